package oauthtest

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Token exchange (RFC 8693) at the OP, for per-caller upstream
// credentials: a gateway presents its caller's token (a JWT a trusted
// issuer signed for the gateway) and gets an access token of the OP for
// the caller, for one resource. zitadel's op has the grant and calls the
// storage to verify third-party subject tokens and to decide; the policy
// here replaces its example storage's (impersonation by admins):
//
//   - the client must be one of AddExchangeClient or AddKeyClient;
//   - the subject token must be the OP's own access token, or a JWT of the
//     issuer TrustSubjectTokens names, for its audience, unexpired;
//   - exactly one resource (RFC 8707), no actor token, and an access token
//     requested (or nothing, which means one).
//
// The token issued is the subject's, for the requested scopes.

const grantTokenExchangeType = oidc.GrantTypeTokenExchange

// AddExchangeClient registers a confidential client that authenticates
// with secret (client_secret_basic or client_secret_post) and may use the
// token exchange grant, and the code flow with the redirect URIs given.
func (o *OP) AddExchangeClient(id, secret string, redirects ...string) {
	o.st.add(&client{id: id, secret: secret, method: oidc.AuthMethodBasic, redirects: redirects,
		grants:  []oidc.GrantType{grantTokenExchangeType, oidc.GrantTypeCode, oidc.GrantTypeRefreshToken},
		appType: op.ApplicationTypeWeb})
}

// AddGatewayClient registers a gateway's confidential client that
// authenticates with secret and may exchange its callers' tokens, obtain
// tokens of its own with client_credentials (what the gateway lists an
// upstream with) and use the code flow with the redirect URIs given.
// Its own tokens name the client as their subject, and the OP's
// introspection (Introspect) accepts them.
func (o *OP) AddGatewayClient(id, secret string, redirects ...string) {
	o.st.add(&client{id: id, secret: secret, method: oidc.AuthMethodBasic, redirects: redirects,
		grants:  []oidc.GrantType{grantTokenExchangeType, oidc.GrantTypeClientCredentials, oidc.GrantTypeCode, oidc.GrantTypeRefreshToken},
		appType: op.ApplicationTypeWeb})
}

// UserOrClient is an auth.TokenVerifier for the tokens of users (Userinfo)
// and of clients' client_credentials grants (Introspect): a resource
// server that a gateway lists with its own client and calls with its
// callers' tokens.
func (o *OP) UserOrClient(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	if ti, err := o.Userinfo(ctx, token, r); err == nil {
		return ti, nil
	}
	return o.Introspect(ctx, token, r)
}

// AddLoginClient registers a confidential client of the code flow (and
// refresh) with the given redirect URIs, such as a gateway's callback, that
// authenticates with secret.
func (o *OP) AddLoginClient(id, secret string, redirects ...string) {
	o.st.add(&client{id: id, secret: secret, method: oidc.AuthMethodBasic, redirects: redirects,
		grants: []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}, appType: op.ApplicationTypeWeb})
}

// TrustSubjectTokens makes the OP accept, as subject tokens of token
// exchanges, p's JWTs (IdP.AccessToken) whose audience includes audience:
// the tokens a gateway's callers present to the gateway.
func (o *OP) TrustSubjectTokens(p *IdP, audience string) {
	o.st.mu.Lock()
	defer o.st.mu.Unlock()
	o.st.subjectIssuer, o.st.subjectAudience = p, audience
}

// TokenExchanges returns how many token exchange requests the token
// endpoint got, granted or not.
func (o *OP) TokenExchanges() int { return int(o.tokenExchanges.Load()) }

// LastTokenExchange returns the form of the last token exchange request
// (client authentication left out).
func (o *OP) LastTokenExchange() url.Values {
	v, _ := o.lastExchange.Load().(url.Values)
	return v
}

// VerifyExchangeSubjectToken accepts a JWT of the trusted issuer (see
// TrustSubjectTokens), for either token type a gateway may present it as.
func (s *opStorage) VerifyExchangeSubjectToken(_ context.Context, token string, tokenType oidc.TokenType) (string, string, map[string]any, error) {
	s.mu.Lock()
	p, aud := s.subjectIssuer, s.subjectAudience
	s.mu.Unlock()
	if p == nil || (tokenType != oidc.AccessTokenType && tokenType != oidc.JWTTokenType) {
		return "", "", nil, errors.New("no trusted issuer of subject tokens")
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return "", "", nil, err
	}
	var c jwt.Claims
	claims := map[string]any{}
	if err := tok.Claims(&p.key.PublicKey, &c, &claims); err != nil {
		return "", "", nil, err
	}
	if err := c.Validate(jwt.Expected{Issuer: p.Issuer, AnyAudience: jwt.Audience{aud}, Time: time.Now()}); err != nil {
		return "", "", nil, err
	}
	if c.Subject == "" {
		return "", "", nil, errors.New("no subject")
	}
	return token, c.Subject, claims, nil
}

// VerifyExchangeActorToken refuses every actor token: delegation is not
// what the tests exercise.
func (s *opStorage) VerifyExchangeActorToken(context.Context, string, oidc.TokenType) (string, string, map[string]any, error) {
	return "", "", nil, errors.New("actor tokens are not accepted")
}

// ValidateTokenExchangeRequest is the OP's policy (see above).
func (s *opStorage) ValidateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	switch r.GetRequestedTokenType() {
	case "":
		r.SetRequestedTokenType(oidc.AccessTokenType)
	case oidc.AccessTokenType:
	default:
		return oidc.ErrInvalidRequest().WithDescription("only access tokens are issued by exchange")
	}
	switch {
	case r.GetExchangeActor() != "":
		return oidc.ErrInvalidRequest().WithDescription("actor tokens are not accepted")
	case len(r.GetResourses()) != 1:
		return oidc.ErrInvalidTarget().WithDescription("exactly one resource is required")
	case slices.Contains(r.GetScopes(), oidc.ScopeOfflineAccess):
		return oidc.ErrInvalidScope().WithDescription("an exchanged token is not refreshed")
	}
	r.SetSubject(r.GetExchangeSubject())
	return nil
}
