package oauth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/netpolicy"
)

func TestClientCredentials(t *testing.T) {
	o := oauthtest.NewOP(t, nil)
	rs := oauthtest.NewResourceServer(t, o, &oauthtest.ResourceOptions{Verify: o.Introspect})
	hc := netpolicy.NewClient(nil)
	connect := func(h *ClientCredentialsHandler) (string, error) {
		ctx := context.Background()
		c := mcp.NewClient(&mcp.Implementation{Name: "m2m", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: rs.URL, HTTPClient: hc, OAuthHandler: h}, nil)
		if err != nil {
			return "", err
		}
		defer s.Close()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		if err != nil {
			return "", err
		}
		m, _ := res.StructuredContent.(map[string]any)
		u, _ := m["user"].(string)
		return u, nil
	}
	for _, method := range []string{"client_secret_basic", "client_secret_post", ""} {
		t.Run("method "+method, func(t *testing.T) {
			t.Setenv("TEST_M2M_SECRET", "verysecret")
			h, err := NewClientCredentialsHandler(&ClientCredentialsConfig{
				Server: "m2m", ClientID: "sid1", SecretEnv: "TEST_M2M_SECRET", AuthMethod: method, HTTPClient: hc,
			})
			if err != nil {
				t.Fatal(err)
			}
			user, err := connect(h)
			if err != nil || user != "sid1" {
				t.Fatalf("connect: %q, %v", user, err)
			}
			want := map[string]string{"client_secret_basic": "basic", "client_secret_post": "post", "": "post"}[method]
			if got := o.ClientAuth(); got != want {
				t.Errorf("the OP saw client authentication %v, want %s", got, want)
			}
		})
	}
	t.Run("secret read at use", func(t *testing.T) {
		t.Setenv("TEST_M2M_SECRET", "verysecret")
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "sid1", SecretEnv: "TEST_M2M_SECRET", HTTPClient: hc})
		if _, err := connect(h); err != nil {
			t.Fatal(err)
		}
		ts, _ := h.TokenSource(context.Background())
		src := ts.(*ccSource)
		src.now = func() time.Time { return time.Now().Add(24 * time.Hour) } // the token has expired
		t.Setenv("TEST_M2M_SECRET", "rotated-away-0000")
		if _, err := src.Token(); err == nil {
			t.Error("a new token was obtained with the old secret: it was not read again")
		}
		t.Setenv("TEST_M2M_SECRET", "verysecret")
		if _, err := src.Token(); err != nil {
			t.Errorf("with the secret back: %v", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		t.Setenv("TEST_M2M_SECRET", "not-the-secret-4242")
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "sid1", SecretEnv: "TEST_M2M_SECRET", HTTPClient: hc})
		_, err := connect(h)
		var ee *EndpointError
		if !errors.As(err, &ee) {
			t.Fatalf("got %v, want the token endpoint's refusal", err)
		}
		t.Log(err)
		noSecrets(t, err.Error(), "not-the-secret-4242")
	})
	t.Run("secret not set", func(t *testing.T) {
		t.Setenv("TEST_M2M_SECRET", "")
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "sid1", SecretEnv: "TEST_M2M_SECRET", HTTPClient: hc})
		_, err := connect(h)
		if err == nil || !strings.Contains(err.Error(), "TEST_M2M_SECRET") {
			t.Errorf("got %v, want an error naming the variable", err)
		}
	})
	t.Run("unsupported method", func(t *testing.T) {
		_, err := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "sid1", SecretEnv: "X", AuthMethod: "private_key_jwt", HTTPClient: hc})
		if err == nil {
			t.Error("private_key_jwt accepted")
		}
	})
}
