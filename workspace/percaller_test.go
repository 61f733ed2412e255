package workspace

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/oauth"
)

// A server reached with each gateway caller's identity gets, for its
// shared connection, which only lists, the operator's credential: the
// gateway client's client_credentials for token exchange, the operator's
// own login for a login per caller. Never a caller's.
func TestPerCallerServerListsWithTheOperatorsCredential(t *testing.T) {
	t.Parallel()
	lookup := func(string) (string, bool) { return "s3cret", true }
	login := &config.OAuth{Identity: config.IdentityCaller, RedirectURL: "https://gw.example.com/oauth/callback"}
	exchange := &config.OAuth{Identity: config.IdentityCaller, Grant: "token_exchange", Issuer: "https://as.example.com", ClientID: "gw", ClientSecretEnv: "GW_SECRET"}
	store := testStore(t)
	for _, tc := range []struct {
		o    *config.OAuth
		want string
	}{{login, "*oauth.Handler"}, {exchange, "*oauth.ClientCredentialsHandler"}} {
		srv := config.Server{Name: "wiki", URL: "https://wiki.example.com/mcp", OAuth: tc.o}
		h, err := OAuthHandlers(store, &OAuthOptions{LookupEnv: lookup})(srv, http.DefaultClient)
		if err != nil {
			t.Fatalf("grant %q: %v", tc.o.Grant, err)
		}
		if got := typeName(h); got != tc.want {
			t.Errorf("grant %q: the listing's handler is a %s, want a %s", tc.o.Grant, got, tc.want)
		}
	}
}

// The callers' credentials follow the server's oauth settings, and refuse
// what cannot be done safely: a secret variable that is unset, a login
// per caller without a store key to seal the callers' tokens with, a
// server not reached with the callers' identities.
func TestCallerCredentials(t *testing.T) {
	t.Parallel()
	set := func(string) (string, bool) { return "s3cret", true }
	unset := func(string) (string, bool) { return "", false }
	exchange := config.Server{Name: "wiki", URL: "https://wiki.example.com/mcp", OAuth: &config.OAuth{
		Identity: config.IdentityCaller, Grant: "token_exchange", Issuer: "https://as.example.com", ClientID: "gw", ClientSecretEnv: "GW_SECRET", SubjectTokenType: "jwt"}}
	login := config.Server{Name: "tracker", URL: "https://tracker.example.com/mcp", OAuth: &config.OAuth{
		Identity: config.IdentityCaller, RedirectURL: "https://gw.example.com/oauth/callback"}}

	c, err := CallerCredentials(nil, &OAuthOptions{LookupEnv: set})(exchange, http.DefaultClient)
	if err != nil || c.Mode() != oauth.CallerExchange || c.Server() != "wiki" {
		t.Errorf("token exchange: %v, %v; want the exchange credentials of wiki", c, err)
	}
	if _, err := CallerCredentials(nil, &OAuthOptions{LookupEnv: unset})(exchange, http.DefaultClient); err == nil || !strings.Contains(err.Error(), "GW_SECRET is not set") {
		t.Errorf("an unset secret: %v, want an error naming the variable", err)
	}
	c, err = CallerCredentials(testStore(t), nil)(login, http.DefaultClient)
	if err != nil || c.Mode() != oauth.CallerLogin || c.RedirectURL() != "https://gw.example.com/oauth/callback" {
		t.Errorf("a login per caller: %v, %v; want login credentials redirecting to the gateway", c, err)
	}
	// A key file that others may read is refused.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), make([]byte, 32), 0o644); err != nil {
		t.Fatal(err)
	}
	keyless, err := oauth.NewStore(filepath.Join(dir, "tokens.json"), &oauth.StoreOptions{KeyFile: filepath.Join(dir, "key")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CallerCredentials(keyless, nil)(login, http.DefaultClient); err == nil || !strings.Contains(err.Error(), "sealed") {
		t.Errorf("a login per caller without a store key: %v, want an error", err)
	}
	plain := config.Server{Name: "plain", URL: "https://plain.example.com/mcp"}
	if _, err := CallerCredentials(testStore(t), nil)(plain, http.DefaultClient); err == nil {
		t.Error("a server reached with a shared identity got per-caller credentials")
	}
}

func testStore(t *testing.T) *oauth.Store {
	t.Helper()
	s, err := oauth.NewStore(filepath.Join(t.TempDir(), "tokens.json"), &oauth.StoreOptions{
		Passphrase: "test passphrase", Argon2: &oauth.Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func typeName(v any) string {
	switch v.(type) {
	case *oauth.Handler:
		return "*oauth.Handler"
	case *oauth.ClientCredentialsHandler:
		return "*oauth.ClientCredentialsHandler"
	case nil:
		return "nil"
	}
	return "something else"
}
