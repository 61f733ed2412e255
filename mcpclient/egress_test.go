package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/netpolicy"
)

// TestEgressAllowsTheServersOwnHost: with the guard on and nothing else
// allowed, a server on 127.0.0.1 is reached (its own host is named exactly,
// so even a loopback address may be dialed) and its tools work.
func TestEgressAllowsTheServersOwnHost(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	s := connect(t, httpConfig("web", serveHTTP(t, demo.HTTPHandler(nil))), reg, &Options{Egress: &EgressPolicy{}})
	if len(s.Tools()) == 0 {
		t.Fatal("no tools registered through the egress guard")
	}
}

// TestEgressRefusesARedirectToAnotherHost: the server answers with a
// redirect to "localhost" (the same machine under another name, which the
// policy does not allow); the guard refuses to dial it, and the handler
// behind the redirect is never reached.
func TestEgressRefusesARedirectToAnotherHost(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	target := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		demo.HTTPHandler(nil).ServeHTTP(w, r)
	}))
	other := strings.Replace(target, "127.0.0.1", "localhost", 1)
	front := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other, http.StatusTemporaryRedirect)
	}))

	_, err := Connect(context.Background(), httpConfig("web", front), confirmingRegistry(), &Options{Egress: &EgressPolicy{}})
	var ee *netpolicy.EgressError
	if !errors.As(err, &ee) {
		t.Fatalf("Connect error = %v, want a *netpolicy.EgressError for host localhost", err)
	}
	if ee.Host != "localhost" || reached.Load() != 0 {
		t.Errorf("refused host %q (want localhost); the redirect target was reached %d times (want 0)", ee.Host, reached.Load())
	}

	// Allowing the name lets the same redirect through the guard. (The
	// session still fails after it: the client drops Mcp-Session-Id on a
	// hop that leaves the origin, which a server that redirects its whole
	// endpoint elsewhere cannot survive; that is the origin pinning.)
	s, err := Connect(context.Background(), httpConfig("web2", front), confirmingRegistry(), &Options{Egress: &EgressPolicy{AllowHosts: []string{"localhost"}}})
	if err == nil {
		defer s.Close()
	}
	if errors.As(err, &ee) {
		t.Errorf("with localhost allowed the guard still refused: %v", err)
	}
	if reached.Load() == 0 {
		t.Errorf("with localhost allowed, the redirect target was never reached (Connect: %v)", err)
	}
}
