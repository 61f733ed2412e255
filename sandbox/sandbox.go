// Package sandbox confines a stdio MCP server, on Linux, without
// containers: Landlock filesystem rules (and TCP rules from Landlock ABI
// 4), a seccomp filter, resource limits and a clean environment.
//
// The confinement is applied by a launcher: the program that starts the
// server (toolwire, or any program that imports this package) re-executes
// itself with the server's command and a [Policy] in its environment; this
// package's init sees them, confines that new process and then execs the
// server in place of it. The program that started the server is never
// restricted itself, and no setup runs in a forked child of a threaded
// process. Any binary that links this package is a launcher, so a library
// user passes its own os.Executable (mcpclient does by default) and a test
// binary re-executes itself:
//
//	k := sandbox.Probe()
//	conf := sandbox.Plan(p, k)
//	if err := conf.Err(); err != nil && p.Required {
//		return err // refuse rather than run unconfined
//	}
//	cmd, release, err := sandbox.Command(exe, p, k, "notes", "node", []string{"server.js"}, env)
//	// ... start it, and once it has ended:
//	release()
//
// Where the kernel lacks a feature, [Plan] says what could not be
// applied; on systems other than Linux nothing is.
package sandbox

import (
	"errors"
	"fmt"
	"strings"
)

// Network is what a confined server may reach over IP.
type Network int

// The networks a policy may grant.
const (
	// NetworkNone refuses every IP socket: no TCP, no UDP, no DNS.
	NetworkNone Network = iota
	// NetworkProxy lets the server connect over TCP to the egress
	// proxy's port only (Policy.ProxyPort), which applies the server's
	// allowlist; UDP and other IP sockets are refused.
	NetworkProxy
	// NetworkOpen leaves the network unconfined.
	NetworkOpen
)

func (n Network) String() string {
	switch n {
	case NetworkNone:
		return "none"
	case NetworkProxy:
		return "proxy"
	case NetworkOpen:
		return "open"
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// Policy is what a confined server may do. Paths are absolute; a path
// that does not exist is skipped.
type Policy struct {
	// Read lists the files and directories the server may read and
	// execute, each with everything beneath it.
	Read []string
	// Write lists the files and directories the server may also create,
	// change and remove things in.
	Write []string
	// Network is what it may reach; ProxyPort is the egress proxy's TCP
	// port on 127.0.0.1 when Network is NetworkProxy.
	Network   Network
	ProxyPort uint16
	// MaxProcesses bounds the processes and threads of the server and
	// its children together (RLIMIT_NPROC within a user namespace of
	// their own, or for root a pids cgroup of their own); 0 means no
	// bound.
	MaxProcesses uint64
	// MaxOpenFiles bounds each process's open files (RLIMIT_NOFILE); 0
	// means no bound.
	MaxOpenFiles uint64
	// MaxMemory bounds each process's data memory, in bytes
	// (RLIMIT_DATA: heap and private writable mappings); 0 means no
	// bound.
	MaxMemory uint64
}

// Kernel is what the running kernel offers the launcher.
type Kernel struct {
	// LandlockABI is the Landlock ABI version, 0 without Landlock.
	LandlockABI int
	// Seccomp reports whether seccomp filters can be installed.
	Seccomp bool
	// UserNamespaces reports whether this process may start a child in
	// a user namespace of its own.
	UserNamespaces bool
	// Root reports that servers run as root, whom the kernel does not
	// hold to RLIMIT_NPROC.
	Root bool
	// PidsCgroup is, for root, the directory of a pids cgroup controller
	// (cgroup v2 with pids enabled below it, or v1) in which a cgroup of
	// one's own was made and given a pids.max; "" when there is none.
	PidsCgroup string
}

// maxABI is the newest Landlock ABI whose rights this package grants
// knowingly; a newer kernel is used at this level.
const maxABI = 7

// Confinement is what a policy comes to on a kernel: what is applied and
// what is not.
type Confinement struct {
	// Landlock is the Landlock ABI the rules are applied at; 0 for none.
	Landlock int `json:"landlock"`
	// Seccomp reports whether the system-call filter is applied.
	Seccomp bool `json:"seccomp"`
	// Network is "none", "proxy" or "open" when that is enforced, and
	// "not confined" when the policy asks for a limit the kernel cannot
	// enforce.
	Network string `json:"network"`
	// Processes reports whether MaxProcesses is enforced: by
	// RLIMIT_NPROC in a user namespace, or for root by a pids cgroup.
	Processes bool `json:"processes"`
	// Missing says, one item each, what the policy asked for and the
	// kernel (or the system) cannot give.
	Missing []string `json:"missing,omitempty"`
	// Notes says what is not applied for a reason that is not the
	// kernel's: the bound on processes for root.
	Notes []string `json:"notes,omitempty"`
}

// ErrUnavailable is wrapped by [Confinement.Err] when part of a policy
// cannot be applied.
var ErrUnavailable = errors.New("the sandbox cannot be applied as configured")

// Err returns nil when everything the policy asks for is applied, and an
// error wrapping ErrUnavailable naming what is not otherwise.
func (c Confinement) Err() error {
	if len(c.Missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, strings.Join(c.Missing, "; "))
}

// Confined reports whether anything at all is applied.
func (c Confinement) Confined() bool { return c.Landlock > 0 || c.Seccomp }

// String describes the confinement in one line, as "servers" shows it:
// "landlock v7, seccomp, net: none", followed by what could not be
// applied, or "not confined" and why.
func (c Confinement) String() string {
	if !c.Confined() {
		s := "not confined"
		if len(c.Missing) > 0 {
			s += " (" + strings.Join(c.Missing, "; ") + ")"
		}
		return s
	}
	var parts []string
	if c.Landlock > 0 {
		parts = append(parts, fmt.Sprintf("landlock v%d", c.Landlock))
	}
	if c.Seccomp {
		parts = append(parts, "seccomp")
	}
	parts = append(parts, "net: "+c.Network)
	s := strings.Join(parts, ", ")
	if notApplied := append(c.Missing[:len(c.Missing):len(c.Missing)], c.Notes...); len(notApplied) > 0 {
		s += "; not applied: " + strings.Join(notApplied, "; ")
	}
	return s
}

// Short is String with what is not applied named in a few words, for a
// table: "landlock v7, seccomp, net: none; not applied: a bound on
// processes".
func (c Confinement) Short() string {
	short := c
	short.Missing, short.Notes = nil, nil
	for _, m := range append(c.Missing[:len(c.Missing):len(c.Missing)], c.Notes...) {
		name, _, _ := strings.Cut(m, " (")
		short.Missing = append(short.Missing, name)
	}
	return short.String()
}

// Plan returns what p comes to on kernel k. The launcher applies exactly
// that: a feature Plan leaves out is not attempted.
func Plan(p Policy, k Kernel) Confinement {
	var c Confinement
	if !supported {
		c.Network = "not confined"
		c.Missing = []string{"no sandbox on " + goos + " (it needs Linux's Landlock and seccomp)"}
		return c
	}
	c.Landlock = min(k.LandlockABI, maxABI)
	c.Seccomp = k.Seccomp
	if c.Landlock == 0 {
		c.Missing = append(c.Missing, "Landlock (filesystem rules need Linux 5.13 or later with Landlock enabled)")
	}
	if !c.Seccomp {
		c.Missing = append(c.Missing, "seccomp (no ptrace, mount, namespace or BPF filter)")
	}
	c.Network = p.Network.String()
	switch p.Network {
	case NetworkNone:
		// The seccomp filter refuses every IP socket; Landlock's TCP
		// rules, where there are any, refuse connections once more.
		if !c.Seccomp && c.Landlock < 4 {
			c.Network = "not confined"
			c.Missing = append(c.Missing, "network confinement (needs seccomp or Landlock ABI 4)")
		}
	case NetworkProxy:
		// Only Landlock can tell a TCP connection to the proxy's port
		// from one elsewhere.
		if c.Landlock < 4 {
			c.Network = "not confined"
			c.Missing = append(c.Missing, fmt.Sprintf("Landlock TCP rules (ABI 4, Linux 6.7; this kernel has ABI %d), so the egress proxy cannot be enforced", k.LandlockABI))
		}
	}
	if p.MaxProcesses > 0 {
		switch {
		case k.Root && k.PidsCgroup != "":
			c.Processes = true // by a cgroup's pids.max (see Command)
		case k.Root:
			// Not the kernel's lack, and refusing every server run by
			// root under "required" would help nobody.
			c.Notes = append(c.Notes, "a bound on processes (the kernel does not hold root to RLIMIT_NPROC, and no pids cgroup could be made)")
		case !k.UserNamespaces:
			c.Missing = append(c.Missing, "a bound on processes (needs unprivileged user namespaces)")
		default:
			c.Processes = true
		}
	}
	return c
}
