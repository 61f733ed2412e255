package gateway

import (
	"context"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// IssuerKey is where a token verifier puts, in TokenInfo.Extra, the issuer
// of a JWT it verified ([JWTVerifier] does). The gateway then gives the
// caller's calls a [tool.Principal] with that issuer and the caller's
// token, which an upstream reached with each caller's own identity by
// token exchange (RFC 8693) presents at its authorization server; a caller
// without one (a static token of the gateway's) is known by subject
// alone, and its token never leaves the gateway.
const IssuerKey = "toolwire.issuer"

// callerName names the caller of the verified token ti wherever the
// gateway keys something by caller (its limits, its listens, the
// requestState that continues a parked call, a session's record): by the
// kind of credential and its issuer as well as the subject, since one
// subject from two credentials is two parties. A JWT's caller is
// jwt:"<issuer>":<sub>; a caller known by a token of the verifier's own
// configuration (a static token, or a verifier that names no issuer) is
// subject:<subject>, which no JWT's caller can be. "" without a subject.
func callerName(ti *auth.TokenInfo) string {
	if ti == nil || ti.UserID == "" {
		return ""
	}
	if iss, _ := ti.Extra[IssuerKey].(string); iss != "" {
		return "jwt:" + strconv.Quote(iss) + ":" + ti.UserID
	}
	return "subject:" + ti.UserID
}

// callerPrincipal returns the caller of req as a tool's source sees it: the
// authenticated subject, the issuer the verifier names, and, for a JWT
// caller, the bearer token the request carried (the one verified) and its
// expiry. ok is false without an authenticated subject.
func callerPrincipal(req mcp.Request) (p tool.Principal, ok bool) {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil || extra.TokenInfo.UserID == "" {
		return p, false
	}
	return principalFrom(extra.TokenInfo, extra.Header.Get("Authorization")), true
}

// principalFrom is the principal of a verified token ti that came in the
// Authorization header authz.
func principalFrom(ti *auth.TokenInfo, authz string) tool.Principal {
	p := tool.Principal{Subject: ti.UserID, Credential: tool.CredentialStatic}
	p.Role, _ = ti.Extra[roleKey].(string)
	iss, _ := ti.Extra[IssuerKey].(string)
	if iss == "" {
		return p
	}
	// A policy rule may read the claims of a JWT it verified.
	p.Credential = tool.CredentialJWT
	p.Claims, _ = ti.Extra[claimsKey].(map[string]any)
	p.Issuer, p.Expiry = iss, ti.Expiration
	if scheme, token, ok := strings.Cut(authz, " "); ok && strings.EqualFold(scheme, "Bearer") {
		p.Token = tool.NewBearerToken(strings.TrimSpace(token))
	}
	return p
}

// withPrincipal returns ctx carrying the caller of req, when it has one.
func withPrincipal(ctx context.Context, req mcp.Request) context.Context {
	if p, ok := callerPrincipal(req); ok {
		return tool.WithPrincipal(ctx, p)
	}
	return ctx
}
