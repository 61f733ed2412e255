package gateway

import (
	"net/http"
	"net/url"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// HTTPOptions configures [Gateway.Handler].
type HTTPOptions struct {
	// Verifier checks each request's bearer token. Nil means no
	// authentication: every caller sees every tool. Only for loopback use;
	// the CLI refuses other addresses without it.
	Verifier auth.TokenVerifier
	// Roles decides which tools each role sees (and may call). Required
	// with a Verifier: a caller whose role is not listed sees no tool.
	Roles Roles
	// ResourceURL is this endpoint's canonical URL, announced in the RFC
	// 9728 protected-resource metadata and the WWW-Authenticate challenge.
	ResourceURL string
	// AuthorizationServers are the issuers that grant tokens for this
	// resource, announced in the metadata.
	AuthorizationServers []string
	// Stateless serves without sessions (no elicitation, hence no
	// approvals by asking).
	Stateless bool
	// MaxBodyBytes limits the size of a request body; a larger one is
	// refused with 413 before it is parsed. Zero means go-sdk's default
	// ([mcp.DefaultMaxRequestBodyBytes], 4 MiB); a negative value removes
	// the limit, which no server reachable by untrusted callers should do.
	MaxBodyBytes int64
}

// MetadataPath is where the protected-resource metadata is served.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Handler returns the gateway as a Streamable HTTP handler for the path
// /mcp, plus the protected-resource metadata at [MetadataPath]. With a
// verifier, a request without a valid bearer token gets 401 with a
// WWW-Authenticate challenge pointing at the metadata; each caller gets a
// server listing only its role's tools, and its subject is on every audit
// event of its calls. Host headers that are not localhost are refused on
// loopback listeners (DNS rebinding), as go-sdk does by default.
//
// The handler keeps one MCP server per role, each watching the registry;
// Close stops them.
func (g *Gateway) Handler(opts HTTPOptions) *Handler {
	byRole := &roleServers{g: g, roles: opts.Roles, servers: map[string]*mcp.Server{}}
	var bound *sessions // sessions bound to their credential; none without tokens or sessions
	if opts.Verifier != nil && !opts.Stateless {
		bound = newSessions()
		opts.Verifier = bound.verifier(opts.Verifier)
		byRole.middleware = bound.record
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(req *http.Request) *mcp.Server {
		if opts.Verifier == nil {
			return byRole.get("", nil)
		}
		_, role := callerOf(req)
		return byRole.get(role, func(name string) bool { return opts.Roles.allows(role, name) })
	}, &mcp.StreamableHTTPOptions{Stateless: opts.Stateless, MaxRequestBodyBytes: opts.MaxBodyBytes})

	var h http.Handler = mcpHandler
	mux := http.NewServeMux()
	if bound != nil {
		h = bound.check(h)
	}
	if opts.Verifier != nil {
		h = requireToken(opts, h)
		mux.Handle(MetadataPath, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               opts.ResourceURL,
			AuthorizationServers:   opts.AuthorizationServers,
			BearerMethodsSupported: []string{"header"},
		}))
	}
	mux.Handle("/mcp", h)
	return &Handler{mux: mux, servers: byRole}
}

// Handler is the gateway's HTTP handler (see [Gateway.Handler]).
type Handler struct {
	mux     *http.ServeMux
	servers *roleServers
}

// ServeHTTP serves /mcp and the protected-resource metadata.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Close stops the per-role servers from following the registry. Requests
// still being served are not interrupted.
func (h *Handler) Close() { h.servers.stopAll() }

// requireToken wraps next in go-sdk's bearer-token middleware. The 401
// challenge must point at the protected-resource metadata; without a
// configured ResourceURL its address is derived from each request's Host,
// since a challenge without it leaves a client nowhere to start.
func requireToken(opts HTTPOptions, next http.Handler) http.Handler {
	if opts.ResourceURL != "" {
		return auth.RequireBearerToken(opts.Verifier, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: originOnly(opts.ResourceURL) + MetadataPath,
		})(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		auth.RequireBearerToken(opts.Verifier, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: scheme + "://" + r.Host + MetadataPath,
		})(next).ServeHTTP(w, r)
	})
}

// roleServers keeps one MCP server per role: callers of the same role see
// the same tools, so they can share it.
type roleServers struct {
	g          *Gateway
	roles      Roles
	middleware mcp.Middleware // added to each server made; nil for none

	mu      sync.Mutex
	servers map[string]*mcp.Server
	stops   []func()
	closed  bool
}

// get returns the role's server, making it on first use. Making one lists
// every upstream's catalog (each bounded by its timeout), so it happens
// outside the lock: one slow upstream does not hold up the other roles.
// Two first requests of a role may both make one; the second is stopped.
func (r *roleServers) get(role string, visible func(string) bool) *mcp.Server {
	r.mu.Lock()
	s, ok := r.servers[role]
	r.mu.Unlock()
	if ok {
		return s
	}
	made, stop := r.g.Server(visible)
	if r.middleware != nil {
		made.AddReceivingMiddleware(r.middleware)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.servers[role]; ok {
		stop()
		return s
	}
	if r.closed {
		stop() // the handler is closing: serve this request, keep nothing
		return made
	}
	r.servers[role] = made
	r.stops = append(r.stops, stop)
	return made
}

func (r *roleServers) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, stop := range r.stops {
		stop()
	}
	r.stops = nil
	r.closed = true
}

// originOnly returns scheme://host of u, or u itself when it does not parse.
func originOnly(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	return p.Scheme + "://" + p.Host
}
