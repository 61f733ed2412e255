package gateway

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// sessions binds each stateful session of an authenticated handler to the
// credential that opened it. The caller's identity and role are fixed when
// the session opens: a request in the session that shows another token is
// refused (another token of the same subject included: go-sdk compares
// subjects only), and one whose token no longer verifies, or whose role
// changed, ends the session, so neither takes effect later than the next
// request.
type sessions struct {
	mu    sync.Mutex
	bound map[string]binding // by session ID
}

type binding struct {
	cred credential
	ss   *mcp.ServerSession
}

func newSessions() *sessions { return &sessions{bound: map[string]binding{}} }

// verifier wraps v so that every TokenInfo it returns names its
// credential: the hash of its token, unless v named it (JWTVerifier names
// a JWT's subject and client, so that a refreshed token keeps the session). When v refuses a token that opened the session the request
// names, that session ends: a revoked or expired token takes its sessions
// (and their event streams) with it.
func (b *sessions) verifier(v auth.TokenVerifier) auth.TokenVerifier {
	return func(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
		ti, err := v(ctx, token, req)
		if err != nil {
			if errors.Is(err, auth.ErrInvalidToken) {
				b.endIf(req.Header.Get(sessionHeader), func(c credential) bool { return c.token == HashToken(token) })
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

// record is receiving middleware of the per-role servers: a session is
// bound to the credential of its initialize request. The binding goes
// when the session ends.
func (b *sessions) record(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "initialize" {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.ID() != "" && req.GetExtra() != nil {
				b.bind(ss, credentialOf(req.GetExtra().TokenInfo))
			}
		}
		return next(ctx, method, req)
	}
}

func (b *sessions) bind(ss *mcp.ServerSession, c credential) {
	id := ss.ID()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.bound[id]; ok {
		return // a second initialize: the session keeps its first credential
	}
	b.bound[id] = binding{cred: c, ss: ss}
	// The goroutine lives as long as the session: Wait returns when it
	// closes (DELETE, idle timeout, or endIf).
	go func() {
		_ = ss.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.bound[id].ss == ss {
			delete(b.bound, id)
		}
	}()
}

// endIf closes the session id when its credential satisfies cond.
func (b *sessions) endIf(id string, cond func(credential) bool) {
	if id == "" {
		return
	}
	b.mu.Lock()
	bd, ok := b.bound[id]
	if ok && cond(bd.cred) {
		delete(b.bound, id)
	} else {
		ok = false
	}
	b.mu.Unlock()
	if ok {
		_ = bd.ss.Close()
	}
}

// check wraps next, the Streamable HTTP handler behind the token check:
// a request naming a session is served only with the credential that
// opened it. Unknown sessions are not found (fail closed: every session of
// an authenticated handler is bound when it opens).
func (b *sessions) check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(sessionHeader)
		if id == "" {
			next.ServeHTTP(w, r)
			return
		}
		cur := credentialOf(auth.TokenInfoFromContext(r.Context()))
		b.mu.Lock()
		bd, ok := b.bound[id]
		b.mu.Unlock()
		switch {
		case !ok:
			http.Error(w, "session not found", http.StatusNotFound)
		case cur.token != bd.cred.token:
			http.Error(w, "this session was opened with another credential", http.StatusForbidden)
		case cur.role != bd.cred.role:
			b.endIf(id, func(c credential) bool { return c == bd.cred })
			http.Error(w, "session ended: the credential's role changed since it opened; open a new session", http.StatusNotFound)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
