package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"HOME": "/home/u", "EMPTY": "", "TOKEN": "s3cret", "A_1": "x"}
	tests := []struct {
		in      string
		want    string
		wantErr string // substring; "" means success
		missing string // the variable a *MissingVarError must name
	}{
		{in: "plain", want: "plain"},
		{in: "", want: ""},
		{in: "${HOME}/bin", want: "/home/u/bin"},
		{in: "a${A_1}b${A_1}", want: "axbx"},
		{in: "${env:TOKEN}", want: "s3cret"},
		{in: "${env:NOPE:-d}", want: "d"},
		{in: "${NOPE:-fallback}", want: "fallback"},
		{in: "${EMPTY:-fallback}", want: "fallback"},
		{in: "${HOME:-fallback}", want: "/home/u"},
		{in: "${NOPE:-}", want: ""},
		{in: "${NOPE:-a:-b}", want: "a:-b"},
		{in: "${EMPTY}", want: ""},
		{in: "$$", want: "$"},
		{in: "$${HOME}", want: "${HOME}"},
		{in: "$$$$", want: "$$"},
		{in: "costs $5", want: "costs $5"},
		{in: "$HOME", want: "$HOME"},
		{in: "trailing $", want: "trailing $"},
		{in: "a$", want: "a$"},
		{in: "$}", want: "$}"},
		{in: "${NOPE}", wantErr: "variable NOPE is not set", missing: "NOPE"},
		{in: "x ${env:NOPE} y", wantErr: "variable NOPE is not set", missing: "NOPE"},
		{in: "${HOME", wantErr: `unterminated "${" at byte 0`},
		{in: "ok ${", wantErr: `unterminated "${" at byte 3`},
		{in: "${}", wantErr: `invalid placeholder "${}"`},
		{in: "${1A}", wantErr: `invalid placeholder "${1A}"`},
		{in: "${A-B}", wantErr: `invalid placeholder "${A-B}"`},
		{in: "${env:}", wantErr: `invalid placeholder "${env:}"`},
		{in: "${A:=x}", wantErr: `invalid placeholder "${A:=x}"`},
		{in: "${NOPE:-${HOME}}", wantErr: "nested placeholders are not supported"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in, lookupIn(env))
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("Expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Expand(%q) error = %v, want containing %q", tt.in, err, tt.wantErr)
			continue
		}
		var mv *MissingVarError
		if isMissing := errors.As(err, &mv); isMissing != (tt.missing != "") || (isMissing && mv.Var != tt.missing) {
			t.Errorf("Expand(%q): MissingVarError = %v (%v), want var %q", tt.in, isMissing, mv, tt.missing)
		}
	}
}

func TestExpandServer(t *testing.T) {
	orig := Server{
		Name:          "demo",
		Transport:     "stdio",
		Command:       "${TOOLS}/srv",
		Args:          []string{"--token=${TOKEN}", "--level=${LEVEL:-info}", "$$literal"},
		Env:           map[string]string{"TOKEN": "${TOKEN}", "PLAIN": "p", "EMPTY": "${EMPTY}"},
		Cwd:           "${HOME}",
		TierOverrides: map[string]string{"t": "write"},
		OnlyTools:     []string{},
		ExcludeTools:  []string{"x"},
	}
	snapshot := orig
	snapshot.Args = append([]string(nil), orig.Args...)
	snapshot.Env = map[string]string{"TOKEN": "${TOKEN}", "PLAIN": "p", "EMPTY": "${EMPTY}"}

	env := map[string]string{"TOOLS": "/opt/t", "TOKEN": "s3cret", "HOME": "/home/u", "EMPTY": ""}
	got, secrets, err := ExpandServer(orig, Resolver{LookupEnv: lookupIn(env)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Command != "/opt/t/srv" || got.Cwd != "/home/u" {
		t.Errorf("command, cwd = %q, %q", got.Command, got.Cwd)
	}
	if want := []string{"--token=s3cret", "--level=info", "$literal"}; !reflect.DeepEqual(got.Args, want) {
		t.Errorf("Args = %q, want %q", got.Args, want)
	}
	if want := map[string]string{"TOKEN": "s3cret", "PLAIN": "p", "EMPTY": ""}; !reflect.DeepEqual(got.Env, want) {
		t.Errorf("Env = %q, want %q", got.Env, want)
	}
	// Values from variables, once each, without the empty one or the
	// default written in the file.
	if want := []string{"/opt/t", "s3cret", "/home/u"}; !reflect.DeepEqual(secrets, want) {
		t.Errorf("secrets = %q, want %q", secrets, want)
	}
	if got.OnlyTools == nil || len(got.OnlyTools) != 0 {
		t.Errorf("OnlyTools = %#v, want non-nil empty kept", got.OnlyTools)
	}

	// The original keeps its placeholders, and the copy shares nothing.
	if !reflect.DeepEqual(orig, snapshot) {
		t.Errorf("original modified:\n got %+v\nwant %+v", orig, snapshot)
	}
	got.Args[0] = "changed"
	got.Env["PLAIN"] = "changed"
	got.TierOverrides["t"] = "destructive"
	got.ExcludeTools[0] = "changed"
	if orig.Args[0] != "--token=${TOKEN}" || orig.Env["PLAIN"] != "p" || orig.TierOverrides["t"] != "write" || orig.ExcludeTools[0] != "x" {
		t.Errorf("copy shares storage with the original: %+v", orig)
	}
}

func TestExpandServerHTTP(t *testing.T) {
	s := Server{
		Name:        "remote",
		Transport:   "http",
		URL:         "${BASE}/mcp",
		Headers:     map[string]string{"X-Key": "${KEY}", "X-Team": "blue"},
		BearerToken: "${TOKEN}",
	}
	env := map[string]string{"BASE": "https://api.example.com", "KEY": "k1", "TOKEN": "t1"}
	got, secrets, err := ExpandServer(s, Resolver{LookupEnv: lookupIn(env)})
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "https://api.example.com/mcp" || got.Headers["X-Key"] != "k1" || got.Headers["X-Team"] != "blue" || got.BearerToken != "t1" {
		t.Errorf("got %+v", got)
	}
	if want := []string{"https://api.example.com", "k1", "t1"}; !reflect.DeepEqual(secrets, want) {
		t.Errorf("secrets = %q, want %q", secrets, want)
	}
}

func TestExpandServerErrors(t *testing.T) {
	tests := []struct {
		desc    string
		s       Server
		env     map[string]string
		want    string
		missing []string
	}{
		{
			desc: "missing env variable",
			s:    Server{Name: "demo", Command: "x", Env: map[string]string{"TOKEN": "${DEMO_TOKEN}"}},
			want: `server "demo": env.TOKEN: variable DEMO_TOKEN is not set`, missing: []string{"DEMO_TOKEN"},
		},
		{
			desc: "every failing field, in field order",
			s: Server{Name: "demo", Command: "${CMD}", Args: []string{"ok", "${A}"},
				Headers: map[string]string{"X-B": "${B}", "X-A": "${A"}, BearerToken: "${T}"},
			want: `server "demo": command: variable CMD is not set
server "demo": args[1]: variable A is not set
server "demo": headers.X-A: unterminated "${" at byte 0 (write "$$" for a literal "$")
server "demo": headers.X-B: variable B is not set
server "demo": bearerToken: variable T is not set`,
			missing: []string{"CMD"},
		},
		{
			desc: "command expands to nothing",
			s:    Server{Name: "demo", Command: "${CMD}"},
			env:  map[string]string{"CMD": ""},
			want: `server "demo": command: expands to an empty string`,
		},
		{
			desc: "bad url after expansion does not show the value",
			s:    Server{Name: "r", URL: "${BASE}/mcp"},
			env:  map[string]string{"BASE": "ftp://user:hunter2@h"},
			want: `server "r": url: after expansion: scheme "ftp" is not allowed; want https, or http to a loopback address`,
		},
		{
			desc: "plain http to a remote host after expansion",
			s:    Server{Name: "r", URL: "${BASE}/mcp"},
			env:  map[string]string{"BASE": "http://example.com"},
			want: `server "r": url: after expansion: plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost); use https`,
		},
		{
			desc: "header value with a line break",
			s:    Server{Name: "r", URL: "https://h/", Headers: map[string]string{"X": "${V}"}},
			env:  map[string]string{"V": "a\r\nInjected: 1"},
			want: `server "r": headers.X: after expansion: header value contains a line break or NUL`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, secrets, err := ExpandServer(tt.s, Resolver{LookupEnv: lookupIn(tt.env)})
			if err == nil {
				t.Fatalf("ExpandServer succeeded: %+v", got)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tt.want)
			}
			if got.Name != "" || secrets != nil {
				t.Errorf("failed expansion returned data: %+v, %q", got, secrets)
			}
			var mv *MissingVarError
			if ok := errors.As(err, &mv); ok != (len(tt.missing) > 0) || (ok && mv.Var != tt.missing[0]) {
				t.Errorf("errors.As MissingVarError = %v, %+v; want %v", ok, mv, tt.missing)
			}
		})
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "plain", "$", "$$", "${A}", "${A:-d}", "${env:A}", "${", "$5", "${A:-${B}}", "a$${b}c", "${EMPTY:-x}",
		"${input:k}", "a${input:a-b.c}b${A}", "${input:}", "${input:k:-d}", "$${input:k}"} {
		f.Add(s)
	}
	env := map[string]string{"A": "va", "B": "", "EMPTY": ""}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Expand(s, lookupIn(env))
		if !strings.Contains(s, "$") && (err != nil || got != s) {
			t.Fatalf("Expand(%q) = %q, %v; input without $ must come back unchanged", s, got, err)
		}
		if err != nil {
			return
		}
		// With every variable known, a successful expansion under one
		// lookup must also succeed when all variables are set.
		if _, err := Expand(s, func(string) (string, bool) { return "v", true }); err != nil {
			t.Fatalf("Expand(%q) succeeded with some variables but failed with all: %v", s, err)
		}
	})
}

// FuzzExpandServerInputs checks that inputs and variables resolve the same
// way inside a server, and that every value that came from an input is in
// the secrets.
func FuzzExpandServerInputs(f *testing.F) {
	for _, s := range []string{"${input:k}", "x${input:k}y${A}", "${input:k}${input:k}", "$${input:k}", "${input:bad id}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		srv := Server{Name: "f", Command: "c", Env: map[string]string{"V": s}}
		out, secrets, err := ExpandServer(srv, Resolver{
			LookupEnv: lookupIn(map[string]string{"A": "va"}),
			Input:     func(id string, _ Input) (string, error) { return "in-" + id, nil },
		})
		if err != nil {
			return
		}
		if strings.Contains(s, "${input:") && !strings.Contains(s, "$${input:") && !strings.Contains(out.Env["V"], "in-") {
			t.Fatalf("input not resolved in %q: %q", s, out.Env["V"])
		}
		for _, v := range secrets {
			if !strings.Contains(out.Env["V"], v) {
				t.Fatalf("secret %q is not in the value %q", v, out.Env["V"])
			}
		}
	})
}

func TestUnsetVariables(t *testing.T) {
	t.Parallel()
	s := Server{
		Name: "db", Command: "${BIN}/db", Args: []string{"--dsn=${DSN}", "${MODE:-ro}", "$${LITERAL}", "${input:key}"},
		Env: map[string]string{"TOKEN": "${env:DB_TOKEN}", "EMPTY": "${SET_BUT_EMPTY}", "HOME": "${HOME}"},
		URL: "", Headers: map[string]string{"X-Key": "${KEY}${KEY}"},
		BearerToken: "${BEARER}",
	}
	env := map[string]string{"BIN": "/usr/bin", "SET_BUT_EMPTY": "", "HOME": "/home/u"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got := UnsetVariables(s, lookup)
	want := []UnsetVariable{
		{"args[0]", "DSN"},
		{"env.TOKEN", "DB_TOKEN"},
		{"headers.X-Key", "KEY"},
		{"bearerToken", "BEARER"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UnsetVariables = %+v\nwant %+v", got, want)
	}
	// Each one is what ExpandServer would stop at.
	_, _, err := ExpandServer(s, Resolver{LookupEnv: lookup, Input: func(string, Input) (string, error) { return "k", nil }})
	for _, u := range want {
		if err == nil || !strings.Contains(err.Error(), u.Field+": variable "+u.Var) {
			t.Errorf("ExpandServer does not fail on %s (%s): %v", u.Field, u.Var, err)
		}
	}
	env["DSN"], env["DB_TOKEN"], env["KEY"], env["BEARER"] = "d", "t", "k", "b"
	if got := UnsetVariables(s, lookup); len(got) != 0 {
		t.Errorf("with every variable set: %+v", got)
	}
}
