package oauthtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestAccessTokenLifetime: a configured lifetime is what the token
// response says and what the OP enforces, at introspection and at the
// resource server.
func TestAccessTokenLifetime(t *testing.T) {
	const lifetime = 2 * time.Second
	ctx := context.Background()
	o := NewOP(t, &OPOptions{AccessTokenLifetime: lifetime})
	rs := NewResourceServer(t, o, &ResourceOptions{Verify: o.Introspect})
	cc := clientcredentials.Config{ClientID: ServiceClientID, ClientSecret: ServiceClientSecret, TokenURL: o.Issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}
	start := time.Now()
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := tok.Expiry.Sub(start); d <= 0 || d > lifetime+time.Second {
		t.Errorf("token expires %v after the request, want about %v", d, lifetime)
	}
	if o.ClientAuth() != "basic" {
		t.Errorf("ClientAuth = %q, want basic", o.ClientAuth())
	}
	status := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rs.URL, nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if _, err := o.Introspect(ctx, tok.AccessToken, nil); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	if got := status(); got == http.StatusUnauthorized {
		t.Fatalf("the resource server refused a fresh token")
	}
	// expires_in is in whole seconds: the token lives until start+lifetime.
	time.Sleep(time.Until(start.Add(lifetime)) + 100*time.Millisecond)
	if _, err := o.Introspect(ctx, tok.AccessToken, nil); err == nil {
		t.Error("an expired token is still active")
	}
	if got := status(); got != http.StatusUnauthorized {
		t.Errorf("the resource server answered an expired token with %d, want 401", got)
	}
}
