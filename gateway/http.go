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
func (g *Gateway) Handler(opts HTTPOptions) http.Handler {
	byRole := &roleServers{g: g, roles: opts.Roles, servers: map[string]*mcp.Server{}}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(req *http.Request) *mcp.Server {
		if opts.Verifier == nil {
			return byRole.get("", nil)
		}
		_, role := callerOf(req)
		return byRole.get(role, func(name string) bool { return opts.Roles.allows(role, name) })
	}, &mcp.StreamableHTTPOptions{Stateless: opts.Stateless})

	var h http.Handler = mcpHandler
	mux := http.NewServeMux()
	if opts.Verifier != nil {
		metadataURL := opts.ResourceURL
		if metadataURL != "" {
			metadataURL = originOnly(opts.ResourceURL) + MetadataPath
		}
		h = auth.RequireBearerToken(opts.Verifier, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL})(h)
		mux.Handle(MetadataPath, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               opts.ResourceURL,
			AuthorizationServers:   opts.AuthorizationServers,
			BearerMethodsSupported: []string{"header"},
		}))
	}
	mux.Handle("/mcp", h)
	return mux
}

// roleServers keeps one MCP server per role: callers of the same role see
// the same tools, so they can share it.
type roleServers struct {
	g     *Gateway
	roles Roles

	mu      sync.Mutex
	servers map[string]*mcp.Server
}

func (r *roleServers) get(role string, visible func(string) bool) *mcp.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.servers[role]; ok {
		return s
	}
	s, _ := r.g.Server(visible) // lives as long as the handler
	r.servers[role] = s
	return s
}

// originOnly returns scheme://host of u, or u itself when it does not parse.
func originOnly(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	return p.Scheme + "://" + p.Host
}
