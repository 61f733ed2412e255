package oauth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/netpolicy"
)

func TestEnterpriseManagedAuthorization(t *testing.T) {
	o := oauthtest.NewOP(t, nil)
	rs := oauthtest.NewResourceServer(t, o, nil) // userinfo: the token is the user's
	idp := oauthtest.NewIdP(t, "xaa-client")
	o.TrustIdP(idp, "xaa-client", "xaa-secret")
	hc := netpolicy.NewClient(nil)
	handler := func(t *testing.T, c IdPConfig) *ClientCredentialsHandler {
		t.Helper()
		t.Setenv("TEST_XAA_SECRET", "xaa-secret")
		h, err := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "xaa", ClientID: "xaa-client", SecretEnv: "TEST_XAA_SECRET", IdP: &c, HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	t.Run("ID token from a variable, IdP endpoint discovered", func(t *testing.T) {
		t.Setenv("TEST_XAA_ID_TOKEN", idp.IDToken(t, oauthtest.Subject))
		h := handler(t, IdPConfig{Issuer: idp.Issuer, ClientID: idp.ClientID, IDTokenEnv: "TEST_XAA_ID_TOKEN"})
		before, grants := idp.Exchanges(), o.JWTBearerGrants()
		user, err := whoami(t, rs.URL, h)
		if err != nil || user != oauthtest.Subject {
			t.Fatalf("connect: %q, %v; want the ID token's user %s", user, err, oauthtest.Subject)
		}
		if idp.Exchanges() != before+1 || o.JWTBearerGrants() != grants+1 {
			t.Errorf("exchanges %d, JWT bearer grants %d; want one each", idp.Exchanges()-before, o.JWTBearerGrants()-grants)
		}
		f := idp.LastExchange()
		if f.Get("audience") != o.Issuer || f.Get("resource") != rs.URL {
			t.Errorf("token exchange audience %q, resource %q; want the OP's issuer and the MCP server", f.Get("audience"), f.Get("resource"))
		}
		if got := o.ClientAuth(); got != "post" {
			t.Errorf("client authentication at the OP %q, want post (listed, and preferred)", got)
		}
		// An expired token: a new ID-JAG, a new grant.
		ts, _ := h.TokenSource(context.Background())
		src := ts.(*ccSource)
		src.tok.Expiry = time.Now()
		if _, err := src.Token(); err != nil {
			t.Fatal(err)
		}
		if idp.Exchanges() != before+2 {
			t.Errorf("a second token reused the ID-JAG (%d exchanges)", idp.Exchanges()-before)
		}
	})
	t.Run("ID token from a file, endpoint configured", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "id_token")
		if err := os.WriteFile(file, []byte(idp.IDToken(t, oauthtest.Subject)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		h := handler(t, IdPConfig{Issuer: idp.Issuer, TokenEndpoint: idp.Issuer + "/token", ClientID: idp.ClientID, IDTokenFile: file})
		if user, err := whoami(t, rs.URL, h); err != nil || user != oauthtest.Subject {
			t.Fatalf("connect: %q, %v", user, err)
		}
	})
	t.Run("ID token the IdP refuses", func(t *testing.T) {
		other := oauthtest.NewIdP(t, "xaa-client") // another key
		bad := other.IDToken(t, oauthtest.Subject)
		t.Setenv("TEST_XAA_ID_TOKEN", bad)
		h := handler(t, IdPConfig{Issuer: idp.Issuer, ClientID: idp.ClientID, IDTokenEnv: "TEST_XAA_ID_TOKEN"})
		_, err := whoami(t, rs.URL, h)
		var ee *EndpointError
		if !errors.As(err, &ee) || ee.Code != "invalid_grant" || !strings.Contains(err.Error(), "identity provider") {
			t.Fatalf("got %v, want the IdP's invalid_grant", err)
		}
		noSecrets(t, err.Error(), bad)
	})
	t.Run("ID token not set", func(t *testing.T) {
		t.Setenv("TEST_XAA_ID_TOKEN", "")
		h := handler(t, IdPConfig{Issuer: idp.Issuer, ClientID: idp.ClientID, IDTokenEnv: "TEST_XAA_ID_TOKEN"})
		if _, err := whoami(t, rs.URL, h); err == nil || !strings.Contains(err.Error(), "TEST_XAA_ID_TOKEN") {
			t.Errorf("got %v, want an error naming the variable", err)
		}
	})
	t.Run("wrong client secret at the authorization server", func(t *testing.T) {
		t.Setenv("TEST_XAA_ID_TOKEN", idp.IDToken(t, oauthtest.Subject))
		h := handler(t, IdPConfig{Issuer: idp.Issuer, ClientID: idp.ClientID, IDTokenEnv: "TEST_XAA_ID_TOKEN"})
		t.Setenv("TEST_XAA_SECRET", "not-the-secret-4242")
		_, err := whoami(t, rs.URL, h)
		var ee *EndpointError
		if !errors.As(err, &ee) || ee.Code != "invalid_client" {
			t.Fatalf("got %v, want the token endpoint's invalid_client", err)
		}
		noSecrets(t, err.Error(), "not-the-secret-4242")
	})
	t.Run("bad config", func(t *testing.T) {
		for name, c := range map[string]IdPConfig{
			"no issuer":      {ClientID: "c", IDTokenEnv: "X"},
			"no client":      {Issuer: idp.Issuer, IDTokenEnv: "X"},
			"no ID token":    {Issuer: idp.Issuer, ClientID: "c"},
			"two ID tokens":  {Issuer: idp.Issuer, ClientID: "c", IDTokenEnv: "X", IDTokenFile: "f"},
			"not a URL rule": {Issuer: "http://idp.example.com", ClientID: "c", IDTokenEnv: "X"},
		} {
			if _, err := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "xaa", ClientID: "xaa-client", SecretEnv: "S", IdP: &c, HTTPClient: hc}); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
	})
}
