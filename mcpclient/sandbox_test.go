package mcpclient

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/sandbox"
	"github.com/toolwire/toolwire/tool"
)

// needSandbox skips a test on a system that cannot confine a server
// fully: not Linux, or a kernel without Landlock's TCP rules, seccomp or
// user namespaces.
func needSandbox(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox is Linux's")
	}
	k := sandbox.Probe()
	if k.LandlockABI < 4 || !k.Seccomp || !k.UserNamespaces {
		t.Skipf("this kernel offers %+v; the test needs Landlock ABI 4, seccomp and user namespaces", k)
	}
}

// sandboxedText is a result's text, its message for an error.
func sandboxedText(res *tool.Result) string {
	var b strings.Builder
	b.WriteString(res.Message)
	for _, c := range res.Content {
		if t, ok := c.(*tool.Text); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// A hostile server, confined by default, fails at every attempt beyond
// its rights with the system's own error, and keeps serving: it cannot
// read a planted key in its home or another server's state, write
// outside its own directory, open a connection, fork without bound,
// ptrace toolwire or make namespaces.
func TestSandboxHostileServer(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	home, states := t.TempDir(), t.TempDir()
	key := filepath.Join(home, ".ssh", "id_ed25519")
	other := filepath.Join(states, "other", "memory.json")
	for _, f := range []string{key, other} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	cfg := stdioConfig("hostile", "hostile")
	cfg.Env["HOME"] = home
	reg := confirmingRegistry()
	s := connect(t, cfg, reg, &Options{Sandbox: SandboxOptions{StateDir: states}})
	pid := s.PID()
	if got := s.Status().Sandbox.String(); got != "landlock v7, seccomp, net: none" && !strings.HasPrefix(got, "landlock v") {
		t.Errorf("Status().Sandbox = %q, want it confined", got)
	}
	ex := tool.NewExecutor(reg, nil)
	outside := filepath.Join(home, "pwned")
	for _, c := range []struct {
		name, tool, args, want string
	}{
		{"read a planted key in its home", "hostile__read", `{"path":"` + key + `"}`, "permission denied"},
		{"read another server's state", "hostile__read", `{"path":"` + other + `"}`, "permission denied"},
		{"write outside its directory", "hostile__write", `{"path":"` + outside + `"}`, "permission denied"},
		{"connect to a port on 127.0.0.1", "hostile__connect", `{"addr":"` + ln.Addr().String() + `"}`, "operation not permitted"},
		{"ptrace its parent", "hostile__ptrace_parent", `{}`, "operation not permitted"},
		{"unshare", "hostile__unshare", `{}`, "operation not permitted"},
	} {
		res := call(t, ex, c.tool, c.args)
		if !res.IsError || !strings.Contains(sandboxedText(res), c.want) {
			t.Errorf("%s: got %v %q, want the server's error with %q", c.name, res.IsError, sandboxedText(res), c.want)
		}
	}
	// RLIMIT_NPROC binds every user but root, and root's processes are
	// bounded by a pids cgroup where one can be made: as root without
	// one, Status must say the bound is not applied, and nothing is forked.
	if conf := s.Status().Sandbox; conf.Processes {
		res := call(t, ex, "hostile__fork", `{"n":10000}`)
		if !res.IsError || !strings.Contains(sandboxedText(res), "resource temporarily unavailable") {
			t.Errorf("fork 10000 processes: got %v %q, want the server's error with %q", res.IsError, sandboxedText(res), "resource temporarily unavailable")
		}
	} else if k := sandbox.Probe(); k.Root && k.PidsCgroup != "" {
		t.Errorf("Status().Sandbox = %q, and a pids cgroup could bound the processes", conf)
	} else if !strings.Contains(conf.String(), "not applied: a bound on processes") {
		t.Errorf("Status().Sandbox = %q: processes are not bounded, and it does not say so", conf)
	} else {
		t.Logf("the fork bomb is not tried: %s", conf)
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the server wrote %s (stat: %v)", outside, err)
	}
	// Still serving, in the same process, and able to do what it may.
	if res := call(t, ex, "hostile__state", `{}`); res.IsError {
		t.Errorf("writing in its own state directory: %s", sandboxedText(res))
	}
	if data, err := os.ReadFile(filepath.Join(states, "hostile", "note")); err != nil || string(data) != "mine\n" {
		t.Errorf("its own state: %q, %v", data, err)
	}
	if s.PID() != pid {
		t.Errorf("the server was restarted: pid %d, then %d", pid, s.PID())
	}
	// As root, the server's pids cgroup goes when the server does.
	if k := sandbox.Probe(); k.Root && k.PidsCgroup != "" {
		cgroups, _ := filepath.Glob(filepath.Join(k.PidsCgroup, fmt.Sprintf("toolwire-%d-hostile-*", os.Getpid())))
		if len(cgroups) != 1 {
			t.Fatalf("the server's pids cgroups: %q, want one", cgroups)
		}
		_ = s.Close() // its error is how the server ended: not the point here
		if _, err := os.Stat(cgroups[0]); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the server's pids cgroup %s is still there after it closed (%v)", cgroups[0], err)
		}
	}
}

// security.sandbox: required refuses to start a server the kernel cannot
// confine as configured, naming the server and what is missing, and
// starts nothing; without required, the server starts and Status says
// what was not applied.
func TestSandboxRequiredRefusesWhatTheKernelLacks(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	old := &sandbox.Kernel{LandlockABI: 3, Seccomp: true, UserNamespaces: true} // Linux 6.2: no TCP rules
	cfg := stdioConfig("fetcher", "demo")
	cfg.Sandbox = &config.Sandbox{Network: []string{"npm-registry.example.com"}}

	_, err := Connect(boundedCtx(t, waitTime), cfg, confirmingRegistry(), &Options{Sandbox: SandboxOptions{Mode: config.SandboxRequired, Kernel: old, StateDir: t.TempDir()}})
	if err == nil {
		t.Fatal("Connect under security.sandbox: required on a kernel without Landlock TCP rules succeeded")
	}
	for _, want := range []string{`server "fetcher"`, "required", "Landlock TCP rules", "ABI 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("error %v does not wrap sandbox.ErrUnavailable", err)
	}

	s := connect(t, cfg, confirmingRegistry(), &Options{Sandbox: SandboxOptions{Kernel: old, StateDir: t.TempDir()}})
	got := s.Status().Sandbox.String()
	if want := "landlock v3, seccomp, net: not confined; not applied: Landlock TCP rules"; !strings.HasPrefix(got, want) {
		t.Errorf("Status().Sandbox = %q, want it to start with %q", got, want)
	}
}

// A server whose sandbox is off runs unconfined, and says so.
func TestSandboxOff(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	home := t.TempDir()
	key := filepath.Join(home, "id_ed25519")
	if err := os.WriteFile(key, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := stdioConfig("loose", "hostile")
	cfg.Sandbox = &config.Sandbox{Off: true}
	reg := confirmingRegistry()
	s := connect(t, cfg, reg, &Options{Sandbox: SandboxOptions{StateDir: t.TempDir()}})
	if st := s.Status().Sandbox; st == nil || !st.Off || st.Confined() {
		t.Errorf("Status().Sandbox = %+v, want off", st)
	}
	if res := call(t, ex(reg), "loose__read", `{"path":"`+key+`"}`); res.IsError {
		t.Errorf("unconfined, reading %s failed: %s", key, sandboxedText(res))
	}
}

func ex(reg *tool.Registry) *tool.Executor { return tool.NewExecutor(reg, nil) }

// A server allowed some hosts reaches them through toolwire's egress
// proxy, by CONNECT and by plain HTTP, and nothing else: a host outside
// its allowlist is refused by the proxy, and a direct connection, even to
// an allowed address, by Landlock.
func TestSandboxNetworkThroughTheProxy(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	plain, secure := httptest.NewServer(ok), httptest.NewTLSServer(ok)
	defer plain.Close()
	defer secure.Close()
	cfg := stdioConfig("fetcher", "hostile")
	cfg.Sandbox = &config.Sandbox{Network: []string{"127.0.0.1"}}
	reg := confirmingRegistry()
	s := connect(t, cfg, reg, &Options{Sandbox: SandboxOptions{StateDir: t.TempDir()}})
	if got := s.Status().Sandbox.Network; got != "proxy" {
		t.Errorf("Status().Sandbox.Network = %q, want proxy", got)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(plain.URL, "http://"))
	for _, c := range []struct {
		name, tool, args, want string // want "" for success
	}{
		{"plain HTTP to an allowed host", "fetcher__fetch", `{"url":"` + plain.URL + `"}`, ""},
		{"CONNECT to an allowed host", "fetcher__fetch", `{"url":"` + secure.URL + `"}`, ""},
		{"a host outside the allowlist", "fetcher__fetch", `{"url":"http://localhost:` + port + `"}`, "403 Forbidden"},
		{"straight to an allowed address", "fetcher__connect", `{"addr":"` + strings.TrimPrefix(plain.URL, "http://") + `"}`, "permission denied"},
	} {
		res := call(t, ex(reg), c.tool, c.args)
		switch {
		case c.want == "" && res.IsError:
			t.Errorf("%s: %s", c.name, sandboxedText(res))
		case c.want != "" && (!res.IsError || !strings.Contains(sandboxedText(res), c.want)):
			t.Errorf("%s: got %v %q, want the server's error with %q", c.name, res.IsError, sandboxedText(res), c.want)
		}
	}
}
