package workspace_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/workspace"
)

func TestApprovalPolicy(t *testing.T) {
	t.Parallel()
	p, err := workspace.ApprovalPolicy(&config.Gateway{Approvals: config.GatewayApprovals{
		Write: "deny", Tools: map[string]string{"demo__write_note": "allow"},
	}})
	if err != nil || p.Write != gateway.Deny || p.Destructive != "" || p.Tools["demo__write_note"] != gateway.Allow {
		t.Errorf("policy %+v, %v; want write deny, destructive unset (the default), demo__write_note allow", p, err)
	}
	if p, err := workspace.ApprovalPolicy(nil); err != nil || p.Write != "" || p.Destructive != "" || p.Tools != nil {
		t.Errorf("no gateway section: %+v, %v; want the defaults", p, err)
	}
	_, err = workspace.ApprovalPolicy(&config.Gateway{Approvals: config.GatewayApprovals{Tools: map[string]string{"x": "ask"}}})
	if err == nil || !strings.HasPrefix(err.Error(), "gateway.approvals.tools.x: ") {
		t.Errorf("an unknown approval: %v; want an error naming the key", err)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if opts, err := workspace.Authentication(ctx, nil); err != nil || opts.Verifier != nil {
		t.Errorf("no gateway section: %+v, %v; want no authentication", opts, err)
	}
	gwc := &config.Gateway{
		Tokens: []config.GatewayToken{{SHA256: gateway.HashToken("a-token-of-the-test"), Subject: "ci", Role: "reader"}},
		Roles:  map[string][]string{"reader": {"demo__*"}},
	}
	opts, err := workspace.Authentication(ctx, gwc)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := opts.Verifier(ctx, "a-token-of-the-test", nil); err != nil || info.UserID != "ci" {
		t.Errorf("the configured token: %+v, %v", info, err)
	}
	if _, err := opts.Verifier(ctx, "another-token", nil); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("another token: %v, want auth.ErrInvalidToken", err)
	}

	// An issuer whose key set cannot be fetched (nothing listens there).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/jwks"
	ln.Close()
	gwc.JWT = &config.GatewayJWT{JWKSURL: url, Issuer: "https://issuer.example.com", Audience: "toolwire"}
	_, err = workspace.Authentication(ctx, gwc)
	if !errors.Is(err, workspace.ErrVerifier) || !strings.HasPrefix(err.Error(), "gateway.jwt: ") {
		t.Errorf("an unreachable key set: %v; want ErrVerifier, naming gateway.jwt", err)
	}
}
