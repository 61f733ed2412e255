package config

import (
	"strings"
	"testing"
)

// TestHostShapesAskBeforeWriting reads the shapes VS Code, Cursor, Claude
// Desktop and Claude Code accept, with and without "type": each is read
// as a host's file, whose tools are "write" (confirmed before each call)
// until an operator says otherwise, never with toolwire's "read" default.
func TestHostShapesAskBeforeWriting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host, file, data, dialect string
	}{
		{"VS Code, typed stdio", ".vscode/mcp.json", `{"servers": {"fs": {"type": "stdio", "command": "npx", "args": ["-y", "srv"]}}}`, DialectVSCode},
		{"VS Code, untyped stdio", ".vscode/mcp.json", `{"servers": {"fs": {"command": "npx", "args": ["-y", "srv"]}}}`, DialectVSCode},
		{"VS Code, untyped stdio with env", ".vscode/mcp.json", `{"servers": {"fs": {"command": "npx", "env": {"K": "v"}}}}`, DialectVSCode},
		{"VS Code, typed http", ".vscode/mcp.json", `{"servers": {"r": {"type": "http", "url": "https://h/mcp"}}}`, DialectVSCode},
		{"VS Code, untyped http", ".vscode/mcp.json", `{"servers": {"r": {"url": "https://h/mcp", "headers": {"X": "y"}}}}`, DialectVSCode},
		{"VS Code, untyped with inputs", ".vscode/mcp.json", `{"inputs": [{"type": "promptString", "id": "k", "description": "K"}], "servers": {"fs": {"command": "x", "env": {"K": "${input:k}"}}}}`, DialectVSCode},
		{"VS Code, untyped with comments", ".vscode/mcp.json", "// workspace servers\n{\"servers\": {\"fs\": {\"command\": \"x\"}}}", DialectVSCode},
		{"Cursor, untyped", ".cursor/mcp.json", `{"mcpServers": {"fs": {"command": "npx", "args": ["srv"]}}}`, DialectMCPServers},
		{"Cursor, typed", ".cursor/mcp.json", `{"mcpServers": {"fs": {"type": "stdio", "command": "npx"}}}`, DialectMCPServers},
		{"Cursor, remote", ".cursor/mcp.json", `{"mcpServers": {"r": {"url": "https://h/mcp"}}}`, DialectMCPServers},
		{"Claude Desktop", "claude_desktop_config.json", `{"mcpServers": {"fs": {"command": "npx", "args": ["srv"], "env": {}}}}`, DialectMCPServers},
		{"Claude Code, typed stdio", ".mcp.json", `{"mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": [], "env": {}}}}`, DialectMCPServers},
		{"Claude Code, typed http", ".mcp.json", `{"mcpServers": {"r": {"type": "http", "url": "https://h/mcp"}}}`, DialectMCPServers},
		{"Claude Code, typed sse", ".mcp.json", `{"mcpServers": {"r": {"type": "sse", "url": "https://h/sse"}}}`, DialectMCPServers},
		{"Claude Code, untyped", ".mcp.json", `{"mcpServers": {"fs": {"command": "npx"}}}`, DialectMCPServers},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			f, err := Parse(tt.file, []byte(tt.data), "")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.Dialect != tt.dialect {
				t.Errorf("Dialect = %q, want %q", f.Dialect, tt.dialect)
			}
			if f.DialectReason == "" {
				t.Errorf("no reason given for the dialect")
			}
			if len(f.Servers) == 0 {
				t.Fatal("no servers")
			}
			for _, s := range f.Servers {
				if s.DefaultTier != "write" || !s.DefaultTierImplied {
					t.Errorf("server %q: default tier %q (implied %v), want write, implied", s.Name, s.DefaultTier, s.DefaultTierImplied)
				}
			}
		})
	}
}

// TestDialectReasons checks that the reason given for a dialect names
// what decided it.
func TestDialectReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data, dialect, reason string
	}{
		{`{"servers": {"a": {"command": "x"}}}`, DialectVSCode, "fail-closed"},
		{"{\n \"servers\": {\"a\": {\n  \"type\": \"stdio\", \"command\": \"x\"}}}", DialectVSCode, `VS Code's "type" on line 3`},
		{"servers:\n  a:\n    command: x\n    defaultTier: write\n", DialectToolwire, `toolwire's "defaultTier" on line 4`},
		{"servers:\n  a: {command: x}\n", DialectToolwire, "no host application writes YAML"},
		{`{"mcpServers": {"a": {"command": "x"}}}`, DialectMCPServers, `"mcpServers"`},
	}
	for _, tt := range tests {
		f, err := Parse("c", []byte(tt.data), "")
		if err != nil {
			t.Fatalf("Parse(%s): %v", tt.data, err)
		}
		if f.Dialect != tt.dialect || !strings.Contains(f.DialectReason, tt.reason) {
			t.Errorf("Parse(%s): dialect %q because %q; want %q because …%s…", tt.data, f.Dialect, f.DialectReason, tt.dialect, tt.reason)
		}
	}
}
