package gateway

import (
	"context"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// Revision2026 is the first MCP revision without sessions (SEP-2567): every
// request carries its protocol version, client info and capabilities in
// _meta, and a server asks its client for input through multi round-trip
// requests (SEP-2322) instead of sending requests during a call.
const Revision2026 = "2026-07-28"

// latestLegacy is the newest revision that opens with initialize: what an
// initialize asking for a later one gets.
const latestLegacy = "2025-11-25"

// protocolVersions are the MCP revisions the gateway serves, newest first.
// 2026-07-28 is served statelessly over HTTP (see [Gateway.Handler]) and on
// any connection, such as stdio, whose client opens with it.
var protocolVersions = []string{Revision2026, latestLegacy, "2025-06-18", "2025-03-26", "2024-11-05"}

// negotiated is the revision of a session whose initialize asked for
// asked, as go-sdk negotiates it: the one asked for when the gateway
// serves it and it has an initialize, else the latest that has one.
func negotiated(asked string) string {
	if servedLegacy(asked) {
		return asked
	}
	return latestLegacy
}

// servedLegacy reports whether v is a revision the gateway serves that
// has an initialize (one before 2026-07-28).
func servedLegacy(v string) bool {
	return slices.Contains(protocolVersions, v) && !modern(v)
}

// modern reports whether version is a revision without sessions. Revisions
// are dates, so they compare as strings.
func modern(version string) bool { return version >= Revision2026 }

// requestInfo is what the gateway reads of a request's revision and
// client: go-sdk's server requests answer from the request's _meta on
// 2026-07-28 and from the session's initialize before.
type requestInfo interface {
	ProtocolVersion() string
	ClientInfo() *mcp.Implementation
	ClientCapabilities() *mcp.ClientCapabilities
}

// revisionOf returns the revision of req, or "" when it does not say.
func revisionOf(req mcp.Request) string {
	if ri, ok := req.(requestInfo); ok {
		return ri.ProtocolVersion()
	}
	return ""
}

// capabilitiesOf returns the capabilities the client of req declared: in
// the request's own _meta on 2026-07-28, at initialize before.
func capabilitiesOf(req mcp.Request) *mcp.ClientCapabilities {
	if ri, ok := req.(requestInfo); ok {
		return ri.ClientCapabilities()
	}
	return nil
}

// maxClientName bounds the client's name and version as the audit log
// keeps them: the client chose them.
const maxClientName = 128

// withClient returns ctx carrying the revision and the client of req, which
// the executor puts on the audit events of the calls made with it.
func withClient(ctx context.Context, req mcp.Request) context.Context {
	ri, ok := req.(requestInfo)
	if !ok {
		return ctx
	}
	c := tool.Client{Protocol: ri.ProtocolVersion()}
	if unknownRevision(ctx, req, c.Protocol) {
		// What the client's initialize on this connection asked for, if
		// the gateway kept it; else unknown, not go-sdk's guess.
		c.Protocol = ""
		if s := trackedFrom(ctx); s != nil {
			c.Protocol = s.client.Protocol
		}
	}
	name, version := "", ""
	// The request's own _meta first, as it came: go-sdk's ClientInfo
	// decodes it again, a cost per request.
	if p := paramsOf(req); p != nil {
		if info, ok := p.GetMeta()[mcp.MetaKeyClientInfo].(map[string]any); ok {
			name, _ = info["name"].(string)
			version, _ = info["version"].(string)
		}
	}
	if name == "" {
		if info := ri.ClientInfo(); info != nil {
			name, version = info.Name, info.Version
		}
	}
	c.Name = clientName(name, version)
	if s := trackedFrom(ctx); c.Name == "" && s != nil && !s.stateful && s.client.Protocol == c.Protocol {
		// A 2025 client served statelessly names itself only in its
		// initialize (see tracker.wrapRequests), kept for its connection
		// if it asked for the revision its requests speak.
		c.Name = s.client.Name
	}
	if c == (tool.Client{}) {
		return ctx
	}
	return tool.WithClient(ctx, c)
}

// clientName is a client's name and version as the audit keeps them,
// bounded.
func clientName(name, version string) string {
	n := name
	if version != "" {
		n += "/" + version
	}
	if r := []rune(n); len(r) > maxClientName {
		n = string(r[:maxClientName]) + "…"
	}
	return n
}

// unknownRevision reports whether the revision go-sdk gives req, rev, is
// a guess: a 2025 request served without a session (--stateless) that
// carries no version header. go-sdk then takes it for 2025-03-26's, but a
// 2024-11-05 client sends no header either, and neither says its revision
// anywhere else in the request; the audit records none rather than a
// wrong one.
func unknownRevision(ctx context.Context, req mcp.Request, rev string) bool {
	s := trackedFrom(ctx)
	if s == nil || s.stateful || modern(rev) {
		return false
	}
	extra := req.GetExtra()
	return extra == nil || extra.Header.Get(protocolHeader) == ""
}

// capInitialize is receiving middleware: an initialize that asks for
// 2026-07-28 or later is answered with the latest revision that has an
// initialize. go-sdk would keep the version asked for as the session's
// (while answering the negotiated one), and then treat the session as a
// sessionless one: no list_changed or resources/updated, and input
// requests instead of elicitation/create, which a 2025 client cannot read.
// A 2026 client never sends initialize (it opens with server/discover, or
// with any request).
func capInitialize(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "initialize" {
			if p, ok := req.GetParams().(*mcp.InitializeParams); ok && p != nil && modern(p.ProtocolVersion) {
				p.ProtocolVersion = latestLegacy
			}
		}
		return next(ctx, method, req)
	}
}
