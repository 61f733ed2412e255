package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
