package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const fullYAML = `# every toolwire field, servers deliberately not in alphabetical order
servers:
  zeta:
    command: ./bin/demoserver
    args: ["-x", "--flag=${FLAG:-on}"]
    env: {LOG_LEVEL: debug, TOKEN: "${DEMO_TOKEN}"}
    cwd: ./work
    prefix: z
    defaultTier: write
    tierOverrides: {write_note: write, delete_note: destructive, read_note: read}
    onlyTools: [echo, add]
    excludeTools: [fail]
    timeout: 1m30s
    required: true
    transport: stdio
  alpha:
    url: http://127.0.0.1:8080/mcp
    headers: {X-Team: blue}
    bearerToken: "${REMOTE_TOKEN}"
    transport: http
  mid:
    command: npx
audit:
  file: toolwire-audit.jsonl
  logArguments: true
`

// fullJSON is fullYAML in JSON, tab-indented as many editors write it.
const fullJSON = "{\n" +
	"\t\"servers\": {\n" +
	"\t\t\"zeta\": {\n" +
	"\t\t\t\"command\": \".\\/bin\\/demoserver\",\n" +
	"\t\t\t\"args\": [\"-x\", \"--flag=${FLAG:-on}\"],\n" +
	"\t\t\t\"env\": {\"LOG_LEVEL\": \"debug\", \"TOKEN\": \"${DEMO_TOKEN}\"},\n" +
	"\t\t\t\"cwd\": \"./work\",\n" +
	"\t\t\t\"prefix\": \"z\",\n" +
	"\t\t\t\"defaultTier\": \"write\",\n" +
	"\t\t\t\"tierOverrides\": {\"write_note\": \"write\", \"delete_note\": \"destructive\", \"read_note\": \"read\"},\n" +
	"\t\t\t\"onlyTools\": [\"echo\", \"add\"],\n" +
	"\t\t\t\"excludeTools\": [\"fail\"],\n" +
	"\t\t\t\"timeout\": \"1m30s\",\n" +
	"\t\t\t\"required\": true,\n" +
	"\t\t\t\"transport\": \"stdio\"\n" +
	"\t\t},\n" +
	"\t\t\"alpha\": {\n" +
	"\t\t\t\"url\": \"http://127.0.0.1:8080/mcp\",\n" +
	"\t\t\t\"headers\": {\"X-Team\": \"blue\"},\n" +
	"\t\t\t\"bearerToken\": \"${REMOTE_TOKEN}\",\n" +
	"\t\t\t\"transport\": \"http\"\n" +
	"\t\t},\n" +
	"\t\t\"mid\": {\"command\": \"npx\"}\n" +
	"\t},\n" +
	"\t\"audit\": {\"file\": \"toolwire-audit.jsonl\", \"logArguments\": true}\n" +
	"}\n"

func wantFull(path string, zetaLine, alphaLine, midLine int) *File {
	return &File{
		Path:    path,
		Dialect: "toolwire",
		Servers: []Server{
			{
				Name:          "zeta",
				Line:          zetaLine,
				Transport:     "stdio",
				Command:       "/cfg/bin/demoserver",
				Args:          []string{"-x", "--flag=${FLAG:-on}"},
				Env:           map[string]string{"LOG_LEVEL": "debug", "TOKEN": "${DEMO_TOKEN}"},
				Cwd:           "/cfg/work",
				Prefix:        "z",
				DefaultTier:   "write",
				TierOverrides: map[string]string{"write_note": "write", "delete_note": "destructive", "read_note": "read"},
				OnlyTools:     []string{"echo", "add"},
				ExcludeTools:  []string{"fail"},
				Timeout:       90 * time.Second,
				Required:      true,
			},
			{
				Name:        "alpha",
				Line:        alphaLine,
				Transport:   "http",
				URL:         "http://127.0.0.1:8080/mcp",
				Headers:     map[string]string{"X-Team": "blue"},
				BearerToken: "${REMOTE_TOKEN}",
				DefaultTier: "read", DefaultTierImplied: true,
			},
			{Name: "mid", Line: midLine, Transport: "stdio", Command: "npx", DefaultTier: "read", DefaultTierImplied: true},
		},
		Audit: Audit{File: "/cfg/toolwire-audit.jsonl", LogArguments: true},
	}
}

func TestParseToolwireEveryField(t *testing.T) {
	tests := []struct {
		name string
		data string
		want *File
	}{
		{"toolwire.yaml", fullYAML, wantFull("toolwire.yaml", 3, 16, 21)},
		{"toolwire.json", fullJSON, wantFull("toolwire.json", 3, 17, 23)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.name, []byte(tt.data), "/cfg")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got.DialectReason = "" // TestDialectReasons
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse mismatch\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseHostEveryField(t *testing.T) {
	const data = `{
  "numStartups": 3,
  "projects": {"/x": {"mcpServers": {"ignored": {"bogus": 1}}}},
  "mcpServers": {
    "files": {
      "command": "node",
      "args": ["./server.js", "--root=${HOME}"],
      "env": {"DEBUG": "1"},
      "cwd": "srv"
    },
    "typed-stdio": {"type": "stdio", "command": "./run.sh"},
    "remote": {
      "type": "http",
      "url": "https://example.com/mcp",
      "headers": {"Authorization": "Bearer ${TOKEN}"}
    },
    "streamable": {"type": "streamable-http", "url": "https://example.com/s"},
    "untyped": {"url": "http://localhost:9000/mcp"}
  }
}`
	got, err := Parse("claude.json", []byte(data), "/home/u")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &File{
		Path:          "claude.json",
		Dialect:       "mcpServers",
		DialectReason: `it has an "mcpServers" map`,
		Servers: []Server{
			{Name: "files", Line: 5, Transport: "stdio", Command: "node",
				Args: []string{"./server.js", "--root=${HOME}"}, Env: map[string]string{"DEBUG": "1"},
				Cwd: "/home/u/srv", DefaultTier: "write", DefaultTierImplied: true},
			{Name: "typed-stdio", Line: 11, Transport: "stdio", Command: "/home/u/run.sh", DefaultTier: "write", DefaultTierImplied: true},
			{Name: "remote", Line: 12, Transport: "http", URL: "https://example.com/mcp",
				Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}, DefaultTier: "write", DefaultTierImplied: true},
			{Name: "streamable", Line: 17, Transport: "http", URL: "https://example.com/s", DefaultTier: "write", DefaultTierImplied: true},
			{Name: "untyped", Line: 18, Transport: "http", URL: "http://localhost:9000/mcp", DefaultTier: "write", DefaultTierImplied: true},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse mismatch\n got %+v\nwant %+v", got, want)
	}
}

func TestParseHostWarnings(t *testing.T) {
	const data = `{
  "servers": {"old": {}},
  "mcpServers": {
    "a": {
      "command": "x",
      "disabled": true,
      "autoApprove": ["t"],
      "alwaysAllow": [],
      "timeout": 60,
      "description": "d",
      "envFile": ".env"
    },
    "b": {
      "url": "https://e.com/mcp",
      "oauth": {"clientId": "c"},
      "headersHelper": "get-headers.sh",
      "disabled": false
    }
  }
}`
	f, err := Parse("cursor.json", []byte(data), "")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []string{
		`cursor.json:2: servers: ignored because this file has "mcpServers"; toolwire reads only "mcpServers" from such files`,
		`cursor.json:6: mcpServers.a.disabled: the server is disabled and will not be started`,
		`cursor.json:7: mcpServers.a.autoApprove: ignored (a host approval list; toolwire uses tiers instead)`,
		`cursor.json:8: mcpServers.a.alwaysAllow: ignored (a host approval list; toolwire uses tiers instead)`,
		`cursor.json:9: mcpServers.a.timeout: ignored (host timeouts use different units; toolwire uses its default request timeout)`,
		`cursor.json:10: mcpServers.a.description: ignored (descriptive only)`,
		`cursor.json:15: mcpServers.b.oauth: ignored (OAuth is not supported yet, so requests are sent without it)`,
		`cursor.json:16: mcpServers.b.headersHelper: ignored (toolwire does not run header helper commands, so those headers are not sent)`,
	}
	if !reflect.DeepEqual(f.Warnings, want) {
		t.Errorf("warnings:\n got %q\nwant %q", f.Warnings, want)
	}
	if len(f.Servers) != 2 || f.Servers[0].Command != "x" || f.Servers[1].URL != "https://e.com/mcp" {
		t.Fatalf("servers not loaded despite ignorable fields: %+v", f.Servers)
	}
	// disabled is honoured: the server stays listed, marked; false is silent.
	if !f.Servers[0].Disabled || f.Servers[1].Disabled {
		t.Errorf("Disabled = %v, %v; want true, false", f.Servers[0].Disabled, f.Servers[1].Disabled)
	}
	if f.Servers[0].EnvFile != ".env" {
		t.Errorf("EnvFile = %q, want .env kept for ExpandServer", f.Servers[0].EnvFile)
	}
	// The details match the texts and say which server each is about.
	if len(f.WarningDetails) != len(want) {
		t.Fatalf("%d details for %d warnings", len(f.WarningDetails), len(want))
	}
	for i, w := range f.WarningDetails {
		if w.Text != want[i] {
			t.Errorf("detail %d text = %q, want %q", i, w.Text, want[i])
		}
	}
	if w := f.WarningDetails[0]; w.Server != "" || w.Field != "servers" || w.Line != 2 {
		t.Errorf("file-level warning = %+v", w)
	}
	if w := f.WarningDetails[2]; w.Server != "a" || w.Field != "autoApprove" || w.Line != 7 ||
		w.Message != "ignored (a host approval list; toolwire uses tiers instead)" {
		t.Errorf("server warning = %+v", w)
	}
}

func TestParseToolwireHasNoWarnings(t *testing.T) {
	f, err := Parse("t.yaml", []byte(fullYAML), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if f.Warnings != nil {
		t.Errorf("Warnings = %q, want nil", f.Warnings)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		desc string
		name string
		data string
		want string
	}{
		// Unknown fields, at every level and in both formats.
		{"unknown top-level field", "toolwire.yaml", "servers:\n  a: {command: x}\nextra: 1\n",
			"toolwire.yaml:3: extra: unknown field"},
		{"unknown server field", "toolwire.yaml", "servers:\n  demo:\n    command: x\n    colour: red\n",
			"toolwire.yaml:4: servers.demo.colour: unknown field"},
		{"misspelt server field", "toolwire.yaml", "servers:\n  demo:\n    command: x\n    default_tier: read\n",
			`toolwire.yaml:4: servers.demo.default_tier: unknown field (did you mean "defaultTier"?)`},
		{"unknown audit field", "toolwire.yaml", "servers:\n  a: {command: x}\naudit:\n  file: a\n  rotate: true\n",
			"toolwire.yaml:5: audit.rotate: unknown field"},
		{"unknown field in toolwire JSON", "toolwire.json", "{\n  \"servers\": {\n    \"demo\": {\n      \"command\": \"x\",\n      \"colour\": 1\n    }\n  }\n}",
			"toolwire.json:5: servers.demo.colour: unknown field"},
		{"unknown field in tab-indented JSON", "claude.json", "{\n\t\"mcpServers\": {\n\t\t\"x\": {\n\t\t\t\"command\": \"a\",\n\n\t\t\t\"colour\": 1\n\t\t}\n\t}\n}",
			"claude.json:6: mcpServers.x.colour: unknown field"},
		{"unknown field in one-line JSON", "claude.json", `{"mcpServers": {"x": {"command": "a", "colour": 1}}}`,
			"claude.json:1: mcpServers.x.colour: unknown field"},
		{"unknown field in CRLF JSON after escapes", "claude.json", "{\r\n\"mcpServers\": {\r\n\"x\": {\"command\": \"a\\/\\u00e9\\n\",\r\n\"bearerToken\": \"t\"}}}",
			"claude.json:4: mcpServers.x.bearerToken: unknown field"},

		// Transport rules.
		{"missing command and url", "toolwire.yaml", "servers:\n  a:\n    prefix: p\n",
			`toolwire.yaml:2: servers.a: needs "command" (stdio) or "url" (http)`},
		{"missing command and url in host file", "claude.json", "{\"mcpServers\": {\n  \"x\": {}\n}}",
			`claude.json:2: mcpServers.x: needs "command" (stdio) or "url" (http)`},
		{"declared http without url", "toolwire.yaml", "servers:\n  a:\n    transport: http\n",
			`toolwire.yaml:2: servers.a: needs "url" (transport is "http")`},
		{"both command and url", "toolwire.yaml", "servers:\n  a:\n    command: x\n    url: https://h/\n",
			`toolwire.yaml:2: servers.a: has both "command" (stdio) and "url" (http); keep one`},
		{"transport disagrees", "toolwire.yaml", "servers:\n  a:\n    url: https://h/\n    transport: stdio\n",
			`toolwire.yaml:4: servers.a.transport: "stdio" conflicts with "url", which means http`},
		{"host type disagrees", "claude.json", "{\"mcpServers\": {\"x\": {\n\"command\": \"c\",\n\"type\": \"http\"}}}",
			`claude.json:3: mcpServers.x.type: "http" conflicts with "command", which means stdio`},
		{"unknown transport", "toolwire.yaml", "servers:\n  a:\n    command: x\n    transport: ws\n",
			`toolwire.yaml:4: servers.a.transport: unknown transport "ws" (want "stdio", "http" or "sse")`},
		{"sse transport with a command", "toolwire.yaml", "servers:\n  a:\n    command: x\n    transport: sse\n",
			`toolwire.yaml:4: servers.a.transport: "sse" conflicts with "command", which means stdio`},
		{"toolwire has no streamable-http", "toolwire.yaml", "servers:\n  a:\n    url: https://h/\n    transport: streamable-http\n",
			`toolwire.yaml:4: servers.a.transport: unknown transport "streamable-http" (want "stdio", "http" or "sse")`},
		{"unknown host type", "claude.json", "{\"mcpServers\": {\"x\": {\"type\": \"ws\", \"url\": \"https://h/\"}}}",
			`claude.json:1: mcpServers.x.type: unknown type "ws" (want "stdio", "http", "streamable-http" or "sse")`},
		{"args on http server", "toolwire.yaml", "servers:\n  a:\n    url: https://h/\n    args: [x]\n",
			`toolwire.yaml:4: servers.a.args: only valid for stdio servers, and this server uses "url" (http)`},
		{"cwd on http server", "toolwire.yaml", "servers:\n  a:\n    url: https://h/\n    cwd: /tmp\n",
			`toolwire.yaml:4: servers.a.cwd: only valid for stdio servers, and this server uses "url" (http)`},
		{"bearerToken on stdio server", "toolwire.yaml", "servers:\n  a:\n    command: x\n    bearerToken: t\n",
			`toolwire.yaml:4: servers.a.bearerToken: only valid for http and sse servers, and this server uses "command" (stdio)`},
		{"headers on host stdio server", "claude.json", "{\"mcpServers\": {\"x\": {\"command\": \"c\",\n\"headers\": {\"A\": \"b\"}}}}",
			`claude.json:2: mcpServers.x.headers: only valid for http and sse servers, and this server uses "command" (stdio)`},

		// Values.
		{"bad tier", "toolwire.yaml", "servers:\n  demo:\n    command: x\n\n\n\n    defaultTier: admin\n",
			`toolwire.yaml:7: servers.demo.defaultTier: unknown tier "admin" (want read, write or destructive)`},
		{"tier is case-sensitive", "toolwire.yaml", "servers:\n  a:\n    command: x\n    tierOverrides:\n      rm: Destructive\n",
			`toolwire.yaml:5: servers.a.tierOverrides.rm: unknown tier "Destructive" (want read, write or destructive)`},
		{"empty override key", "toolwire.yaml", "servers:\n  a:\n    command: x\n    tierOverrides:\n      \"\": write\n",
			`toolwire.yaml:5: servers.a.tierOverrides[""]: empty tool name`},
		{"unparsable timeout", "toolwire.yaml", "servers:\n  a:\n    command: x\n    timeout: soon\n",
			`toolwire.yaml:4: servers.a.timeout: invalid duration "soon" (want a Go duration such as "30s" or "2m")`},
		{"zero timeout", "toolwire.yaml", "servers:\n  a:\n    command: x\n    timeout: 0s\n",
			`toolwire.yaml:4: servers.a.timeout: must be greater than zero, got "0s"`},
		{"negative timeout", "toolwire.yaml", "servers:\n  a:\n    command: x\n    timeout: -5s\n",
			`toolwire.yaml:4: servers.a.timeout: must be greater than zero, got "-5s"`},
		{"number timeout", "toolwire.yaml", "servers:\n  a:\n    command: x\n    timeout: 30\n",
			`toolwire.yaml:4: servers.a.timeout: want a duration such as "30s", got integer 30`},
		{"unquoted number in env", "toolwire.yaml", "servers:\n  a:\n    command: x\n    env:\n      PORT: 8080\n",
			`toolwire.yaml:5: servers.a.env.PORT: want a string, got integer 8080 (put it in quotes)`},
		{"required not a bool", "toolwire.yaml", "servers:\n  a:\n    command: x\n    required: yes\n",
			`toolwire.yaml:4: servers.a.required: want true or false, got string "yes"`},
		{"args not a list", "toolwire.yaml", "servers:\n  a:\n    command: x\n    args: -v\n",
			`toolwire.yaml:4: servers.a.args: want a list of strings, got string "-v"`},
		{"empty command", "toolwire.yaml", "servers:\n  a:\n    command: \"\"\n",
			`toolwire.yaml:3: servers.a.command: must not be empty`},
		{"null onlyTools", "toolwire.yaml", "servers:\n  a:\n    command: x\n    onlyTools:\n",
			`toolwire.yaml:4: servers.a.onlyTools: null is ambiguous: write [] for no tools, or remove the field for all tools`},
		{"empty tool name", "toolwire.yaml", "servers:\n  a:\n    command: x\n    excludeTools: [ok, \"\"]\n",
			`toolwire.yaml:4: servers.a.excludeTools[1]: must not be empty`},
		{"bad prefix", "toolwire.yaml", "servers:\n  a:\n    command: x\n    prefix: has space\n",
			`toolwire.yaml:4: servers.a.prefix: invalid prefix "has space" (want 1 to 64 letters, digits, '_', '.' or '-')`},
		{"bad url scheme", "toolwire.yaml", "servers:\n  a:\n    url: ftp://h/x\n",
			`toolwire.yaml:3: servers.a.url: "ftp://h/x": scheme "ftp" is not allowed; want https, or http to a loopback address`},
		{"bad header name", "toolwire.yaml", "servers:\n  a:\n    url: https://h/\n    headers:\n      \"X Team\": blue\n",
			`toolwire.yaml:5: servers.a.headers["X Team"]: invalid header name (character ' ' is not allowed)`},
		{"env name with =", "claude.json", "{\"mcpServers\": {\"x\": {\"command\": \"c\", \"env\": {\n\"A=B\": \"1\"}}}}",
			`claude.json:2: mcpServers.x.env["A=B"]: variable name must not contain "=" or NUL`},
		{"tilde path", "toolwire.yaml", "servers:\n  a:\n    command: ~/bin/srv\n",
			`toolwire.yaml:3: servers.a.command: "~" is not expanded here; write ${HOME} instead`},
		{"unterminated placeholder", "toolwire.yaml", "servers:\n  a:\n    command: x\n    env:\n      TOKEN: \"${TOKEN\"\n",
			`toolwire.yaml:5: servers.a.env.TOKEN: unterminated "${" at byte 0 (write "$$" for a literal "$")`},
		{"bad placeholder name", "toolwire.yaml", "servers:\n  a:\n    command: x\n    args: [\"${1X}\"]\n",
			`toolwire.yaml:4: servers.a.args[0]: invalid placeholder "${1X}" (variable names are letters, digits and '_', not starting with a digit)`},

		// Names and structure.
		{"invalid server name", "toolwire.yaml", "servers:\n  a:\n    command: x\n  bad/name:\n    command: x\n",
			`toolwire.yaml:4: servers["bad/name"]: invalid server name (want 1 to 64 letters, digits, '_', '.' or '-')`},
		{"empty server name", "claude.json", "{\"mcpServers\": {\"\": {\"command\": \"c\"}}}",
			`claude.json:1: mcpServers[""]: server name must not be empty`},
		{"name too long", "toolwire.yaml", "servers:\n  " + strings.Repeat("n", 65) + ":\n    command: x\n",
			`toolwire.yaml:2: servers.` + strings.Repeat("n", 65) + `: invalid server name (want 1 to 64 letters, digits, '_', '.' or '-')`},
		{"duplicate server", "toolwire.yaml", "servers:\n  a:\n    command: x\n  a:\n    command: y\n",
			`toolwire.yaml:4: servers.a: duplicate server name "a" (first defined on line 2)`},
		{"duplicate server in JSON", "claude.json", "{\"mcpServers\": {\n\"a\": {\"command\": \"x\"},\n\"a\": {\"command\": \"y\"}}}",
			`claude.json:3: mcpServers.a: duplicate server name "a" (first defined on line 2)`},
		{"no servers", "toolwire.yaml", "servers: {}\n",
			`toolwire.yaml:1: servers: no servers defined`},
		{"no host servers", "claude.json", "{\n\"mcpServers\": {}}",
			`claude.json:2: mcpServers: no servers defined`},
		{"servers not a map", "toolwire.yaml", "servers:\n  - a\n",
			`toolwire.yaml:2: servers: want a map of servers, got a list`},
		{"server not a map", "toolwire.yaml", "servers:\n  a: npx\n",
			`toolwire.yaml:2: servers.a: want a map of server settings, got string "npx"`},
		{"neither dialect", "x.yaml", "\n\nfoo: 1\n",
			`x.yaml:3: no configuration found: ` + shapesAccepted},
		{"top level list of strings", "x.yaml", "- a\n",
			`x.yaml:1: no configuration found in a list: ` + shapesAccepted},
		{"top level string", "x.yaml", "hello\n",
			`x.yaml:1: no configuration found in string "hello": ` + shapesAccepted},
		{"misspelt servers", "x.yaml", "server:\n  a: {command: x}\n",
			`x.yaml:1: server: unknown key (did you mean "servers"?); no configuration found: ` + shapesAccepted},
		{"merge key", "toolwire.yaml", "base: &b {command: x}\nservers:\n  a:\n    <<: *b\n",
			`toolwire.yaml:1: base: unknown field
toolwire.yaml:3: servers.a: needs "command" (stdio) or "url" (http)
toolwire.yaml:4: servers.a["<<"]: YAML merge keys are not supported; repeat the settings instead`},

		// Broken files.
		{"empty file", "e.yaml", "", "e.yaml: file is empty"},
		{"blank file", "e.json", " \n\t\n", "e.json: file is empty"},
		{"comments only", "e.yaml", "# nothing yet\n", "e.yaml: file is empty"},
		{"no name", "", "", "file is empty"},
		{"malformed YAML", "bad.yaml", "servers:\n  a:\n    command: [x\n", "bad.yaml:3:14: invalid YAML: did not find expected ',' or ']'"},
		{"malformed JSON", "bad.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",,}\n  }\n}",
			`bad.json:3:26: invalid JSON: invalid character ',' looking for beginning of object key string`},
		{"truncated JSON", "bad.json", "{\n  \"mcpServers\": {\n", "bad.json:2:18: invalid JSON: unexpected end of file"},
		{"trailing JSON", "bad.json", "{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}\n{}", `bad.json:2:1: invalid JSON: unexpected data after the top-level value`},
		{"two YAML documents", "two.yaml", "servers:\n  a: {command: x}\n---\nservers: {}\n",
			"two.yaml:3:1: a second YAML document starts here; toolwire reads one document per file"},
		{"second document after an empty one", "two.yaml", "servers:\n  a: {command: x}\n---\n---\nb: 1\n",
			"two.yaml:4:1: a second YAML document starts here; toolwire reads one document per file"},
		{"no name in error", "", "servers:\n  a:\n    colour: red\n    command: x\n", "line 3: servers.a.colour: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, err := Parse(tt.name, []byte(tt.data), "/cfg")
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want error %q", f, tt.want)
			}
			if f != nil {
				t.Errorf("Parse returned a File alongside an error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// The merge-key case above shows one shape; this checks the general promise:
// all problems are reported, one per line, in file order.
func TestParseReportsAllErrorsInFileOrder(t *testing.T) {
	const data = `servers:
  a:
    colour: red
    defaultTier: admin
  b:
    command: x
    timeout: never
audit:
  logArguments: maybe
`
	_, err := Parse("t.yaml", []byte(data), "")
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	want := []string{
		`t.yaml:2: servers.a: needs "command" (stdio) or "url" (http)`,
		`t.yaml:3: servers.a.colour: unknown field`,
		`t.yaml:4: servers.a.defaultTier: unknown tier "admin" (want read, write or destructive)`,
		`t.yaml:7: servers.b.timeout: invalid duration "never" (want a Go duration such as "30s" or "2m")`,
		`t.yaml:9: audit.logArguments: want true or false, got string "maybe"`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got %q\nwant %q", got, want)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != len(want) {
		t.Errorf("error is not an errors.Join of %d errors: %T", len(want), err)
	}
}

func TestOnlyToolsEmptyVersusAbsent(t *testing.T) {
	tests := []struct {
		desc    string
		data    string
		wantNil bool
		wantLen int
	}{
		{"absent means all tools", "servers:\n  a:\n    command: x\n", true, 0},
		{"empty YAML list means no tools", "servers:\n  a:\n    command: x\n    onlyTools: []\n", false, 0},
		{"empty JSON list means no tools", `{"servers": {"a": {"command": "x", "onlyTools": []}}}`, false, 0},
		{"listed tools", "servers:\n  a:\n    command: x\n    onlyTools: [t1, t2]\n", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, err := Parse("t", []byte(tt.data), "")
			if err != nil {
				t.Fatal(err)
			}
			got := f.Servers[0].OnlyTools
			if (got == nil) != tt.wantNil || len(got) != tt.wantLen {
				t.Errorf("OnlyTools = %#v, want nil=%v len=%d", got, tt.wantNil, tt.wantLen)
			}
		})
	}
}

func TestRelativePaths(t *testing.T) {
	tests := []struct {
		desc        string
		dir         string
		command     string
		cwd         string
		wantCommand string
		wantCwd     string
	}{
		{"dot-slash command", "/cfg", "./bin/x", "", "/cfg/bin/x", ""},
		{"command with a slash", "/cfg", "bin/x", "", "/cfg/bin/x", ""},
		{"parent command", "/cfg/sub", "../bin/x", "", "/cfg/bin/x", ""},
		{"bare name is looked up in PATH", "/cfg", "npx", "", "npx", ""},
		{"absolute command", "/cfg", "/usr/bin/x", "", "/usr/bin/x", ""},
		{"placeholder command", "/cfg", "${TOOLS}/x", "", "${TOOLS}/x", ""},
		{"relative cwd", "/cfg", "x", "work", "x", "/cfg/work"},
		{"dot cwd", "/cfg", "x", ".", "x", "/cfg"},
		{"absolute cwd", "/cfg", "x", "/srv", "x", "/srv"},
		{"no dir leaves paths alone", "", "./bin/x", "./work", "./bin/x", "./work"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			data := "servers:\n  a:\n    command: " + `"` + tt.command + `"` + "\n"
			if tt.cwd != "" {
				data += "    cwd: " + tt.cwd + "\n"
			}
			f, err := Parse("t.yaml", []byte(data), tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			s := f.Servers[0]
			if s.Command != filepath.FromSlash(tt.wantCommand) || s.Cwd != filepath.FromSlash(tt.wantCwd) {
				t.Errorf("command, cwd = %q, %q; want %q, %q", s.Command, s.Cwd, tt.wantCommand, tt.wantCwd)
			}
		})
	}
}

func TestLoadResolvesAgainstFileDirectory(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "conf")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "toolwire.yaml")
	data := "servers:\n  a:\n    command: ./bin/x\n    cwd: work\naudit:\n  file: logs/audit.jsonl\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	// A relative path to Load must still give absolute results, because the
	// server may be started from another directory.
	t.Chdir(dir)
	f, err := Load(filepath.Join("conf", "toolwire.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != filepath.Join("conf", "toolwire.yaml") {
		t.Errorf("Path = %q, want the path as given", f.Path)
	}
	realSub, err := filepath.Abs("conf")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(realSub, "bin", "x"); f.Servers[0].Command != want {
		t.Errorf("Command = %q, want %q", f.Servers[0].Command, want)
	}
	if want := filepath.Join(realSub, "work"); f.Servers[0].Cwd != want {
		t.Errorf("Cwd = %q, want %q", f.Servers[0].Cwd, want)
	}
	if want := filepath.Join(realSub, "logs", "audit.jsonl"); f.Audit.File != want {
		t.Errorf("Audit.File = %q, want %q", f.Audit.File, want)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
}

func TestLoadErrorNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolwire.yaml")
	if err := os.WriteFile(path, []byte("servers:\n  demo:\n    command: x\n    colour: red\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || err.Error() != path+":4: servers.demo.colour: unknown field" {
		t.Errorf("Load error = %v", err)
	}
}

func TestJSONDecoding(t *testing.T) {
	tests := []struct {
		desc    string
		data    string
		command string
		line    int
	}{
		{"escaped slash", `{"mcpServers": {"a": {"command": "\/usr\/bin\/x"}}}`, "/usr/bin/x", 1},
		{"unicode escape", "{\"mcpServers\": {\n\"a\": {\"command\": \"/caf\\u00e9\"}}}", "/café", 2},
		{"tabs and CRLF", "{\r\n\t\"mcpServers\": {\r\n\t\t\"a\":\r\n\t\t{\"command\": \"/x\"}}}", "/x", 3},
		{"byte order mark", "\ufeff{\n\"mcpServers\": {\"a\": {\"command\": \"/x\"}}}", "/x", 2},
		{"multi-line string before the key", "{\"note\": \"a\\nb\\nc\",\n\"mcpServers\": {\n\n\"a\": {\"command\": \"/x\"}}}", "/x", 4},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, err := Parse("c.json", []byte(tt.data), "")
			if err != nil {
				t.Fatal(err)
			}
			s := f.Servers[0]
			if s.Command != tt.command || s.Line != tt.line {
				t.Errorf("command %q on line %d, want %q on line %d", s.Command, s.Line, tt.command, tt.line)
			}
		})
	}
	f, err := Parse("c.json", []byte("{\"mcpServers\": {\"caf\\u00e9\": {\"command\": \"/x\"}}}"), "")
	if err == nil {
		t.Errorf("server named %q accepted; the name check should reject non-ASCII", f.Servers[0].Name)
	} else if !strings.Contains(err.Error(), `mcpServers["café"]: invalid server name`) {
		t.Errorf("error does not show the decoded name: %v", err)
	}
}

func TestTrailingDocumentMarkers(t *testing.T) {
	for _, data := range []string{"servers: {a: {command: x}}\n---\n", "---\nservers: {a: {command: x}}\n...\n"} {
		f, err := Parse("t.yaml", []byte(data), "")
		if err != nil || len(f.Servers) != 1 {
			t.Errorf("Parse(%q) = %+v, %v; want one server", data, f, err)
		}
	}
}

func TestBraceMeansJSON(t *testing.T) {
	// JSON with comments and trailing commas, as VS Code reads it (and
	// writes it: its files start with a comment).
	vscode := "// MCP servers of this workspace\n/* shared */ {\n  \"servers\": {\n    \"a\": {\"type\": \"stdio\", \"command\": \"x\", \"args\": [\"-y\",],},\n  },\n}\n"
	f, err := Parse("mcp.json", []byte(vscode), "")
	if err != nil {
		t.Fatalf("JSONC: %v", err)
	}
	if f.Dialect != DialectVSCode || f.Servers[0].Command != "x" || !reflect.DeepEqual(f.Servers[0].Args, []string{"-y"}) || f.Servers[0].Line != 4 {
		t.Errorf("JSONC: %s %+v", f.Dialect, f.Servers)
	}
	// A file that starts with a comment is still JSON: its errors are
	// JSON's, at the line and column of the file as written.
	_, err = Parse("c.json", []byte("// comment\n{\"mcpServers\": {\"a\": {\"command\": \"x\" \"args\": []}}}"), "")
	if err == nil || !strings.HasPrefix(err.Error(), "c.json:2:38: invalid JSON: ") {
		t.Errorf("JSON after a comment: %v, want a JSON syntax error at 2:38", err)
	}
	// A trailing comma inside a string is text.
	f, err = Parse("s.json", []byte(`{"mcpServers": {"a": {"command": "x", "args": [",]", ",}"]}}}`), "")
	if err != nil || !reflect.DeepEqual(f.Servers[0].Args, []string{",]", ",}"}) {
		t.Errorf("commas in strings: %v %+v", err, f)
	}
	// Leading YAML comments make the same structure YAML.
	f, err = Parse("t.yaml", []byte("# flow style\n{servers: {a: {command: npx, args: [-y]}}}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Servers[0].Command != "npx" || !reflect.DeepEqual(f.Servers[0].Args, []string{"-y"}) {
		t.Errorf("got %+v", f.Servers[0])
	}
}

func TestYAMLSyntaxErrorLines(t *testing.T) {
	// The YAML library reports some lines 0-based, some not at all, and
	// never a column; each case here has its real problem on the line and
	// column named in want.
	tests := []struct {
		data string
		want string
	}{
		{"a: 1\nb: [1, 2}\n", "y:2:4: invalid YAML: did not find expected ',' or ']'"},
		{"a: 1\n- b\n", "y:2:1: invalid YAML: did not find expected key"},
		{"a:\n  b: 1\n c: 2\n", "y:3:2: invalid YAML: did not find expected key"},
		{"x: [1, 2", "y:1:4: invalid YAML: did not find expected ',' or ']'"},
		{"a: 1\nb: [1, 2\n", "y:2:4: invalid YAML: did not find expected ',' or ']'"},
		{"a: {b: 1]\n", "y:1:4: invalid YAML: did not find expected ',' or '}'"},
		{"a: 1\nb: 2\nc: d: e\n", "y:3:5: invalid YAML: mapping values are not allowed in this context"},
		{"a: b\n  c: d\n", "y:2:4: invalid YAML: mapping values are not allowed in this context"},
		{"a: 1\nb: \"x\\q\"\n", "y:2:6: invalid YAML: found unknown escape character"},
		{"a: 1\n\n\nb: @x\n", "y:4:4: invalid YAML: found character that cannot start any token"},
		{"a: `x`\n", "y:1:4: invalid YAML: found character that cannot start any token"},
		{"a:\n\tb: 1\n", "y:2:1: invalid YAML: found character that cannot start any token"},
		{"a: 'abc", "y:1:4: invalid YAML: found unexpected end of stream"},
		{"a: *\n", "y:1:4: invalid YAML: did not find expected alphabetic or numeric character"},
		{"- a\nb: c\n", "y:2:1: invalid YAML: did not find expected '-' indicator"},
		{"a: 1\n\nb: *nope\n", "y:3:4: invalid YAML: unknown anchor 'nope' referenced"},
		{"a: 1\nb: \x01\n", "y:2:4: invalid YAML: control character U+0001 is not allowed"},
		{"a: 1\n\nb: \xff\n", "y:3:4: invalid YAML: the file is not valid UTF-8"},
		{"é: 1\nb: [\"ü\", 2}\n", "y:2:4: invalid YAML: did not find expected ',' or ']'"},
		{"a: 1\né: ü: x\n", "y:2:5: invalid YAML: mapping values are not allowed in this context"},
	}
	for _, tt := range tests {
		_, err := Parse("y", []byte(tt.data), "")
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q)\n got %v\nwant %s", tt.data, err, tt.want)
		}
	}
}

func TestYAMLAliases(t *testing.T) {
	const data = `servers:
  a:
    command: x
    env: &shared {LOG: debug}
  b:
    command: y
    env: *shared
`
	f, err := Parse("t.yaml", []byte(data), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Servers[1].Env["LOG"] != "debug" {
		t.Errorf("alias not followed: %+v", f.Servers[1])
	}

	// An alias bomb must be refused, not expanded.
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g"} {
		bomb += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	bomb += "servers: {s: {command: x, args: *g}}\n"
	_, err = Parse("bomb.yaml", []byte(bomb), "")
	if err == nil || !strings.Contains(err.Error(), "document too large") {
		t.Errorf("alias bomb: %v", err)
	}
}

func TestHostFileIgnoresOtherTopLevelKeys(t *testing.T) {
	f, err := Parse("c.json", []byte(`{"theme": "dark", "mcpServers": {"a": {"command": "x"}}, "projects": [1, 2]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Dialect != "mcpServers" || len(f.Servers) != 1 || f.Warnings != nil {
		t.Errorf("got %+v", f)
	}
}
