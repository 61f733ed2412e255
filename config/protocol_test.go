package config

import (
	"strings"
	"testing"
)

// A server's protocol is one of the revisions toolwire knows, round-trips,
// and anything else is refused naming the field and the revisions.
func TestServerProtocol(t *testing.T) {
	f, err := Parse("t.yaml", []byte("servers:\n  old:\n    command: mcp-old\n    protocol: 2025-11-25\n"), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Servers[0].Protocol; got != "2025-11-25" {
		t.Fatalf("protocol = %q, want 2025-11-25", got)
	}
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("t.yaml", out, "/cfg")
	if err != nil || back.Servers[0].Protocol != "2025-11-25" {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
	_, err = Parse("t.yaml", []byte("servers:\n  old:\n    command: mcp-old\n    protocol: 2025-12-01\n"), "/cfg")
	if err == nil || !strings.Contains(err.Error(), `t.yaml:4: servers.old.protocol: unknown MCP revision "2025-12-01" (want one of 2026-07-28, 2025-11-25,`) {
		t.Errorf("an unknown revision: %v", err)
	}
}
