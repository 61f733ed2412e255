package workspace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

// TestMain lets the test binary double as the demo MCP server, so that a
// workspace starts a real child process without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLWIRE_TEST_SERVER") == "demo" {
		if err := demo.ServeStdio(context.Background(), nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The default token store and pins file live in the user's
	// configuration directory: keep the tests out of the real one.
	dir, err := os.MkdirTemp("", "toolwire-workspace-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state")) // the sandboxed servers' state directories
	exampleConfig = filepath.Join(dir, "toolwire.yaml")
	if err := os.WriteFile(exampleConfig, []byte(demoServer+"audit:\n  file: audit.jsonl\nsecurity:\n  pins: off\n"), 0o600); err != nil {
		panic(err)
	}
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// exampleConfig is the toolwire.yaml of Example: the demo server, an
// audit file beside it, no pins.
var exampleConfig string

// demoServer is a servers section naming the demo server (this binary).
var demoServer = `servers:
  demo:
    command: ` + quote(os.Args[0]) + `
    env: {TOOLWIRE_TEST_SERVER: demo}
    tierOverrides: {write_note: write}
`

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// decline is the confirmer of a program that asks nobody: no write or
// destructive call runs.
func decline(context.Context, tool.PendingCall) (bool, error) { return false, nil }

// Example opens the configuration the CLI would, and calls a tool of its
// server through the same executor: validated, audited, masked.
func Example() {
	ctx := context.Background()
	file, err := config.LoadAll([]string{exampleConfig})
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: tool.ConfirmFunc(decline)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	res := w.Executor().Call(ctx, "demo__echo", json.RawMessage(`{"text":"hello from a Go program"}`))
	fmt.Println(res.Text())
	res = w.Executor().Call(ctx, "demo__delete_note", json.RawMessage(`{"title":"groceries"}`))
	fmt.Println(res.Reason)
	// Output:
	// hello from a Go program
	// declined
}

// fixture is a directory with a configuration naming the demo server and
// an audit file.
type fixture struct {
	dir, audit string
}

func newFixture(t *testing.T) *fixture {
	return &fixture{dir: t.TempDir()}
}

// load writes cfg as toolwire.yaml and loads it.
func (f *fixture) load(t *testing.T, cfg string) *config.File {
	t.Helper()
	p := filepath.Join(f.dir, "toolwire.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// demoFile is the demo server with an audit file, pins off.
func (f *fixture) demoFile(t *testing.T, extra string) *config.File {
	f.audit = filepath.Join(f.dir, "audit.jsonl")
	return f.load(t, demoServer+extra+"audit:\n  file: audit.jsonl\nsecurity:\n  pins: off\n")
}

func (f *fixture) auditEvents(t *testing.T) []audit.Event {
	t.Helper()
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	var evs []audit.Event
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev audit.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func approveAll(context.Context, tool.PendingCall) (bool, error) { return true, nil }

// progressSignal is a tool.Caller that signals the first progress report.
type progressSignal chan struct{}

func (p progressSignal) Progress(context.Context, tool.Progress) {
	select {
	case p <- struct{}{}:
	default:
	}
}

// TestClosingGivesEveryRequestedCallAnOutcome: when a program ends while a
// call still runs (its context cancelled, the workspace closed at once),
// the call's outcome is in the audit log before the file closes.
func TestClosingGivesEveryRequestedCallAnOutcome(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, f.demoFile(t, ""), &workspace.Options{
		Confirmer: tool.ConfirmFunc(approveAll), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	started := make(progressSignal, 1)
	done := make(chan *tool.Result, 1)
	callCtx, stop := context.WithCancel(ctx)
	go func() { done <- w.Executor().Call(tool.WithCaller(callCtx, started), "demo__wait_for_cancel", nil) }()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("wait_for_cancel never started")
	}
	// As at the end of serve, run or chat: the command's context ends
	// (Ctrl-C, SIGTERM) and the workspace closes at once.
	stop()
	w.Close()
	if res := <-done; !res.IsError {
		t.Errorf("the call outlived its server: %+v", res)
	}
	open := map[string]bool{}
	for _, ev := range f.auditEvents(t) {
		key := fmt.Sprintf("%s/%d", ev.Batch, ev.Index)
		switch {
		case ev.Kind == audit.CallRequested:
			open[key] = true
		case ev.Kind.Ends():
			delete(open, key)
		}
	}
	if len(open) != 0 {
		raw, _ := os.ReadFile(f.audit)
		t.Errorf("calls %v were requested and have no outcome:\n%s", open, raw)
	}
}

// A server that fails is left out and reported, its reason masked; the
// others are used.
func TestOpenLeavesOutAFailedServerAndSaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const secret = "hunter2-not-a-directory"
	file := f.demoFile(t, "  broken:\n    command: ${BROKEN_DIR}/no-such-server\n")
	lookup := func(k string) (string, bool) {
		if k == "BROKEN_DIR" {
			return "/" + secret, true
		}
		return "", false
	}
	var mu sync.Mutex
	failed := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{
		Confirmer: tool.ConfirmFunc(approveAll), LookupEnv: lookup,
		OnFailed: func(server, reason string) {
			mu.Lock()
			defer mu.Unlock()
			failed[server] = reason
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if len(failed) != 1 || failed["broken"] == "" {
		t.Fatalf("reported failures %v, want broken's alone", failed)
	}
	if strings.Contains(failed["broken"], secret) || !strings.Contains(failed["broken"], "no-such-server") {
		t.Errorf("broken's reason %q: want the command named, the placeholder's value masked", failed["broken"])
	}
	if _, ok := w.Registry().Lookup("demo__echo"); !ok {
		t.Errorf("the demo server's tools are missing beside the failed server")
	}

	// Without OnFailed, the reason is a warning of the logger, masked too.
	var logs bytes.Buffer
	w2, err := workspace.Open(ctx, file, &workspace.Options{
		Confirmer: tool.ConfirmFunc(approveAll), LookupEnv: lookup, AuditFile: filepath.Join(f.dir, "second.jsonl"),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "no-such-server") || strings.Contains(logs.String(), secret) {
		t.Errorf("logs: want a masked warning naming the command:\n%s", logs.String())
	}
}

// Open fails, matching ErrNotStarted, when a required server fails or no
// server starts; a configuration it cannot apply is another error.
func TestOpenFailures(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	open := func(cfg string) error {
		f := newFixture(t)
		w, err := workspace.Open(ctx, f.load(t, cfg), &workspace.Options{Confirmer: tool.ConfirmFunc(approveAll), Logger: quiet})
		if err == nil {
			w.Close()
		}
		return err
	}
	missing := "  gone:\n    command: /nonexistent/server\n"

	err := open(demoServer + missing + "    required: true\nsecurity:\n  pins: off\n")
	if !errors.Is(err, workspace.ErrNotStarted) || !strings.HasPrefix(err.Error(), "required server failed: ") {
		t.Errorf("a required server failing: %v; want ErrNotStarted, saying which", err)
	}
	err = open("servers:\n" + missing + "security:\n  pins: off\n")
	if !errors.Is(err, workspace.ErrNotStarted) || err.Error() != "no server could be started" {
		t.Errorf("no server starting: %v; want ErrNotStarted, saying so", err)
	}
	err = open(demoServer + "audit:\n  required: true\n")
	if !errors.Is(err, workspace.ErrNoAuditFile) || errors.Is(err, workspace.ErrNotStarted) {
		t.Errorf("audit.required without a file: %v; want ErrNoAuditFile", err)
	}
	err = open(demoServer + "audit:\n  file: audit.jsonl\n  signingKey: no-such.key\n")
	if err == nil || errors.Is(err, workspace.ErrNotStarted) || !strings.Contains(err.Error(), "audit.signingKey") {
		t.Errorf("an unreadable signing key: %v; want an error naming audit.signingKey", err)
	}
}

// OpenStore on files opens Options.AuditFile over the configuration's
// audit.file as the store's audit sink, and none when neither names one.
func TestOpenStoreAuditFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	file := f.load(t, demoServer+"audit:\n  file: configured.jsonl\n")
	for _, tc := range []struct {
		opts *workspace.Options
		want string
	}{
		{nil, "configured.jsonl"},
		{&workspace.Options{AuditFile: filepath.Join(f.dir, "flag.jsonl")}, "flag.jsonl"},
	} {
		st, err := workspace.OpenStore(ctx, file, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if st.Kind() != store.Files {
			t.Errorf("no store setting: %s, want files", st.Kind())
		}
		if err := audit.NewLog(st.Audit(), nil).Record(audit.Event{Kind: audit.PinForgotten, Source: "s"}); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := os.Stat(filepath.Join(f.dir, tc.want)); err != nil {
			t.Errorf("options %+v: %v", tc.opts, err)
		}
	}
	st, err := workspace.OpenStore(ctx, f.load(t, demoServer), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Audit() != nil {
		t.Errorf("no audit file named: sink %v, want none", st.Audit())
	}
}

// The workspace's gateway serves its tools with the configuration's result
// limit; its handler is ready while the required server is, and Close
// ends both.
func TestGatewayServesTheWorkspace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	file := f.load(t, strings.Replace(demoServer, "    env:", "    required: true\n    env:", 1)+"security:\n  pins: off\n  maxResultBytes: 16\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{})})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := w.Handler(w.Gateway(nil), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	ready, err := http.Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	ready.Body.Close()
	if ready.StatusCode != http.StatusOK {
		t.Errorf("/readyz with the required server ready: %d, want 200", ready.StatusCode)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	long := strings.Repeat("x", 100)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": long}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError || !strings.HasPrefix(text, strings.Repeat("x", 16)) || strings.Contains(text, strings.Repeat("x", 17)) {
		t.Errorf("echo of 100 bytes under security.maxResultBytes 16: %q (isError %v)", text, res.IsError)
	}

	if !w.Ready() {
		t.Errorf("Ready() = false with the required server ready")
	}
	w.Close()
	if w.Ready() {
		t.Errorf("Ready() = true after Close")
	}
}
