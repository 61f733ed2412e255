package sandbox

import (
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// denied are the system calls a server has no use for and an escape or an
// attack on the rest of the machine does: debugging other processes,
// mounting, namespaces, BPF, the kernel keyring, kernel modules, file
// handles that bypass path checks, io_uring (whose operations seccomp
// does not see) and the like. Each fails with EPERM. Names the
// architecture does not have are skipped.
var denied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
	"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
	"bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"open_by_handle_at", "name_to_handle_at",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"acct", "swapon", "swapoff", "reboot", "syslog", "quotactl", "quotactl_fd",
	"iopl", "ioperm", "uselib", "vhangup", "lookup_dcookie",
	"settimeofday", "clock_settime", "sethostname", "setdomainname",
}

// namespaceFlags are clone's flags that make new namespaces.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// ipprotoMPTCP is Multipath TCP, which Landlock's TCP rules do not cover.
const ipprotoMPTCP = 262

// nonStreamTypes are the bits of a socket type that are set for every
// type but SOCK_STREAM (1): datagram, raw, seqpacket and the rest.
const nonStreamTypes = 0xe

// seccompPolicy is the filter for network n.
func seccompPolicy(info *arch.Info, n Network) seccomp.Policy {
	var names []string
	for _, name := range denied {
		if _, ok := info.SyscallNames[name]; ok {
			names = append(names, name)
		}
	}
	eperm := seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	deny := seccomp.SyscallGroup{Names: names, Action: eperm,
		NamesWithCondtions: []seccomp.NameWithConditions{
			{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}}},
		}}
	switch n {
	case NetworkNone:
		for _, family := range []uint64{unix.AF_INET, unix.AF_INET6, unix.AF_PACKET} {
			deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{Name: "socket",
				Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: family}}})
		}
	case NetworkProxy:
		// TCP only, which Landlock holds to the proxy's port.
		for _, family := range []uint64{unix.AF_INET, unix.AF_INET6} {
			deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{Name: "socket",
				Conditions: seccomp.ArgumentConditions{
					{Argument: 0, Operation: seccomp.Equal, Value: family},
					{Argument: 1, Operation: seccomp.BitsSet, Value: nonStreamTypes},
				}})
		}
		deny.NamesWithCondtions = append(deny.NamesWithCondtions,
			seccomp.NameWithConditions{Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.Equal, Value: ipprotoMPTCP}}},
			seccomp.NameWithConditions{Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_PACKET}}})
	}
	// clone3 passes its flags in memory a filter cannot read: ENOSYS makes
	// the C library and the runtimes fall back to clone, whose flags the
	// rule above checks.
	clone3 := seccomp.SyscallGroup{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)}
	return seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{deny, clone3}}
}

// applySeccomp installs the filters on every thread of the process, with
// no_new_privs set (which an unprivileged filter needs, and which keeps a
// set-user-ID program from gaining rights under it).
func applySeccomp(n Network) error {
	info, err := arch.GetInfo("")
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	policy := seccompPolicy(info, n)
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy}); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	// The filter above matches system calls of the native architecture
	// only and allows the others; this one refuses the others (i386
	// calls through int 0x80 on x86-64), whose numbers mean different
	// calls.
	if err := loadArchFilter(uint32(info.ID)); err != nil {
		return fmt.Errorf("seccomp: architecture filter: %w", err)
	}
	return nil
}

// loadArchFilter installs a filter that fails every system call made
// with another architecture's convention than native with ENOSYS.
func loadArchFilter(native uint32) error {
	raw, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: native, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)},
		bpf.RetConstant{Val: uint32(seccomp.ActionAllow)},
	})
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return errno
	}
	return nil
}
