package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolwire/toolwire/oauth"
)

// A configured client's secret goes with a revocation only to the entry it
// belongs to: the same client, obtained for the server's URL. Another
// registration under the same server name (an entry from an earlier
// configuration, at another authorization server) never gets it.
func TestLogoutSendsTheConfiguredSecretOnlyForItsOwnClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolwire.yaml")
	if err := os.WriteFile(cfg, []byte("servers:\n  docs:\n    url: https://mcp.example.com/mcp\n    oauth:\n      clientId: configured\n      clientSecretEnv: DOCS_SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{lookupEnv: func(k string) (string, bool) {
		if k == "DOCS_SECRET" {
			return "s3cret-of-the-configured-client", true
		}
		return "", false
	}}
	g := &globalFlags{config: []string{cfg}}
	entry := func(id string, dynamic bool, resource string) *oauth.Entry {
		return &oauth.Entry{Server: "docs", Resource: resource, Client: &oauth.Client{ID: id, Dynamic: dynamic}}
	}
	for _, c := range []struct {
		name  string
		entry *oauth.Entry
		want  string
	}{
		{"its own client", entry("configured", false, "https://mcp.example.com/mcp"), "s3cret-of-the-configured-client"},
		{"a dynamic registration", entry("configured", true, "https://mcp.example.com/mcp"), ""},
		{"another client", entry("registered-elsewhere", false, "https://mcp.example.com/mcp"), ""},
		{"another server's URL", entry("configured", false, "https://old.example.com/mcp"), ""},
		{"no binding", entry("configured", false, ""), ""},
	} {
		if got := configuredSecret(e, g, c.entry); got != c.want {
			t.Errorf("%s: secret %q, want %q", c.name, got, c.want)
		}
	}
}
