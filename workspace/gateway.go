package workspace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
)

// The gateway section of a configuration, as toolwire serve applies it.
// Both functions take the section alone: serve needs the approvals (the
// registry's confirmer) and the authentication (whether the address may be
// bound) before it opens the workspace.

// ErrVerifier is matched by the error of [Authentication] when the JWT
// verifier could not be made: the issuer's key set could not be fetched,
// say. The error's text is the cause's.
var ErrVerifier = errors.New("jwt verifier unavailable")

// ApprovalPolicy returns the approvals gwc configures (gateway.approvals:
// per tier, and per tool); a nil gwc, or one without approvals, gives the
// defaults. The approver of a gateway, [gateway.NewApprover], applies it.
func ApprovalPolicy(gwc *config.Gateway) (gateway.ApprovalPolicy, error) {
	var p gateway.ApprovalPolicy
	if gwc == nil {
		return p, nil
	}
	var err error
	a := gwc.Approvals
	if a.Write != "" {
		if p.Write, err = gateway.ParseApproval(a.Write); err != nil {
			return p, fmt.Errorf("gateway.approvals.write: %w", err)
		}
	}
	if a.Destructive != "" {
		if p.Destructive, err = gateway.ParseApproval(a.Destructive); err != nil {
			return p, fmt.Errorf("gateway.approvals.destructive: %w", err)
		}
	}
	if len(a.Tools) > 0 {
		p.Tools = make(map[string]gateway.Approval, len(a.Tools))
		for name, s := range a.Tools {
			if p.Tools[name], err = gateway.ParseApproval(s); err != nil {
				return p, fmt.Errorf("gateway.approvals.tools.%s: %w", name, err)
			}
		}
	}
	return p, nil
}

// DefaultOperatorWait is how long a call whose client cannot be asked
// waits for an operator when gateway.approvals.operatorWait is not set.
const DefaultOperatorWait = 30 * time.Second

// Operators returns how the approver of a gateway keeps lasting approvals
// and reaches an operator as gwc configures it (gateway.approvals:
// operatorWait, webhook), over the store's grants and queue. The
// webhook's secret is read from its environment variable now (through
// lookupEnv); a webhook without one is an error, never an unsigned post.
func Operators(gwc *config.Gateway, grants approval.Grants, queue approval.Queue, lookupEnv func(string) (string, bool)) (gateway.Operators, error) {
	ops := gateway.Operators{Grants: grants, Queue: queue, Wait: DefaultOperatorWait}
	if gwc == nil {
		return ops, nil
	}
	a := gwc.Approvals
	if a.OperatorWait != nil {
		ops.Wait = *a.OperatorWait
	}
	if a.Webhook != nil {
		secret, ok := lookupEnv(a.Webhook.SecretEnv)
		if !ok || secret == "" {
			return ops, fmt.Errorf("gateway.approvals.webhook.secretEnv: environment variable %s is not set (the webhook's posts are signed with it)", a.Webhook.SecretEnv)
		}
		ops.Webhook = &gateway.Webhook{URL: a.Webhook.URL, Secret: []byte(secret)}
	}
	return ops, nil
}

// Authentication returns the HTTP options that authenticate the gateway's
// callers as gwc configures them: with gateway.tokens or gateway.jwt, a
// verifier of them (a static token is tried first, then a JWT), the
// roles, the resource URL and the authorization servers (the JWT's issuer
// when none is configured); with neither, or a nil gwc, no
// authentication. The JWT verifier fetches its issuer's key set now: an
// error of that matches [ErrVerifier].
func Authentication(ctx context.Context, gwc *config.Gateway) (gateway.HTTPOptions, error) {
	var opts gateway.HTTPOptions
	if gwc == nil || (len(gwc.Tokens) == 0 && gwc.JWT == nil) {
		return opts, nil
	}
	var verifiers []auth.TokenVerifier
	if len(gwc.Tokens) > 0 {
		tokens := make([]gateway.StaticToken, len(gwc.Tokens))
		for i, t := range gwc.Tokens {
			tokens[i] = gateway.StaticToken{SHA256: t.SHA256, Subject: t.Subject, Role: t.Role}
		}
		verifier, err := gateway.StaticVerifier(tokens)
		if err != nil {
			return opts, fmt.Errorf("gateway.tokens: %w", err)
		}
		verifiers = append(verifiers, verifier)
	}
	roles := gateway.Roles(gwc.Roles)
	if err := roles.Validate(); err != nil {
		return opts, fmt.Errorf("gateway.roles: %w", err)
	}
	opts.AuthorizationServers = gwc.AuthorizationServers
	if j := gwc.JWT; j != nil {
		verifier, err := gateway.JWTVerifier(ctx, &gateway.JWTOptions{
			JWKSURL: j.JWKSURL, Issuer: j.Issuer, Audience: j.Audience, RoleClaim: j.RoleClaim,
		})
		if err != nil {
			return opts, &marked{fmt.Errorf("gateway.jwt: %w", err), ErrVerifier}
		}
		verifiers = append(verifiers, verifier)
		if len(opts.AuthorizationServers) == 0 {
			opts.AuthorizationServers = []string{j.Issuer}
		}
	}
	opts.Verifier, opts.Roles = anyVerifier(verifiers), roles
	opts.ResourceURL = gwc.ResourceURL
	return opts, nil
}

// anyVerifier accepts a token that any of verifiers accepts, asking them in
// order. When all refuse it, the error is the last one's (each wraps
// auth.ErrInvalidToken); an error of another kind ends the search.
func anyVerifier(verifiers []auth.TokenVerifier) auth.TokenVerifier {
	if len(verifiers) == 1 {
		return verifiers[0]
	}
	return func(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
		err := fmt.Errorf("%w: no verifier", auth.ErrInvalidToken)
		for _, v := range verifiers {
			var info *auth.TokenInfo
			if info, err = v(ctx, token, req); err == nil {
				return info, nil
			}
			if !errors.Is(err, auth.ErrInvalidToken) {
				return nil, err
			}
		}
		return nil, err
	}
}

// marked is err that also matches mark ([errors.Is]), with err's text.
type marked struct{ err, mark error }

func (e *marked) Error() string   { return e.err.Error() }
func (e *marked) Unwrap() []error { return []error{e.err, e.mark} }
