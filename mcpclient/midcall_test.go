package mcpclient

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/tool"
)

// midCallServer is a go-sdk server written for the revisions before
// 2026-07-28: its tool asks its client with elicitation/create during the
// call, and reports a failure to ask in its error, as go-sdk's reference
// server does.
func midCallServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mid-call", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "your name?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
			}})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "name=" + r.Content["name"].(string)}}}, nil
		})
	return srv
}

// Issue 22.21: a server that asks its client during a call, spoken to on
// 2026-07-28 (which does not allow it: go-sdk's server refuses its own
// tool's request), fails with an error that names the setting that makes
// it work, protocol: 2025-11-25 on that server; with the setting, the
// question reaches the caller.
func TestAServerAskingMidCallOn2026NamesTheSetting(t *testing.T) {
	t.Parallel()
	opts := &Options{Relay: RelayCapabilities{Elicitation: true}}

	reg := confirmingRegistry()
	s := connect(t, httpConfig("up", serveHTTP(t, statelessHandler(midCallServer()))), reg, opts)
	if p := s.Status().Protocol; p != protocol2026 {
		t.Fatalf("the server speaks %s, want %s", p, protocol2026)
	}
	c := &answeringCaller{name: "ada"}
	res := tool.NewExecutor(reg, nil).Call(tool.WithCaller(boundedCtx(t, waitTime), c), "up__ask", nil)
	if !res.IsError || !strings.Contains(res.Message, `set "protocol: 2025-11-25" on server "up"`) || !strings.Contains(res.Text(), "elicitation failed") {
		t.Errorf("a 2026-07-28 call whose tool asks mid-call: %q (message %q), want the server's error and the setting named", res.Text(), res.Message)
	}

	reg = confirmingRegistry()
	cfg := httpConfig("up", serveHTTP(t, statefulHandler(midCallServer())))
	cfg.Protocol = protocolLegacy
	connect(t, cfg, reg, opts)
	res = tool.NewExecutor(reg, nil).Call(tool.WithCaller(boundedCtx(t, waitTime), c), "up__ask", nil)
	if res.IsError || res.Text() != "name=ada" {
		t.Errorf("the same tool with protocol %s: %q (%s), want the caller's answer", protocolLegacy, res.Text(), res.Message)
	}
}
