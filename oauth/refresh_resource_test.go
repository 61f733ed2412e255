package oauth

import (
	"context"
	"testing"
)

// TestRefreshCarriesResource checks that refreshes name the MCP server
// (RFC 8707): after a login in this process, the resource its discovery
// found; in a new process, the configured one.
func TestRefreshCarriesResource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	h := f.handler("login")
	if err := h.Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	f.expire()
	h.src.forget() // as time passing would: the token in memory expired too
	if _, err := h.src.Token(); err != nil {
		t.Fatal(err)
	}
	if f.op.Refreshes() != 1 || f.op.RefreshResource() != f.rs.URL {
		t.Errorf("refreshes %d, resource %q; want 1 with %s", f.op.Refreshes(), f.op.RefreshResource(), f.rs.URL)
	}

	// A new process: no discovery yet, the resource its tokens are bound to.
	f.expire()
	cold, err := NewHandler(&HandlerConfig{Server: "demo", Resource: f.rs.URL, Store: newTestStore(t, f.path), HTTPClient: f.hc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.call(ctx, cold); err != nil {
		t.Fatal(err)
	}
	if f.op.Refreshes() != 2 || f.op.RefreshResource() != f.rs.URL {
		t.Errorf("refreshes %d, resource %q; want 2, the second with %s", f.op.Refreshes(), f.op.RefreshResource(), f.rs.URL)
	}
}
