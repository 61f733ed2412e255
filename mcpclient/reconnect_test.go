package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/tool"
)

// envMarker names the file by which the "once" test server knows it has
// already run.
const envMarker = "TOOLWIRE_TEST_MARKER"

// serveOnce is TOOLWIRE_TEST_SERVER=once: the demo the first time, and on
// every later start (the marker file exists) a refusal, exit status 3.
func serveOnce() error {
	path := os.Getenv(envMarker)
	if path == "" {
		return errors.New("once: " + envMarker + " is not set")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintln(os.Stderr, "refusing to start again")
		os.Exit(3)
	}
	if err != nil {
		return err
	}
	f.Close()
	return demo.ServeStdio(context.Background(), nil)
}

// fastPolicy reconnects at once, so tests do not wait out real backoffs.
var fastPolicy = ReconnectPolicy{MaxAttempts: 3, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}

// kill SIGKILLs a stdio server's child.
func kill(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("no child pid to kill (%d)", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// A killed stdio child is replaced: the server goes degraded, reconnects to
// a new process and is ready again with the same tools.
func TestReconnectStdio(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	watch, log := newAuditWatch()
	changes := make(chan Status, 64)
	reg := confirmingRegistry()
	s := connect(t, stdioConfig("demo", "demo"), reg, &Options{Reconnect: fastPolicy, Audit: log, StateChanges: changes})
	ex := tool.NewExecutor(reg, nil)
	if res := call(t, ex, "demo__echo", `{"text":"before"}`); res.IsError || res.Text() != "before" {
		t.Fatalf("echo before the kill = %+v", res)
	}
	before := toolNames(reg)
	oldPID := s.PID()
	drain(changes) // the start's snapshots

	kill(t, oldPID)
	var seq []Status
	for {
		got := awaitState(t, ctx, changes, "demo", Degraded, Reconnecting, Connecting, Initializing, Discovering, Ready, Failed)
		st := got[len(got)-1]
		seq = append(seq, st)
		// The tools stay registered, under the same names, all along.
		if now := toolNames(reg); !slices.Equal(now, before) {
			t.Errorf("while %s the registry holds %v, want %v", st.State, now, before)
		}
		if st.State == Ready || st.State == Failed {
			break
		}
	}
	states := statesOf(seq)
	t.Logf("after the kill: %v", states)
	checkMoves(t, Ready, seq)
	if len(states) < 6 || !slices.Equal(states[:2], []State{Degraded, Reconnecting}) ||
		!slices.Equal(states[len(states)-4:], []State{Connecting, Initializing, Discovering, Ready}) {
		t.Fatalf("states after the kill %v, want degraded, reconnecting, …, connecting, initializing, discovering, ready", states)
	}
	if seq[0].LastError == "" {
		t.Errorf("degraded snapshot %+v has no error", seq[0])
	}
	if seq[1].Attempt != 1 {
		t.Errorf("first reconnecting snapshot says attempt %d, want 1", seq[1].Attempt)
	}

	newPID := s.PID()
	if newPID <= 0 || newPID == oldPID {
		t.Errorf("PID after reconnecting = %d, before = %d; want a new child", newPID, oldPID)
	}
	if err := syscall.Kill(oldPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the killed child %d is still there (kill(pid, 0) = %v); it should have been reaped", oldPID, err)
	}
	if after := toolNames(reg); !slices.Equal(after, before) {
		t.Errorf("after reconnecting the registry holds %v, want %v", after, before)
	}
	if got := slices.Sorted(slices.Values(s.Tools())); !slices.Equal(got, before) {
		t.Errorf("Tools() after reconnecting = %v, want %v", got, before)
	}
	if res := call(t, ex, "demo__echo", `{"text":"after"}`); res.IsError || res.Text() != "after" {
		t.Errorf("echo after reconnecting = %+v", res)
	}
	// The new child is fresh: it has seen only this echo and the stats call.
	if st := stats(t, ex, "demo", 0); st.Calls != 2 {
		t.Errorf("the new child has seen %d calls, want 2 (echo and stats)", st.Calls)
	}

	re := watch.waitKind(t, ctx, audit.ServerReconnected)
	if re.Source != "demo" || re.Attempt != 1 || re.Tools != len(before) {
		t.Errorf("server.reconnected = %+v, want source demo, attempt 1, %d tools", re, len(before))
	}
	deg := watch.of(audit.ServerDegraded)
	if len(deg) == 0 {
		t.Fatalf("no server.degraded event; audit has %v", kinds(watch.all()))
	}
	if d := deg[0]; d.Source != "demo" || d.Attempt != 1 || d.Backoff <= 0 || d.Backoff > fastPolicy.Max || d.Error == "" {
		t.Errorf("first server.degraded = %+v, want source demo, attempt 1, a backoff in (0, %s] and the cause", d, fastPolicy.Max)
	}
	wantKinds := []string{string(audit.ServerStarted), string(audit.ServerDegraded), string(audit.ServerReconnected)}
	if got := kinds(watch.all()); !slices.Equal(got, wantKinds) {
		t.Errorf("audit events %v, want %v", got, wantKinds)
	}
	if st := s.Status(); st.State != Ready || st.Attempt != 0 {
		t.Errorf("Status after reconnecting = %+v, want ready with no attempt pending", st)
	}
}

// While a server waits to reconnect, its calls fail at once as unavailable,
// and Close does not wait for the backoff.
func TestCallsFailFastWhileReconnecting(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	watch, log := newAuditWatch()
	changes := make(chan Status, 64)
	reg := confirmingRegistry()
	policy := ReconnectPolicy{MaxAttempts: 3, Initial: time.Minute, Max: time.Minute}
	s, err := Connect(ctx, stdioConfig("demo", "demo"), reg, &Options{Reconnect: policy, Audit: log, StateChanges: changes})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	before := toolNames(reg)
	drain(changes)

	kill(t, s.PID())
	awaitState(t, ctx, changes, "demo", Reconnecting)
	// Registered still, but unavailable.
	if now := toolNames(reg); !slices.Equal(now, before) {
		t.Errorf("while reconnecting the registry holds %v, want %v", now, before)
	}

	callCtx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	res := tool.NewExecutor(reg, nil).Call(callCtx, "demo__echo", json.RawMessage(`{"text":"x"}`))
	elapsed := time.Since(start)
	if callCtx.Err() != nil {
		t.Errorf("the call waited %v, until its 5s deadline; want it to fail at once", elapsed)
	}
	if !res.IsError || res.Reason != tool.ReasonUnavailable || !strings.Contains(res.Message, "reconnecting") {
		t.Errorf("call while reconnecting = IsError %v, Reason %q, Message %q; want unavailable, saying reconnecting", res.IsError, res.Reason, res.Message)
	}
	if !strings.Contains(res.Message, "attempt 1 of 3") {
		t.Errorf("message %q does not say which attempt is pending", res.Message)
	}
	t.Logf("call while reconnecting returned in %v: %s", elapsed, res.Message)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	closeCtx, cancelClose := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancelClose()
	select {
	case <-closed:
	case <-closeCtx.Done():
		t.Fatal("Close did not return within 5s while a reconnect backoff was pending")
	}
	if n := reg.Len(); n != 0 {
		t.Errorf("after Close the registry holds %v", toolNames(reg))
	}
	if st := s.State(); st != Stopped {
		t.Errorf("state after Close = %s, want stopped", st)
	}
	if got := statesOf(drain(changes)); !slices.Equal(got, []State{Stopped}) {
		t.Errorf("snapshots after Close %v, want [stopped]", got)
	}
	if ev := watch.of(audit.ServerStopped); len(ev) != 1 {
		t.Errorf("%d server.stopped events, want 1; audit has %v", len(ev), kinds(watch.all()))
	}
	if ev := watch.of(audit.ServerReconnected); len(ev) != 0 {
		t.Errorf("a reconnect happened although Close came during the backoff: %+v", ev)
	}
}

// A server that cannot be restarted ends Failed once the attempts run out:
// its tools are gone and the reason is kept.
func TestReconnectExhaustedFails(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	watch, log := newAuditWatch()
	changes := make(chan Status, 64)
	reg := confirmingRegistry()
	path, readPID := pidFile(t)
	cfg := stdioConfig("flaky", "once")
	cfg.Env[envMarker] = filepath.Join(t.TempDir(), "started")
	cfg.Env[envPIDFile] = path
	writableBy(&cfg, path)
	writableBy(&cfg, cfg.Env[envMarker])
	policy := fastPolicy
	policy.MaxAttempts = 2
	s := connect(t, cfg, reg, &Options{Reconnect: policy, Audit: log, StateChanges: changes})
	ex := tool.NewExecutor(reg, nil)
	if res := call(t, ex, "flaky__echo", `{"text":"x"}`); res.IsError {
		t.Fatalf("echo on the first start: %s", res.Message)
	}
	drain(changes)

	kill(t, s.PID())
	seq := awaitState(t, ctx, changes, "flaky", Failed, Ready)
	states := statesOf(seq)
	t.Logf("after the kill: %v", states)
	checkMoves(t, Ready, seq)
	if states[len(states)-1] != Failed {
		t.Fatalf("states after the kill %v, want it to end failed", states)
	}
	if n := reg.Len(); n != 0 {
		t.Errorf("a failed server's tools are still registered: %v", toolNames(reg))
	}
	if got := s.Tools(); len(got) != 0 {
		t.Errorf("Tools() of a failed server = %v", got)
	}
	st := s.Status()
	if st.State != Failed || !strings.Contains(st.LastError, `"flaky"`) || !strings.Contains(st.LastError, "refusing to start again") {
		t.Errorf("Status = %+v; want failed, with a LastError naming the server and quoting its stderr", st)
	}
	if res := call(t, ex, "flaky__echo", `{"text":"x"}`); res.Reason != tool.ReasonUnknownTool {
		t.Errorf("call to a failed server's tool = Reason %q, Message %q; want unknown_tool", res.Reason, res.Message)
	}

	failed := watch.waitKind(t, ctx, audit.ServerFailed)
	if failed.Source != "flaky" || failed.Reason != "reconnect" || !strings.Contains(failed.Error, "refusing to start again") {
		t.Errorf("server.failed = %+v, want source flaky, reason reconnect and the cause", failed)
	}
	var attempts []int
	for _, d := range watch.of(audit.ServerDegraded) {
		attempts = append(attempts, d.Attempt)
	}
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Errorf("server.degraded attempts %v, want [1 2]", attempts)
	}
	if ev := watch.of(audit.ServerReconnected); len(ev) != 0 {
		t.Errorf("server.reconnected for a server that could not restart: %+v", ev)
	}
	// The last refusing child (it wrote the pid file too) has been reaped.
	assertGone(t, readPID())

	// A failed server still closes cleanly, once.
	if err := s.Close(); err != nil {
		t.Errorf("Close of a failed server = %v", err)
	}
	if st := s.State(); st != Stopped {
		t.Errorf("state after Close = %s, want stopped", st)
	}
}

// A Streamable HTTP server that restarts (same address, all sessions lost)
// is noticed, and the client starts a new session with it.
func TestReconnectHTTPServerRestart(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	l := listenBelowEphemeral(t)
	addr := l.Addr().String()
	var (
		mu      sync.Mutex
		servers []*http.Server
	)
	serve := func(l net.Listener) {
		hs := &http.Server{Handler: demo.HTTPHandler(nil)}
		mu.Lock()
		servers = append(servers, hs)
		mu.Unlock()
		go func() { _ = hs.Serve(l) }()
	}
	// Registered before Connect, so it runs after the server's Close.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, hs := range servers {
			_ = hs.Close()
		}
	})
	serve(l)

	watch, log := newAuditWatch()
	changes := make(chan Status, 64)
	reg := confirmingRegistry()
	s := connect(t, httpConfig("web", "http://"+addr+"/mcp"), reg, &Options{Reconnect: fastPolicy, Audit: log, StateChanges: changes})
	ex := tool.NewExecutor(reg, nil)
	for range 3 {
		if res := call(t, ex, "web__echo", `{"text":"old"}`); res.IsError {
			t.Fatalf("echo on the first server: %s", res.Message)
		}
	}
	if st := stats(t, ex, "web", 0); st.Calls != 4 {
		t.Fatalf("the first server counted %d calls, want 4", st.Calls)
	}
	before := toolNames(reg)
	drain(changes)

	// Stop the first server, closing every connection (the session's
	// standalone SSE GET among them), and start a new one on the same
	// address: it knows nothing of the old session.
	mu.Lock()
	first := servers[0]
	mu.Unlock()
	lostAt := time.Now()
	if err := first.Close(); err != nil {
		t.Fatalf("closing the first server: %v", err)
	}
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	serve(l2)

	seq := awaitState(t, ctx, changes, "web", Degraded)
	noticed := time.Since(lostAt)
	t.Logf("session loss noticed after %v: %s", noticed, seq[len(seq)-1].LastError)
	if len(seq) != 1 {
		t.Errorf("snapshots before degraded: %v", statesOf(seq))
	}
	if seq[0].LastError == "" {
		t.Error("degraded snapshot carries no cause")
	}
	seq = append(seq, awaitState(t, ctx, changes, "web", Ready, Failed)...)
	checkMoves(t, Ready, seq)
	if last := seq[len(seq)-1]; last.State != Ready {
		t.Fatalf("after the restart the server went %v; last error %s", statesOf(seq), last.LastError)
	}
	t.Logf("ready again after %v: %v", time.Since(lostAt), statesOf(seq))
	if after := toolNames(reg); !slices.Equal(after, before) {
		t.Errorf("after reconnecting the registry holds %v, want %v", after, before)
	}
	if res := call(t, ex, "web__echo", `{"text":"new"}`); res.IsError || res.Text() != "new" {
		t.Errorf("echo after the restart = %+v", res)
	}
	// The new server has counted only the calls made since: this is a new
	// demo behind a new session, not the old one answering.
	if st := stats(t, ex, "web", 0); st.Calls != 2 {
		t.Errorf("the new server counted %d calls, want 2 (echo and stats)", st.Calls)
	}
	re := watch.waitKind(t, ctx, audit.ServerReconnected)
	if re.Source != "web" || re.Tools != len(before) {
		t.Errorf("server.reconnected = %+v", re)
	}
	if deg := watch.of(audit.ServerDegraded); len(deg) == 0 || deg[0].Error == "" {
		t.Errorf("server.degraded events %+v, want one with the cause", deg)
	}
	if st := s.Status(); st.State != Ready || st.Tools != len(before) {
		t.Errorf("Status after the restart = %+v", st)
	}
}

// notifyingServer is an in-process MCP server over Streamable HTTP whose
// tools a test changes while a client is connected.
func notifyingServer(t *testing.T) (*mcp.Server, string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "0"}, nil)
	for _, name := range []string{"alpha", "beta"} {
		srv.AddTool(&mcp.Tool{Name: name, Description: "the first " + name, InputSchema: json.RawMessage(`{"type":"object"}`)}, answer(name))
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() {
		ts.CloseClientConnections() // the session's standalone GET
		ts.Close()
	})
	return srv, ts.URL + "/mcp"
}

// answer is a tool handler that answers with text.
func answer(text string) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

// A server's notifications/tools/list_changed updates the registry: added,
// removed and changed tools, each reported in tools.changed.
func TestToolsListChanged(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	srv, url := notifyingServer(t)
	watch, log := newAuditWatch()
	reg := confirmingRegistry()
	s := connect(t, httpConfig("srv", url), reg, &Options{Audit: log})
	if got, want := toolNames(reg), []string{"srv__alpha", "srv__beta"}; !slices.Equal(got, want) {
		t.Fatalf("registry holds %v, want %v", got, want)
	}

	srv.AddTool(&mcp.Tool{Name: "gamma", Description: "new", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("gamma"))
	srv.RemoveTools("beta")
	srv.AddTool(&mcp.Tool{Name: "alpha", Description: "the second alpha", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("alpha 2"))

	// The changes may come as one tools.changed event or several.
	var added, removed, changed []string
	union := func(evs []audit.Event) {
		added, removed, changed = nil, nil, nil
		for _, ev := range evs {
			if ev.Kind != audit.ToolsChanged {
				continue
			}
			added = append(added, ev.Added...)
			removed = append(removed, ev.Removed...)
			changed = append(changed, ev.Changed...)
		}
		for _, p := range []*[]string{&added, &removed, &changed} {
			slices.Sort(*p)
			*p = slices.Compact(*p)
		}
	}
	alphaChanged := func() bool {
		tl, ok := reg.Lookup("srv__alpha")
		return ok && strings.Contains(tl.Description, "the second alpha")
	}
	evs := watch.waitFor(t, ctx, "tools.changed covering gamma, beta and alpha", func(evs []audit.Event) bool {
		union(evs)
		return slices.Contains(added, "srv__gamma") && slices.Contains(removed, "srv__beta") && slices.Contains(changed, "srv__alpha") &&
			reg.Has("srv__gamma") && !reg.Has("srv__beta") && alphaChanged()
	})
	t.Logf("%d tools.changed event(s)", len(watch.of(audit.ToolsChanged)))
	if !slices.Equal(added, []string{"srv__gamma"}) || !slices.Equal(removed, []string{"srv__beta"}) || !slices.Equal(changed, []string{"srv__alpha"}) {
		t.Errorf("tools.changed reported added %v, removed %v, changed %v; want [srv__gamma], [srv__beta], [srv__alpha]", added, removed, changed)
	}
	for _, ev := range evs {
		if ev.Kind == audit.ToolsChanged && ev.Source != "srv" {
			t.Errorf("tools.changed event names source %q, want srv", ev.Source)
		}
	}
	if got, want := toolNames(reg), []string{"srv__alpha", "srv__gamma"}; !slices.Equal(got, want) {
		t.Errorf("registry holds %v, want %v", got, want)
	}
	if got := slices.Sorted(slices.Values(s.Tools())); !slices.Equal(got, []string{"srv__alpha", "srv__gamma"}) {
		t.Errorf("Tools() = %v", got)
	}
	if tl, _ := reg.Lookup("srv__alpha"); tl.Origin != (tool.Origin{Source: "srv", Name: "alpha"}) {
		t.Errorf("srv__alpha origin = %+v", tl.Origin)
	}
	ex := tool.NewExecutor(reg, nil)
	if res := call(t, ex, "srv__gamma", `{}`); res.IsError || res.Text() != "gamma" {
		t.Errorf("srv__gamma = %+v", res)
	}
	if res := call(t, ex, "srv__alpha", `{}`); res.IsError || res.Text() != "alpha 2" {
		t.Errorf("srv__alpha after its re-adding = %+v, want the new handler's answer", res)
	}
	if res := call(t, ex, "srv__beta", `{}`); res.Reason != tool.ReasonUnknownTool {
		t.Errorf("srv__beta after its removal = Reason %q, want unknown_tool", res.Reason)
	}
	if st := s.Status(); st.State != Ready || st.Tools != 2 {
		t.Errorf("Status = %+v, want ready with 2 tools", st)
	}
}

// listenBelowEphemeral listens on a free port of 127.0.0.1 below the
// ephemeral range (from 32768 on Linux, 49152 elsewhere), which no
// outgoing connection of a test running beside takes as its own port: a
// server restarted on the same address can listen there again. (Port 0
// gave an ephemeral port, which another test's connection took once
// between the first server's close and the second's listen.)
func listenBelowEphemeral(t *testing.T) net.Listener {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return l
		}
	}
	t.Fatal("no free port of 127.0.0.1 in 20000-31999 after 200 tries")
	return nil
}
