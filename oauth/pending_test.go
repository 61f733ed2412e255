package oauth

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// appRedirect is where the embedding application receives redirects. The
// test browser stops there, as the application's page would take over.
func appRedirect(t *testing.T) string {
	// A port that is certainly ours and closed: nothing must be served.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/app/oauth/callback"
}

func (f *fixture) pendingHandler(redirect string) *Handler {
	f.t.Helper()
	h, err := NewHandler(&HandlerConfig{Server: "demo", Resource: f.rs.URL, Store: newTestStore(f.t, f.path), HTTPClient: f.hc, PendingRedirectURL: redirect})
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// TestPendingThenFinishAfterRestart is seed 000's state machine: the
// connect returns a pending state with the URL instead of prompting, the
// application finishes with the code (here after a "restart": a new
// store and handler), and a fresh connect succeeds.
func TestPendingThenFinishAfterRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	redirect := appRedirect(t)

	h := f.pendingHandler(redirect)
	_, err := f.call(ctx, h)
	var pe *PendingError
	if !errors.As(err, &pe) {
		t.Fatalf("first connect: %v, want a *PendingError", err)
	}
	if !strings.HasPrefix(pe.URL, f.op.Issuer) || pe.State == "" {
		t.Fatalf("pending %+v: want an authorization URL at the OP and a state", pe)
	}
	for _, p := range []string{"code_challenge_method=S256", "code_challenge=", "resource=", "offline_access"} {
		if !strings.Contains(pe.URL, p) {
			t.Errorf("authorization URL lacks %q", p)
		}
	}
	// A retry hands out the same request rather than invalidating it.
	_, err = f.call(ctx, f.pendingHandler(redirect))
	var again *PendingError
	if !errors.As(err, &again) || again.URL != pe.URL {
		t.Errorf("second connect: %v, want the same pending URL", err)
	}
	if n := f.op.Registrations(); n != 1 {
		t.Errorf("registrations = %d, want 1", n)
	}
	// Nothing secret is in the error text.
	e := f.entry()
	noSecrets(t, err.Error(), e.Pending.Verifier, pe.URL)

	// The user authorizes; the application's redirect page gets the code.
	f.browser.StopAt(redirect)
	if err := f.browser.Authorize(ctx, pe.URL); err != nil {
		t.Fatal(err)
	}
	res, err := ParseRedirect(f.browser.Stopped())
	if err != nil {
		t.Fatalf("parse redirect %q: %v", f.browser.Stopped(), err)
	}

	// Restart, then finish: a forged state first.
	h = f.pendingHandler(redirect)
	forged := *res
	forged.State = "not-the-state"
	if err := h.FinishAuth(ctx, &forged); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("finish with a forged state: %v, want ErrStateMismatch", err)
	}
	if err := h.FinishAuth(ctx, res); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if err := h.FinishAuth(ctx, res); !errors.Is(err, ErrNoPendingAuth) {
		t.Errorf("second finish: %v, want ErrNoPendingAuth", err)
	}
	// A fresh transport now connects.
	user, err := f.call(ctx, h)
	if err != nil || user != "id1" {
		t.Fatalf("connect after finish: %q, %v", user, err)
	}
	if e := f.entry(); e.Pending != nil || e.Token == nil {
		t.Errorf("after finish stored %v, want a token and no pending request", e)
	}
}

func TestFinishAuthRefusesBadResponses(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	redirect := appRedirect(t)
	h := f.pendingHandler(redirect)
	if err := h.FinishAuth(ctx, &auth.AuthorizationResult{Code: "c", State: "s"}); !errors.Is(err, ErrNoPendingAuth) {
		t.Errorf("finish with nothing pending: %v, want ErrNoPendingAuth", err)
	}
	_, err := f.call(ctx, h)
	var pe *PendingError
	if !errors.As(err, &pe) {
		t.Fatalf("connect: %v", err)
	}
	// An iss from another server (RFC 9207, mix-up defence).
	err = h.FinishAuth(ctx, &auth.AuthorizationResult{Code: "c", State: pe.State, Iss: "https://evil.example"})
	if !errors.Is(err, ErrIssuerMismatch) {
		t.Errorf("finish with a foreign iss: %v, want ErrIssuerMismatch", err)
	}
	// A code the OP never issued: the token endpoint's refusal, without
	// the code or the verifier in the message.
	verifier := f.entry().Pending.Verifier
	err = h.FinishAuth(ctx, &auth.AuthorizationResult{Code: "made-up-code-0123456789", State: pe.State})
	var ee *EndpointError
	if !errors.As(err, &ee) || ee.Code != "invalid_grant" {
		t.Errorf("finish with a made-up code: %v, want the token endpoint's invalid_grant", err)
	}
	if err != nil {
		noSecrets(t, err.Error(), "made-up-code-0123456789", verifier)
	}
	// An error response.
	if _, err := ParseRedirect(redirect + "?error=access_denied&error_description=user+said+no&state=" + pe.State); !errors.Is(err, ErrAccessDenied) {
		t.Errorf("parse an error redirect: %v, want ErrAccessDenied", err)
	}
}
