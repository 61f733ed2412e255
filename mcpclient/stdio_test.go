package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/tool"
)

// knownDemoTools are the demo tools these tests rely on by name.
var knownDemoTools = []string{
	"echo", "add", "list_notes", "write_note", "delete_note",
	"tiny_image", "mislabeled_image", "tiny_audio", "embedded_resource",
	"slow_count", "wait_for_cancel", "stats", "fail",
}

// demoToolNames asks an in-memory demo server for its listing, so the
// expectation follows the demo rather than a hard-coded count.
func demoToolNames(t *testing.T) []string {
	t.Helper()
	ctx := boundedCtx(t, waitTime)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := demo.NewServer(nil).Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("in-memory demo server: %v", err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("in-memory demo client: %v", err)
	}
	defer cs.Close()
	var names []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("listing the in-memory demo: %v", err)
		}
		names = append(names, tl.Name)
	}
	for _, k := range knownDemoTools {
		if !slices.Contains(names, k) {
			t.Fatalf("the demo no longer lists %q (it lists %v)", k, names)
		}
	}
	return names
}

func TestStdioConnectDemo(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	cfg := stdioConfig("demo", "demo")
	cfg.TierOverrides = map[string]string{"write_note": "write"}
	s := connect(t, cfg, reg, nil)

	var want []string
	for _, n := range demoToolNames(t) {
		want = append(want, "demo__"+n)
	}
	slices.Sort(want)
	if got := toolNames(reg); !slices.Equal(got, want) {
		t.Errorf("registry holds %v, want %v", got, want)
	}
	if got := slices.Sorted(slices.Values(s.Tools())); !slices.Equal(got, want) {
		t.Errorf("Tools() = %v, want %v", got, want)
	}
	if s.Name() != "demo" {
		t.Errorf("Name() = %q", s.Name())
	}
	if sk, w := s.Skipped(), s.Warnings(); len(sk) != 0 || len(w) != 0 {
		t.Errorf("Skipped() = %v, Warnings() = %v, want none", sk, w)
	}

	wantTier := map[string]tool.Tier{
		"delete_note": tool.Destructive, // raised by its destructiveHint
		"write_note":  tool.Write,       // the override
	}
	for _, tl := range reg.List() {
		original := strings.TrimPrefix(tl.Name, "demo__")
		if tl.Origin != (tool.Origin{Source: "demo", Name: original}) {
			t.Errorf("%s: Origin = %+v", tl.Name, tl.Origin)
		}
		want, ok := wantTier[original]
		if !ok {
			want = tool.Read
		}
		if tl.Tier != want {
			t.Errorf("%s: tier %s, want %s", tl.Name, tl.Tier, want)
		}
		if !strings.Contains(tl.Description, `MCP server "demo"`) {
			t.Errorf("%s: description %q is not attributed to the server", tl.Name, tl.Description)
		}
	}
}

func TestStdioCallsThroughExecutor(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	cfg := stdioConfig("demo", "demo")
	cfg.TierOverrides = map[string]string{"write_note": "write"}
	connect(t, cfg, reg, nil)
	ex := tool.NewExecutor(reg, nil)

	t.Run("echo", func(t *testing.T) {
		res := call(t, ex, "demo__echo", `{"text":"hello over stdio"}`)
		if res.IsError || res.Text() != "hello over stdio" {
			t.Errorf("echo = %+v, want the text back", res)
		}
	})
	t.Run("add structured", func(t *testing.T) {
		res := call(t, ex, "demo__add", `{"a":2,"b":3.5}`)
		if res.IsError {
			t.Fatalf("add: %s", res.Message)
		}
		raw, _ := json.Marshal(res.Structured)
		var got struct{ Sum *float64 }
		if err := json.Unmarshal(raw, &got); err != nil || got.Sum == nil || *got.Sum != 5.5 {
			t.Errorf("add structured content = %s, want sum 5.5", raw)
		}
	})
	t.Run("mislabeled image", func(t *testing.T) {
		res := call(t, ex, "demo__mislabeled_image", `{}`)
		if res.IsError || len(res.Content) != 1 {
			t.Fatalf("mislabeled_image = %+v", res)
		}
		img, ok := res.Content[0].(*tool.Image)
		if !ok {
			t.Fatalf("block is %T, want *tool.Image", res.Content[0])
		}
		if img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG")) {
			t.Errorf("image MIME %q (data %q…), want image/png and the PNG bytes", img.MIMEType, img.Data[:min(8, len(img.Data))])
		}
	})
	t.Run("audio and resources", func(t *testing.T) {
		res := call(t, ex, "demo__tiny_audio", `{}`)
		if a, ok := res.Content[0].(*tool.Audio); !ok || a.MIMEType != "audio/wav" {
			t.Errorf("tiny_audio block = %#v, want *tool.Audio audio/wav", res.Content[0])
		}
		res = call(t, ex, "demo__embedded_resource", `{}`)
		if len(res.Content) != 2 {
			t.Fatalf("embedded_resource = %+v, want 2 blocks", res)
		}
		if r, ok := res.Content[0].(*tool.Resource); !ok || r.URI != "demo://notes/readme" || r.MIMEType != "text/plain" || r.Text == "" {
			t.Errorf("first block = %#v, want the embedded text resource", res.Content[0])
		}
		if l, ok := res.Content[1].(*tool.ResourceLink); !ok || l.URI != "demo://notes/index" || l.Name != "notes-index" {
			t.Errorf("second block = %#v, want the resource link", res.Content[1])
		}
	})
	t.Run("write tier runs after confirmation", func(t *testing.T) {
		res := call(t, ex, "demo__write_note", `{"title":"t","body":"b"}`)
		if res.IsError {
			t.Fatalf("write_note: %s", res.Message)
		}
		if res := call(t, ex, "demo__list_notes", `{}`); !strings.Contains(res.Text(), "t") {
			t.Errorf("list_notes after write = %q", res.Text())
		}
	})
	t.Run("tool error", func(t *testing.T) {
		res := call(t, ex, "demo__fail", `{"reason":"on purpose"}`)
		if !res.IsError || res.Reason != tool.ReasonTool || !strings.Contains(res.Message, "demo failure") || !strings.Contains(res.Message, "on purpose") {
			t.Errorf("fail = IsError %v, Reason %q, Message %q; want tool_error carrying the server's text", res.IsError, res.Reason, res.Message)
		}
	})
	t.Run("invalid arguments never reach the server", func(t *testing.T) {
		before := stats(t, ex, "demo", 0)
		res := call(t, ex, "demo__echo", `{}`)
		if !res.IsError || res.Reason != tool.ReasonInvalidArgs {
			t.Errorf("echo without text = Reason %q, Message %q; want invalid_arguments", res.Reason, res.Message)
		}
		after := stats(t, ex, "demo", 0)
		// The second stats call is the only call the server may have seen.
		if after.Calls != before.Calls+1 {
			t.Errorf("server calls went from %d to %d, want exactly one more (the stats call)", before.Calls, after.Calls)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		res := call(t, ex, "demo__no_such_tool", `{}`)
		if !res.IsError || res.Reason != tool.ReasonUnknownTool {
			t.Errorf("unknown tool = Reason %q, want unknown_tool", res.Reason)
		}
	})
}

// TestStdioProgress checks the reports of a real slow_count.
//
// What the SDK guarantees about ordering (go-sdk v1.8.0,
// internal/jsonrpc2/conn.go): readIncoming hands each incoming notification
// to a queue that a single goroutine (handleAsync) drains one at a time, in
// arrival order, while a response is delivered to the waiting call directly
// from readIncoming. So notifications reach the ProgressNotificationHandler
// in the order the server sent them, but a response can overtake the
// notifications the server sent before it: CallTool may return while those
// are still queued. Connect's call removes the progress token when CallTool
// returns, so such late reports are dropped. What the caller sees is
// therefore an in-order prefix of the reports the server sent, which may be
// shorter than all of them (even empty). Observed under -race: slow_count
// {steps:4, interval_ms:20} now and then loses its last report (sent just
// before the result), and of 20 reports sent back to back right before the
// response anywhere from 0 to 20 arrive. Only a report the client has seen
// before the call ends proves the earlier ones were delivered (see
// TestStdioProgressOrderedBeforeCompletion).
func TestStdioProgress(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	connect(t, stdioConfig("demo", "demo"), reg, nil)
	ex := tool.NewExecutor(reg, nil)

	rec := &recorder{}
	res := ex.Call(tool.WithCaller(boundedCtx(t, waitTime), rec), "demo__slow_count", json.RawMessage(`{"steps":4,"interval_ms":20}`))
	if res.IsError || res.Text() != "counted to 4" {
		t.Fatalf("slow_count = %+v", res)
	}
	// The demo reports after every step: 1, 2, 3, 4 of 4. What reaches the
	// caller must be a prefix of that.
	got := rec.got()
	if len(got) > 4 {
		t.Errorf("got %d reports for 4 steps: %+v", len(got), got)
	}
	for i, p := range got {
		step := i + 1
		want := tool.Progress{Progress: float64(step), Total: 4, Message: "step " + strconv.Itoa(step) + " of 4"}
		if p != want {
			t.Errorf("report %d = %+v, want %+v (reports must arrive in order, none missing before the last)", i, p, want)
		}
	}
	t.Logf("slow_count{steps:4} delivered %d report(s) before the call returned: %+v", len(got), got)
}

// TestStdioProgressOrderedBeforeCompletion checks what is guaranteed: the
// server sends n reports and then waits; once the client has seen the last
// one, it must have seen every earlier one, in order, exactly once, with the
// server's totals and messages.
func TestStdioProgressOrderedBeforeCompletion(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	connect(t, stdioConfig("custom", "custom"), reg, nil)
	ex := tool.NewExecutor(reg, nil)

	const n = 25
	ctx, cancel := context.WithTimeout(t.Context(), waitTime)
	defer cancel()
	rec := &recorder{until: make(chan struct{}), untilAt: n}
	done := make(chan *tool.Result, 1)
	go func() { done <- ex.Call(tool.WithCaller(ctx, rec), "custom__burst", json.RawMessage(`{"n":25}`)) }()
	select {
	case <-rec.until:
	case res := <-done:
		t.Fatalf("burst ended before its last report arrived: %+v (reports %+v)", res, rec.got())
	case <-ctx.Done():
		t.Fatalf("the last report never arrived; got %+v", rec.got())
	}
	got := rec.got()
	cancel()
	if res := <-done; res.Reason != tool.ReasonCancelled {
		t.Errorf("cancelled burst = Reason %q, Message %q; want cancelled", res.Reason, res.Message)
	}
	if len(got) != n {
		t.Fatalf("got %d reports, want %d: %+v", len(got), n, got)
	}
	for i, p := range got {
		want := tool.Progress{Progress: float64(i + 1), Total: n, Message: "report " + strconv.Itoa(i+1)}
		if p != want {
			t.Errorf("report %d = %+v, want %+v", i, p, want)
		}
	}
}

// TestStdioProgressAfterResultIsPrefix checks the guarantee that is left when
// the server answers right after reporting: whatever reaches the caller is
// an in-order prefix of what the server sent, with no gaps or repeats.
func TestStdioProgressAfterResultIsPrefix(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	connect(t, stdioConfig("custom", "custom"), reg, nil)
	ex := tool.NewExecutor(reg, nil)
	for range 5 {
		rec := &recorder{}
		res := ex.Call(tool.WithCaller(boundedCtx(t, waitTime), rec), "custom__burst", json.RawMessage(`{"n":20,"return":true}`))
		if res.IsError || res.Text() != "done" {
			t.Fatalf("burst = %+v", res)
		}
		got := rec.got()
		for i, p := range got {
			if p.Progress != float64(i+1) || p.Total != 20 {
				t.Fatalf("report %d = %+v, want %d of 20 (reports must be an in-order prefix): %+v", i, p, i+1, got)
			}
		}
		t.Logf("%d of 20 reports sent before the response reached the caller", len(got))
	}
}

// cancelAfterFirstProgress starts a call with a Caller, waits for its first
// progress report (which proves the server's handler is running), cancels
// the call's context and returns the call's result.
func cancelAfterFirstProgress(t *testing.T, ex *tool.Executor, name, args string) *tool.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTime)
	defer cancel()
	rec := &recorder{first: make(chan struct{})}
	done := make(chan *tool.Result, 1)
	go func() { done <- ex.Call(tool.WithCaller(ctx, rec), name, json.RawMessage(args)) }()
	select {
	case <-rec.first:
	case res := <-done:
		t.Fatalf("%s ended before reporting progress: %+v", name, res)
	case <-ctx.Done():
		t.Fatalf("%s reported no progress within %s", name, waitTime)
	}
	cancel()
	select {
	case res := <-done:
		return res
	case <-time.After(waitTime):
		t.Fatalf("%s did not return after its context was cancelled", name)
		return nil
	}
}

// testCancellationReachesServer cancels a running call and then asks the
// demo (in the same server) whether its handler saw the cancellation.
func testCancellationReachesServer(t *testing.T, ex *tool.Executor, prefix, name, args string) {
	t.Helper()
	res := cancelAfterFirstProgress(t, ex, prefix+"__"+name, args)
	if !res.IsError || res.Reason != tool.ReasonCancelled {
		t.Fatalf("cancelled %s = IsError %v, Reason %q, Message %q; want cancelled", name, res.IsError, res.Reason, res.Message)
	}
	if st := stats(t, ex, prefix, 1); st.Cancelled < 1 {
		t.Errorf("server stats after the cancellation = %+v, want cancelled >= 1", st)
	}
}

func TestStdioCancellationReachesServer(t *testing.T) {
	t.Parallel()
	t.Run("wait_for_cancel", func(t *testing.T) {
		t.Parallel()
		reg := confirmingRegistry()
		connect(t, stdioConfig("demo", "demo"), reg, nil)
		testCancellationReachesServer(t, tool.NewExecutor(reg, nil), "demo", "wait_for_cancel", `{}`)
	})
	t.Run("slow_count", func(t *testing.T) {
		t.Parallel()
		reg := confirmingRegistry()
		connect(t, stdioConfig("demo", "demo"), reg, nil)
		// 100 steps of 100 ms: the count still has seconds to go when the
		// first report arrives, so the cancellation lands mid-count.
		testCancellationReachesServer(t, tool.NewExecutor(reg, nil), "demo", "slow_count", `{"steps":100,"interval_ms":100}`)
	})
}

func TestStdioTimeout(t *testing.T) {
	cfg := stdioConfig("demo", "demo")
	cfg.Timeout = 300 * time.Millisecond
	// The 300 ms bound the start too, and the sandbox's launcher execs the
	// (large, race-enabled) test binary a second time: this test is of
	// the call's timeout, so its server runs unconfined.
	cfg.Sandbox = &config.Sandbox{Off: true}
	reg := confirmingRegistry()
	// The 300 ms also bound starting the child; a race-enabled binary on a
	// busy machine can miss that now and then, so a connect that runs out
	// of its own time is retried a few times. Any other failure is fatal.
	var s *Server
	for attempt := 1; ; attempt++ {
		var err error
		s, err = Connect(boundedCtx(t, waitTime), cfg, reg, nil)
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "no answer within") {
			t.Fatalf("Connect with a 300ms timeout (attempt %d): %v", attempt, err)
		}
		t.Logf("attempt %d: %v", attempt, err)
	}
	t.Cleanup(func() { _ = s.Close() })

	start := time.Now()
	res := call(t, tool.NewExecutor(reg, nil), "demo__wait_for_cancel", `{}`)
	elapsed := time.Since(start)
	if !res.IsError || res.Reason != tool.ReasonTimeout || !strings.Contains(res.Message, "no answer within") {
		t.Errorf("wait_for_cancel with a 300ms timeout = Reason %q, Message %q; want timeout saying no answer within", res.Reason, res.Message)
	}
	if !strings.Contains(res.Message, "300ms") {
		t.Errorf("timeout message %q does not say how long it waited", res.Message)
	}
	if elapsed < 300*time.Millisecond || elapsed > waitTime/2 {
		t.Errorf("timed-out call took %v, want about 300ms", elapsed)
	}
}

func TestStdioClose(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	other := &tool.Tool{Name: "local", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }}
	if err := reg.Register(other); err != nil {
		t.Fatal(err)
	}
	s, err := Connect(boundedCtx(t, waitTime), stdioConfig("demo", "demo"), reg, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	pid := s.PID()
	if pid <= 0 {
		t.Fatalf("PID() = %d for a connected stdio server", pid)
	}
	if reg.Len() < 2 {
		t.Fatalf("registry holds %v after Connect", toolNames(reg))
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	var first error
	select {
	case first = <-closed:
	case <-time.After(waitTime):
		t.Fatal("Close did not return")
	}
	if first != nil {
		t.Errorf("Close() = %v, want nil for a server that exits when its stdin closes", first)
	}
	if got := toolNames(reg); !slices.Equal(got, []string{"local"}) {
		t.Errorf("after Close the registry holds %v, want only the unrelated tool", got)
	}
	if second := s.Close(); second != first {
		t.Errorf("second Close = %v, first = %v; want the same result", second, first)
	}
	assertGone(t, pid)
}

func TestStdioPreflightWithoutConfirmer(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		path, readPID := pidFile(t)
		cfg := stdioConfig("demo", "demo")
		cfg.Env[envPIDFile] = path
		writableBy(&cfg, path)
		cfg.TierOverrides = map[string]string{"write_note": "write"}
		reg := tool.NewRegistry(nil)
		s, err := Connect(boundedCtx(t, waitTime), cfg, reg, nil)
		if err == nil {
			_ = s.Close()
			t.Fatal("Connect without a confirmer succeeded")
		}
		if !errors.Is(err, tool.ErrNeedsConfirmer) {
			t.Errorf("error %v does not wrap ErrNeedsConfirmer", err)
		}
		for _, want := range []string{`"demo"`, "demo__delete_note (destructive)", "demo__write_note (write)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %s", err, want)
			}
		}
		if strings.Contains(err.Error(), "demo__echo") {
			t.Errorf("error %q names a read tool", err)
		}
		if reg.Len() != 0 {
			t.Errorf("registry holds %v after a refused Connect", toolNames(reg))
		}
		assertGone(t, readPID())
	})
	t.Run("read-only selection is accepted", func(t *testing.T) {
		t.Parallel()
		cfg := stdioConfig("demo", "demo")
		cfg.ExcludeTools = []string{"delete_note"}
		reg := tool.NewRegistry(nil)
		connect(t, cfg, reg, nil)
		if reg.Len() == 0 || reg.Has("demo__delete_note") {
			t.Errorf("registry holds %v", toolNames(reg))
		}
	})
}

func TestStdioStartFailures(t *testing.T) {
	t.Parallel()
	t.Run("no such command", func(t *testing.T) {
		t.Parallel()
		cfg := stdioConfig("ghost", "demo")
		cfg.Command = filepath.Join(t.TempDir(), "no-such-server")
		cfg.Args = []string{"--flag"}
		reg := confirmingRegistry()
		_, err := Connect(boundedCtx(t, waitTime), cfg, reg, nil)
		var ce *ConnectError
		if !errors.As(err, &ce) {
			t.Fatalf("Connect = %v (%T), want *ConnectError", err, err)
		}
		if ce.Server != "ghost" {
			t.Errorf("ConnectError.Server = %q", ce.Server)
		}
		for _, want := range []string{`"ghost"`, cfg.Command + " --flag"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %s", err, want)
			}
		}
		if reg.Len() != 0 {
			t.Errorf("registry holds %v", toolNames(reg))
		}
	})
	t.Run("server exits at once", func(t *testing.T) {
		t.Parallel()
		path, readPID := pidFile(t)
		cfg := stdioConfig("crashy", "crash")
		cfg.Env[envPIDFile] = path
		writableBy(&cfg, path)
		reg := confirmingRegistry()
		_, err := Connect(boundedCtx(t, waitTime), cfg, reg, nil)
		var ce *ConnectError
		if !errors.As(err, &ce) {
			t.Fatalf("Connect = %v (%T), want *ConnectError", err, err)
		}
		for _, want := range []string{`"crashy"`, "fatal: config missing"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %s", err, want)
			}
		}
		if reg.Len() != 0 {
			t.Errorf("registry holds %v", toolNames(reg))
		}
		assertGone(t, readPID())
	})
}

func TestStdioCustomServer(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	cfg := stdioConfig("custom", "custom")
	cfg.TierOverrides = map[string]string{"guarded": "write"}
	s := connect(t, cfg, reg, nil)
	ex := tool.NewExecutor(reg, nil)

	capped := registeredName("custom", longName)
	dotted := registeredName("custom", "a.b")
	want := []string{"custom__a_b", dotted, "custom__burst", "custom__guarded", capped}
	slices.Sort(want)
	if got := toolNames(reg); !slices.Equal(got, want) {
		t.Errorf("registry holds %v, want %v", got, want)
	}

	// The server lists "a.b" before "a_b"; the one whose name needs no
	// change takes the plain name, whatever the order. Each tool answers
	// with its own original name.
	for name, original := range map[string]string{"custom__a_b": "a_b", dotted: "a.b", capped: longName} {
		if res := call(t, ex, name, `{}`); res.IsError || res.Text() != original {
			t.Errorf("%s answered %+v, want the server's %q", name, res, original)
		}
	}

	sk := s.Skipped()
	if len(sk) != 1 || sk[0].Name != "broken" || !strings.Contains(sk[0].Reason, "schema") {
		t.Errorf("Skipped() = %+v, want broken with a schema reason", sk)
	}
	if reg.Has("custom__broken") {
		t.Error("the broken-schema tool was registered")
	}

	g, ok := reg.Lookup("custom__guarded")
	if !ok || g.Tier != tool.Write {
		t.Errorf("guarded (readOnlyHint true, override write) = %+v, want tier write", g)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("Warnings() = %v", w)
	}
}

func TestStdioToolFilters(t *testing.T) {
	t.Parallel()
	all := demoToolNames(t)
	for _, tc := range []struct {
		name     string
		only     []string
		exclude  []string
		want     []string
		warnings []string
	}{
		{name: "empty onlyTools registers nothing", only: []string{}, want: nil},
		{name: "onlyTools", only: []string{"echo"}, want: []string{"demo__echo"}},
		{name: "exclude wins over onlyTools", only: []string{"echo", "add"}, exclude: []string{"add"}, want: []string{"demo__echo"}},
		{name: "excludeTools", exclude: []string{"delete_note", "write_note"}, want: func() []string {
			var w []string
			for _, n := range all {
				if n != "delete_note" && n != "write_note" {
					w = append(w, "demo__"+n)
				}
			}
			slices.Sort(w)
			return w
		}()},
		{name: "unknown names warn", only: []string{"echo", "ghost"}, exclude: []string{"phantom"}, want: []string{"demo__echo"},
			warnings: []string{`onlyTools names tool "ghost"`, `excludeTools names tool "phantom"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := stdioConfig("demo", "demo")
			cfg.OnlyTools, cfg.ExcludeTools = tc.only, tc.exclude
			reg := confirmingRegistry()
			s := connect(t, cfg, reg, nil)
			if got := toolNames(reg); !slices.Equal(got, tc.want) {
				t.Errorf("registry holds %v, want %v", got, tc.want)
			}
			if got := slices.Sorted(slices.Values(s.Tools())); !slices.Equal(got, tc.want) {
				t.Errorf("Tools() = %v, want %v", got, tc.want)
			}
			w := s.Warnings()
			if len(w) != len(tc.warnings) {
				t.Fatalf("Warnings() = %q, want %d", w, len(tc.warnings))
			}
			for i := range w {
				if !strings.Contains(w[i], tc.warnings[i]) {
					t.Errorf("warning %d = %q, want it to contain %s", i, w[i], tc.warnings[i])
				}
			}
		})
	}
}

func TestStdioPlaceholders(t *testing.T) {
	t.Parallel()
	const secret = "tw-secret-3b9f1c"
	t.Run("expanded and masked", func(t *testing.T) {
		t.Parallel()
		cfg := stdioConfig("demo", "demo")
		cfg.Env["X"] = "${SECRET_X}"
		secrets := audit.NewSecrets()
		lookup := func(k string) (string, bool) {
			if k == "SECRET_X" {
				return secret, true
			}
			return "", false
		}
		if got := secrets.String(secret); got != secret {
			t.Fatalf("Secrets masks %q before Connect", got)
		}
		s := connect(t, cfg, confirmingRegistry(), &Options{LookupEnv: lookup, Secrets: secrets})
		if got := secrets.String(secret); got != audit.Mask {
			t.Errorf("after Connect Secrets.String(value) = %q, want %q", got, audit.Mask)
		}
		if cfg.Env["X"] != "${SECRET_X}" {
			t.Errorf("Connect changed the caller's configuration: env X = %q", cfg.Env["X"])
		}

		// The child got the expanded value, and nothing of this process's
		// environment beyond the allowlist.
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(s.PID()) + "/environ")
		if err != nil {
			t.Skipf("cannot read the child's environment: %v", err)
		}
		vars := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
		if !slices.Contains(vars, "X="+secret) {
			t.Errorf("child environment %q lacks X=<expanded value>", vars)
		}
		for _, kv := range vars {
			k, _, _ := strings.Cut(kv, "=")
			if _, configured := cfg.Env[k]; !configured && !slices.Contains(inheritedEnv, k) && !slices.Contains(sandboxEnv, k) {
				t.Errorf("child inherited %s, which is neither configured nor allowlisted", k)
			}
		}
	})
	t.Run("missing variable", func(t *testing.T) {
		t.Parallel()
		path, readPID := pidFile(t)
		cfg := stdioConfig("demo", "demo")
		cfg.Env["X"] = "${SECRET_X}"
		cfg.Env[envPIDFile] = path
		writableBy(&cfg, path)
		reg := confirmingRegistry()
		lookup := func(string) (string, bool) { return "", false }
		_, err := Connect(boundedCtx(t, waitTime), cfg, reg, &Options{LookupEnv: lookup})
		if err == nil {
			t.Fatal("Connect with a missing variable succeeded")
		}
		for _, want := range []string{`"demo"`, "env.X", "SECRET_X"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %s", err, want)
			}
		}
		if pid := readPID(); pid != 0 {
			t.Errorf("a server process (%d) was started despite the missing variable", pid)
		}
		if reg.Len() != 0 {
			t.Errorf("registry holds %v", toolNames(reg))
		}
	})
}

func TestConnectBadTierStartsNothing(t *testing.T) {
	t.Parallel()
	path, readPID := pidFile(t)
	cfg := stdioConfig("demo", "demo")
	cfg.Env[envPIDFile] = path
	writableBy(&cfg, path)
	cfg.TierOverrides = map[string]string{"echo": "dangerous"}
	_, err := Connect(boundedCtx(t, waitTime), cfg, confirmingRegistry(), nil)
	if err == nil || !strings.Contains(err.Error(), `"demo"`) || !strings.Contains(err.Error(), "tierOverrides.echo") {
		t.Errorf("Connect with a bad tier = %v, want an error naming the server and tierOverrides.echo", err)
	}
	if pid := readPID(); pid != 0 {
		t.Errorf("a server process (%d) was started for a bad configuration", pid)
	}
}

// connectWithin connects a server that never answers and checks that
// Connect gives up after the server's timeout, says so, and leaves no
// process behind. The child is found by a marker in its environment, not
// by the pid it writes: a loaded machine may not have run it that far
// before the timeout ends it.
func connectWithin(t *testing.T, mode string) {
	t.Helper()
	marker := fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "_"), os.Getpid(), time.Now().UnixNano())
	cfg := stdioConfig("mute", mode)
	cfg.Env[envTag] = marker
	cfg.Timeout = time.Second
	reg := confirmingRegistry()
	_, err := Connect(boundedCtx(t, waitTime), cfg, reg, nil)
	var ce *ConnectError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no answer within 1s") {
		t.Errorf("Connect to a server that never answers = %v, want a *ConnectError saying no answer within 1s", err)
	}
	if reg.Len() != 0 {
		t.Errorf("registry holds %v", toolNames(reg))
	}
	if left := markedProcesses(marker); len(left) > 0 {
		t.Errorf("processes of the server left after Connect failed: %v", left)
	}
}

func TestStdioConnectTimeout(t *testing.T) {
	t.Parallel()
	t.Run("server that never answers", func(t *testing.T) {
		t.Parallel()
		connectWithin(t, "mute")
	})
	t.Run("server that also ignores stdin closing", func(t *testing.T) {
		t.Parallel()
		connectWithin(t, "stubborn")
	})
}

// logRecords is a slog.Handler that keeps every record.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// lines renders each record as "LEVEL msg k=v k=v".
func (h *logRecords) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.Key + "=" + a.Value.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

// The child's stderr is logged line by line at debug level and kept for the
// connect error, with expanded secrets masked in both.
func TestStdioStderrIsLoggedAndMasked(t *testing.T) {
	t.Parallel()
	const token = "tw-stderr-secret-41aa"
	logs := &logRecords{}
	cfg := stdioConfig("crashy", "crash")
	cfg.Env["TOKEN"] = "${TOKEN}"
	lookup := func(k string) (string, bool) { return token, k == "TOKEN" }
	_, err := Connect(boundedCtx(t, waitTime), cfg, confirmingRegistry(), &Options{Logger: slog.New(logs), LookupEnv: lookup})
	if err == nil {
		t.Fatal("Connect to a crashing server succeeded")
	}
	if strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "using token "+audit.Mask) {
		t.Errorf("connect error %q should show the stderr line with the token masked", err)
	}
	lines := logs.lines()
	for _, want := range []string{
		"DEBUG server stderr server=crashy line=using token " + audit.Mask,
		"DEBUG server stderr server=crashy line=fatal: config missing",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("log lacks %q; it has %q", want, lines)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, token) {
			t.Errorf("log line %q reveals the token", l)
		}
	}
}

// Skipped tools and unmatched names are logged as warnings.
func TestStdioWarningsAreLogged(t *testing.T) {
	t.Parallel()
	logs := &logRecords{}
	cfg := stdioConfig("custom", "custom")
	cfg.TierOverrides = map[string]string{"ghost": "write"}
	connect(t, cfg, confirmingRegistry(), &Options{Logger: slog.New(logs)})
	var skippedLogged, unmatchedLogged bool
	for _, l := range logs.lines() {
		skippedLogged = skippedLogged || strings.HasPrefix(l, "WARN tool left out server=custom tool=broken reason=")
		unmatchedLogged = unmatchedLogged || l == `WARN server "custom": tierOverrides names tool "ghost", which the server does not list`
	}
	if !skippedLogged || !unmatchedLogged {
		t.Errorf("log = %q; want a warning for the skipped tool and one for the unmatched override", logs.lines())
	}
}

// Two servers in one registry with one prefix: a name the first holds is
// never given to the second's tool (nor moved to it when the first goes),
// the second's clashing tools are left out and say who holds their names,
// each name reaches its own server, and closing one leaves the other's
// tools.
func TestStdioTwoServersShareARegistry(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	cfg := stdioConfig("first", "demo")
	cfg.Prefix = "shared"
	cfg.OnlyTools = []string{"echo", "stats"}
	first := connect(t, cfg, reg, nil)
	cfg.Name = "second"
	cfg.OnlyTools = []string{"echo", "stats", "add"}
	second := connect(t, cfg, reg, nil)

	if got, want := toolNames(reg), []string{"shared__add", "shared__echo", "shared__stats"}; !slices.Equal(got, want) {
		t.Fatalf("registry holds %v, want %v", got, want)
	}
	if got := second.Tools(); !slices.Equal(got, []string{"shared__add"}) {
		t.Errorf("second.Tools() = %v, want [shared__add]", got)
	}
	if tl, _ := reg.Lookup("shared__echo"); tl.Origin != (tool.Origin{Source: "first", Name: "echo"}) {
		t.Errorf("shared__echo origin = %+v, want the first server's", tl.Origin)
	}
	var left []string
	for _, sk := range second.Skipped() {
		if !strings.Contains(sk.Reason, `held by tool "`+sk.Name+`" of server "first"`) {
			t.Errorf("second left out %s because %q; want the reason to name the holder", sk.Name, sk.Reason)
		}
		left = append(left, sk.Name)
	}
	if slices.Sort(left); !slices.Equal(left, []string{"echo", "stats"}) {
		t.Errorf("second left out %v, want [echo stats]", left)
	}

	ex := tool.NewExecutor(reg, nil)
	for range 3 {
		call(t, ex, "shared__echo", `{"text":"x"}`)
	}
	call(t, ex, "shared__add", `{"a":1,"b":2}`)
	// Each server has seen only its own calls: the first its 3 echoes and
	// this stats call.
	if got := stats(t, ex, "shared", 0).Calls; got != 4 {
		t.Errorf("first server saw %d calls, want 4", got)
	}

	if err := first.Close(); err != nil {
		t.Errorf("first.Close() = %v", err)
	}
	if got, want := toolNames(reg), []string{"shared__add"}; !slices.Equal(got, want) {
		t.Errorf("after closing the first server the registry holds %v, want %v", got, want)
	}
	if res := call(t, ex, "shared__add", `{"a":2,"b":2}`); res.IsError {
		t.Errorf("the second server's add after closing the first = %+v", res)
	}
}

func TestConnectUnknownTransport(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	_, err := Connect(boundedCtx(t, waitTime), config.Server{Name: "odd", Transport: "carrier-pigeon", URL: "http://127.0.0.1:1/"}, reg, nil)
	if err == nil || !strings.Contains(err.Error(), `"odd"`) || !strings.Contains(err.Error(), `"carrier-pigeon"`) {
		t.Errorf("Connect with transport carrier-pigeon = %v, want an error naming the server and the transport", err)
	}
	if reg.Len() != 0 {
		t.Errorf("registry holds %v", toolNames(reg))
	}
}

// A server's configured secrets are its placeholders' values, its bearer
// token, and the env and header values named as credentials, literal ones
// too; other literal values are not, and a credential too short to mask
// is a warning naming the server and the field, never the value.
func TestConfiguredSecretsAndShortCredentialWarnings(t *testing.T) {
	t.Parallel()
	logs := &logRecords{}
	secrets := audit.NewSecrets()
	cfg := stdioConfig("crashy", "crash")
	cfg.Env["API_TOKEN"] = "tw-literal-secret-77"
	cfg.Env["LOG_DIR"] = "/var/tmp/crashy-logs"
	cfg.Env["SHORT_KEY"] = "q7z"
	cfg.Env["DB_PIN"] = "${PIN}"
	cfg.Env["TOKEN"] = "${TOKEN}"
	lookup := func(k string) (string, bool) {
		switch k {
		case "PIN":
			return "4096", true
		case "TOKEN":
			return "tw-placeholder-secret-9", true
		}
		return "", false
	}
	_, _ = Connect(boundedCtx(t, waitTime), cfg, confirmingRegistry(), &Options{Logger: slog.New(logs), LookupEnv: lookup, Secrets: secrets})

	const text = "tw-literal-secret-77 tw-placeholder-secret-9 /var/tmp/crashy-logs q7z 4096"
	if got, want := secrets.String(text), "[REDACTED] [REDACTED] /var/tmp/crashy-logs q7z 4096"; got != want {
		t.Errorf("masked %q as %q, want %q", text, got, want)
	}
	var warned []string
	for _, l := range logs.lines() {
		if strings.HasPrefix(l, "WARN ") && strings.Contains(l, "too short to mask") {
			warned = append(warned, l)
			if strings.Contains(l, "q7z") || strings.Contains(l, "4096") {
				t.Errorf("warning %q shows the value", l)
			}
		}
	}
	want := []string{
		`WARN server "crashy": env.DB_PIN (set by ${PIN}): the value is shorter than 8 characters, too short to mask; it is shown in clear wherever the server echoes it`,
		`WARN server "crashy": env.SHORT_KEY: the value is shorter than 8 characters, too short to mask; it is shown in clear wherever the server echoes it`,
	}
	if !slices.Equal(warned, want) {
		t.Errorf("warnings = %q, want %q", warned, want)
	}
}

func TestCredentialName(t *testing.T) {
	for name, want := range map[string]bool{
		"API_KEY": true, "GITHUB_TOKEN": true, "X-Api-Key": true, "Authorization": true, "DB_PASSWORD": true,
		"CLIENT_SECRET": true, "GITHUB_PAT": true, "DB_PASS": true, "Cookie": true,
		"PATH": false, "LOG_LEVEL": false, "HOME": false, "ROOT_DIR": false, "PINNED": false, "Accept": false,
	} {
		if got := credentialName(name); got != want {
			t.Errorf("credentialName(%q) = %v, want %v", name, got, want)
		}
	}
}
