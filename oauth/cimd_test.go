package oauth

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/netpolicy"
)

const testMetadataURL = "https://tools.example.com/toolwire/client.json"

// cimdHandler is the fixture's login handler with a client metadata URL.
func (f *fixture) cimdHandler() *Handler {
	f.t.Helper()
	h, err := NewHandler(&HandlerConfig{Server: "demo", Resource: f.rs.URL, Store: newTestStore(f.t, f.path), HTTPClient: f.hc,
		Fetcher: &Loopback{Open: f.browser.Open, Out: io.Discard}, ClientMetadataURL: testMetadataURL})
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

func TestClientMetadataDocumentUsedWhereSupported(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	doc, err := ClientMetadataDocument(testMetadataURL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The OP "fetched" the document the operator published.
	if err := f.op.AddMetadataClient(doc); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if user, err := f.call(ctx, f.cimdHandler()); err != nil || user == "" {
		t.Fatalf("login: %q, %v", user, err)
	}
	if n := f.op.Registrations(); n != 0 {
		t.Errorf("%d registrations, want none: the metadata URL is the client ID", n)
	}
	e := f.entry()
	if e.Client == nil || e.Client.ID != testMetadataURL || e.Client.Dynamic || e.Client.Secret != "" {
		t.Fatalf("stored client %+v, want the metadata URL as a public client", e.Client)
	}
	// A refresh goes as that client too.
	f.expire()
	if _, err := f.call(ctx, f.handler("none")); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if f.op.Refreshes() != 1 {
		t.Errorf("refreshes %d, want 1", f.op.Refreshes())
	}
}

func TestClientMetadataURLFallsBackToRegistration(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // the OP does not advertise client_id_metadata_document_supported
	if user, err := f.call(context.Background(), f.cimdHandler()); err != nil || user == "" {
		t.Fatalf("login: %q, %v", user, err)
	}
	if n := f.op.Registrations(); n != 1 {
		t.Errorf("%d registrations, want 1", n)
	}
	if e := f.entry(); e.Client == nil || !e.Client.Dynamic || e.Client.ID == testMetadataURL {
		t.Errorf("stored client %+v, want a registered one", e.Client)
	}
}

func TestClientMetadataDocument(t *testing.T) {
	t.Parallel()
	raw, err := ClientMetadataDocument(testMetadataURL, "acme toolwire", nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["client_id"] != testMetadataURL || doc["client_name"] != "acme toolwire" || doc["token_endpoint_auth_method"] != "none" || doc["application_type"] != "native" {
		t.Errorf("document %s", raw)
	}
	if r, _ := doc["redirect_uris"].([]any); len(r) != 1 || r[0] != LoopbackRedirectURI {
		t.Errorf("redirect_uris %v, want the loopback receiver", doc["redirect_uris"])
	}
	for _, bad := range []string{"http://tools.example.com/c.json", "https://tools.example.com", "https://tools.example.com/", "https://127.0.0.1/c.json", "https://u:p@tools.example.com/c.json"} {
		if _, err := ClientMetadataDocument(bad, "", nil); err == nil || !strings.Contains(err.Error(), "client metadata URL") {
			t.Errorf("%s: %v, want an error naming the client metadata URL", bad, err)
		}
		if _, err := NewHandler(&HandlerConfig{Server: "s", Store: newTestStore(t, t.TempDir()+"/o.json"), HTTPClient: netpolicy.NewClient(nil), ClientMetadataURL: bad}); err == nil {
			t.Errorf("NewHandler accepted %s", bad)
		}
	}
}
