package config

import (
	"fmt"
	"slices"
)

var (
	// hostServerFields are the fields a host's server entry may have, for
	// "did you mean" suggestions.
	hostServerFields = []string{"type", "transport", "command", "args", "env", "envFile", "cwd", "url", "httpUrl", "sseUrl", "headers", "disabled"}
	hostStdioOnly    = []string{"args", "env", "envFile", "cwd"}
	hostRemoteOnly   = []string{"headers"}

	// hostTransports maps the transport names hosts write to toolwire's.
	hostTransports = map[string]Transport{
		"stdio":           TransportStdio,
		"http":            TransportHTTP,
		"streamable-http": TransportHTTP,
		"streamableHttp":  TransportHTTP,
		"sse":             TransportSSE,
	}
	hostTransportWant = `"stdio", "http", "streamable-http" or "sse"`
)

// hostIgnored lists the fields that hosts add to server entries and that
// toolwire skips with a warning instead of failing, so that a file written
// for Claude Desktop, Claude Code, Cursor, VS Code, Cline or Roo Code loads
// as is. Each entry says why the field does not carry over; the warning
// repeats it because ignoring some of them changes behaviour.
var hostIgnored = map[string]string{
	"autoApprove":   "a host approval list; toolwire uses tiers instead",
	"alwaysAllow":   "a host approval list; toolwire uses tiers instead",
	"trust":         "a host approval setting; toolwire uses tiers instead",
	"timeout":       "host timeouts use different units; toolwire uses its default request timeout",
	"description":   "descriptive only",
	"oauth":         "OAuth is not supported yet, so requests are sent without it",
	"headersHelper": "toolwire does not run header helper commands, so those headers are not sent",
	"dev":           "VS Code's development mode (watch and debug) applies to VS Code only",
}

// hostRules says how one host shape names things.
type hostRules struct {
	// declaredKeys are the fields that declare a transport.
	declaredKeys []string
	// nameField: the entry itself carries its name (lists, a single
	// server); otherwise a "name" field must repeat its key.
	nameField bool
}

var (
	mcpServersRules = hostRules{declaredKeys: []string{"type", "transport"}}
	vscodeRules     = hostRules{declaredKeys: []string{"type"}}
	genericRules    = hostRules{declaredKeys: []string{"type", "transport"}}
	listRules       = hostRules{declaredKeys: []string{"type", "transport"}, nameField: true}
)

// hostFile decodes the mcpServers shape. Only the mcpServers key is ours;
// the rest of the file belongs to the host application.
func (d *decoder) hostFile(root *node, f *File) {
	var servers *pair
	for i := range root.pairs {
		p := &root.pairs[i]
		if p.key != "mcpServers" {
			continue
		}
		if servers != nil {
			d.errorf(p.keyLine, "mcpServers", "duplicate key (first defined on line %d)", servers.keyLine)
			continue
		}
		servers = p
	}
	for _, p := range root.pairs {
		if p.key == "servers" {
			d.warnf(p.keyLine, "servers", `ignored because this file has "mcpServers"; toolwire reads only "mcpServers" from such files`)
		}
	}
	f.Servers = d.keyedServers(*servers, "mcpServers", mcpServersRules)
}

// keyedServers decodes a map from server name to a host's settings.
func (d *decoder) keyedServers(p pair, path string, rules hostRules) []Server {
	if !d.wantMap(p.value, path, "a map of servers") {
		return nil
	}
	entries := d.serverEntries(p.value, path)
	if len(p.value.pairs) == 0 {
		d.errorf(p.keyLine, path, "no servers defined")
		return nil
	}
	var out []Server
	for _, e := range entries {
		spath := joinPath(path, e.key)
		if !d.checkName(e.key, e.keyLine, spath) || !d.wantMap(e.value, spath, "a map of server settings") {
			continue
		}
		st := newServerState(e.key, e.keyLine, spath)
		d.hostEntry(st, e.value, rules)
		out = append(out, st.s)
	}
	return out
}

// namedServers decodes a top-level map from server name to settings.
func (d *decoder) namedServers(root *node, path string) []Server {
	return d.keyedServers(pair{key: path, keyLine: root.line, value: root}, path, genericRules)
}

// listServers decodes a top-level list of servers, each naming itself.
func (d *decoder) listServers(root *node) []Server {
	if len(root.items) == 0 {
		d.errorf(root.line, "", "no servers defined")
		return nil
	}
	seen := map[string]int{}
	var out []Server
	for i, item := range root.items {
		spath := indexPath("", i)
		if !d.wantMap(item, spath, `a map of server settings with "name"`) {
			continue
		}
		st, ok := d.namedEntry(item, spath)
		if !ok {
			continue
		}
		if first, dup := seen[st.s.Name]; dup {
			d.errorf(st.s.Line, joinPath(spath, "name"), "%s", duplicateServer(st.s.Name, first))
			continue
		}
		seen[st.s.Name] = st.s.Line
		out = append(out, st.s)
	}
	return out
}

// singleServer decodes a file that is one server's settings.
func (d *decoder) singleServer(root *node) []Server {
	st, ok := d.namedEntry(root, "")
	if !ok {
		return nil
	}
	return []Server{st.s}
}

// namedEntry decodes a server whose settings carry its "name".
func (d *decoder) namedEntry(n *node, path string) (*serverState, bool) {
	p, ok := lookup(n, "name")
	if !ok {
		d.errorf(n.line, path, `needs "name", the server's name`)
		return nil, false
	}
	name, ok := d.str(p.value, joinPath(path, "name"), "a string")
	if !ok || !d.checkName(name, p.value.line, joinPath(path, "name")) {
		return nil, false
	}
	st := newServerState(name, p.keyLine, path)
	d.hostEntry(st, n, listRules)
	return st, true
}

// hostEntry decodes one server's settings in a host's shape.
func (d *decoder) hostEntry(st *serverState, n *node, rules hostRules) {
	for _, f := range d.entries(n, st.path) {
		path := joinPath(st.path, f.key)
		switch {
		case d.commonField(st, f):
		case f.key == "httpUrl" || f.key == "sseUrl":
			d.url(st, f)
			st.present[f.key] = f.keyLine
		case slices.Contains(rules.declaredKeys, f.key):
			d.declareTransport(st, f, hostTransports, hostTransportWant)
		case f.key == "name":
			if rules.nameField {
				continue // read by namedEntry
			}
			if s, ok := d.str(f.value, path, "a string"); ok && s != st.s.Name {
				d.errorf(f.value.line, path, "%s", fmt.Sprintf("%q differs from the server's key %q; remove it or make them agree", s, st.s.Name))
			}
		default:
			if why, ok := hostIgnored[f.key]; ok {
				d.serverWarnf(st, f.keyLine, f.key, "ignored (%s)", why)
				continue
			}
			d.unknownField(f, st.path, hostServerFields)
		}
	}
	d.settleTransport(st, hostStdioOnly, hostRemoteOnly)
}
