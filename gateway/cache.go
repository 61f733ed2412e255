package gateway

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Cache hints (SEP-2549): from 2026-07-28 on, server/discover, the four
// listings and resources/read carry ttlMs (how long a client may reuse the
// result) and cacheScope (public: any client or intermediary may reuse it;
// private: only the requesting user's client). go-sdk sends the fields to
// every client; 2025 clients ignore them.
//
// The gateway's answers depend on the caller wherever callers have
// different roles: a listing is the caller's role's, and so, through
// visibility, is whether a read succeeds. Those are private. A read also
// stays private when its upstream said so, and lives no longer than the
// upstream allows. Nothing obtained through a multi round-trip retry is
// cacheable, as the spec requires (server/utilities/caching, "Cache Key").
//
// The gateway keeps no cache of upstream results of its own: every read,
// prompt get and completion goes to its upstream, so one caller's private
// result cannot be served to another. (Its one shared listing of the
// upstreams is what the upstreams offer the gateway itself, filtered per
// caller afterwards.)

// Cache scopes.
const (
	scopePublic  = "public"
	scopePrivate = "private"
)

// cacheHints returns the served server's [mcp.ServerOptions].SetCacheable.
// perCaller says whether what the server answers depends on its caller
// (servers per role, when roles differ). On entry c holds what the
// handler produced: for a read, the upstream's own hints.
func (g *Gateway) cacheHints(perCaller func() bool) func(context.Context, mcp.Request, *mcp.Cacheable) {
	ttl := int(g.opts.CacheTTL / time.Millisecond)
	return func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
		scope := scopePublic
		if perCaller() {
			scope = scopePrivate
		}
		limit := ttl
		if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok && p != nil {
			if c.CacheScope == scopePrivate {
				scope = scopePrivate
			}
			limit = min(limit, max(c.TTLMs, 0)) // an upstream that says nothing says 0
			if p.RequestState != "" || len(p.InputResponses) > 0 {
				limit, scope = 0, scopePrivate
			}
		}
		c.TTLMs, c.CacheScope = limit, scope
	}
}
