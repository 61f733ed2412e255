package config

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	transportStdio = "stdio"
	transportHTTP  = "http"
)

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// serverState is one server being decoded, with the line of every field that
// was present; transport rules are checked once all fields are known.
type serverState struct {
	s       Server
	path    string
	present map[string]int

	// The transport the file declares ("" when absent or invalid), under
	// the key that dialect uses for it.
	declared     string
	declaredKey  string
	declaredLine int
	declaredBad  bool // present but invalid, and already reported
}

func newServerState(name string, line int, path string) *serverState {
	return &serverState{
		s:       Server{Name: name, Line: line, DefaultTier: "read"},
		path:    path,
		present: make(map[string]int),
	}
}

// checkName validates a server name. The name becomes the default tool
// prefix, so it is held to the characters a tool name may carry.
func (d *decoder) checkName(p pair, path string) bool {
	switch {
	case p.key == "":
		d.errorf(p.keyLine, path, "server name must not be empty")
	case !serverNameRE.MatchString(p.key):
		d.errorf(p.keyLine, path, "invalid server name (want 1 to 64 letters, digits, '_', '.' or '-')")
	default:
		return true
	}
	return false
}

// commonField decodes the fields both dialects share and reports whether key
// was one of them.
func (d *decoder) commonField(st *serverState, p pair) bool {
	path := joinPath(st.path, p.key)
	v := p.value
	switch p.key {
	case "command":
		if s, ok := d.nonEmpty(v, path); ok && d.placeholdersOK(v.line, path, s) {
			st.s.Command = d.resolvePath(v.line, path, s, true)
		}
	case "args":
		if list, ok := d.strList(v, path, false); ok {
			for i, a := range list {
				d.placeholdersOK(v.items[i].line, indexPath(path, i), a)
			}
			st.s.Args = list
		}
	case "env":
		if m, ok := d.strMap(v, path, envNameProblem, placeholderProblem); ok {
			st.s.Env = m
		}
	case "cwd":
		if s, ok := d.nonEmpty(v, path); ok && d.placeholdersOK(v.line, path, s) {
			st.s.Cwd = d.resolvePath(v.line, path, s, false)
		}
	case "url":
		if s, ok := d.nonEmpty(v, path); ok && d.placeholdersOK(v.line, path, s) {
			// A URL built from placeholders can only be checked once
			// expanded, which ExpandServer does.
			if !strings.Contains(s, "$") {
				if msg := urlProblem(s, true); msg != "" {
					d.errorf(v.line, path, "%s", msg)
					break
				}
			}
			st.s.URL = s
		}
	case "headers":
		if m, ok := d.strMap(v, path, headerNameProblem, headerValueProblem); ok {
			st.s.Headers = m
		}
	default:
		return false
	}
	st.present[p.key] = p.keyLine
	return true
}

// settleTransport applies the rules that tie command, url and the declared
// transport together, then rejects fields the chosen transport cannot use.
func (d *decoder) settleTransport(st *serverState, stdioOnly, httpOnly []string) {
	_, hasCommand := st.present["command"]
	_, hasURL := st.present["url"]
	inferred := ""
	switch {
	case hasCommand && hasURL:
		d.errorf(st.s.Line, st.path, `has both "command" (stdio) and "url" (http); keep one`)
		return
	case hasCommand:
		inferred = transportStdio
	case hasURL:
		inferred = transportHTTP
	}
	switch {
	case st.declared == "" && inferred == "":
		if st.declaredBad {
			return
		}
		d.errorf(st.s.Line, st.path, `needs "command" (stdio) or "url" (http)`)
		return
	case inferred == "":
		d.errorf(st.s.Line, st.path, "needs %q (%s is %q)", fieldFor(st.declared), st.declaredKey, st.declared)
		return
	case st.declared != "" && st.declared != inferred:
		d.errorf(st.declaredLine, joinPath(st.path, st.declaredKey), "%q conflicts with %q, which means %s",
			st.declared, fieldFor(inferred), inferred)
		return
	}
	st.s.Transport = inferred
	wrong := httpOnly
	if inferred == transportHTTP {
		wrong = stdioOnly
	}
	for _, f := range wrong {
		if line, ok := st.present[f]; ok {
			other := transportStdio
			if inferred == transportStdio {
				other = transportHTTP
			}
			d.errorf(line, joinPath(st.path, f), "only valid for %s servers, and this server uses %q (%s)",
				other, fieldFor(inferred), inferred)
		}
	}
}

func fieldFor(transport string) string {
	if transport == transportHTTP {
		return "url"
	}
	return "command"
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

// placeholdersOK reports malformed ${...} placeholders at load time, where
// the line is known, rather than at connect time.
func (d *decoder) placeholdersOK(line int, path, s string) bool {
	if msg := placeholderProblem(s); msg != "" {
		d.errorf(line, path, "%s", msg)
		return false
	}
	return true
}

func placeholderProblem(s string) string {
	_, _, err := expand(s, func(string) (string, bool) { return "", true })
	if err != nil {
		return err.Error()
	}
	return ""
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

func headerValueProblem(v string) string {
	if strings.ContainsAny(v, "\r\n\x00") {
		return "header value must not contain line breaks or NUL"
	}
	return placeholderProblem(v)
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
