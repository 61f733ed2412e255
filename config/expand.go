package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Expand resolves ${VAR}, ${VAR:-default} and ${env:VAR} in s using lookup
// (os.LookupEnv in production).
//
// A variable that is unset (lookup false) with no default is an error of
// type *MissingVarError. "$$" is a literal "$"; a "$" not followed by "{" or
// "$" stays literal, so "$5" needs no escaping; an unterminated "${" is an
// error. ${VAR:-default} uses the default when VAR is unset or empty, as a
// shell does. Variable names match [A-Za-z_][A-Za-z0-9_]*; the "env:" form
// exists because VS Code style files write it that way.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	out, _, err := expand(s, lookup)
	return out, err
}

// expand is Expand that also returns the non-empty values that came from
// variables, which are the ones a caller may need to redact.
func expand(s string, lookup func(string) (string, bool)) (string, []string, error) {
	if !strings.Contains(s, "$") {
		return s, nil, nil
	}
	var b strings.Builder
	var used []string
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", nil, fmt.Errorf(`unterminated "${" at byte %d (write "$$" for a literal "$")`, i)
			}
			body := s[i+2 : i+2+end]
			val, fromVar, err := resolveVar(body, lookup)
			if err != nil {
				return "", nil, err
			}
			if fromVar && val != "" {
				used = append(used, val)
			}
			b.WriteString(val)
			i += 2 + end + 1
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), used, nil
}

// resolveVar evaluates the inside of one ${...}; fromVar reports whether the
// value came from lookup rather than from a default written in the file.
func resolveVar(body string, lookup func(string) (string, bool)) (val string, fromVar bool, err error) {
	name, def, hasDef := strings.Cut(body, ":-")
	name = strings.TrimPrefix(name, "env:")
	if !validVarName(name) {
		return "", false, fmt.Errorf("invalid placeholder %q (variable names are letters, digits and '_', not starting with a digit)", "${"+body+"}")
	}
	if hasDef && strings.Contains(def, "${") {
		// The first "}" ends the placeholder, so a nested one would be cut
		// in half; refuse rather than produce a mangled value.
		return "", false, fmt.Errorf("invalid placeholder %q (nested placeholders are not supported)", "${"+body+"}")
	}
	v, ok := lookup(name)
	switch {
	case ok && (v != "" || !hasDef):
		return v, true, nil
	case hasDef:
		return def, false, nil
	}
	return "", false, &MissingVarError{Var: name}
}

func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// ExpandServer returns a copy of s with Expand applied to command, args, env
// values, cwd, url, header values and bearerToken. An error names the server
// and the field, e.g. `server "demo": env.TOKEN: variable DEMO_TOKEN is not
// set`, and every failing field is reported. It also returns the non-empty
// values that came from variables, without duplicates, so callers can redact
// them from logs. The copy shares no slices or maps with s.
func ExpandServer(s Server, lookup func(string) (string, bool)) (Server, []string, error) {
	out := s
	out.Args = slices.Clone(s.Args)
	out.Env = maps.Clone(s.Env)
	out.Headers = maps.Clone(s.Headers)
	out.TierOverrides = maps.Clone(s.TierOverrides)
	out.OnlyTools = slices.Clone(s.OnlyTools)
	out.ExcludeTools = slices.Clone(s.ExcludeTools)

	var errs []error
	var secrets []string
	fail := func(path string, err error) {
		errs = append(errs, fmt.Errorf("server %q: %s: %w", s.Name, path, err))
	}
	field := func(path, v string) string {
		r, used, err := expand(v, lookup)
		if err != nil {
			fail(path, err)
			return v
		}
		for _, u := range used {
			if !slices.Contains(secrets, u) {
				secrets = append(secrets, u)
			}
		}
		return r
	}

	out.Command = field("command", s.Command)
	if s.Command != "" && out.Command == "" {
		fail("command", errors.New("expands to an empty string"))
	}
	for i, a := range s.Args {
		out.Args[i] = field(indexPath("args", i), a)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		out.Env[k] = field(joinPath("env", k), s.Env[k])
	}
	out.Cwd = field("cwd", s.Cwd)
	if s.URL != "" {
		before := len(errs)
		out.URL = field("url", s.URL)
		// Checked again because placeholders may have hidden a bad URL at
		// load time; the value is not shown since it may hold a secret.
		if len(errs) == before && strings.Contains(s.URL, "$") {
			if msg := urlProblem(out.URL, false); msg != "" {
				fail("url", errors.New("after expansion: "+msg))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		out.Headers[k] = field(joinPath("headers", k), s.Headers[k])
		if strings.ContainsAny(out.Headers[k], "\r\n\x00") {
			fail(joinPath("headers", k), errors.New("after expansion: header value contains a line break or NUL"))
		}
	}
	out.BearerToken = field("bearerToken", s.BearerToken)
	if strings.ContainsAny(out.BearerToken, "\r\n\x00") {
		fail("bearerToken", errors.New("after expansion: token contains a line break or NUL"))
	}
	if len(errs) > 0 {
		return Server{}, nil, errors.Join(errs...)
	}
	return out, secrets, nil
}
