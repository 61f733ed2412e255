package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 22.20: a go-sdk upstream that speaks 2026-07-28 asks, in the
// answer to a call (multi round-trip input requests), a titled
// multi-select (SEP-1330) written with "type": "string" beside its items'
// anyOf, as go-sdk's reference server writes it. The question reaches the
// gateway's clients of both generations with its titles, and their answer
// reaches the upstream: go-sdk's client-side check of input requests
// inside toolwire does not refuse it.
func TestATitledMultiSelectIsRelayedFromA2026Upstream(t *testing.T) {
	t.Parallel()
	titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}}
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"titledMulti": map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "string", "anyOf": titled}},
	}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "pick", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["pick"].(*mcp.ElicitResult); ok {
			picked, _ := json.Marshal(r.Content["titledMulti"])
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "upstream got " + r.Action + " " + string(picked)}}}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			"pick": &mcp.ElicitParams{Message: "Pick some options", RequestedSchema: schema},
		}, RequestState: "asked"}, nil
	})
	b, conn := elicitingGateway(t, srv, &mcp.StreamableHTTPOptions{Stateless: true})
	if p := conn.Status().Protocol; p != Revision2026 {
		t.Fatalf("the upstream speaks %s, want %s", p, Revision2026)
	}
	for _, rev := range []string{"2025-11-25", Revision2026} {
		var shown []string
		cs := b.dial(t, "", rev, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			raw, _ := json.Marshal(req.Params.RequestedSchema)
			shown = append(shown, req.Params.Message+" "+string(raw))
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"titledMulti": []any{"value2"}}}, nil
		}})
		got, isErr := call(t, cs, "up__pick", nil)
		if isErr || got != `upstream got accept ["value2"]` {
			t.Errorf("%s: %q (isError %v), want the client's answer to reach the upstream", rev, got, isErr)
		}
		if len(shown) != 1 || !strings.Contains(shown[0], "Pick some options") || !strings.Contains(shown[0], `"title":"Second Option"`) {
			t.Errorf("%s: the client was shown %q, want the question with its titled options", rev, shown)
		}
	}
}
