package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/tool"
)

// The test binary doubles as the stdio MCP servers the end-to-end tests
// start: Connect re-executes it with TOOLWIRE_TEST_SERVER set, and TestMain
// then serves instead of running tests.
const (
	envServer  = "TOOLWIRE_TEST_SERVER"
	envTag     = "TOOLWIRE_TEST_TAG"     // names a test's children, to find them in /proc
	envPIDFile = "TOOLWIRE_TEST_PIDFILE" // when set, the child writes its pid there first
	// envCancels, when set, names a file to which the custom server
	// appends the reason of every notifications/cancelled it receives.
	envCancels = "TOOLWIRE_TEST_CANCELS"
)

// writableBy lets the sandboxed server of cfg write file, which the test
// reads: a file in a test's temporary directory is outside what a server
// may write by default.
func writableBy(cfg *config.Server, file string) {
	if cfg.Sandbox == nil {
		cfg.Sandbox = &config.Sandbox{}
	}
	cfg.Sandbox.Write = append(cfg.Sandbox.Write, filepath.Dir(file))
}

// longName is the 80-character tool name of the custom server.
var longName = strings.Repeat("long_tool_name_", 5) + "abcde"

func TestMain(m *testing.M) {
	mode := os.Getenv(envServer)
	if mode == "" {
		// Connect logs to slog.Default when Options.Logger is nil; keep test
		// output quiet. Tests that look at logs pass their own logger.
		slog.SetDefault(slog.New(slog.DiscardHandler))
		// The sandboxed servers' state directories go under
		// XDG_STATE_HOME: keep the tests' out of the user's.
		state, err := os.MkdirTemp("", "toolwire-mcpclient-state-")
		if err != nil {
			panic(err)
		}
		os.Setenv("XDG_STATE_HOME", state)
		code := m.Run()
		os.RemoveAll(state)
		os.Exit(code)
	}
	if path := os.Getenv(envPIDFile); path != "" {
		if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "writing pid file: %v\n", err)
			os.Exit(2)
		}
	}
	var err error
	switch mode {
	case "demo":
		err = demo.ServeStdio(context.Background(), nil)
	case "crash":
		if token := os.Getenv("TOKEN"); token != "" {
			fmt.Fprintf(os.Stderr, "using token %s\n", token)
		}
		fmt.Fprint(os.Stderr, "fatal: config missing\n")
		os.Exit(3)
	case "mute":
		// Reads requests but never answers; exits when stdin closes.
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "stubborn":
		// Never answers and ignores stdin closing: only a signal ends it.
		_, _ = io.Copy(io.Discard, os.Stdin)
		time.Sleep(time.Hour)
	case "custom":
		srv := newCustomServer()
		srv.AddReceivingMiddleware(recordCancels)
		err = srv.Run(context.Background(), &listenWatch{Transport: &mcp.StdioTransport{}})
	case "asking":
		err = askingServer(nil, nil).Run(context.Background(), &mcp.StdioTransport{})
	case "silent":
		err = serveSilently()
	case "slowstart":
		// A server that needs a while before it answers, as a server
		// started through npx or reaching a network service does; the
		// start benchmark uses it to show starts overlap.
		time.Sleep(200 * time.Millisecond)
		err = demo.ServeStdio(context.Background(), nil)
	case "flaky":
		// Its tools hang on the first start and answer on every later
		// one (see serveFlaky in retry_test.go).
		err = serveFlaky()
	case "hostile":
		err = hostileServer().Run(context.Background(), &mcp.StdioTransport{})
	case "once":
		// The demo on the first start; a refusal on every later one (see
		// serveOnce in reconnect_test.go).
		err = serveOnce()
	default:
		err = fmt.Errorf("unknown %s %q", envServer, mode)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "test server: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// newCustomServer builds the server behind TOOLWIRE_TEST_SERVER=custom. Each
// plain tool answers with its own name, so a test can tell which original
// tool a registered name reaches.
func newCustomServer() *mcp.Server { return customServer(nil) }

// customServer is newCustomServer whose blocking burst also returns when
// release is closed: an in-process Streamable HTTP server waits for its
// calls to return before it deletes a session, and a test's cleanup must
// not wait forever on a call that was never cancelled.
func customServer(release <-chan struct{}) *mcp.Server { return customServerWith(release, nil) }

// customServerWith is customServer with the server's options.
func customServerWith(release <-chan struct{}, opts *mcp.ServerOptions) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "custom", Version: "0.0.1"}, opts)
	obj := json.RawMessage(`{"type":"object"}`)
	named := func(name string) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		}
	}
	for _, name := range []string{"a.b", "a_b", longName} {
		srv.AddTool(&mcp.Tool{Name: name, Description: "answers " + name, InputSchema: obj}, named(name))
	}
	srv.AddTool(&mcp.Tool{
		Name:        "broken",
		Description: "has an input schema that does not compile",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":12}}}`),
	}, named("broken"))
	srv.AddTool(&mcp.Tool{
		Name:        "guarded",
		Description: "claims to be read-only",
		InputSchema: obj,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, named("guarded"))

	// burst sends n progress reports (1..n of n), each followed by a log
	// line when "logs" is true (and the client set a log level), and then
	// returns when "return" is true, or else blocks until the call is
	// cancelled.
	srv.AddTool(&mcp.Tool{
		Name:        "burst",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"return":{"type":"boolean"},"logs":{"type":"boolean"}},"required":["n"]}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			N      int  `json:"n"`
			Return bool `json:"return"`
			Logs   bool `json:"logs"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		token := req.Params.GetProgressToken()
		for i := 1; i <= args.N && token != nil; i++ {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: float64(i), Total: float64(args.N), Message: fmt.Sprintf("report %d", i),
			})
			if err == nil && args.Logs {
				err = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("line %d", i)})
			}
			if err != nil {
				return nil, err
			}
		}
		if args.Return {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		}
		select {
		case <-ctx.Done():
		case <-release:
			return nil, errors.New("released by the test")
		}
		return nil, ctx.Err()
	})
	return srv
}

// waitTime bounds every step of a test that could block if the code under
// test is wrong, so that a bug fails the test rather than hanging it.
const waitTime = 20 * time.Second

// boundedCtx returns a context that ends after d or with the test.
func boundedCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// stdioConfig returns the configuration of a stdio server served by this
// test binary in the given mode.
func stdioConfig(name, mode string) config.Server {
	return config.Server{
		Name:      name,
		Transport: "stdio",
		Command:   os.Args[0],
		// GORACE: a race-enabled child otherwise sleeps a second on exit,
		// which would make every Close take a second.
		Env:         map[string]string{envServer: mode, "GORACE": "atexit_sleep_ms=0"},
		DefaultTier: "read",
	}
}

// confirmAll is a confirmer that approves every call.
var confirmAll = tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) { return true, nil })

func confirmingRegistry() *tool.Registry {
	return tool.NewRegistry(&tool.RegistryOptions{Confirmer: confirmAll})
}

// connect connects cfg into reg and closes the server when the test ends.
func connect(t *testing.T, cfg config.Server, reg *tool.Registry, opts *Options) *Server {
	t.Helper()
	s, err := Connect(boundedCtx(t, waitTime), cfg, reg, opts)
	if err != nil {
		t.Fatalf("Connect(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// call runs one call through an executor, bounded by waitTime.
func call(t *testing.T, ex *tool.Executor, name, args string) *tool.Result {
	t.Helper()
	return ex.Call(boundedCtx(t, waitTime), name, json.RawMessage(args))
}

// recorder is a tool.Caller that keeps every progress report. When first is
// set, it is closed on the first report; when until is set, it is closed
// once a report's Progress reaches untilAt.
type recorder struct {
	mu      sync.Mutex
	reports []tool.Progress

	first     chan struct{}
	firstOnce sync.Once
	until     chan struct{}
	untilAt   float64
	untilOnce sync.Once
}

func (r *recorder) Progress(_ context.Context, p tool.Progress) {
	r.mu.Lock()
	r.reports = append(r.reports, p)
	r.mu.Unlock()
	if r.first != nil {
		r.firstOnce.Do(func() { close(r.first) })
	}
	if r.until != nil && p.Progress >= r.untilAt {
		r.untilOnce.Do(func() { close(r.until) })
	}
}

func (r *recorder) got() []tool.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]tool.Progress(nil), r.reports...)
}

// demoStats is the demo's stats result.
type demoStats struct {
	Calls     int `json:"calls"`
	Cancelled int `json:"cancelled"`
}

// stats calls the demo's stats tool under its own 10 s deadline, so a server
// that never sees the awaited cancellation fails the test instead of hanging.
func stats(t *testing.T, ex *tool.Executor, prefix string, waitForCancelled int) demoStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res := ex.Call(ctx, prefix+"__stats", json.RawMessage(fmt.Sprintf(`{"wait_for_cancelled":%d}`, waitForCancelled)))
	if res.IsError {
		t.Fatalf("stats(wait_for_cancelled=%d): %s: %s", waitForCancelled, res.Reason, res.Message)
	}
	raw, err := json.Marshal(res.Structured)
	if err != nil {
		t.Fatalf("stats structured content %#v: %v", res.Structured, err)
	}
	var st demoStats
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("stats structured content %s: %v", raw, err)
	}
	return st
}

// pidFile returns a path for a child to write its pid to, and a function
// that reads it (0 when the file was never written).
func pidFile(t *testing.T) (string, func() int) {
	t.Helper()
	path := t.TempDir() + "/child.pid"
	return path, func() int {
		t.Helper()
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatalf("reading pid file: %v", err)
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil {
			t.Fatalf("pid file holds %q: %v", b, err)
		}
		return pid
	}
}

// assertGone checks that no process has the given pid any more. The child
// has been waited for (reaped) by Close, so even a zombie would be a bug.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("no child pid to check (%d)", pid)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after Close: kill(pid, 0) = %v, want ESRCH", pid, err)
	}
}

// toolNames returns the names registered in reg.
func toolNames(reg *tool.Registry) []string {
	var names []string
	for _, t := range reg.List() {
		names = append(names, t.Name)
	}
	return names
}

// listenIDs are the ids of the subscriptions/listen requests the custom
// server has read (see listenWatch).
var listenIDs sync.Map // fmt.Sprint(id) -> true

// listenWatch is the custom server's transport: it notes the id of every
// subscriptions/listen request, whose cancellation recordCancels leaves out.
type listenWatch struct{ mcp.Transport }

func (t *listenWatch) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &listenWatchConn{c}, nil
}

type listenWatchConn struct{ mcp.Connection }

func (c *listenWatchConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "subscriptions/listen" {
		listenIDs.Store(fmt.Sprint(r.ID.Raw()), true)
	}
	return m, err
}

// recordCancels is a receiving middleware that appends the reason of
// every notifications/cancelled to the file named by envCancels, if set,
// but those of a subscriptions/listen stream, which a client of protocol
// 2026-07-28 cancels when it closes the session. It runs after the SDK
// has read the notification, before the session can end: the SDK finishes
// handling what it read before a session closes.
func recordCancels(next mcp.MethodHandler) mcp.MethodHandler {
	path := os.Getenv(envCancels)
	if path == "" {
		return next
	}
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.CancelledParams); ok && method == "notifications/cancelled" {
			if _, listen := listenIDs.Load(fmt.Sprint(p.RequestID)); listen {
				return next(ctx, method, req)
			}
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				fmt.Fprintf(os.Stderr, "recording a cancellation: %v\n", err)
			} else {
				fmt.Fprintln(f, p.Reason)
				_ = f.Close()
			}
		}
		return next(ctx, method, req)
	}
}

// markedProcesses lists the processes whose environment holds
// envTag=marker. A zombie's environment cannot be read, so a child that
// exited and was not waited for is not listed; Close waits for its child.
func markedProcesses(marker string) []int {
	needle := []byte(envTag + "=" + marker + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(b, needle) {
			pids = append(pids, pid)
		}
	}
	return pids
}
