package main

// Tests of "toolwire run" and "toolwire chat": the CLI runs in-process
// against the real demo MCP server (this test binary, started as a child
// process; see TestMain) and a scripted LLM endpoint on 127.0.0.1, which
// keeps every request so the tests can check what the model was sent back.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/agent/agenttest"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// agentCLI is one in-process run of the CLI with its own streams, terminal
// status and environment.
type agentCLI struct {
	stdin    string
	terminal bool
	env      map[string]string
	stderr   *watchBuffer // nil: a fresh one
}

func (f *fixture) runAgent(t *testing.T, ctx context.Context, c agentCLI, args ...string) outcome {
	t.Helper()
	var stdout bytes.Buffer
	stderr := c.stderr
	if stderr == nil {
		stderr = &watchBuffer{}
	}
	e := &env{
		stdin:      strings.NewReader(c.stdin),
		stdout:     &stdout,
		stderr:     stderr,
		isTerminal: func() bool { return c.terminal },
		lookupEnv: func(k string) (string, bool) {
			v, ok := c.env[k]
			return v, ok
		},
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	root := newRootCommand(e)
	root.SetArgs(append([]string{"--config", f.config}, args...))
	code := exitCode(root.ExecuteContext(ctx), stderr)
	return outcome{code, stdout.String(), stderr.String()}
}

// watchBuffer is a stderr that a test can wait on: Seen returns a channel
// closed once the text has been written.
type watchBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	waiters map[string]chan struct{}
}

func (w *watchBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	for text, ch := range w.waiters {
		if strings.Contains(w.buf.String(), text) {
			close(ch)
			delete(w.waiters, text)
		}
	}
	return n, err
}

func (w *watchBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *watchBuffer) Seen(text string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(w.buf.String(), text) {
		close(ch)
		return ch
	}
	if w.waiters == nil {
		w.waiters = map[string]chan struct{}{}
	}
	w.waiters[text] = ch
	return ch
}

func openaiArgs(srv *agenttest.Server, extra ...string) []string {
	return append([]string{"run", "--model", "scripted", "--base-url", srv.URL + "/v1"}, extra...)
}

// runKinds are the audit events a run is judged by: the servers' start and
// stop, every step of every tool call, and the model's failures. Others
// (tool pinning, say) belong to other features' tests.
var runKinds = map[audit.Kind]bool{
	audit.ServerStarted: true, audit.ServerStopped: true,
	audit.CallRequested: true, audit.ValidationPassed: true, audit.ValidationFailed: true,
	audit.ConfirmationRequested: true, audit.ConfirmationAccepted: true, audit.ConfirmationRejected: true,
	audit.CallExecuted: true, audit.CallErrored: true, audit.LLMFailed: true,
}

// auditLines reads the audit file as one line per event of runKinds: kind,
// tool, call id and reason, as far as the event has them.
func (f *fixture) auditLines(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, ev := range f.auditEvents(t) {
		if !runKinds[ev.Kind] {
			continue
		}
		fields := []string{string(ev.Kind)}
		for _, s := range []string{ev.Tool, ev.CallID, ev.Reason} {
			if s != "" {
				fields = append(fields, s)
			}
		}
		out = append(out, strings.Join(fields, " "))
	}
	return out
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

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got: %s\nwant: %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

// TestRunCompletesMultiStepTaskAskingBeforeTheDestructiveStep is the issue's
// "done when": a multi-step task through an OpenAI-compatible endpoint and
// the demo server's tools, confirmation asked before the write and the
// destructive step, and every step in the audit log.
func TestRunCompletesMultiStepTaskAskingBeforeTheDestructiveStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("I will save the note first.",
			agenttest.Call{ID: "w1", Name: "demo__write_note", Args: `{"title":"groceries","body":"milk, eggs"}`}),
		agenttest.OpenAIReply("",
			agenttest.Call{ID: "l1", Name: "demo__list_notes", Args: `{}`},
			agenttest.Call{ID: "e1", Name: "demo__echo", Args: `{"text":"checkpoint"}`}),
		agenttest.OpenAIReply("",
			agenttest.Call{ID: "d1", Name: "demo__delete_note", Args: `{"title":"groceries"}`}),
		agenttest.OpenAIReply("Saved, listed and deleted the note."),
	)
	o := f.runAgent(t, context.Background(), agentCLI{stdin: "y\ny\n", terminal: true, env: map[string]string{"OPENAI_API_KEY": "sk-e2e"}},
		openaiArgs(srv, "Save a groceries note, list my notes, then delete it.")...)
	o.expect(t, exitOK)

	if want := "I will save the note first.\nSaved, listed and deleted the note.\n"; o.stdout != want {
		t.Errorf("stdout = %q, want %q", o.stdout, want)
	}
	mustContain(t, "stderr", o.stderr,
		"→ demo__write_note [write]", "demo__write_note is a write tool", "← demo__write_note: ok",
		"→ demo__list_notes [read]", "→ demo__echo [read]",
		"→ demo__delete_note [destructive]", "demo__delete_note is a destructive tool", "← demo__delete_note: ok")
	if n := strings.Count(o.stderr, "Run it? [y/N]"); n != 2 {
		t.Errorf("asked %d times, want twice (write and destructive):\n%s", n, o.stderr)
	}
	if ask, show := strings.Index(o.stderr, "demo__delete_note is a destructive tool"), strings.Index(o.stderr, "← demo__delete_note"); ask < 0 || show < ask {
		t.Errorf("the destructive call finished before it was asked about:\n%s", o.stderr)
	}

	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model was asked %d times, want 4", len(reqs))
	}
	if names := agenttest.ToolNames(reqs[0]); len(names) != 13 || !slices.Contains(names, "demo__delete_note") {
		t.Errorf("tools offered = %v, want the demo's 13", names)
	}
	if k := srv.Keys()[0]; k != "Bearer sk-e2e" {
		t.Errorf("key sent = %q", k)
	}
	got := [][][2]string{agenttest.OpenAIToolResults(reqs[1]), agenttest.OpenAIToolResults(reqs[2]), agenttest.OpenAIToolResults(reqs[3])}
	want := [][][2]string{
		{{"w1", `saved note "groceries"`}},
		{{"w1", `saved note "groceries"`}, {"l1", "groceries"}, {"e1", "checkpoint"}},
		{{"w1", `saved note "groceries"`}, {"l1", "groceries"}, {"e1", "checkpoint"}, {"d1", `deleted note "groceries"`}},
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d carried tool results %q, want %q", i+2, got[i], want[i])
		}
	}

	// l1 and e1 ran in one round, concurrently: their events interleave.
	sameLines(t, "audit log", groupedByCall(f.auditLines(t)), []string{
		"server.started",
		"call.requested demo__write_note w1", "validation.passed demo__write_note w1",
		"confirmation.requested demo__write_note w1", "confirmation.accepted demo__write_note w1", "call.executed demo__write_note w1",
		"call.requested demo__list_notes l1", "validation.passed demo__list_notes l1", "call.executed demo__list_notes l1",
		"call.requested demo__echo e1", "validation.passed demo__echo e1", "call.executed demo__echo e1",
		"call.requested demo__delete_note d1", "validation.passed demo__delete_note d1",
		"confirmation.requested demo__delete_note d1", "confirmation.accepted demo__delete_note d1", "call.executed demo__delete_note d1",
		"server.stopped",
	})
	if titles := f.noteTitles(t); len(titles) != 0 {
		t.Errorf("notes left = %v, want none", titles)
	}
}

func TestRunAnthropicConcurrentCallsWithAnImage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.AnthropicReply("",
			agenttest.Call{ID: "toolu_1", Name: "demo__add", Args: `{"a":2,"b":3}`},
			agenttest.Call{ID: "toolu_2", Name: "demo__tiny_image", Args: `{}`}),
		agenttest.AnthropicReply("2 + 3 = 5, and the image is a gradient."),
	)
	o := f.runAgent(t, context.Background(), agentCLI{env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-e2e"}},
		"run", "--provider", "anthropic", "--model", "scripted", "--base-url", srv.URL, "add 2 and 3, and show the image")
	o.expect(t, exitOK)
	if o.stdout != "2 + 3 = 5, and the image is a gradient.\n" {
		t.Errorf("stdout = %q", o.stdout)
	}
	msgs := agenttest.Messages(srv.Requests()[1])
	if len(msgs) != 3 || msgs[2]["role"] != "user" {
		t.Fatalf("second request's messages = %v", msgs)
	}
	results := msgs[2]["content"].([]any)
	if len(results) != 2 {
		t.Fatalf("tool results = %v", results)
	}
	first, _ := json.Marshal(results[0])
	if string(first) != `{"content":[{"text":"5","type":"text"}],"tool_use_id":"toolu_1","type":"tool_result"}` {
		t.Errorf("add's result = %s", first)
	}
	img := results[1].(map[string]any)
	if img["tool_use_id"] != "toolu_2" {
		t.Errorf("second result answers %v", img["tool_use_id"])
	}
	var png []byte
	for _, c := range img["content"].([]any) {
		block := c.(map[string]any)
		if block["type"] == "image" {
			src := block["source"].(map[string]any)
			if src["media_type"] != "image/png" {
				t.Errorf("media_type = %v", src["media_type"])
			}
			png, _ = base64.StdEncoding.DecodeString(fmt.Sprint(src["data"]))
		}
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("no PNG image block in the tool result: %v", img)
	}
}

func TestRunValidationErrorIsCorrectedInTheNextRound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("", agenttest.Call{ID: "a1", Name: "demo__add", Args: `{"a":1,"b":"two"}`}),
		agenttest.OpenAIReply("", agenttest.Call{ID: "a2", Name: "demo__add", Args: `{"a":1,"b":2}`}),
		agenttest.OpenAIReply("1 + 2 = 3"),
	)
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "add 1 and two")...)
	o.expect(t, exitOK)
	reqs := srv.Requests()
	bad := agenttest.OpenAIToolResults(reqs[1])
	if len(bad) != 1 {
		t.Fatalf("results = %v", bad)
	}
	mustContain(t, "the invalid call's result", bad[0][1], "invalid arguments", "/b", "correct the arguments")
	if good := agenttest.OpenAIToolResults(reqs[2]); len(good) != 2 || good[1] != [2]string{"a2", "3"} {
		t.Errorf("results after the correction = %v", good)
	}
	mustContain(t, "stderr", o.stderr, "← demo__add: invalid_arguments:", "← demo__add: ok")
	sameLines(t, "audit log", f.auditLines(t), []string{
		"server.started",
		"call.requested demo__add a1", "validation.failed demo__add a1 invalid_arguments",
		"call.requested demo__add a2", "validation.passed demo__add a2", "call.executed demo__add a2",
		"server.stopped",
	})
}

func TestRunUnknownToolAndMalformedArgumentsGoBackToTheModel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("",
			agenttest.Call{ID: "u1", Name: "demo__teleport", Args: `{}`},
			agenttest.Call{ID: "m1", Name: "demo__echo", Args: `{"text":`}),
		agenttest.OpenAIReply("Sorry."),
	)
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "do it")...)
	o.expect(t, exitOK)
	got := agenttest.OpenAIToolResults(srv.Requests()[1])
	mustContain(t, "unknown tool result", got[0][1], `unknown tool "demo__teleport"`)
	mustContain(t, "malformed arguments result", got[1][1], "invalid arguments", "not valid JSON")
	mustContain(t, "stderr", o.stderr, "→ demo__teleport [unknown tool]")
	sameLines(t, "audit log", f.auditLines(t), []string{
		"server.started",
		"call.requested demo__teleport u1", "validation.failed demo__teleport u1 unknown_tool",
		"call.requested demo__echo m1", "validation.failed demo__echo m1 invalid_arguments",
		"server.stopped",
	})
}

func TestRunDeclinedConfirmationTellsTheModelNotToRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.run(t, "", false, "call", "demo__write_note", "title=keep", "body=x", "--yes").expect(t, exitOK)
	for _, c := range []struct {
		name     string
		cli      agentCLI
		prompted bool
		told     []string
	}{
		{"answered no", agentCLI{stdin: "n\n", terminal: true}, true, []string{"error (declined)", "do not call it again"}},
		// Nobody could be asked: not a refusal (TestRunWithoutATerminalTellsTheModelNobodyCouldBeAsked).
		{"no terminal", agentCLI{stdin: "y\n"}, false, []string{"error (not confirmed)", "the user did not refuse it"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := agenttest.NewServer(t,
				agenttest.OpenAIReply("", agenttest.Call{ID: "d1", Name: "demo__delete_note", Args: `{"title":"keep"}`}),
				agenttest.OpenAIReply("I left the note alone."),
			)
			o := f.runAgent(t, context.Background(), c.cli, openaiArgs(srv, "delete the note keep")...)
			o.expect(t, exitOK)
			if prompted := strings.Contains(o.stderr, "Run it? [y/N]"); prompted != c.prompted {
				t.Errorf("prompted = %v, want %v:\n%s", prompted, c.prompted, o.stderr)
			}
			got := agenttest.OpenAIToolResults(srv.Requests()[1])
			mustContain(t, "declined result", got[0][1], c.told...)
			if titles := f.noteTitles(t); len(titles) != 1 {
				t.Errorf("notes = %v, want the note kept", titles)
			}
		})
	}
	lines := f.auditLines(t)
	if slices.Contains(lines, "call.executed demo__delete_note d1") || !slices.Contains(lines, "confirmation.rejected demo__delete_note d1 declined") {
		t.Errorf("audit log:\n%s", strings.Join(lines, "\n"))
	}
}

func TestRunStopsAtTheRoundLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	again := agenttest.OpenAIReply("", agenttest.Call{ID: "e", Name: "demo__echo", Args: `{"text":"again"}`})
	srv := agenttest.NewServer(t, again, again, again)
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "--max-rounds", "2", "loop forever")...)
	o.expect(t, exitToolErr)
	mustContain(t, "stderr", o.stderr, "tool round limit reached: the model still called tools after 2 rounds")
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("model asked %d times, want 3", n)
	}
	if n := strings.Count(strings.Join(f.auditLines(t), "\n"), "call.executed demo__echo"); n != 2 {
		t.Errorf("%d calls executed, want 2", n)
	}
}

func TestRunCtrlCCancelsTheModelRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	arrived := make(chan struct{})
	abandoned := make(chan struct{})
	srv := agenttest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(abandoned)
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }() // what main's signal handler does on Ctrl-C
	o := f.runAgent(t, ctx, agentCLI{}, openaiArgs(srv, "hang")...)
	o.expect(t, exitInterrupted)
	mustContain(t, "stderr", o.stderr, "interrupted: the model request and the tool calls in flight were cancelled")
	<-abandoned
	sameLines(t, "audit log", f.auditLines(t), []string{"server.started", "llm.failed cancelled", "server.stopped"})
}

func TestRunCtrlCCancelsTheToolCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t, agenttest.OpenAIReply("", agenttest.Call{ID: "w1", Name: "demo__wait_for_cancel", Args: `{}`}))
	stderr := &watchBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	// The demo reports progress once the call reaches its handler.
	go func() { <-stderr.Seen("waiting for cancellation"); cancel() }()
	o := f.runAgent(t, ctx, agentCLI{stderr: stderr}, openaiArgs(srv, "wait")...)
	o.expect(t, exitInterrupted)
	sameLines(t, "audit log", f.auditLines(t), []string{
		"server.started",
		"call.requested demo__wait_for_cancel w1", "validation.passed demo__wait_for_cancel w1", "call.errored demo__wait_for_cancel w1 cancelled",
		"server.stopped",
	})
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("model asked %d times, want 1: nothing after the cancel", n)
	}
}

func TestRunFindToolsWhenDefinitionsExceedTheBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("", agenttest.Call{ID: "f1", Name: "find_tools", Args: `{"query":"echo text","limit":2}`}),
		agenttest.OpenAIReply("", agenttest.Call{ID: "e1", Name: "demo__echo", Args: `{"text":"found"}`}),
		agenttest.OpenAIReply("It said found."),
	)
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "--tool-budget", "300", "echo something")...)
	o.expect(t, exitOK)
	reqs := srv.Requests()
	if got := agenttest.ToolNames(reqs[0]); !slices.Equal(got, []string{"find_tools"}) {
		t.Errorf("first request offered %v, want only find_tools", got)
	}
	if got := agenttest.ToolNames(reqs[1]); !slices.Contains(got, "demo__echo") || len(got) > 3 {
		t.Errorf("second request offered %v, want find_tools and its two matches", got)
	}
	mustContain(t, "find_tools result", agenttest.OpenAIToolResults(reqs[1])[0][1], "demo__echo (read): Returns the given text unchanged.")
	if got := agenttest.OpenAIToolResults(reqs[2]); got[1] != [2]string{"e1", "found"} {
		t.Errorf("echo result = %v", got)
	}
}

func TestRunProviderFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	t.Run("401 names the key variable", func(t *testing.T) {
		srv := agenttest.NewServer(t, agenttest.Status(http.StatusUnauthorized, "Incorrect API key provided"))
		o := f.runAgent(t, context.Background(), agentCLI{env: map[string]string{"MY_LLM_KEY": "sk-very-secret"}},
			openaiArgs(srv, "--api-key-env", "MY_LLM_KEY", "hi")...)
		o.expect(t, exitUsage)
		mustContain(t, "stderr", o.stderr, "refused the API key (401 Unauthorized", "check the key in MY_LLM_KEY")
		if k := srv.Keys()[0]; k != "Bearer sk-very-secret" {
			t.Errorf("key sent = %q", k)
		}
	})
	t.Run("429 honours retry-after", func(t *testing.T) {
		srv := agenttest.NewServer(t,
			agenttest.Status(http.StatusTooManyRequests, "Rate limit reached", "Retry-After-Ms", "20"),
			agenttest.OpenAIReply("finally"))
		o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "hi")...)
		o.expect(t, exitOK)
		if o.stdout != "finally\n" {
			t.Errorf("stdout = %q", o.stdout)
		}
	})
	t.Run("429 gives up within bounds", func(t *testing.T) {
		limited := agenttest.Status(http.StatusTooManyRequests, "Rate limit reached", "Retry-After", "86400")
		srv := agenttest.NewServer(t, limited)
		o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "hi")...)
		o.expect(t, exitToolErr)
		mustContain(t, "stderr", o.stderr, "rate limiting or overloaded (429 Too Many Requests", "asks to wait 24h0m0s, longer than the 1m0s allowed")
	})
	t.Run("unreachable endpoint", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		o := f.runAgent(t, context.Background(), agentCLI{}, "run", "--model", "m", "--base-url", "http://"+addr+"/v1", "hi")
		o.expect(t, exitToolErr)
		mustContain(t, "stderr", o.stderr, "openai: cannot reach http://"+addr+"/v1", "connection refused")
	})

	var failed []string
	for _, ev := range f.auditEvents(t) {
		if ev.Kind == audit.LLMFailed {
			failed = append(failed, fmt.Sprintf("%s %s attempt=%d backoff=%v", ev.Source, ev.Reason, ev.Attempt, ev.Backoff))
		}
	}
	sameLines(t, "llm.failed events", failed, []string{
		"openai unauthorized attempt=1 backoff=0s",
		"openai rate_limited attempt=1 backoff=20ms",
		"openai rate_limited attempt=1 backoff=0s",
		"openai unreachable attempt=1 backoff=0s",
	})
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("sk-very-secret")) {
		t.Errorf("the API key reached the audit log:\n%s", raw)
	}
	// The model's failures and the tool calls share one hash chain.
	if rep, err := audit.Verify(bytes.NewReader(raw), nil); err != nil || rep.Lines != strings.Count(string(raw), "\n") {
		t.Errorf("audit.Verify = %+v, %v", rep, err)
	}
}

func TestRunRefusesBadSettingsBeforeStartingServers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"no model", nil, []string{"run", "hi"}, []string{"no model: pass --model NAME, set TOOLWIRE_MODEL, or set agent.model in the configuration"}},
		{"unknown provider", map[string]string{"TOOLWIRE_PROVIDER": "palm"}, []string{"run", "--model", "m", "hi"}, []string{`unknown provider "palm"`}},
		{"remote plain http", map[string]string{"TOOLWIRE_MODEL": "m"}, []string{"run", "--base-url", "http://10.1.2.3:8000/v1", "hi"}, []string{"plain http is allowed only to a loopback address", "--insecure-http allows it"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := f.runAgent(t, context.Background(), agentCLI{env: c.env}, c.args...)
			o.expect(t, exitUsage)
			mustContain(t, "stderr", o.stderr, c.want...)
		})
	}
	if _, err := os.Stat(f.audit); !os.IsNotExist(err) {
		t.Errorf("a refused run touched the audit log (stat: %v)", err)
	}
}

func TestRunSettingsComeFromTheEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t, agenttest.AnthropicReply("hello from the environment"))
	o := f.runAgent(t, context.Background(), agentCLI{env: map[string]string{
		"TOOLWIRE_PROVIDER": "anthropic", "TOOLWIRE_MODEL": "env-model", "TOOLWIRE_BASE_URL": srv.URL,
		"TOOLWIRE_API_KEY_ENV": "TEAM_KEY", "TEAM_KEY": "sk-team",
	}}, "run", "hi")
	o.expect(t, exitOK)
	if req := srv.Requests()[0]; req["model"] != "env-model" || srv.Keys()[0] != "Bearer sk-team" {
		t.Errorf("model %v, key %q", req["model"], srv.Keys()[0])
	}
}

// TestRunSettingsComeFromTheConfiguration: the agent section supplies
// what no flag or TOOLWIRE_* variable sets, and a flag still wins.
func TestRunSettingsComeFromTheConfiguration(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t, agenttest.AnthropicReply("one"), agenttest.AnthropicReply("two"))
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(raw) + "agent:\n  provider: anthropic\n  model: cfg-model\n  baseURL: " + srv.URL + "\n  apiKeyEnv: CFG_KEY\n"
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := agentCLI{env: map[string]string{"CFG_KEY": "sk-cfg"}}
	f.runAgent(t, context.Background(), env, "run", "hi").expect(t, exitOK)
	f.runAgent(t, context.Background(), env, "run", "--model", "flag-model", "hi").expect(t, exitOK)
	reqs, keys := srv.Requests(), srv.Keys()
	if len(reqs) != 2 || reqs[0]["model"] != "cfg-model" || reqs[1]["model"] != "flag-model" || keys[0] != "Bearer sk-cfg" {
		t.Errorf("models %v / %v, key %q; want cfg-model then flag-model, with the key from CFG_KEY", reqs[0]["model"], reqs[len(reqs)-1]["model"], keys[0])
	}
}

func TestChatKeepsTheConversationAcrossLines(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("", agenttest.Call{ID: "w1", Name: "demo__write_note", Args: `{"title":"t","body":"b"}`}),
		agenttest.OpenAIReply("Saved."),
		agenttest.OpenAIReply("You asked me to save a note."),
	)
	// The confirmation's answer comes from the same stdin as the lines.
	o := f.runAgent(t, context.Background(), agentCLI{stdin: "save a note\ny\n\nwhat did I ask?\nexit\nnever read\n", terminal: true},
		"chat", "--model", "scripted", "--base-url", srv.URL+"/v1")
	o.expect(t, exitOK)
	if o.stdout != "Saved.\nYou asked me to save a note.\n" {
		t.Errorf("stdout = %q", o.stdout)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model asked %d times, want 3", len(reqs))
	}
	var roles []string
	for _, m := range agenttest.Messages(reqs[2]) {
		roles = append(roles, fmt.Sprint(m["role"]))
	}
	sameLines(t, "third request's roles", roles, []string{"user", "assistant", "tool", "assistant", "user"})
	if last := agenttest.Messages(reqs[2])[4]; last["content"] != "what did I ask?" {
		t.Errorf("last message = %v", last)
	}
	if titles := f.noteTitles(t); len(titles) != 1 {
		t.Errorf("notes = %v, want the confirmed note", titles)
	}
}

func TestRunSpinnerFollowsProgressAndStaysOffQuestions(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := &spinner{out: &out}
	ctx := context.Background()
	s.Progress(ctx, tool.Progress{Progress: 1, Total: 3, Message: "step 1 of 3"})
	s.Progress(ctx, tool.Progress{Progress: 2, Total: 3, Message: "step 2\x1b[31m of 3"})
	if want := "\r\033[K⠋ 1/3 step 1 of 3\r\033[K⠙ 2/3 step 2\\x1b[31m of 3"; out.String() != want {
		t.Errorf("drawn %q, want %q", out.String(), want)
	}
	out.Reset()
	s.hold()
	s.Progress(ctx, tool.Progress{Progress: 3})
	s.release()
	s.clear()
	if out.String() != "\r\033[K" {
		t.Errorf("while held: drawn %q, want only the clearing of the line", out.String())
	}
	var none *spinner
	none.clear() // a nil spinner (stderr not a terminal) does nothing
}

func TestRunSaysACutAnswerIsCut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t, agenttest.SSE(
		agenttest.Event{Data: `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"The steps are: one, tw"},"finish_reason":null}]}`},
		agenttest.Event{Data: `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`},
		agenttest.Event{Data: "[DONE]"}))
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "steps")...)
	o.expect(t, exitToolErr)
	if o.stdout != "The steps are: one, tw\n" {
		t.Errorf("stdout = %q", o.stdout)
	}
	mustContain(t, "stderr", o.stderr, "cut at the token limit", "the answer is incomplete", "the model's own reply limit")
	// --max-tokens is Anthropic's: an OpenAI user is not offered it.
	if strings.Contains(o.stderr, "--max-tokens") {
		t.Errorf("an OpenAI run's cut reply offers --max-tokens:\n%s", o.stderr)
	}
}

func TestRunRejectsZeroRounds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t)
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "--max-rounds", "0", "x")...)
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, "--max-rounds 0: want at least 1")
}

func TestRunFindsARefusedKeyBeforeStartingServers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t) // no completion may be asked for
	srv.SetModels(agenttest.Status(http.StatusUnauthorized, "Incorrect API key provided"))
	o := f.runAgent(t, context.Background(), agentCLI{env: map[string]string{"OPENAI_API_KEY": "sk-wrong"}}, openaiArgs(srv, "x")...)
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, "refused the API key", "Incorrect API key provided", "check the key in OPENAI_API_KEY")
	if keys := srv.ModelKeys(); len(keys) != 1 || keys[0] != "Bearer sk-wrong" {
		t.Errorf("model list asked with %q, want once with the key", keys)
	}
	// No server started: the audit log, which records server.started, was
	// never opened.
	if _, err := os.Stat(f.audit); !os.IsNotExist(err) {
		t.Errorf("servers were started before the key was found refused (audit stat: %v)", err)
	}
}

func TestRunWithoutATerminalTellsTheModelNobodyCouldBeAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("", agenttest.Call{ID: "w1", Name: "demo__write_note", Args: `{"title":"t","body":"b"}`}),
		agenttest.OpenAIReply("I could not save it."))
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "save")...)
	o.expect(t, exitOK)
	sent := agenttest.OpenAIToolResults(srv.Requests()[1])[0][1]
	mustContain(t, "tool message", sent, "no terminal", "the user did not refuse it")
	if strings.Contains(sent, "The user refused") {
		t.Errorf("the model was told the user refused: %s", sent)
	}
	mustContain(t, "audit", strings.Join(f.auditLines(t), "\n"), "confirmation.rejected demo__write_note w1 unconfirmed")
}
