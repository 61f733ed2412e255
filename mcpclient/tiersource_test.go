package mcpclient

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// TestHostFileToolsAreWriteUnlessTheOperatorChose: a host application's
// file carries no tiers, so its tools are write (confirmed first) by
// default, while toolwire's own file keeps read; each tool says where its
// tier came from.
func TestHostFileToolsAreWriteUnlessTheOperatorChose(t *testing.T) {
	t.Parallel()
	yes := new(true)
	listing := []*mcp.Tool{
		{Name: "create_entities"},
		{Name: "read_graph", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "delete_entities", Annotations: &mcp.ToolAnnotations{DestructiveHint: yes}},
	}
	type want struct {
		tier tool.Tier
		src  tool.TierSource
	}
	for _, tc := range []struct {
		name, file, data string
		want             map[string]want
	}{
		{
			name: "Claude Desktop", file: "claude_desktop_config.json",
			data: `{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`,
			want: map[string]want{
				"create_entities": {tool.Write, tool.TierDefault},
				"read_graph":      {tool.Write, tool.TierDefault}, // readOnlyHint never lowers
				"delete_entities": {tool.Destructive, tool.TierHint},
			},
		},
		{
			name: "VS Code", file: "mcp.json",
			data: `{"servers": {"memory": {"type": "stdio", "command": "npx"}}}`,
			want: map[string]want{
				"create_entities": {tool.Write, tool.TierDefault},
				"read_graph":      {tool.Write, tool.TierDefault},
				"delete_entities": {tool.Destructive, tool.TierHint},
			},
		},
		{
			name: "toolwire without tiers", file: "toolwire.yaml",
			data: "servers:\n  memory:\n    command: npx\n",
			want: map[string]want{
				"create_entities": {tool.Read, tool.TierDefault},
				"read_graph":      {tool.Read, tool.TierDefault},
				"delete_entities": {tool.Destructive, tool.TierHint},
			},
		},
		{
			name: "toolwire with tiers", file: "toolwire.yaml",
			data: "servers:\n  memory:\n    command: npx\n    defaultTier: read\n    tierOverrides: {create_entities: write}\n",
			want: map[string]want{
				"create_entities": {tool.Write, tool.TierOverride},
				"read_graph":      {tool.Read, tool.TierOperator},
				"delete_entities": {tool.Destructive, tool.TierHint},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := config.Parse(tc.file, []byte(tc.data), "")
			if err != nil {
				t.Fatal(err)
			}
			ad, err := adapt(f.Servers[0], listing, func(string) tool.Handler {
				return func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(ad.tools) != len(listing) {
				t.Fatalf("%d tools, want %d", len(ad.tools), len(listing))
			}
			for _, tt := range ad.tools {
				w := tc.want[tt.Origin.Name]
				if tt.Tier != w.tier || tt.TierSource != w.src {
					t.Errorf("%s: tier %s from %q, want %s from %q", tt.Origin.Name, tt.Tier, tt.TierSource, w.tier, w.src)
				}
			}
		})
	}
}
