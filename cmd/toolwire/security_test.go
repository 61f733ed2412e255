package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/demo"
)

// withAuditSettings adds lines to the fixture's audit section.
func (f *fixture) withAuditSettings(t *testing.T, lines string) {
	t.Helper()
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "audit:\n  file: audit.jsonl\n", "audit:\n  file: audit.jsonl\n"+lines, 1)
	if cfg == string(raw) {
		t.Fatalf("no audit section to extend in:\n%s", raw)
	}
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSignedAuditFromConfigVerifies: audit.signingKey makes every line of a
// real session's audit log signed; "audit verify" accepts it with the
// matching public key and refuses it with another.
func TestSignedAuditFromConfigVerifies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.run(t, "", false, "audit", "keygen", "--out", filepath.Join(f.dir, "signer")).expect(t, exitOK)
	f.run(t, "", false, "audit", "keygen", "--out", filepath.Join(f.dir, "other")).expect(t, exitOK)
	f.withAuditSettings(t, "  signingKey: signer.key\n")

	f.run(t, "", false, "call", "demo__echo", "text=signed").expect(t, exitOK)
	o := f.run(t, "", false, "audit", "verify", f.audit, "--public-key", filepath.Join(f.dir, "signer.pub"))
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, "every chained line signed by the key") {
		t.Errorf("verify did not report signatures:\n%s", o.stdout)
	}
	if bad := f.run(t, "", false, "audit", "verify", f.audit, "--public-key", filepath.Join(f.dir, "other.pub")); bad.code == exitOK {
		t.Errorf("verify accepted the log with another key:\n%s", bad.stdout)
	}
}

// TestSignedAuditRefusesAKeyOthersCanRead: a signing key readable by other
// users is refused before any server starts, naming the setting.
func TestSignedAuditRefusesAKeyOthersCanRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.run(t, "", false, "audit", "keygen", "--out", filepath.Join(f.dir, "signer")).expect(t, exitOK)
	if err := os.Chmod(filepath.Join(f.dir, "signer.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.withAuditSettings(t, "  signingKey: signer.key\n")
	o := f.run(t, "", false, "tools")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, "audit.signingKey") {
		t.Errorf("error does not name audit.signingKey:\n%s", o.stderr)
	}
}

// TestStrictGuardsEgress: under --strict a remote server may reach only its
// own host (and security.allowHosts); a redirect to another name for the
// same machine is refused at dial time, naming the host.
func TestStrictGuardsEgress(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(demo.HTTPHandler(nil))
	defer target.Close()
	elsewhere := strings.Replace(target.URL, "127.0.0.1", "localhost", 1) + "/mcp"
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere, http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	direct := newFixture(t, "  web:\n    url: "+target.URL+"/mcp\n    required: true\n")
	if o := direct.run(t, "", false, "--strict", "tools"); o.code != exitOK || !strings.Contains(o.stdout, "web__echo") {
		t.Fatalf("--strict refused a server on its own host: exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
	}
	redirected := newFixture(t, "  web:\n    url: "+front.URL+"/mcp\n    required: true\n")
	o := redirected.run(t, "", false, "--strict", "tools")
	if o.code == exitOK || !strings.Contains(o.stderr, `egress to "localhost" refused`) {
		t.Errorf("--strict followed a redirect to another host: exit %d\nstderr:\n%s", o.code, o.stderr)
	}
}
