package config

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/toolwire/toolwire/netpolicy"
)

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// serverState is one server being decoded, with the line of every field that
// was present; transport rules are checked once all fields are known.
type serverState struct {
	s       Server
	path    string
	present map[string]int

	// The transport the file declares ("" when absent or invalid), under
	// the key the file uses for it ("type" or "transport").
	declared     Transport
	declaredKey  string
	declaredLine int
	declaredBad  bool // present but invalid, and already reported
}

func newServerState(name string, line int, path string) *serverState {
	return &serverState{
		s:       Server{Name: name, Line: line},
		path:    path,
		present: make(map[string]int),
	}
}

// checkName validates a server name. The name becomes the default tool
// prefix, so it is held to the characters a tool name may carry.
func (d *decoder) checkName(name string, line int, path string) bool {
	switch {
	case name == "":
		d.errorf(line, path, "server name must not be empty")
	case !serverNameRE.MatchString(name):
		d.errorf(line, path, "invalid server name (want 1 to 64 letters, digits, '_', '.' or '-')")
	default:
		return true
	}
	return false
}

// commonField decodes the fields every dialect shares and reports whether
// key was one of them.
func (d *decoder) commonField(st *serverState, p pair) bool {
	path := joinPath(st.path, p.key)
	v := p.value
	switch p.key {
	case "command":
		if s, ok := d.nonEmpty(v, path); ok {
			if s, ok = d.template(st, v.line, path, s); ok {
				st.s.Command = d.resolvePath(v.line, path, s, true)
			}
		}
	case "args":
		if list, ok := d.strList(v, path, false); ok {
			for i, a := range list {
				list[i], _ = d.template(st, v.items[i].line, indexPath(path, i), a)
			}
			st.s.Args = list
		}
	case "env":
		if m, ok := d.strMap(v, path, envNameProblem, func(line int, path, v string) (string, bool) {
			return d.template(st, line, path, v)
		}); ok {
			st.s.Env = m
		}
	case "envFile":
		if s, ok := d.nonEmpty(v, path); ok {
			if s, ok = d.template(st, v.line, path, s); ok {
				st.s.EnvFile = d.resolvePath(v.line, path, s, false)
			}
		}
	case "cwd":
		if s, ok := d.nonEmpty(v, path); ok {
			if s, ok = d.template(st, v.line, path, s); ok {
				st.s.Cwd = d.resolvePath(v.line, path, s, false)
			}
		}
	case "url":
		d.url(st, p)
	case "headers":
		if m, ok := d.strMap(v, path, headerNameProblem, func(line int, path, v string) (string, bool) {
			if strings.ContainsAny(v, "\r\n\x00") {
				d.errorf(line, path, "header value must not contain line breaks or NUL")
				return "", false
			}
			return d.template(st, line, path, v)
		}); ok {
			st.s.Headers = m
		}
	case "disabled":
		if b, ok := d.boolean(v, path); ok {
			st.s.Disabled = b
			if b {
				d.serverWarnf(st, p.keyLine, p.key, "the server is disabled and will not be started")
			}
		}
	default:
		return false
	}
	st.present[p.key] = p.keyLine
	return true
}

// url decodes an endpoint: "url", or the "httpUrl" and "sseUrl" of some
// hosts, which also say the transport.
func (d *decoder) url(st *serverState, p pair) {
	path := joinPath(st.path, p.key)
	v := p.value
	s, ok := d.nonEmpty(v, path)
	if !ok {
		return
	}
	if s, ok = d.template(st, v.line, path, s); !ok {
		return
	}
	// A URL built from placeholders can only be checked once expanded,
	// by ExpandServer; netpolicy's client checks every request's URL too.
	if !strings.Contains(s, "$") {
		if msg := serverURLProblem(s, true); msg != "" {
			d.errorf(v.line, path, "%s", msg)
			return
		}
	}
	st.s.URL = s
}

// endpointKeys are the fields that say where a server is, in the order
// they are named in messages, with the transport each one means ("" for
// "url", which means http unless the declared transport is sse).
var endpointKeys = []struct {
	key       string
	transport Transport
}{
	{"command", TransportStdio},
	{"url", ""},
	{"httpUrl", TransportHTTP},
	{"sseUrl", TransportSSE},
}

// settleTransport applies the rules that tie command, the URL fields and the
// declared transport together, then rejects fields the chosen transport
// cannot use.
func (d *decoder) settleTransport(st *serverState, stdioOnly, remoteOnly []string) {
	type endpoint struct {
		key       string
		transport Transport
		line      int
	}
	var eps []endpoint
	for _, k := range endpointKeys {
		if line, ok := st.present[k.key]; ok {
			t := k.transport
			if t == "" {
				t = TransportHTTP
				if st.declared == TransportSSE {
					t = TransportSSE
				}
			}
			eps = append(eps, endpoint{k.key, t, line})
		}
	}
	switch {
	case len(eps) > 1:
		d.errorf(st.s.Line, st.path, "has both %q (%s) and %q (%s); keep one",
			eps[0].key, eps[0].transport, eps[1].key, eps[1].transport)
		return
	case len(eps) == 0 && st.declared == "":
		if !st.declaredBad {
			d.errorf(st.s.Line, st.path, `needs "command" (stdio) or "url" (http)`)
		}
		return
	case len(eps) == 0:
		want := "url"
		if st.declared == TransportStdio {
			want = "command"
		}
		d.errorf(st.s.Line, st.path, "needs %q (%s is %q)", want, st.declaredKey, st.declared)
		return
	}
	ep := eps[0]
	if st.declared != "" && st.declared != ep.transport {
		d.errorf(st.declaredLine, joinPath(st.path, st.declaredKey), "%q conflicts with %q, which means %s",
			st.declared, ep.key, ep.transport)
		return
	}
	st.s.Transport = ep.transport
	wrong, valid := remoteOnly, "http and sse"
	if ep.transport != TransportStdio {
		wrong, valid = stdioOnly, "stdio"
	}
	for _, f := range wrong {
		if line, ok := st.present[f]; ok {
			d.errorf(line, joinPath(st.path, f), "only valid for %s servers, and this server uses %q (%s)",
				valid, ep.key, ep.transport)
		}
	}
}

// declareTransport reads a declared transport: "type" in host files,
// "transport" in toolwire's (and either in the generic shapes). The values
// are those of the dialect, mapped to a Transport* name by values.
func (d *decoder) declareTransport(st *serverState, p pair, values map[string]Transport, want string) {
	path := joinPath(st.path, p.key)
	if st.declaredKey != "" && st.declaredKey != p.key {
		d.errorf(p.keyLine, path, "has both %q and %q; keep one", st.declaredKey, p.key)
		st.declared, st.declaredBad = "", true
		return
	}
	st.declaredKey = p.key
	st.declaredBad = true
	st.present[p.key] = p.keyLine
	t, ok := d.str(p.value, path, want)
	if !ok {
		return
	}
	tr, known := values[t]
	if !known {
		d.errorf(p.value.line, path, "unknown %s %q (want %s)", p.key, t, want)
		return
	}
	st.declared, st.declaredLine, st.declaredBad = tr, p.value.line, false
}

// resolvePath makes a relative path in the file relative to the file's
// directory, because the process that reads the config rarely runs from
// there. Commands without a slash are names to look up in PATH and are left
// alone, as are paths starting with a placeholder, which may expand to an
// absolute path.
func (d *decoder) resolvePath(line int, path, p string, isCommand bool) string {
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		d.errorf(line, path, `"~" is not expanded here; write ${HOME} instead`)
		return p
	}
	if d.dir == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "$") {
		return p
	}
	if isCommand && !strings.ContainsRune(p, '/') && !strings.ContainsRune(p, filepath.Separator) {
		return p
	}
	return filepath.Join(d.dir, p)
}

func envNameProblem(k string) string {
	switch {
	case k == "":
		return "empty variable name"
	case strings.ContainsAny(k, "=\x00"):
		return `variable name must not contain "=" or NUL`
	}
	return ""
}

func headerNameProblem(k string) string {
	if k == "" {
		return "empty header name"
	}
	for _, r := range k {
		// RFC 9110 token characters.
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return fmt.Sprintf("invalid header name (character %q is not allowed)", r)
		}
	}
	return ""
}

// serverURLProblem applies the remote-URL rule (netpolicy.CheckURL: https
// anywhere, plain http only to loopback) to a server's endpoint. show says
// whether the URL, without any password, may appear in the message.
func serverURLProblem(s string, show bool) string {
	_, err := netpolicy.CheckURL(s)
	var ue *netpolicy.URLError
	switch {
	case err == nil:
		return ""
	case !errors.As(err, &ue):
		return err.Error()
	case show:
		return fmt.Sprintf("%q: %s", ue.URL, ue.Reason)
	}
	return ue.Reason
}

// urlProblem checks that s is an absolute http or https URL. show says
// whether the URL may appear in the message; after expansion it may hold a
// secret, so it must not.
func urlProblem(s string, show bool) string {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "invalid URL: " + err.Error()
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if show {
			return fmt.Sprintf("want an http:// or https:// URL, got %q", s)
		}
		return "want an http:// or https:// URL"
	}
	if u.Host == "" {
		return "URL has no host"
	}
	return ""
}
