// Package console is the operator's web console of toolwire serve: a few
// server-rendered pages on a listener of their own, never on the MCP path,
// that show what the gateway is doing and let a person answer the calls
// waiting for an operator.
//
// The pages show the configured servers (state, MCP revision), the tools
// (tier and where it came from, pin state, the policy rules that apply),
// the open sessions by caller, the calls waiting for approval (allow or
// deny, with a scope), the lasting approvals, the tail of the audit log
// with the state of its hash chain, and the limits being hit. They update
// without a reload: a small script follows /events (server-sent events)
// and fetches the part of the page that changed, rendered by the server.
//
//	con, err := console.New(&console.Options{Token: token})
//	...
//	wo.Telemetry.AuditSink = con.AuditSink // the audit tail follows
//	w, err := workspace.Open(ctx, file, wo)
//	...
//	httpOpts.Observe = con.Observe // sessions and limits
//	go con.Serve(ctx, ln, &console.Sources{Workspace: w, Limits: h.Limits}, nil) // or a *tls.Config
//
// Security: the console is the operator's alone. A person signs in with
// the operator's token (distinct from every caller's token), compared in
// constant time, and gets a session cookie (HttpOnly, SameSite=Strict,
// Secure over TLS). Every state-changing request is a POST that carries
// the session's CSRF token and the console's own Origin. Every answer
// forbids framing and caching, and its Content-Security-Policy allows only
// the console's own script and style, served from the binary. Text that
// servers or callers wrote (tool names, descriptions, arguments, audit
// lines) is escaped for HTML and its control characters shown, not
// acted on.
package console
