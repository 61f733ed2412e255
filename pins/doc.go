// Package pins defends against "rug pulls": an MCP server changing a tool's
// description, schema or annotations after the user approved the tool.
//
// A tool's [Definition] (name, description, input schema, annotations) is
// reduced to a [Fingerprint], a SHA-256 over its canonical JSON
// ([CanonicalJSON], RFC 8785), so re-encoding the same definition never
// looks like a change and any real change does. A [Store] keeps one pin per
// tool per server ([Scope]: the server's name and identity, so two servers
// of one name never share pins) in a JSON file shared by every toolwire
// process of the user. At connect and at every tools/list_changed, the client checks the
// server's definitions against the pins and registers only what the
// [Report] allows:
//
//	store, err := pins.NewStore("") // ~/.config/toolwire/pins.json
//	...
//	scope := pins.Scope{Server: "github", Identity: id} // see mcpclient.PinScope
//	rep, err := store.Check(ctx, scope, defs, pins.Enforce)
//	if err != nil { ... } // register nothing from this server
//	for i, d := range rep.Decisions {
//		if d.Action != pins.Allow {
//			// log a warning and record an audit event: d.Status,
//			// d.Old → d.New, d.Fields
//		}
//		if d.Allowed() {
//			register(defs[i])
//		}
//	}
//
// The first check of a server that has no pins trusts and pins every tool
// (trust on first use). After that, a new or changed tool is quarantined in
// [Enforce] mode and allowed with a warning in [Warn] mode; in neither mode
// does Check pin it. The operator inspects pins with [Store.List], approves
// a server's current definitions with [Store.Approve] and drops pins with
// [Store.Forget]:
//
//	toolwire pins list
//	toolwire pins approve github/create_issue  → store.Approve(ctx, scope, defs, "create_issue")
//	toolwire pins forget github                → store.Forget(ctx, scope, "")
//
// Pins cover only what a [Definition] holds. A caller that shows the model
// anything else from the server's listing (a title in place of an empty
// description, say) puts that text in the Definition too.
package pins
