package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// envAct makes this test binary, started through the launcher, do one
// thing and print its outcome instead of running tests.
const envAct = "SANDBOX_TEST_ACT"

func TestMain(m *testing.M) {
	if act, ok := os.LookupEnv(envAct); ok {
		fmt.Print(do(act))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// do performs act ("read:PATH", "write:PATH", "dial:ADDR", "socket:N,N,N"
// or "syscall:NR,A0") and returns "ok" or the errno's name.
func do(act string) string {
	verb, arg, _ := strings.Cut(act, ":")
	var err error
	switch verb {
	case "read":
		_, err = os.ReadFile(arg)
	case "write":
		err = os.WriteFile(arg, []byte("x"), 0o600)
	case "dial":
		var c net.Conn
		if c, err = net.Dial("tcp", arg); err == nil {
			c.Close()
		}
	case "socket", "syscall":
		var n [3]uintptr
		for i, f := range strings.Split(arg, ",") {
			v, _ := strconv.ParseUint(f, 0, 64)
			n[i] = uintptr(v)
		}
		var r uintptr
		var errno syscall.Errno
		if verb == "socket" {
			r, _, errno = syscall.RawSyscall(syscall.SYS_SOCKET, n[0], n[1], n[2])
		} else {
			r, _, errno = syscall.RawSyscall(n[0], n[1], 0, 0)
		}
		if errno != 0 {
			err = errno
		} else if verb == "socket" {
			syscall.Close(int(r))
		} else if n[0] == syscall.SYS_CLONE && r == 0 {
			syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0) // the child of a clone that worked
		}
	case "forks":
		// Children that wait, forever, to be killed: each counts until
		// then, the way a fork bomb's do.
		n, _ := strconv.Atoi(arg)
		for range n {
			r, _, errno := syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0)
			if errno != 0 {
				err = errno
				break
			}
			if r == 0 {
				for {
					syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
				}
			}
		}
	default:
		return "unknown act " + act
	}
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func needKernel(t *testing.T) Kernel {
	t.Helper()
	k := Probe()
	if k.LandlockABI < 4 || !k.Seccomp {
		t.Skipf("this kernel offers %+v; the test needs Landlock ABI 4 and seccomp", k)
	}
	return k
}

// launchAct runs act in this test binary, started through the launcher with
// p, and returns what it printed.
func launchAct(t *testing.T, p Policy, act string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, release, err := Command(exe, p, Probe(), "act", exe, nil, []string{envAct + "=" + act})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v; stderr: %s", act, err, stderr.String())
	}
	return out.String()
}

// The launcher applies the policy before the program runs: each act
// outside it fails with the kernel's own error, and each inside succeeds.
func TestLaunchConfines(t *testing.T) {
	t.Parallel()
	needKernel(t)
	exe, _ := os.Executable()
	readable, writable, outside := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{readable, writable, outside} {
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	allowed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { allowed.Close() })
	base := Policy{Read: []string{filepath.Dir(exe), readable}, Write: []string{writable}}
	proxy := base
	proxy.Network, proxy.ProxyPort = NetworkProxy, uint16(allowed.Addr().(*net.TCPAddr).Port)
	nr := func(n uintptr, arg uintptr) string { return fmt.Sprintf("syscall:%d,%d", n, arg) }
	for _, c := range []struct {
		name string
		p    Policy
		act  string
		want string
	}{
		{"read in a read path", base, "read:" + filepath.Join(readable, "f"), "ok"},
		{"read outside", base, "read:" + filepath.Join(outside, "f"), "EACCES"},
		{"write in a write path", base, "write:" + filepath.Join(writable, "g"), "ok"},
		{"write in a read path", base, "write:" + filepath.Join(readable, "g"), "EACCES"},
		{"an IPv4 socket without network", base, fmt.Sprintf("socket:%d,%d,0", unix.AF_INET, unix.SOCK_STREAM), "EPERM"},
		{"an IPv6 socket without network", base, fmt.Sprintf("socket:%d,%d,0", unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC), "EPERM"},
		{"a Unix socket without network", base, fmt.Sprintf("socket:%d,%d,0", unix.AF_UNIX, unix.SOCK_STREAM), "ok"},
		{"the proxy's port", proxy, "dial:" + allowed.Addr().String(), "ok"},
		{"another port, with a proxy", proxy, "dial:" + ln.Addr().String(), "EACCES"},
		{"UDP, with a proxy", proxy, fmt.Sprintf("socket:%d,%d,0", unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK), "EPERM"},
		{"a raw socket, with a proxy", proxy, fmt.Sprintf("socket:%d,%d,%d", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), "EPERM"},
		{"Multipath TCP, with a proxy", proxy, fmt.Sprintf("socket:%d,%d,%d", unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP), "EPERM"},
		{"clone into a new user namespace", base, nr(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD)), "EPERM"},
		{"clone3", base, nr(unix.SYS_CLONE3, 0), "ENOSYS"},
		{"bpf", base, nr(unix.SYS_BPF, 0), "EPERM"},
		{"keyctl", base, nr(unix.SYS_KEYCTL, 0), "EPERM"},
		{"io_uring_setup", base, nr(unix.SYS_IO_URING_SETUP, 1), "EPERM"},
		{"perf_event_open", base, nr(unix.SYS_PERF_EVENT_OPEN, 0), "EPERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := launchAct(t, c.p, c.act); got != c.want {
				t.Errorf("%s: %q, want %q", c.act, got, c.want)
			}
		})
	}
}

// A launch that cannot exec its program says why on stderr and exits 126.
func TestLaunchFailureIsReported(t *testing.T) {
	t.Parallel()
	needKernel(t)
	exe, _ := os.Executable()
	missing := filepath.Join(t.TempDir(), "no-such-server")
	cmd, _, err := Command(exe, Policy{}, Probe(), "missing", missing, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 126 || !strings.Contains(stderr.String(), "toolwire sandbox: exec "+missing) {
		t.Errorf("run: %v, stderr %q; want exit status 126 naming the program", err, stderr.String())
	}
}

// As root, whom RLIMIT_NPROC does not bind, the server's processes are
// bounded by a pids cgroup of its own: a fork bomb fails with EAGAIN, and
// the release kills what it left and removes the cgroup.
func TestLaunchBoundsRootByPidsCgroup(t *testing.T) {
	t.Parallel()
	k := needKernel(t)
	if !k.Root {
		t.Skip("not root: RLIMIT_NPROC bounds the processes")
	}
	if k.PidsCgroup == "" {
		t.Skip("as root, and no pids cgroup can be made here")
	}
	exe, _ := os.Executable()
	p := Policy{Read: []string{filepath.Dir(exe)}, MaxProcesses: 64}
	if c := Plan(p, k); !c.Processes || len(c.Notes) > 0 {
		t.Fatalf("Plan = %+v, want the bound on processes applied", c)
	}
	cmd, release, err := Command(exe, p, k, "fork bomb", exe, nil, []string{envAct + "=forks:10000"})
	if err != nil {
		t.Fatal(err)
	}
	// Files, not pipes: the bomb's children keep them open.
	outFile, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	err = cmd.Run()
	defer release()
	out, _ := os.ReadFile(outFile.Name())
	if err != nil {
		t.Fatalf("run: %v; output: %s", err, out)
	}
	if string(out) != "EAGAIN" {
		t.Errorf("forking 10000 processes: %q, want EAGAIN", out)
	}
	pattern := filepath.Join(k.PidsCgroup, fmt.Sprintf("toolwire-%d-fork_bomb-*", os.Getpid()))
	cgroups, _ := filepath.Glob(pattern)
	if len(cgroups) != 1 {
		t.Fatalf("cgroups %s: %q, want one", pattern, cgroups)
	}
	// The bomb's children are still there, paused, counted in the cgroup.
	procs, err := os.ReadFile(filepath.Join(cgroups[0], "cgroup.procs"))
	if n := len(strings.Fields(string(procs))); err != nil || n == 0 || n > 64 {
		t.Errorf("processes left in the cgroup: %d (%v), want between 1 and 64", n, err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cgroups[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cgroup %s is still there after the release (%v)", cgroups[0], err)
	}
	for _, pid := range strings.Fields(string(procs)) {
		n, _ := strconv.Atoi(pid)
		if n > 0 && syscall.Kill(n, 0) == nil {
			if state, _ := os.ReadFile("/proc/" + pid + "/stat"); !strings.Contains(string(state), ") Z ") {
				t.Errorf("process %d of the bomb's lives on after the release", n)
			}
		}
	}
}
