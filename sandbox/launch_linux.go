package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

const (
	supported = true
	goos      = "linux"
)

// envSpec carries the launch to the launcher: the JSON of a spec, or
// probeSpec.
const envSpec = "TOOLWIRE_SANDBOX_SPEC"

// probeSpec asks the launcher to exit at once with status 0: Probe starts
// it in a user namespace to learn whether that works.
const probeSpec = "probe"

// spec is what the launcher is told: the policy, what Plan made of it,
// and the program to exec with its arguments and environment.
type spec struct {
	Policy Policy
	Conf   Confinement
	Path   string
	Args   []string
	Env    []string
	// Cgroup is the pids cgroup to join, for root (see cgroup_linux.go).
	Cgroup string
}

// The launcher: a process started by Command finds its spec here, before
// main and before anything else of the program's has run, confines
// itself and execs the server. It never returns to the program.
func init() {
	raw, ok := os.LookupEnv(envSpec)
	if !ok {
		return
	}
	if raw == probeSpec {
		os.Exit(0)
	}
	err := launch(raw)
	// The server's stderr is the launcher's: the error reaches the
	// server's log and the connect error's stderr tail.
	fmt.Fprintf(os.Stderr, "toolwire sandbox: %v\n", err)
	os.Exit(126)
}

// launch applies the spec's confinement to this process and execs the
// server; it returns only when something failed.
func launch(raw string) error {
	// Seccomp filters and no_new_privs belong to a thread: the exec below
	// must happen on the thread they were set on (they are synchronized
	// to the others as well).
	runtime.LockOSThread()
	var s spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return fmt.Errorf("read the launch: %w", err)
	}
	// First: Landlock would refuse the write to the cgroup's files.
	if s.Cgroup != "" {
		if err := joinCgroup(s.Cgroup); err != nil {
			return err
		}
	}
	if err := applyLimits(s.Policy, s.Conf); err != nil {
		return err
	}
	if s.Conf.Landlock > 0 {
		if err := applyLandlock(s.Policy, s.Conf.Landlock); err != nil {
			return err
		}
	}
	if s.Conf.Seccomp {
		if err := applySeccomp(s.Policy.Network); err != nil {
			return err
		}
	}
	if err := syscall.Exec(s.Path, s.Args, s.Env); err != nil {
		return fmt.Errorf("exec %s: %w", s.Path, err)
	}
	return nil
}

// applyLimits sets the resource limits. RLIMIT_NPROC counts the
// processes of a user; within the user namespace the launcher was started
// in, it counts those of this server alone (and binds root too).
func applyLimits(p Policy, c Confinement) error {
	set := func(name string, resource int, v uint64) error {
		if v == 0 {
			return nil
		}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(resource, &cur); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// A limit can be lowered, not raised above the hard one.
		v = min(v, cur.Max)
		if err := syscall.Setrlimit(resource, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("set %s to %d: %w", name, v, err)
		}
		return nil
	}
	if err := set("RLIMIT_NOFILE", syscall.RLIMIT_NOFILE, p.MaxOpenFiles); err != nil {
		return err
	}
	if err := set("RLIMIT_DATA", syscall.RLIMIT_DATA, p.MaxMemory); err != nil {
		return err
	}
	if c.Processes {
		const rlimitNPROC = 6
		if err := set("RLIMIT_NPROC", rlimitNPROC, p.MaxProcesses); err != nil {
			return err
		}
	}
	return nil
}

// systemRead are the system's directories every server may read and
// execute from: programs, libraries, runtimes, certificates, time zones.
// Not /etc as a whole (it has secrets readable by root), not /home, /root,
// /tmp, /var or /run.
var systemRead = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/nix/store", "/snap",
	"/proc", "/sys",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
	"/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/localtime", "/etc/timezone",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies", "/etc/os-release",
	"/etc/mime.types", "/etc/npmrc", "/etc/nodejs", "/etc/python3", "/etc/xdg",
	"/run/systemd/resolve",
}

// systemWrite are the devices every server may write to.
var systemWrite = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// landlockConfigs are go-landlock's full configurations by ABI.
var landlockConfigs = []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7}

// applyLandlock restricts the process's filesystem (and, from ABI 4, TCP)
// access to p's, at ABI abi. No best effort: Plan chose abi from what the
// kernel offers, and anything short of it is an error.
func applyLandlock(p Policy, abi int) error {
	cfg := landlockConfigs[abi-1]
	if p.Network == NetworkOpen {
		cfg.HandledAccessNet = 0
	}
	var rules []landlock.Rule
	add := func(paths []string, write bool) error {
		for _, path := range paths {
			info, err := os.Stat(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("landlock: %w", err)
			}
			var r landlock.FSRule
			switch {
			case info.IsDir() && write:
				r = landlock.RWDirs(path)
				if abi >= 2 {
					r = r.WithRefer() // renames between its own directories
				}
			case info.IsDir():
				r = landlock.RODirs(path)
			case write:
				r = landlock.RWFiles(path)
			default:
				r = landlock.ROFiles(path)
			}
			rules = append(rules, r)
		}
		return nil
	}
	if err := add(append(systemRead[:len(systemRead):len(systemRead)], p.Read...), false); err != nil {
		return err
	}
	if err := add(append(systemWrite[:len(systemWrite):len(systemWrite)], p.Write...), true); err != nil {
		return err
	}
	if p.Network == NetworkProxy && abi >= 4 {
		rules = append(rules, landlock.ConnectTCP(p.ProxyPort))
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock v%d: %w", abi, err)
	}
	return nil
}

// Probe returns what this kernel offers. It is worked out once per
// process; learning whether user namespaces work starts this program once
// more, briefly, in one.
func Probe() Kernel { return probe() }

var probe = sync.OnceValue(func() Kernel {
	var k Kernel
	if abi, err := llsys.LandlockGetABIVersion(); err == nil {
		k.LandlockABI = abi
	}
	k.Seccomp = seccomp.Supported()
	k.Root = os.Geteuid() == 0
	if k.Root {
		k.PidsCgroup = pidsCgroupDir()
	}
	if exe, err := os.Executable(); err == nil {
		cmd := exec.Command(exe)
		cmd.Env = []string{envSpec + "=" + probeSpec}
		cmd.SysProcAttr = userNamespace()
		k.UserNamespaces = cmd.Run() == nil
	}
	return k
})

// userNamespace starts a child in a user namespace of its own, as the
// same user and group.
func userNamespace() *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
	}
}

// Command returns the command that runs the program at path (absolute)
// with args and env, confined by p as far as kernel k allows (see Plan),
// through launcher: an executable that links this package, typically
// os.Executable. The command's SysProcAttr is set; add to it rather than
// replace it.
//
// For root, the bound on processes is a pids cgroup that Command makes
// (named after name, the server's) and the launcher joins. release ends
// whatever is left in it and removes it: call it once the server has
// ended or been killed. It may be called more than once; it does nothing
// when there is no cgroup. When Plan counts on a cgroup and none can be
// made, Command fails: the launcher applies what Plan says, or nothing.
func Command(launcher string, p Policy, k Kernel, name, path string, args, env []string) (cmd *exec.Cmd, release func() error, err error) {
	release = func() error { return nil }
	if !filepath.IsAbs(path) {
		return nil, release, fmt.Errorf("sandbox: the program %q is not an absolute path", path)
	}
	if launcher == "" {
		return nil, release, errors.New("sandbox: no launcher")
	}
	conf := Plan(p, k)
	s := spec{Policy: p, Conf: conf, Path: path, Args: append([]string{path}, args...), Env: env}
	if conf.Processes && k.Root {
		if s.Cgroup, err = newCgroup(k.PidsCgroup, name, p.MaxProcesses); err != nil {
			return nil, release, fmt.Errorf("sandbox: %w", err)
		}
		release = sync.OnceValue(func() error { return releaseCgroup(s.Cgroup) })
	}
	raw, err := json.Marshal(s)
	if err != nil {
		_ = release()
		return nil, func() error { return nil }, fmt.Errorf("sandbox: %w", err)
	}
	cmd = &exec.Cmd{Path: launcher, Args: []string{path}, Env: []string{envSpec + "=" + string(raw)}}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if conf.Processes && !k.Root {
		cmd.SysProcAttr = userNamespace()
	}
	return cmd, release, nil
}
