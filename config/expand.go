package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
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
// exists because VS Code style files write it that way. An ${input:ID}
// placeholder is a *MissingInputError here: only ExpandServer, given a
// Resolver, can ask for inputs.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	out, _, err := expand(s, lookup, nil)
	return out, err
}

// expand is Expand that also returns the non-empty values that came from
// variables or inputs, which are the ones a caller may need to redact. A nil
// input refuses every ${input:ID}.
func expand(s string, lookup func(string) (string, bool), input func(id string) (string, error)) (string, []string, error) {
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
			val, fromVar, err := resolvePlaceholder(body, lookup, input)
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

// resolvePlaceholder evaluates the inside of one ${...}; fromVar reports
// whether the value came from lookup or input rather than from a default
// written in the file.
func resolvePlaceholder(body string, lookup func(string) (string, bool), input func(string) (string, error)) (val string, fromVar bool, err error) {
	if id, ok := strings.CutPrefix(body, "input:"); ok {
		if !validInputID(id) {
			return "", false, fmt.Errorf("invalid placeholder %q (input IDs are letters, digits, '_', '.' and '-'; inputs take no default)", "${"+body+"}")
		}
		if input == nil {
			return "", false, &MissingInputError{ID: id}
		}
		v, err := input(id)
		return v, err == nil, err
	}
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

func validInputID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c == '_' || c == '-' || c == '.' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')) {
			return false
		}
	}
	return true
}

// Resolver says where ExpandServer finds the values of placeholders.
type Resolver struct {
	// LookupEnv resolves ${VAR} and ${env:VAR}; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Input resolves ${input:ID}, typically by asking on a terminal; in
	// describes the declared input (its ID alone when the server does not
	// carry its declaration). Nil refuses every input with a
	// *MissingInputError. ExpandServer asks once per ID and server;
	// callers expanding several servers should remember answers.
	Input func(id string, in Input) (string, error)
}

// ExpandServer returns a copy of s with placeholders resolved in command,
// args, env values, cwd, url, header values and bearerToken, and with the
// variables of s.EnvFile added to Env (env values written in the file win
// over the env file's). An error names the server and the field, e.g.
// `server "demo": env.TOKEN: variable DEMO_TOKEN is not set`, and every
// failing field is reported. It also returns the non-empty values that came
// from variables, inputs and the env file, without duplicates, so callers
// can redact them from logs. The copy shares no slices or maps with s.
func ExpandServer(s Server, r Resolver) (Server, []string, error) {
	lookup := r.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	out := s
	out.Args = slices.Clone(s.Args)
	out.Env = maps.Clone(s.Env)
	out.Headers = maps.Clone(s.Headers)
	out.TierOverrides = maps.Clone(s.TierOverrides)
	out.OnlyTools = slices.Clone(s.OnlyTools)
	out.ExcludeTools = slices.Clone(s.ExcludeTools)
	out.Inputs = maps.Clone(s.Inputs)
	out.Roots = slices.Clone(s.Roots)

	var errs []error
	var secrets []string
	addSecret := func(v string) {
		if v != "" && !slices.Contains(secrets, v) {
			secrets = append(secrets, v)
		}
	}
	fail := func(path string, err error) {
		errs = append(errs, fmt.Errorf("server %q: %s: %w", s.Name, path, err))
	}

	// Each input is asked for once per server, however many fields use it.
	answers := map[string]string{}
	input := func(id string) (string, error) {
		if v, ok := answers[id]; ok {
			return v, nil
		}
		in, ok := s.Inputs[id]
		if !ok {
			in = Input{ID: id}
		}
		if r.Input == nil {
			return "", &MissingInputError{ID: id, Description: in.Description}
		}
		v, err := r.Input(id, in)
		if err != nil {
			return "", fmt.Errorf("input %q: %w", id, err)
		}
		answers[id] = v
		return v, nil
	}
	field := func(path, v string) string {
		res, used, err := expand(v, lookup, input)
		if err != nil {
			fail(path, err)
			return v
		}
		for _, u := range used {
			addSecret(u)
		}
		return res
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
	if s.EnvFile != "" {
		before := len(errs)
		path := field("envFile", s.EnvFile)
		if len(errs) == before {
			vars, err := readEnvFile(path)
			if err != nil {
				fail("envFile", err)
			}
			for _, k := range slices.Sorted(maps.Keys(vars)) {
				if _, set := s.Env[k]; set {
					continue
				}
				if out.Env == nil {
					out.Env = map[string]string{}
				}
				out.Env[k] = vars[k]
				addSecret(vars[k])
			}
		}
	}
	out.Cwd = field("cwd", s.Cwd)
	if s.URL != "" {
		before := len(errs)
		out.URL = field("url", s.URL)
		// Checked again because placeholders may have hidden a bad URL at
		// load time; the value is not shown since it may hold a secret.
		if len(errs) == before && strings.Contains(s.URL, "$") {
			if msg := serverURLProblem(out.URL, false); msg != "" {
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
	for i, r := range s.Roots {
		path := indexPath("roots", i)
		before := len(errs)
		out.Roots[i] = field(path, r)
		if len(errs) == before {
			if err := checkRoot(out.Roots[i]); err != nil {
				fail(path, err)
			}
		}
	}
	if s.Sandbox != nil {
		sb := *s.Sandbox
		for _, list := range []struct {
			name string
			in   []string
			out  *[]string
		}{{"read", s.Sandbox.Read, &sb.Read}, {"write", s.Sandbox.Write, &sb.Write}} {
			*list.out = slices.Clone(list.in)
			for i, p := range list.in {
				path := indexPath(joinPath("sandbox", list.name), i)
				before := len(errs)
				(*list.out)[i] = field(path, p)
				if msg := sandboxPathProblem((*list.out)[i]); len(errs) == before && msg != "" {
					fail(path, errors.New(msg))
				}
			}
		}
		out.Sandbox = &sb
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

// checkRoot checks an expanded root: an absolute path naming a directory.
func checkRoot(root string) error {
	if msg := rootProblem(root); msg != "" {
		return errors.New(msg)
	}
	info, err := os.Stat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q: no such directory", root)
	case err != nil:
		return err // names the path
	case !info.IsDir():
		return fmt.Errorf("%q is not a directory", root)
	}
	return nil
}

// UnsetVariable is a placeholder that cannot be resolved: its variable is
// unset and it has no default. It names the variable, never a value.
type UnsetVariable struct {
	Field string // the field's path in the server's settings, e.g. "env.TOKEN"
	Var   string
}

// UnsetVariables returns every ${VAR} and ${env:VAR} placeholder of s, in
// the fields ExpandServer expands, whose variable lookup (nil:
// os.LookupEnv) does not know and which has no default: the server would
// fail to start. Inputs are not looked at (they are asked for), nor the
// variables an env file would bring (they do not feed placeholders).
func UnsetVariables(s Server, lookup func(string) (string, bool)) []UnsetVariable {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var out []UnsetVariable
	field := func(path, v string) {
		if !strings.Contains(v, "${") {
			return
		}
		rewritePlaceholders(v, func(body string) (string, bool) {
			if strings.HasPrefix(body, "input:") || strings.Contains(body, ":-") {
				return "", false
			}
			name := strings.TrimPrefix(body, "env:")
			if _, ok := lookup(name); !ok && validVarName(name) && !slices.ContainsFunc(out, func(u UnsetVariable) bool { return u.Field == path && u.Var == name }) {
				out = append(out, UnsetVariable{Field: path, Var: name})
			}
			return "", false
		})
	}
	field("command", s.Command)
	for i, a := range s.Args {
		field(indexPath("args", i), a)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		field(joinPath("env", k), s.Env[k])
	}
	field("envFile", s.EnvFile)
	field("cwd", s.Cwd)
	field("url", s.URL)
	for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
		field(joinPath("headers", k), s.Headers[k])
	}
	field("bearerToken", s.BearerToken)
	return out
}
