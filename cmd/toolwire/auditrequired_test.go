package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// setAudit replaces the fixture's audit section.
func (f *fixture) setAudit(t *testing.T, section string) {
	t.Helper()
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "audit:\n  file: audit.jsonl\n", section, 1)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeRefusesCallsARequiredAuditCannotRecord: once the audit file
// cannot be extended (another writer tore its last line), a call through
// the gateway is refused, saying why, instead of running unrecorded.
func TestServeRefusesCallsARequiredAuditCannotRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.setAudit(t, "audit:\n  file: audit.jsonl\n  required: true\n")
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0")
	cs := connectHTTP(t, s.url, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	echo := func() *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "hello"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := echo(); res.IsError || res.Content[0].(*mcp.TextContent).Text != "hello" {
		t.Fatalf("echo with a writable audit log = %+v", res)
	}
	af, err := os.OpenFile(f.audit, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.WriteString(`{"time":`); err != nil {
		t.Fatal(err)
	}
	af.Close()
	res := echo()
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "audit log is required and could not record it") || !strings.Contains(text, "refusing to extend its hash chain") {
		t.Errorf("echo with an unwritable required audit log = %q (isError %v), want a refusal saying why", text, res.IsError)
	}
}

func TestAuditRequiredWithoutAFileIsAUsageError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.setAudit(t, "audit:\n  required: true\n")
	o := f.run(t, "", false, "call", "demo__echo", "text=hi")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, "audit.required: no audit file to write") || strings.Contains(o.stdout, "hi") {
		t.Errorf("stderr = %q, stdout = %q", o.stderr, o.stdout)
	}
}

// progressSignal is a tool.Caller that signals the first progress report.
type progressSignal chan struct{}

func (p progressSignal) Progress(context.Context, tool.Progress) {
	select {
	case p <- struct{}{}:
	default:
	}
}

// TestClosingGivesEveryRequestedCallAnOutcome: when a command ends while a
// call still runs (its context cancelled, the workspace closed at once),
// the call's outcome is in the audit log before the file closes.
func TestClosingGivesEveryRequestedCallAnOutcome(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	var stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr, isTerminal: func() bool { return false },
		lookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := open(ctx, e, &globalFlags{config: []string{f.config}}, openOptions{confirmer: approveAll{}})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	started := make(progressSignal, 1)
	done := make(chan *tool.Result, 1)
	callCtx, stop := context.WithCancel(ctx)
	go func() { done <- w.executor.Call(tool.WithCaller(callCtx, started), "demo__wait_for_cancel", nil) }()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("wait_for_cancel never started")
	}
	// As at the end of serve, run or chat: the command's context ends
	// (Ctrl-C, SIGTERM) and the workspace closes at once.
	stop()
	w.close()
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

// groupedByCall orders auditLines by call, keeping each call's events in
// the order written and the calls in the order first seen: the events of
// concurrent calls are written as they happen, interleaved.
func groupedByCall(lines []string) []string {
	var order []string
	group := map[string][]string{}
	for _, l := range lines {
		key := l
		if f := strings.Fields(l); len(f) >= 3 {
			key = f[2]
		}
		if _, seen := group[key]; !seen {
			order = append(order, key)
		}
		group[key] = append(group[key], l)
	}
	var out []string
	for _, k := range order {
		out = append(out, group[k]...)
	}
	return out
}
