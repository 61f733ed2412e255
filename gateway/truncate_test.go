package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// TestLargeResultsAreTruncatedForTheClientOnly: with MaxResultBytes set, a
// client receives the result cut to the limit with a marker, while the
// audit log records the whole result's size.
func TestLargeResultsAreTruncatedForTheClientOnly(t *testing.T) {
	mem := &audit.Memory{}
	reg := tool.NewRegistry(nil)
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: audit.NewLog(mem, nil)})
	big := strings.Repeat("0123456789", 1000) // 10 000 bytes
	if err := reg.Register(&tool.Tool{
		Name: "big", Description: "returns a lot", InputSchema: json.RawMessage(`{"type":"object"}`), Tier: tool.Read,
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult(big), nil },
	}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{reg: reg, ex: ex, gw: New(ex, &Options{MaxResultBytes: 100})}
	got := text(callTool(t, f.connect(t, nil, nil), "big", map[string]any{}))
	if !strings.HasPrefix(got, big[:100]) || strings.Contains(got, big[:101]) {
		t.Errorf("client got %d bytes starting %.120q; want the first 100 bytes and no more of the text", len(got), got)
	}
	if !strings.Contains(got, "9900 of 10000 bytes left out (limit 100)") {
		t.Errorf("no marker saying how much was cut in %q", got[100:])
	}
	var size int
	for _, ev := range mem.Events() {
		if ev.Kind == audit.CallExecuted {
			size = ev.ResultBytes
		}
	}
	if size != len(big) {
		t.Errorf("audit recorded a result of %d bytes, want the whole %d", size, len(big))
	}
}
