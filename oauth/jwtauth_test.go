package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/netpolicy"
)

// newECKey returns a P-256 key and its PKCS #8 PEM.
func newECKey(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// whoami connects to rs with h and returns the subject the tool sees.
func whoami(t *testing.T, url string, h *ClientCredentialsHandler) (string, error) {
	t.Helper()
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "m2m", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: netpolicy.NewClient(nil), OAuthHandler: h}, nil)
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

func TestClientCredentialsPrivateKeyJWT(t *testing.T) {
	o := oauthtest.NewOP(t, nil)
	rs := oauthtest.NewResourceServer(t, o, &oauthtest.ResourceOptions{Verify: o.Introspect})
	key, keyPEM := newECKey(t)
	o.AddKeyClient("kid1", &key.PublicKey)
	hc := netpolicy.NewClient(nil)

	t.Run("key from a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "client.pem")
		if err := os.WriteFile(file, []byte(keyPEM), 0o600); err != nil {
			t.Fatal(err)
		}
		h, err := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "kid1", Key: &ClientKey{File: file}, HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		user, err := whoami(t, rs.URL, h)
		if err != nil || user != "kid1" {
			t.Fatalf("connect: %q, %v", user, err)
		}
		if got := o.ClientAuth(); got != "private_key_jwt" {
			t.Errorf("the OP saw client authentication %q, want private_key_jwt", got)
		}
		// A second token (the first expired) carries a new assertion: the
		// OP refuses a jti it has seen.
		ts, _ := h.TokenSource(context.Background())
		src := ts.(*ccSource)
		src.tok.Expiry = time.Now()
		if _, err := src.Token(); err != nil {
			t.Errorf("second token: %v", err)
		}
	})
	t.Run("key from a variable", func(t *testing.T) {
		t.Setenv("TEST_M2M_KEY", keyPEM)
		h, err := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "kid1", Key: &ClientKey{Env: "TEST_M2M_KEY"}, AuthMethod: "private_key_jwt", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		if user, err := whoami(t, rs.URL, h); err != nil || user != "kid1" {
			t.Fatalf("connect: %q, %v", user, err)
		}
	})
	t.Run("key file others may read", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("no Unix permissions")
		}
		file := filepath.Join(t.TempDir(), "client.pem")
		if err := os.WriteFile(file, []byte(keyPEM), 0o644); err != nil {
			t.Fatal(err)
		}
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "kid1", Key: &ClientKey{File: file}, HTTPClient: hc})
		if _, err := whoami(t, rs.URL, h); err == nil || !strings.Contains(err.Error(), "mode 0644") {
			t.Errorf("got %v, want the key file refused for its mode", err)
		}
	})
	t.Run("another key", func(t *testing.T) {
		_, other := newECKey(t)
		t.Setenv("TEST_M2M_KEY", other)
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "kid1", Key: &ClientKey{Env: "TEST_M2M_KEY"}, HTTPClient: hc})
		_, err := whoami(t, rs.URL, h)
		var ee *EndpointError
		if !errors.As(err, &ee) || ee.Code != "invalid_client" {
			t.Fatalf("got %v, want the token endpoint's invalid_client", err)
		}
		noSecrets(t, err.Error(), other)
	})
	t.Run("variable not set", func(t *testing.T) {
		t.Setenv("TEST_M2M_KEY", "")
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "kid1", Key: &ClientKey{Env: "TEST_M2M_KEY"}, HTTPClient: hc})
		if _, err := whoami(t, rs.URL, h); err == nil || !strings.Contains(err.Error(), "TEST_M2M_KEY") {
			t.Errorf("got %v, want an error naming the variable", err)
		}
	})
	t.Run("not a key", func(t *testing.T) {
		t.Setenv("TEST_M2M_KEY", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "kid1", Key: &ClientKey{Env: "TEST_M2M_KEY"}, HTTPClient: hc})
		if _, err := whoami(t, rs.URL, h); err == nil || !strings.Contains(err.Error(), "is not a private key") {
			t.Errorf("got %v, want an error saying the PEM block is not a private key", err)
		}
	})
	t.Run("algorithm the server does not accept", func(t *testing.T) {
		o.SetMutate(func(doc map[string]any) { doc["token_endpoint_auth_signing_alg_values_supported"] = []string{"RS256"} })
		defer o.SetMutate(nil)
		t.Setenv("TEST_M2M_KEY", keyPEM)
		h, _ := NewClientCredentialsHandler(&ClientCredentialsConfig{Server: "m2m", ClientID: "kid1", Key: &ClientKey{Env: "TEST_M2M_KEY"}, HTTPClient: hc})
		if _, err := whoami(t, rs.URL, h); err == nil || !strings.Contains(err.Error(), "ES256 key") {
			t.Errorf("got %v, want an error naming the key's algorithm", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		for name, cfg := range map[string]ClientCredentialsConfig{
			"secret and key":     {SecretEnv: "X", Key: &ClientKey{Env: "Y"}},
			"key without where":  {Key: &ClientKey{}},
			"key, secret method": {Key: &ClientKey{Env: "Y"}, AuthMethod: "client_secret_post"},
			"secret, jwt method": {SecretEnv: "X", AuthMethod: "private_key_jwt"},
		} {
			cfg.Server, cfg.ClientID, cfg.HTTPClient = "m2m", "kid1", hc
			if _, err := NewClientCredentialsHandler(&cfg); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
	})
}

// TestCodeFlowPrivateKeyJWT logs in with a configured client that
// authenticates with its key: the code exchange and, in a new process, the
// refresh carry an assertion, and no secret.
func TestCodeFlowPrivateKeyJWT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	key, keyPEM := newECKey(t)
	f.op.AddKeyClient("kid2", &key.PublicKey)
	file := filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(file, []byte(keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	handler := func(login bool) *Handler {
		cfg := &HandlerConfig{Server: "demo", Resource: f.rs.URL, Store: newTestStore(t, f.path), HTTPClient: f.hc, Client: &ClientConfig{ID: "kid2", Key: &ClientKey{File: file}}}
		if login {
			cfg.Fetcher = &Loopback{Open: f.browser.Open, Out: io.Discard}
		}
		h, err := NewHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if user, err := f.call(ctx, handler(true)); err != nil || user != oauthtest.Subject {
		t.Fatalf("login: %q, %v", user, err)
	}
	if f.op.Exchanges() != 1 || f.op.ClientAuth() != "private_key_jwt" {
		t.Errorf("exchanges %d, client authentication %q; want 1 with private_key_jwt", f.op.Exchanges(), f.op.ClientAuth())
	}
	if e := f.entry(); e.Client.ID != "kid2" || e.Client.AuthMethod != "private_key_jwt" || e.Client.Secret != "" {
		t.Errorf("stored client %v", e.Client)
	}
	f.expire()
	if _, err := f.call(ctx, handler(false)); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if f.op.Refreshes() != 1 || f.op.ClientAuth() != "private_key_jwt" {
		t.Errorf("refreshes %d, client authentication %q; want 1 with private_key_jwt", f.op.Refreshes(), f.op.ClientAuth())
	}
}
