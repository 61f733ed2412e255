package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveConditional is a stdio MCP server that, like server-everything,
// lists some tools only to clients that can answer what they would ask:
// ask_me to one that can elicit, sample_me to one that can sample; plain
// always.
func serveConditional() error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "conditional", Version: "1"}, nil)
	for _, name := range []string{"plain", "ask_me", "sample_me"} {
		srv.AddTool(&mcp.Tool{Name: name, Description: "the " + name + " tool", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran"}}}, nil
			})
	}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			list, ok := res.(*mcp.ListToolsResult)
			if err != nil || !ok {
				return res, err
			}
			var caps *mcp.ClientCapabilities
			if r, ok := req.(*mcp.ListToolsRequest); ok {
				caps = r.ClientCapabilities()
			}
			kept := list.Tools[:0]
			for _, t := range list.Tools {
				switch {
				case t.Name == "ask_me" && (caps == nil || caps.Elicitation == nil):
				case t.Name == "sample_me" && (caps == nil || caps.Sampling == nil):
				default:
					kept = append(kept, t)
				}
			}
			list.Tools = kept
			return list, nil
		}
	})
	return srv.Run(context.Background(), &mcp.StdioTransport{})
}

// conditionalServer is the servers entry of serveConditional.
func conditionalServer() string {
	return "  cond:\n    command: " + quoteYAML(os.Args[0]) + "\n    env:\n      TOOLWIRE_TEST_SERVER: conditional\n"
}

// TestPinsApproveApprovesToolsListedOnlyToClientsThatCanAnswer is issue
// 23.9: the warning's remedy works for a tool a server lists only when
// the client can answer elicitation or sampling.
func TestPinsApproveApprovesToolsListedOnlyToClientsThatCanAnswer(t *testing.T) {
	t.Parallel()
	f := newPinFixture(t, "  pins: enforce\n")
	addServers(t, f, conditionalServer())
	for _, target := range []string{"cond/ask_me", "cond/sample_me"} {
		o := f.run(t, "", false, "pins", "approve", target)
		o.expect(t, exitOK)
		mustContain(t, "pins approve "+target, o.stdout, "approved "+target+" ")
	}
}

// A newcomer on a terminal lists the tools, then calls one: the call
// sees no tool the listing did not, so it starts with no pin warning.
func TestNewcomersFirstCallOnATerminalHasNoPinWarning(t *testing.T) {
	t.Parallel()
	f := newPinFixture(t, "  pins: warn\n")
	addServers(t, f, conditionalServer())
	o := f.run(t, "", true, "tools")
	o.expect(t, exitOK)
	if names := toolRows(o.stdout); !slices.Contains(names, "cond__ask_me") {
		t.Errorf("tools on a terminal = %v, want cond__ask_me (a call there can be asked)", names)
	}
	o = f.run(t, "", true, "call", "cond__plain")
	o.expect(t, exitOK)
	if strings.Contains(o.stderr, "warning") {
		t.Errorf("the first call starts with a warning:\n%s", o.stderr)
	}
}

// addServers adds servers entries to the fixture's configuration.
func addServers(t *testing.T, f *fixture, entries string) {
	t.Helper()
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "servers:\n", "servers:\n"+entries, 1)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}
