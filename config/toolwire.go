package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

var (
	toolwireTopFields    = []string{"servers", "audit", "inputs", "gateway", "security", "agent", "oauth", "store", "policy"}
	toolwireServerFields = []string{
		"transport", "command", "args", "env", "envFile", "cwd", "url", "headers", "bearerToken", "oauth",
		"prefix", "defaultTier", "tierOverrides", "onlyTools", "excludeTools", "timeout", "required", "disabled",
		"roots", "protocol", "sandbox",
	}
	toolwireStdioOnly  = []string{"args", "env", "envFile", "cwd", "sandbox"}
	toolwireRemoteOnly = []string{"headers", "bearerToken", "oauth"}
	auditFields        = []string{"file", "logArguments", "signingKey", "required"}

	toolwireTransports = map[string]Transport{
		"stdio": TransportStdio,
		"http":  TransportHTTP,
		"sse":   TransportSSE,
	}
	toolwireTransportWant = `"stdio", "http" or "sse"`
)

// toolwireFile decodes toolwire's own file, where unlike a host's file every
// key is ours and an unknown one is a mistake.
func (d *decoder) toolwireFile(root *node, f *File) {
	d.inputsAllowed = true
	d.inputs = map[string]Input{}
	top := d.entries(root, "")
	// Inputs first: servers refer to them, wherever they are in the file.
	for _, p := range top {
		if p.key == "inputs" {
			d.toolwireInputs(p)
		}
	}
	for _, p := range top {
		switch p.key {
		case "servers":
			f.Servers = d.toolwireServers(p)
		case "audit":
			d.audit(p.value, &f.Audit)
		case "gateway":
			f.Gateway = d.gateway(p)
		case "security":
			d.security(p.value, &f.Security)
		case "agent":
			d.agent(p.value, &f.Agent)
		case "store":
			f.Store = d.store(p.value)
		case "policy":
			f.Policy = d.policy(p)
		case "inputs", "oauth":
		default:
			d.unknownField(p, "", toolwireTopFields)
		}
	}
	// The OAuth defaults last: they apply to the servers.
	for _, p := range top {
		if p.key == "oauth" {
			d.oauthDefaults(p.value, f.Servers)
		}
	}
	for _, p := range top {
		if p.key == "servers" {
			d.callerIdentity(p, f)
		}
	}
}

func (d *decoder) toolwireServers(p pair) []Server {
	const path = "servers"
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
		for _, f := range d.entries(e.value, spath) {
			if !d.commonField(st, f) && !d.toolwireField(st, f) {
				d.unknownField(f, spath, toolwireServerFields)
			}
		}
		if st.declaredKey == "" {
			st.declaredKey = "transport"
		}
		d.settleTransport(st, toolwireStdioOnly, toolwireRemoteOnly)
		out = append(out, st.s)
	}
	return out
}

// toolwireField decodes the fields only toolwire's own file has.
func (d *decoder) toolwireField(st *serverState, p pair) bool {
	path := joinPath(st.path, p.key)
	v := p.value
	s := &st.s
	switch p.key {
	case "transport":
		d.declareTransport(st, p, toolwireTransports, toolwireTransportWant)
	case "bearerToken":
		if t, ok := d.nonEmpty(v, path); ok {
			if strings.ContainsAny(t, "\r\n\x00") {
				d.errorf(v.line, path, "header value must not contain line breaks or NUL")
			} else if t, ok = d.template(st, v.line, path, t); ok {
				s.BearerToken = t
			}
		}
	case "oauth":
		s.OAuth = d.oauth(v, path)
	case "prefix":
		if t, ok := d.nonEmpty(v, path); ok {
			if serverNameRE.MatchString(t) {
				s.Prefix = t
			} else {
				d.errorf(v.line, path, "invalid prefix %q (want 1 to 64 letters, digits, '_', '.' or '-')", t)
			}
		}
	case "defaultTier":
		if t, ok := d.tier(v, path); ok {
			s.DefaultTier = t
		}
	case "tierOverrides":
		if !d.wantMap(v, path, "a map of tool name to tier") {
			break
		}
		m := make(map[string]string, len(v.pairs))
		for _, o := range d.entries(v, path) {
			opath := joinPath(path, o.key)
			if o.key == "" {
				d.errorf(o.keyLine, opath, "empty tool name")
				continue
			}
			if t, ok := d.tier(o.value, opath); ok {
				m[o.key] = t
			}
		}
		s.TierOverrides = m
	case "onlyTools":
		if v.kind == scalarNode && v.typ == typeNull {
			// Null could mean "no tools" or "all tools"; for an allowlist
			// guessing wrong either way is bad, so ask.
			d.errorf(v.line, path, "null is ambiguous: write [] for no tools, or remove the field for all tools")
			break
		}
		if list, ok := d.strList(v, path, true); ok {
			s.OnlyTools = list
		}
	case "excludeTools":
		if list, ok := d.strList(v, path, true); ok {
			s.ExcludeTools = list
		}
	case "timeout":
		if t, ok := d.str(v, path, `a duration such as "30s"`); ok {
			dur, err := time.ParseDuration(t)
			switch {
			case err != nil:
				d.errorf(v.line, path, `invalid duration %q (want a Go duration such as "30s" or "2m")`, t)
			case dur <= 0:
				d.errorf(v.line, path, "must be greater than zero, got %q", t)
			default:
				s.Timeout = dur
			}
		}
	case "required":
		if b, ok := d.boolean(v, path); ok {
			s.Required = b
		}
	case "roots":
		d.roots(st, v, path)
	case "sandbox":
		d.sandbox(st, v, path)
	case "protocol":
		if v.kind == scalarNode && v.typ == "!!timestamp" {
			v.typ = typeString // a revision is written like a date, and YAML reads dates
		}
		if t, ok := d.str(v, path, "an MCP revision such as \"2025-11-25\""); ok {
			if slices.Contains(Revisions, t) {
				s.Protocol = t
			} else {
				d.errorf(v.line, path, "unknown MCP revision %q (want one of %s)", t, strings.Join(Revisions, ", "))
			}
		}
	default:
		return false
	}
	st.present[p.key] = p.keyLine
	return true
}

// roots decodes a server's roots: a list of absolute directories, each
// possibly built from placeholders. Whether each is a directory is checked
// when the server starts (ExpandServer), as a placeholder may name it and
// it may be made meanwhile.
func (d *decoder) roots(st *serverState, v *node, path string) {
	list, ok := d.strList(v, path, true)
	if !ok {
		return
	}
	for i, r := range list {
		ipath := indexPath(path, i)
		line := v.items[i].line
		if r, ok = d.template(st, line, ipath, r); !ok {
			continue
		}
		list[i] = r
		if msg := rootProblem(r); msg != "" && !strings.Contains(r, "$") {
			d.errorf(line, ipath, "%s", msg)
		}
	}
	st.s.Roots = list
}

// rootProblem says what is wrong with root as a root's path, before looking
// at the file system, or "".
func rootProblem(root string) string {
	switch {
	case root == "~" || strings.HasPrefix(root, "~/") || strings.HasPrefix(root, `~\`):
		return `"~" is not expanded here; write ${HOME} instead`
	case !filepath.IsAbs(root):
		return fmt.Sprintf("want an absolute path to a directory, got %q", root)
	}
	return ""
}

func (d *decoder) tier(v *node, path string) (string, bool) {
	t, ok := d.str(v, path, "read, write or destructive")
	if !ok {
		return "", false
	}
	switch t {
	case "read", "write", "destructive":
		return t, true
	}
	d.errorf(v.line, path, "unknown tier %q (want read, write or destructive)", t)
	return "", false
}

func (d *decoder) audit(v *node, a *Audit) {
	const path = "audit"
	if !d.wantMap(v, path, "a map of audit settings") {
		return
	}
	for _, p := range d.entries(v, path) {
		fpath := joinPath(path, p.key)
		switch p.key {
		case "file":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				a.File = d.resolvePath(p.value.line, fpath, s, false)
			}
		case "logArguments":
			if b, ok := d.boolean(p.value, fpath); ok {
				a.LogArguments = b
			}
		case "signingKey":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				a.SigningKey = d.resolvePath(p.value.line, fpath, s, false)
			}
		case "required":
			if b, ok := d.boolean(p.value, fpath); ok {
				a.Required = b
			}
		default:
			d.unknownField(p, path, auditFields)
		}
	}
}
