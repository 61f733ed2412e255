package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		fullYAML,
		fullJSON,
		"",
		"servers: {}",
		"servers:\n  a: {command: x, onlyTools: []}\n",
		`{"mcpServers": {"a": {"command": "x", "disabled": true}}}`,
		`{"mcpServers": {"a": {"type": "sse", "url": "https://h"}}}`,
		"a: &a [*a]\n",
		"{\n\t\"mcpServers\": {\"\\/\": 1}}",
		"servers:\n  a:\n    <<: {command: x}\n",
		// The other shapes.
		`[{"name": "a", "command": "x"}, {"name": "b", "sseUrl": "https://h/sse"}]`,
		"- name: a\n  transport: stdio\n  command: x\n- name: b\n  httpUrl: https://h/\n",
		`{"name": "a", "type": "http", "url": "https://h/", "headers": {"A": "${env:T}"}}`,
		`{"a": {"command": "${workspaceFolder}/x", "envFile": "${userHome}/.env"}, "b": {"url": "https://h/", "disabled": true}}`,
		"{\n // comment\n \"inputs\": [{\"type\": \"promptString\", \"id\": \"k\", \"password\": true}],\n \"servers\": {\"a\": {\"type\": \"stdio\", \"command\": \"x\", \"env\": {\"K\": \"${input:k}\"}, \"dev\": {}}}}",
		"inputs:\n  k: {description: K}\nservers:\n  a:\n    transport: sse\n    url: https://h/\n    headers: {A: '${input:k}'}\n",
		`{"inputs": [], "servers": {"a": {"type": "stdio", "command": "x", "defaultTier": "write"}}}`,
		"servers:\n  a: {command: x}\ngateway:\n  approvals: {write: allow, tools: {a__rm: deny}}\n  tokens:\n    - {sha256: " + strings.Repeat("ab", 32) + ", subject: s, role: r}\n  roles: {r: ['a__*']}\n  resourceURL: https://h/mcp\n  authorizationServers: [https://auth]\n",
		"[1, 2",
		"{\"a\": /* x */ {\"command\": \"y\"}}",
	} {
		f.Add(s)
	}
	known := []string{DialectToolwire, DialectMCPServers, DialectVSCode, DialectList, DialectSingle, DialectNamedMap}
	f.Fuzz(func(t *testing.T, data string) {
		file, err := Parse("fuzz", []byte(data), "/cfg/.vscode")
		if err != nil {
			if file != nil {
				t.Fatalf("File and error both returned")
			}
			// Every reported problem is one line naming the file.
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		if !slices.Contains(known, file.Dialect) {
			t.Fatalf("unknown dialect %q", file.Dialect)
		}
		if len(file.Servers) == 0 {
			t.Fatalf("no servers loaded without an error")
		}
		if len(file.WarningDetails) != len(file.Warnings) {
			t.Fatalf("%d warning details for %d warnings", len(file.WarningDetails), len(file.Warnings))
		}
		seen := map[string]bool{}
		for _, s := range file.Servers {
			if !serverNameRE.MatchString(s.Name) || s.Line < 1 {
				t.Fatalf("bad name or line: %+v", s)
			}
			if seen[s.Name] {
				t.Fatalf("server %q twice", s.Name)
			}
			seen[s.Name] = true
			remote := s.Transport == TransportHTTP || s.Transport == TransportSSE
			if (s.Transport == TransportStdio) == (s.Command == "") || remote == (s.URL == "") {
				t.Fatalf("transport does not match command/url: %+v", s)
			}
			switch s.DefaultTier {
			case "read", "write", "destructive":
			default:
				t.Fatalf("bad default tier: %+v", s)
			}
			for id, in := range s.Inputs {
				if file.Inputs[id] != in {
					t.Fatalf("server input %q not declared in the file: %+v", id, file.Inputs)
				}
			}
		}
		// Whatever loads converts to toolwire's file and back (Marshal
		// checks the round trip itself).
		out, err := Marshal(file)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if _, err := Parse("fuzz-out", out, ""); err != nil {
			t.Fatalf("Marshal output does not parse: %v\n%s", err, out)
		}
	})
}

func FuzzParseEnvFile(f *testing.F) {
	for _, s := range []string{"", "A=1\n", "# c\nexport B='x y'\n", "C=\"a\\nb\" # c\n", "D=\"open\n", "E", "=x", "F=1 #c\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		vars, err := parseEnvFile("f", text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("error %q does not name the file and line", err)
			}
			return
		}
		for k, v := range vars {
			if !validVarName(k) || strings.ContainsRune(v, 0) {
				t.Fatalf("bad variable %q=%q", k, v)
			}
		}
	})
}

// FuzzJSONC checks the JSONC-to-JSON step: it only ever blanks bytes (so
// every line and column stays where it was in the file), never a line
// break, leaves valid JSON untouched, and is idempotent.
func FuzzJSONC(f *testing.F) {
	for _, s := range []string{
		`{"a": [1, 2,], "b": {"c": "d",},}`,
		"// c\n{\"a\": 1 /* x */, \"b\": \"//not, a comment,}\"}",
		`{"s": "\",}", "t": [",]"],}`,
		"{\"a\": [,], \"b\": {,}, \"c\": [1,,]}",
		"/* unterminated",
		"{\"a\": 1,\r\n}\r\n",
		`"\\",]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := string(jsoncToJSON([]byte(in)))
		if len(out) != len(in) {
			t.Fatalf("length %d, want %d", len(out), len(in))
		}
		for i := range len(in) {
			if out[i] != in[i] && (out[i] != ' ' || in[i] == '\n' || in[i] == '\r') {
				t.Fatalf("byte %d: %q became %q", i, in[i], out[i])
			}
		}
		if json.Valid([]byte(in)) && out != in {
			t.Fatalf("valid JSON changed: %q -> %q", in, out)
		}
		if again := string(jsoncToJSON([]byte(out))); again != out {
			t.Fatalf("not idempotent: %q -> %q", out, again)
		}
	})
}
