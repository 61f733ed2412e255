package config

import (
	"strings"
	"testing"
)

// A server's endpoint follows the remote-URL rule (netpolicy.CheckURL) in
// every dialect and under every key that names one; the error names the
// file, the line, the server's field and the URL, never a password.
func TestServerURLRule(t *testing.T) {
	const plain = `plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost); use https`
	tests := []struct {
		desc, name, data, want string // want "" to load
	}{
		{"https", "toolwire.yaml", "servers:\n  a:\n    url: https://mcp.example.com/mcp\n", ""},
		{"http to localhost", "toolwire.yaml", "servers:\n  a:\n    url: http://localhost:8080/mcp\n", ""},
		{"http to localhost with a dot", "toolwire.yaml", "servers:\n  a:\n    url: http://LOCALHOST.:8080/mcp\n", ""},
		{"http to 127.0.0.1", "claude.json", `{"mcpServers": {"a": {"url": "http://127.0.0.1:9/mcp"}}}`, ""},
		{"http to ::1", "claude.json", `{"mcpServers": {"a": {"type": "sse", "url": "http://[::1]:9/sse"}}}`, ""},
		{"placeholder checked after expansion", "toolwire.yaml", "servers:\n  a:\n    url: ${BASE}/mcp\n", ""},

		{"http to a remote host", "toolwire.yaml", "servers:\n  a:\n    url: http://mcp.example.com/mcp\n",
			`toolwire.yaml:3: servers.a.url: "http://mcp.example.com/mcp": ` + plain},
		{"http in httpUrl", "gemini.json", `{"mcpServers": {"a": {"httpUrl": "http://mcp.example.com/"}}}`,
			`gemini.json:1: mcpServers.a.httpUrl: "http://mcp.example.com/": ` + plain},
		{"http in sseUrl", "l.yaml", "- name: a\n  sseUrl: http://10.0.0.5/sse\n",
			`l.yaml:2: [0].sseUrl: "http://10.0.0.5/sse": ` + plain},
		{"localhost as a subdomain", "toolwire.yaml", "servers:\n  a:\n    url: http://localhost.evil.com/\n",
			`toolwire.yaml:3: servers.a.url: "http://localhost.evil.com/": ` + plain},
		{"decimal loopback", "toolwire.yaml", "servers:\n  a:\n    url: http://2130706433/mcp\n",
			`toolwire.yaml:3: servers.a.url: "http://2130706433/mcp": host is an IPv4 address in a non-standard form (decimal, octal, hex, shortened or with a trailing dot); write it as four decimal numbers`},
		{"password", "toolwire.yaml", "servers:\n  a:\n    url: https://bob:hunter2@mcp.example.com/mcp\n",
			`toolwire.yaml:3: servers.a.url: "https://mcp.example.com/mcp": must not contain a user name or password; send credentials in a header`},
		{"fragment", "vscode.json", `{"servers": {"a": {"type": "http", "url": "https://mcp.example.com/mcp#top"}}}`,
			`vscode.json:1: servers.a.url: "https://mcp.example.com/mcp#top": must not have a fragment ("#...")`},
		{"websocket", "toolwire.yaml", "servers:\n  a:\n    url: wss://mcp.example.com/\n",
			`toolwire.yaml:3: servers.a.url: "wss://mcp.example.com/": scheme "wss" is not allowed; want https, or http to a loopback address`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, err := Parse(tt.name, []byte(tt.data), "/cfg")
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if len(f.Servers) != 1 || f.Servers[0].URL == "" {
					t.Fatalf("servers = %+v, want one with a URL", f.Servers)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want error %q", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %q\nwant %q", got, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
