package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestOAuthMetadataPrintsTheDocument(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "  remote:\n    url: https://mcp.example.com/mcp\n    oauth:\n      clientMetadataUrl: https://tools.example.com/toolwire/client.json\n")
	o := f.run(t, "", false, "oauth", "metadata", "remote")
	o.expect(t, exitOK)
	var doc map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, o.stdout)
	}
	if doc["client_id"] != "https://tools.example.com/toolwire/client.json" || doc["token_endpoint_auth_method"] != "none" {
		t.Errorf("document %s", o.stdout)
	}
	o = f.run(t, "", false, "oauth", "metadata", "--url", "https://a.example.com/c.json", "--name", "acme", "--redirect-uri", "https://app.example.com/cb")
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, `"client_name": "acme"`) || !strings.Contains(o.stdout, `"https://app.example.com/cb"`) || !strings.Contains(o.stdout, `"application_type": "web"`) {
		t.Errorf("document %s", o.stdout)
	}
	for _, args := range [][]string{
		{"oauth", "metadata", "demo"},                                 // not a remote server
		{"oauth", "metadata"},                                         // neither SERVER nor --url
		{"oauth", "metadata", "--url", "http://a.example.com/c.json"}, // not https
	} {
		o := f.run(t, "", false, args...)
		if o.code != exitUsage || o.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, o.code, o.stderr)
		}
	}
}
