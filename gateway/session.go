package gateway

import (
	"context"
	"errors"
	"maps"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// credentialKey is where [Gateway.Handler]'s verifier names the credential
// in TokenInfo.Extra (the SHA-256 of the bearer token, or what the verifier
// set), so that a session can be bound to the credential that opened it
// rather than to its subject alone.
const credentialKey = "toolwire.credential"

// sessionHeader is the Streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// credential is what a session is bound to: the credential that opened it
// (see credentialKey) and the role it had then.
type credential struct{ token, role string }

func credentialOf(ti *auth.TokenInfo) credential {
	if ti == nil {
		return credential{}
	}
	token, _ := ti.Extra[credentialKey].(string)
	role, _ := ti.Extra[roleKey].(string)
	return credential{token: token, role: role}
}

// Each session of an authenticated handler is bound to the credential
// that opened it: the caller's identity and role are fixed when the
// session opens. A request in the session that shows another token is
// refused (another token of the same subject included: go-sdk compares
// subjects only), and one whose token no longer verifies, or whose role
// changed, ends the session, so neither takes effect later than the next
// request. In a fleet the binding is part of the session's record, and
// the end of a session is its end on every replica. [stateful] applies
// the rules: see bindingProblem and verifier.

// The answers to a request that breaks its session's binding.
const (
	msgOtherCredential = "this session was opened with another credential"
	msgRoleChanged     = "session ended: the credential's role changed since it opened; open a new session"
)

// bindingProblem says what a request showing cur may not do in a session
// bound to bound: nothing ("" and false), refused (403, the session goes
// on), or refused with the session ended (404, end true).
func bindingProblem(cur, bound credential) (msg string, end bool) {
	switch {
	case cur.token != bound.token:
		return msgOtherCredential, false
	case cur.role != bound.role:
		return msgRoleChanged, true
	}
	return "", false
}

// verifier wraps v so that every TokenInfo it returns names its
// credential: the hash of its token, unless v named it (JWTVerifier names
// a JWT's subject and client, so that a refreshed token keeps the
// session). When v refuses a token that opened the session the request
// names, that session ends: a revoked or expired token takes its sessions
// (and their event streams) with it.
func (h *stateful) verifier(v auth.TokenVerifier) auth.TokenVerifier {
	return func(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
		ti, err := v(ctx, token, req)
		if err != nil {
			if errors.Is(err, auth.ErrInvalidToken) {
				hash := HashToken(token)
				h.endIf(ctx, req.Header.Get(sessionHeader), func(c credential) bool { return c.token == hash })
			}
			return ti, err
		}
		if ti == nil {
			return nil, errInvalidToken
		}
		out := *ti
		out.Extra = maps.Clone(ti.Extra)
		if out.Extra == nil {
			out.Extra = map[string]any{}
		}
		if _, ok := out.Extra[credentialKey]; !ok {
			out.Extra[credentialKey] = HashToken(token)
		}
		return &out, nil
	}
}
