package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// The manager tests do not run in parallel: each checks, after Close, that
// no child process of this test process is left and that the goroutines
// are back to where they were, which other tests running alongside would
// disturb.

// leakCheck remembers what was running before a manager started.
type leakCheck struct {
	goroutines int
	pids       []func() int // read each stdio child's pid file
}

// newLeakCheck takes the baseline. Call it right before NewManager.
func newLeakCheck() *leakCheck {
	runtime.GC()
	return &leakCheck{goroutines: runtime.NumGoroutine()}
}

// stdio returns the configuration of a stdio test server whose child
// writes its pid to a file the check reads later.
func (lc *leakCheck) stdio(t *testing.T, name, mode string) config.Server {
	t.Helper()
	path, read := pidFile(t)
	cfg := stdioConfig(name, mode)
	cfg.Env[envPIDFile] = path
	writableBy(&cfg, path)
	lc.pids = append(lc.pids, read)
	return cfg
}

// verify checks, after the manager's Close, that every recorded child is
// gone, that this process has no children left, and that the goroutines
// return to the baseline within 5 s.
func (lc *leakCheck) verify(t *testing.T) {
	t.Helper()
	for _, read := range lc.pids {
		if pid := read(); pid != 0 {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("child %d still exists after Close: kill(pid, 0) = %v, want ESRCH", pid, err)
			}
		}
	}
	if kids, err := childProcesses(); err != nil {
		t.Logf("cannot scan /proc for children: %v", err)
	} else if len(kids) > 0 {
		t.Errorf("processes left whose parent is this test process: %v", kids)
	}

	deadline := time.Now().Add(5 * time.Second)
	n := runtime.NumGoroutine()
	for n > lc.goroutines && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
		n = runtime.NumGoroutine()
	}
	if n > lc.goroutines {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines 5s after Close, %d before the manager started; stacks:\n%s", n, lc.goroutines, buf)
	}
}

// childProcesses lists "pid (comm) state" of every process whose parent is
// this one, zombies included.
func childProcesses() ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return nil, err
	}
	self := os.Getpid()
	var kids []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid …"; comm may hold spaces and parentheses.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			kids = append(kids, fmt.Sprintf("%d %s %s", pid, s[strings.IndexByte(s, '('):end+1], fields[0]))
		}
	}
	return kids, nil
}

// startWithin runs m.Start, failing the test if it has not returned within d.
func startWithin(t *testing.T, m *Manager, d time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- m.Start(ctx) }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(d + 5*time.Second):
		t.Fatalf("Start did not return within %v", d)
		return 0, nil
	}
}

// closeWithin runs m.Close, failing the test if it has not returned within
// waitTime.
func closeWithin(t *testing.T, m *Manager) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- m.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTime):
		t.Fatal("Close did not return")
		return nil
	}
}

// ghostConfig is a stdio server whose command does not exist.
func ghostConfig(t *testing.T) config.Server {
	cfg := stdioConfig("ghost", "demo")
	cfg.Command = filepath.Join(t.TempDir(), "no-such-server")
	return cfg
}

// Servers that fail to start are reported; the others run.
func TestManagerStartTolerant(t *testing.T) {
	watch, log := newAuditWatch()
	changes := make(chan Status, 64)
	reg := confirmingRegistry()
	lc := newLeakCheck()
	ghost := ghostConfig(t)
	m := NewManager([]config.Server{lc.stdio(t, "a", "demo"), lc.stdio(t, "b", "demo"), ghost}, reg,
		&Options{Audit: log, StateChanges: changes})
	_, err := startWithin(t, m, waitTime)
	if err != nil {
		t.Fatalf("Start with no required server = %v, want nil", err)
	}

	sts := m.Status()
	if got := statesOf(sts); !slices.Equal(got, []State{Ready, Ready, Failed}) {
		t.Fatalf("states %v, want [ready ready failed]", got)
	}
	if g := sts[2]; g.Name != "ghost" || !strings.Contains(g.LastError, ghost.Command) || !strings.Contains(g.LastError, `"ghost"`) {
		t.Errorf("ghost status %+v, want a LastError naming the server and its command", g)
	}
	if f := m.Failed(); len(f) != 1 || f["ghost"] != sts[2].LastError {
		t.Errorf("Failed() = %v, want only ghost with its error", f)
	}
	if got := m.String(); got != "a=ready b=ready ghost=failed" {
		t.Errorf("String() = %q", got)
	}

	// Each server's tools under its own prefix: the same demo tools twice.
	a, _ := m.Server("a")
	b, _ := m.Server("b")
	if _, ok := m.Server("nobody"); ok {
		t.Error(`Server("nobody") found a server`)
	}
	aTools, bTools := a.Tools(), b.Tools()
	if len(aTools) == 0 || len(aTools) != len(bTools) || reg.Len() != len(aTools)+len(bTools) {
		t.Errorf("a has %d tools, b %d, the registry %d; want the same demo tools for each", len(aTools), len(bTools), reg.Len())
	}
	for _, n := range aTools {
		if !strings.HasPrefix(n, "a__") || !slices.Contains(bTools, "b__"+strings.TrimPrefix(n, "a__")) {
			t.Errorf("a's %s has no counterpart among b's tools %v", n, bTools)
		}
	}
	ex := tool.NewExecutor(reg, nil)
	for _, prefix := range []string{"a", "b"} {
		name := prefix + "__echo"
		if res := call(t, ex, name, `{"text":"`+prefix+`"}`); res.IsError || res.Text() != prefix {
			t.Errorf("%s = %+v", name, res)
		}
		if tl, ok := reg.Lookup(name); !ok || tl.Origin != (tool.Origin{Source: prefix, Name: "echo"}) {
			t.Errorf("%s origin = %+v", name, tl.Origin)
		}
	}
	// Each demo counted only its own calls.
	if st := stats(t, ex, "a", 0); st.Calls != 2 {
		t.Errorf("a counted %d calls, want 2", st.Calls)
	}

	// Every server's snapshots follow the lifecycle.
	byName := map[string][]Status{}
	for _, st := range drain(changes) {
		byName[st.Name] = append(byName[st.Name], st)
	}
	if got := slices.Sorted(maps.Keys(byName)); !slices.Equal(got, []string{"a", "b", "ghost"}) {
		t.Errorf("snapshots came from %v", got)
	}
	for name, seq := range byName {
		checkMoves(t, Configured, seq)
		if last := seq[len(seq)-1].State; last != map[string]State{"a": Ready, "b": Ready, "ghost": Failed}[name] {
			t.Errorf("%s's last snapshot is %s", name, last)
		}
	}
	var started []string
	for _, ev := range watch.of(audit.ServerStarted) {
		started = append(started, ev.Source)
	}
	slices.Sort(started)
	if !slices.Equal(started, []string{"a", "b"}) {
		t.Errorf("server.started for %v, want a and b", started)
	}
	if f := watch.of(audit.ServerFailed); len(f) != 1 || f[0].Source != "ghost" || f[0].Reason != "connect" {
		t.Errorf("server.failed events %+v, want one for ghost in phase connect", f)
	}

	if err := closeWithin(t, m); err != nil {
		t.Errorf("Close = %v", err)
	}
	if got := statesOf(m.Status()); !slices.Equal(got, []State{Stopped, Stopped, Stopped}) {
		t.Errorf("states after Close %v", got)
	}
	if reg.Len() != 0 {
		t.Errorf("after Close the registry holds %v", toolNames(reg))
	}
	if second := m.Close(); second != nil {
		t.Errorf("second Close = %v", second)
	}
	lc.verify(t)
}

// A required server that fails stops everything.
func TestManagerRequiredFailure(t *testing.T) {
	reg := confirmingRegistry()
	lc := newLeakCheck()
	ghost := ghostConfig(t)
	ghost.Required = true
	m := NewManager([]config.Server{lc.stdio(t, "a", "demo"), lc.stdio(t, "b", "demo"), ghost}, reg, nil)
	_, err := startWithin(t, m, waitTime)
	if err == nil {
		t.Fatal("Start with a required server failing = nil, want an error")
	}
	if !strings.Contains(err.Error(), `"ghost"`) || !strings.Contains(err.Error(), "required") {
		t.Errorf("Start error %q does not name the required server", err)
	}
	for _, st := range m.Status() {
		if st.State != Stopped && st.State != Failed {
			t.Errorf("%s is %s after a required server failed, want stopped or failed", st.Name, st.State)
		}
	}
	if reg.Len() != 0 {
		t.Errorf("registry holds %v after a required server failed", toolNames(reg))
	}
	// Start closed the manager already; closing again is harmless.
	if err := closeWithin(t, m); err != nil {
		t.Logf("Close after a failed Start = %v", err)
	}
	lc.verify(t)
}

// A server that never answers is bounded by its timeout and does not hold
// up the others.
func TestManagerMuteServer(t *testing.T) {
	reg := confirmingRegistry()
	lc := newLeakCheck()
	mute := lc.stdio(t, "mute", "mute")
	mute.Timeout = 300 * time.Millisecond
	m := NewManager([]config.Server{mute, lc.stdio(t, "demo", "demo")}, reg, nil)
	elapsed, err := startWithin(t, m, waitTime)
	if err != nil {
		t.Fatalf("Start = %v, want nil (mute is not required)", err)
	}
	t.Logf("Start took %v", elapsed)
	if elapsed > 5*time.Second {
		t.Errorf("Start took %v with a 300ms timeout on the mute server", elapsed)
	}
	sts := m.Status()
	if sts[0].State != Failed || !strings.Contains(sts[0].LastError, "no answer within 300ms") {
		t.Errorf("mute status %+v, want failed with no answer within 300ms", sts[0])
	}
	if sts[1].State != Ready {
		t.Errorf("demo status %+v, want ready", sts[1])
	}
	if res := call(t, tool.NewExecutor(reg, nil), "demo__echo", `{"text":"hi"}`); res.IsError || res.Text() != "hi" {
		t.Errorf("demo__echo = %+v", res)
	}
	if err := closeWithin(t, m); err != nil {
		t.Errorf("Close = %v", err)
	}
	lc.verify(t)
}

// Ten servers start side by side.
func TestManagerTenServers(t *testing.T) {
	// One server alone, for comparison.
	reg := confirmingRegistry()
	start := time.Now()
	one, err := Connect(boundedCtx(t, waitTime), stdioConfig("one", "demo"), reg, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	single := time.Since(start)
	if err := one.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	reg = confirmingRegistry()
	lc := newLeakCheck()
	var cfgs []config.Server
	for i := range 10 {
		cfgs = append(cfgs, lc.stdio(t, fmt.Sprintf("d%d", i), "demo"))
	}
	m := NewManager(cfgs, reg, nil)
	all, err := startWithin(t, m, waitTime)
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Logf("one server started in %v, ten in parallel in %v (%.1fx)", single, all, float64(all)/float64(single))
	ex := tool.NewExecutor(reg, nil)
	pids := map[int]bool{}
	for i, st := range m.Status() {
		if st.State != Ready {
			t.Errorf("%s is %s (%s), want ready", st.Name, st.State, st.LastError)
			continue
		}
		pids[st.PID] = true
		if res := call(t, ex, fmt.Sprintf("d%d__echo", i), `{"text":"x"}`); res.IsError {
			t.Errorf("d%d__echo: %s", i, res.Message)
		}
	}
	if len(pids) != 10 {
		t.Errorf("%d distinct child pids, want 10", len(pids))
	}
	if len(m.Failed()) != 0 {
		t.Errorf("Failed() = %v", m.Failed())
	}
	if err := closeWithin(t, m); err != nil {
		t.Errorf("Close = %v", err)
	}
	if reg.Len() != 0 {
		t.Errorf("after Close the registry holds %d tools", reg.Len())
	}
	lc.verify(t)
}

// A reconnect (a killed child replaced by a new one) leaves nothing behind
// either once the manager is closed.
func TestManagerReconnectLeavesNothing(t *testing.T) {
	ctx := boundedCtx(t, waitTime)
	changes := make(chan Status, 64)
	reg := confirmingRegistry()
	lc := newLeakCheck()
	m := NewManager([]config.Server{lc.stdio(t, "demo", "demo")}, reg, &Options{Reconnect: fastPolicy, StateChanges: changes})
	if _, err := startWithin(t, m, waitTime); err != nil {
		t.Fatalf("Start = %v", err)
	}
	s, _ := m.Server("demo")
	oldPID := s.PID()
	lc.pids = append(lc.pids, func() int { return oldPID }) // the pid file now names the new child
	drain(changes)
	kill(t, oldPID)
	seq := awaitState(t, ctx, changes, "demo", Ready, Failed)
	if last := seq[len(seq)-1]; last.State != Ready {
		t.Fatalf("after the kill the server went %v (%s)", statesOf(seq), last.LastError)
	}
	if pid := s.PID(); pid == oldPID || pid <= 0 {
		t.Errorf("PID after reconnecting = %d, before %d", pid, oldPID)
	}
	if res := call(t, tool.NewExecutor(reg, nil), "demo__echo", `{"text":"x"}`); res.IsError {
		t.Errorf("echo after reconnecting: %s", res.Message)
	}
	if err := closeWithin(t, m); err != nil {
		t.Errorf("Close = %v", err)
	}
	lc.verify(t)
}

// A server the configuration disables is listed but not started.
func TestManagerDisabledServer(t *testing.T) {
	reg := confirmingRegistry()
	lc := newLeakCheck()
	path, readPID := pidFile(t)
	off := stdioConfig("off", "demo")
	off.Env[envPIDFile] = path
	writableBy(&off, path)
	off.Disabled = true
	m := NewManager([]config.Server{off, lc.stdio(t, "on", "demo")}, reg, nil)
	if _, err := startWithin(t, m, waitTime); err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if pid := readPID(); pid != 0 {
		t.Errorf("the disabled server was started (child pid %d)", pid)
	}
	for _, st := range m.Status() {
		if st.Name == "off" && st.State != Configured && st.State != Stopped {
			t.Errorf("the disabled server is %s", st.State)
		}
	}
	for _, n := range toolNames(reg) {
		if strings.HasPrefix(n, "off__") {
			t.Errorf("the disabled server's tool %s is registered", n)
		}
	}
	if err := closeWithin(t, m); err != nil {
		t.Errorf("Close = %v", err)
	}
	lc.verify(t)
}

// Apply keeps an unchanged server as it is (same child, same tools),
// closes a removed one, restarts a changed one and starts a new one, and
// reports each; the registry ends up with exactly the new configuration's
// tools.
func TestManagerApplyReload(t *testing.T) {
	lc := newLeakCheck()
	keep, change, drop := lc.stdio(t, "keep", "demo"), lc.stdio(t, "change", "demo"), lc.stdio(t, "drop", "demo")
	reg := confirmingRegistry()
	m := NewManager([]config.Server{keep, change, drop}, reg, nil)
	if _, err := startWithin(t, m, waitTime); err != nil {
		t.Fatal(err)
	}
	pidOf := func(name string) int {
		s, ok := m.Server(name)
		if !ok {
			return 0
		}
		return s.PID()
	}
	keepPID, changePID, dropPID := pidOf("keep"), pidOf("change"), pidOf("drop")
	if keepPID == 0 || changePID == 0 || dropPID == 0 {
		t.Fatalf("pids before the reload: keep %d, change %d, drop %d", keepPID, changePID, dropPID)
	}

	changed := stdioConfig("change", "demo")
	changed.Env[envPIDFile] = change.Env[envPIDFile]
	changed.Sandbox = change.Sandbox
	changed.Prefix = "changed" // its tools' names move with it
	added := lc.stdio(t, "add", "demo")
	keep.Line = 42 // where it is written does not make it another server
	ch, err := m.Apply(boundedCtx(t, waitTime), []config.Server{added, keep, changed})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := Changes{Added: []string{"add"}, Removed: []string{"drop"}, Changed: []string{"change"}, Unchanged: []string{"keep"}, Failed: map[string]string{}}
	if !reflect.DeepEqual(ch, want) {
		t.Errorf("Apply reported %+v, want %+v", ch, want)
	}
	if got := pidOf("keep"); got != keepPID {
		t.Errorf("the unchanged server's child is %d after the reload, want it kept (%d)", got, keepPID)
	}
	if got := pidOf("change"); got == 0 || got == changePID {
		t.Errorf("the changed server's child is %d after the reload, want a new one (was %d)", got, changePID)
	}
	assertGone(t, dropPID)
	assertGone(t, changePID)
	if _, ok := m.Server("drop"); ok {
		t.Error("the removed server is still managed")
	}
	var names []string
	for _, st := range m.Status() {
		names = append(names, st.Name+"="+st.State.String())
	}
	if want := []string{"add=ready", "keep=ready", "change=ready"}; !slices.Equal(names, want) {
		t.Errorf("servers after the reload = %v, want %v (the new configuration's order)", names, want)
	}
	prefixes := map[string]bool{}
	for _, n := range toolNames(reg) {
		prefixes[strings.SplitN(n, "__", 2)[0]] = true
	}
	if want := map[string]bool{"add": true, "keep": true, "changed": true}; !maps.Equal(prefixes, want) {
		t.Errorf("registered prefixes after the reload = %v, want %v", slices.Sorted(maps.Keys(prefixes)), slices.Sorted(maps.Keys(want)))
	}

	if err := closeWithin(t, m); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := m.Apply(t.Context(), nil); !errors.Is(err, ErrManagerClosed) {
		t.Errorf("Apply after Close = %v, want ErrManagerClosed", err)
	}
	lc.verify(t)
}
