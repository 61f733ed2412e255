package mcpclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/oauth"
)

// TestOAuthPendingThenFinishThroughConnect is the embedding application's
// path (seed 000's state machine) through toolwire's client stack: Connect
// to a server that needs authorization reports a pending authorization
// with its URL (and registers nothing in the registry), the application
// has the user authorize and finishes with the code, and a second Connect,
// on a fresh transport, registers the server's tools.
func TestOAuthPendingThenFinishThroughConnect(t *testing.T) {
	ctx := context.Background()
	op := oauthtest.NewOP(t, nil)
	rs := oauthtest.NewResourceServer(t, op, nil)
	store, err := oauth.NewStore(filepath.Join(t.TempDir(), "oauth.json"), &oauth.StoreOptions{
		Passphrase: "test passphrase", Argon2: &oauth.Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port that is ours and closed
	if err != nil {
		t.Fatal(err)
	}
	redirect := "http://" + ln.Addr().String() + "/app/callback"
	ln.Close()

	var handler *oauth.Handler
	opts := &Options{OAuth: func(cfg config.Server, client *http.Client) (auth.OAuthHandler, error) {
		h, err := oauth.NewHandler(&oauth.HandlerConfig{Server: cfg.Name, Resource: cfg.URL, Store: store, HTTPClient: client, PendingRedirectURL: redirect})
		handler = h
		return h, err
	}}
	cfg := httpConfig("remote", rs.URL)

	reg := confirmingRegistry()
	_, err = Connect(ctx, cfg, reg, opts)
	var pending *oauth.PendingError
	if !errors.As(err, &pending) || !strings.HasPrefix(pending.URL, op.Issuer) {
		t.Fatalf("first Connect: %v; want an *oauth.PendingError with an authorization URL at %s", err, op.Issuer)
	}
	if reg.Len() != 0 {
		t.Errorf("a pending server registered %d tools", reg.Len())
	}

	browser := oauthtest.NewBrowser()
	browser.StopAt(redirect)
	if err := browser.Authorize(ctx, pending.URL); err != nil {
		t.Fatal(err)
	}
	res, err := oauth.ParseRedirect(browser.Stopped())
	if err != nil {
		t.Fatal(err)
	}
	if err := handler.FinishAuth(ctx, res); err != nil {
		t.Fatalf("FinishAuth: %v", err)
	}

	s, err := Connect(ctx, cfg, reg, opts)
	if err != nil {
		t.Fatalf("Connect after FinishAuth: %v", err)
	}
	defer s.Close()
	if len(s.Tools()) == 0 {
		t.Errorf("after FinishAuth the server registered no tools")
	}
}
