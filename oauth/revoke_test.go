package oauth

import (
	"context"
	"errors"
	"testing"
)

func TestRevokeEndsTheGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	e := f.entry()
	if _, err := f.op.Userinfo(ctx, e.Token.AccessToken, nil); err != nil {
		t.Fatalf("the access token does not work before revocation: %v", err)
	}
	if err := Revoke(ctx, f.hc, e, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.op.Userinfo(ctx, e.Token.AccessToken, nil); err == nil {
		t.Error("the access token still works after revocation")
	}
	// The stored refresh token no longer refreshes: the grant is gone.
	f.expire()
	if _, err := f.handler("none").src.Token(); !errors.Is(err, ErrLoginRequired) {
		t.Errorf("refresh after revocation: %v, want ErrLoginRequired", err)
	}
	// Nothing to revoke is not an error.
	if err := Revoke(ctx, f.hc, &Entry{Server: "demo", Client: e.Client}, ""); err != nil {
		t.Errorf("revoke without a token: %v", err)
	}
}

func TestRevokeWithoutEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	f.op.SetMutate(func(doc map[string]any) { delete(doc, "revocation_endpoint") })
	e := f.entry()
	err := Revoke(ctx, f.hc, e, "")
	if !errors.Is(err, ErrNoRevocation) {
		t.Fatalf("got %v, want ErrNoRevocation", err)
	}
	noSecrets(t, err.Error(), e.Token.AccessToken, e.Token.RefreshToken)
	if _, err := f.op.Userinfo(ctx, e.Token.AccessToken, nil); err != nil {
		t.Errorf("the access token stopped working: %v", err)
	}
}
