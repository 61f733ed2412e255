package config

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeExampleAsksByDefault holds the README's example configuration
// (the first one a person copies) to the safe pattern (issue 23.3): each
// server asks before every call unless it names the tools that only read,
// and no override sets "write", which a server's hint would raise anyway.
func TestReadmeExampleAsksByDefault(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	if !ok {
		t.Fatal("the README has no YAML example")
	}
	example, _, _ := strings.Cut(rest, "```")
	f, err := Parse("README.md", []byte(example), "/srv")
	if err != nil {
		t.Fatalf("the README's example does not load: %v", err)
	}
	if len(f.Servers) == 0 {
		t.Fatal("the README's example has no servers")
	}
	for _, s := range f.Servers {
		if s.DefaultTier == "read" && s.OnlyTools == nil {
			t.Errorf("server %q: defaultTier read with every tool listed: a tool nobody named runs unasked", s.Name)
		}
		for name, tier := range s.TierOverrides {
			if tier == "write" {
				t.Errorf("server %q: override %s: write (the default asks already; a hint may raise it)", s.Name, name)
			}
		}
	}
	if f.Servers[0].DefaultTier != "write" || len(f.Servers[0].TierOverrides) == 0 {
		t.Errorf("the first server does not ask by default and name its reads: defaultTier %q, overrides %v", f.Servers[0].DefaultTier, f.Servers[0].TierOverrides)
	}
}
