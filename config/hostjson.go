package config

import (
	"strings"
)

var (
	hostServerFields = []string{"type", "command", "args", "env", "cwd", "url", "headers"}
	hostStdioOnly    = []string{"args", "env", "cwd"}
	hostHTTPOnly     = []string{"headers"}
)

// hostIgnored lists the fields that hosts add to mcpServers entries and that
// toolwire skips with a warning instead of failing, so that a file written
// for Claude Desktop, Claude Code, Cursor, Cline or Roo Code loads as is.
// Each entry says why the field does not carry over; the warning repeats it
// because ignoring some of them changes behaviour.
var hostIgnored = map[string]string{
	"disabled":      "a host setting; toolwire does not honour it and still connects to this server",
	"autoApprove":   "a host approval list; toolwire uses tiers instead",
	"alwaysAllow":   "a host approval list; toolwire uses tiers instead",
	"timeout":       "host timeouts use different units; toolwire uses its default request timeout",
	"description":   "descriptive only",
	"envFile":       "toolwire does not read env files, so the variables in it are not set",
	"oauth":         "OAuth is not supported yet, so requests are sent without it",
	"headersHelper": "toolwire does not run header helper commands, so those headers are not sent",
}

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
	f.Servers = d.hostServers(*servers)
}

func (d *decoder) hostServers(p pair) []Server {
	const path = "mcpServers"
	if !d.wantMap(p.value, path, "a map of servers") {
		return nil
	}
	entries := d.entries(p.value, path)
	if len(p.value.pairs) == 0 {
		d.errorf(p.keyLine, path, "no servers defined")
		return nil
	}
	var out []Server
	for _, e := range entries {
		spath := joinPath(path, e.key)
		if !d.checkName(e, spath) || !d.wantMap(e.value, spath, "a map of server settings") {
			continue
		}
		st := newServerState(e.key, e.keyLine, spath)
		st.declaredKey = "type"
		for _, f := range d.entries(e.value, spath) {
			switch {
			case d.commonField(st, f):
			case f.key == "type":
				d.hostType(st, f)
			default:
				if why, ok := hostIgnored[f.key]; ok {
					if f.key == "disabled" && f.value.typ == typeBool && strings.EqualFold(f.value.text, "true") {
						why = "the host has disabled this server, but toolwire does not honour that and still connects to it"
					}
					d.warnf(f.keyLine, joinPath(spath, f.key), "ignored (%s)", why)
					continue
				}
				d.unknownField(f, spath, hostServerFields)
			}
		}
		d.settleTransport(st, hostStdioOnly, hostHTTPOnly)
		out = append(out, st.s)
	}
	return out
}

func (d *decoder) hostType(st *serverState, p pair) {
	path := joinPath(st.path, p.key)
	st.declaredBad = true
	t, ok := d.str(p.value, path, `"stdio", "http" or "streamable-http"`)
	if !ok {
		return
	}
	switch t {
	case "stdio":
		st.declared = transportStdio
	case "http", "streamable-http":
		st.declared = transportHTTP
	case "sse":
		d.errorf(p.value.line, path, `legacy SSE transport is not supported yet (want "stdio", "http" or "streamable-http")`)
		return
	default:
		d.errorf(p.value.line, path, `unknown type %q (want "stdio", "http" or "streamable-http")`, t)
		return
	}
	st.declaredLine, st.declaredBad = p.value.line, false
}
