package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fixtureDir(t *testing.T, rel string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "dialects", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDialectFixtures loads one file per host, written from each host's
// documented format, and checks every field of every server.
func TestDialectFixtures(t *testing.T) {
	dialects := fixtureDir(t, "")
	vscodeProject := fixtureDir(t, "vscode")
	apiKey := Input{ID: "perplexity-key", Description: "Perplexity API Key", Password: true}
	region := Input{ID: "region", Description: "Deployment region", Default: "eu-west-1"}
	tests := []struct {
		file     string
		dialect  string
		servers  []Server
		inputs   map[string]Input
		warnings []string // relative to the fixture's path
	}{
		{
			file: "claude_desktop.json", dialect: DialectMCPServers,
			servers: []Server{
				{Name: "filesystem", Line: 4, Transport: "stdio", Command: "npx", DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/sam/Desktop", "/Users/sam/Downloads"}},
				{Name: "github", Line: 13, Transport: "stdio", Command: "docker", DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"},
					Env:  map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}},
			},
		},
		{
			file: "claude_code.mcp.json", dialect: DialectMCPServers,
			servers: []Server{
				{Name: "shared-db", Line: 3, Transport: "stdio", Command: filepath.Join(dialects, "scripts", "db-mcp.sh"), DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"--config", "${DB_CONFIG:-db.json}"}, Env: map[string]string{"DB_URL": "${DB_URL}"}},
				{Name: "api", Line: 11, Transport: "http", URL: "${API_BASE_URL:-https://api.example.com}/mcp", DefaultTier: "write", DefaultTierImplied: true,
					Headers: map[string]string{"Authorization": "Bearer ${API_KEY}"}},
				{Name: "events", Line: 18, Transport: "sse", URL: "https://events.example.com/sse", DefaultTier: "write", DefaultTierImplied: true,
					Headers: map[string]string{"X-API-Key": "${EVENTS_KEY}"}},
				{Name: "legacy-feed", Line: 25, Transport: "sse", URL: "https://feed.example.com/sse", DefaultTier: "write", DefaultTierImplied: true},
			},
		},
		{
			file: "cursor.mcp.json", dialect: DialectMCPServers,
			servers: []Server{
				{Name: "web-search", Line: 3, Transport: "stdio", Command: "npx", DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"-y", "web-search-mcp"}, Env: map[string]string{"SEARCH_API_KEY": "${env:SEARCH_API_KEY}"},
					EnvFile: filepath.Join(dialects, "cursor.env")},
				{Name: "local-tools", Line: 11, Transport: "stdio", Command: "${HOME}/bin/local-tools", DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"--root", dialects}},
				{Name: "remote-docs", Line: 15, Transport: "http", URL: "https://docs.example.com/mcp", DefaultTier: "write", DefaultTierImplied: true,
					Headers: map[string]string{"Authorization": "Bearer ${env:DOCS_TOKEN}"}},
			},
		},
		{
			file: "vscode/.vscode/mcp.json", dialect: DialectVSCode,
			servers: []Server{
				{Name: "perplexity", Line: 18, Transport: "stdio", Command: "npx", DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"-y", "server-perplexity-ask"}, Env: map[string]string{"PERPLEXITY_API_KEY": "${input:perplexity-key}"},
					EnvFile: filepath.Join(vscodeProject, ".env"), Inputs: map[string]Input{"perplexity-key": apiKey}},
				{Name: "github", Line: 27, Transport: "http", URL: "https://api.githubcopilot.com/mcp/", DefaultTier: "write", DefaultTierImplied: true,
					Headers: map[string]string{"X-Region": "${input:region}"}, Inputs: map[string]Input{"region": region}},
				{Name: "legacy", Line: 34, Transport: "sse", URL: "http://localhost:3001/sse", DefaultTier: "write", DefaultTierImplied: true},
				{Name: "fetch", Line: 38, Transport: "stdio", Command: "uvx", Args: []string{"mcp-server-fetch"},
					Cwd: filepath.Join(vscodeProject, "tools"), DefaultTier: "write", DefaultTierImplied: true},
			},
			inputs:   map[string]Input{"perplexity-key": apiKey, "region": region},
			warnings: []string{`:44: servers.fetch.dev: ignored (VS Code's development mode (watch and debug) applies to VS Code only)`},
		},
		{
			file: "list.yaml", dialect: DialectList,
			servers: []Server{
				{Name: "files", Line: 2, Transport: "stdio", Command: "npx", DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "."}},
				{Name: "search", Line: 6, Transport: "http", URL: "https://search.example.com/mcp", DefaultTier: "write", DefaultTierImplied: true,
					Headers: map[string]string{"Authorization": "Bearer ${SEARCH_TOKEN}"}},
				{Name: "events", Line: 11, Transport: "sse", URL: "https://events.example.com/sse", DefaultTier: "write", DefaultTierImplied: true},
				{Name: "old", Line: 13, Transport: "http", URL: "http://localhost:8931/mcp", DefaultTier: "write", DefaultTierImplied: true, Disabled: true},
			},
			warnings: []string{`:15: [3].disabled: the server is disabled and will not be started`},
		},
		{
			file: "single.json", dialect: DialectSingle,
			servers: []Server{
				{Name: "notes", Line: 2, Transport: "stdio", Command: filepath.Join(dialects, "bin", "notes-server"), DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"--db", "notes.db"}, Env: map[string]string{"NOTES_TOKEN": "${NOTES_TOKEN:-dev}"}, Cwd: dialects},
			},
		},
		{
			file: "namedmap.json", dialect: DialectNamedMap,
			servers: []Server{
				{Name: "files", Line: 2, Transport: "stdio", Command: "npx", DefaultTier: "write", DefaultTierImplied: true,
					Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"}},
				{Name: "search", Line: 6, Transport: "http", URL: "https://search.example.com/mcp", DefaultTier: "write", DefaultTierImplied: true},
				{Name: "legacy", Line: 11, Transport: "sse", URL: "https://legacy.example.com/sse", DefaultTier: "write", DefaultTierImplied: true, Disabled: true},
			},
			warnings: []string{
				`:9: search.autoApprove: ignored (a host approval list; toolwire uses tiers instead)`,
				`:14: legacy.disabled: the server is disabled and will not be started`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "dialects", filepath.FromSlash(tt.file))
			f, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if f.Dialect != tt.dialect {
				t.Errorf("Dialect = %q, want %q", f.Dialect, tt.dialect)
			}
			if len(f.Servers) != len(tt.servers) {
				t.Fatalf("%d servers, want %d: %+v", len(f.Servers), len(tt.servers), f.Servers)
			}
			for i, want := range tt.servers {
				if got := f.Servers[i]; !reflect.DeepEqual(got, want) {
					t.Errorf("server %d\n got %+v\nwant %+v", i, got, want)
				}
			}
			if !reflect.DeepEqual(f.Inputs, tt.inputs) {
				t.Errorf("Inputs = %+v, want %+v", f.Inputs, tt.inputs)
			}
			var want []string
			for _, w := range tt.warnings {
				want = append(want, path+w)
			}
			if !reflect.DeepEqual(f.Warnings, want) {
				t.Errorf("Warnings\n got %q\nwant %q", f.Warnings, want)
			}
		})
	}
}

func TestDetectDialect(t *testing.T) {
	tests := []struct {
		desc, data, want string
	}{
		{"toolwire yaml", "servers:\n  a: {command: x}\n", DialectToolwire},
		// JSON with "servers" and neither dialect's own fields: VS Code could
		// have written it, so it is read as VS Code's (its tools ask first).
		{"json servers without either's fields", `{"servers": {"a": {"command": "x", "args": []}}}`, DialectVSCode},
		{"json servers with a url and no type", `{"servers": {"a": {"url": "https://h/mcp"}}}`, DialectVSCode},
		{"toolwire by security", `{"servers": {"a": {"command": "x"}}, "security": {"strict": true}}`, DialectToolwire},
		{"toolwire by agent", `{"servers": {"a": {"command": "x"}}, "agent": {"model": "m"}}`, DialectToolwire},
		{"toolwire by defaultTier", `{"servers": {"a": {"command": "x", "defaultTier": "write"}}}`, DialectToolwire},
		{"toolwire by transport", `{"servers": {"a": {"transport": "sse", "url": "https://h/"}}}`, DialectToolwire},
		{"toolwire by audit", `{"servers": {"a": {"command": "x"}}, "audit": {"file": "a"}}`, DialectToolwire},
		{"toolwire by inputs map", "inputs: {k: {description: K}}\nservers:\n  a: {command: x, env: {K: '${input:k}'}}\n", DialectToolwire},
		{"vscode by type", `{"servers": {"a": {"type": "stdio", "command": "x"}}}`, DialectVSCode},
		{"vscode by inputs list", `{"inputs": [], "servers": {"a": {"command": "x"}}}`, DialectVSCode},
		{"vscode with other top-level keys", `{"servers": {"a": {"type": "http", "url": "https://h/"}}, "extra": 1}`, DialectVSCode},
		{"mcpServers", `{"mcpServers": {"a": {"command": "x"}}}`, DialectMCPServers},
		{"mcpServers wins over servers", `{"servers": {"a": {"type": "stdio"}}, "mcpServers": {"a": {"command": "x"}}}`, DialectMCPServers},
		{"json list", `[{"name": "a", "command": "x"}]`, DialectList},
		{"yaml list", "- name: a\n  url: https://h/\n", DialectList},
		{"single by command", `{"name": "a", "command": "x"}`, DialectSingle},
		{"single by sseUrl", "name: a\nsseUrl: https://h/sse\n", DialectSingle},
		{"named map", `{"a": {"command": "x"}, "b": {"httpUrl": "https://h/"}}`, DialectNamedMap},
		{"named map with a server called url", `{"url": {"command": "x"}}`, DialectNamedMap},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, err := Parse("c", []byte(tt.data), "")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.Dialect != tt.want {
				t.Errorf("Dialect = %q, want %q", f.Dialect, tt.want)
			}
		})
	}
}

func TestDialectErrors(t *testing.T) {
	tests := []struct {
		desc, name, data, want string
	}{
		{"vscode and toolwire fields mixed", "mcp.json",
			"{\n\"inputs\": [],\n\"servers\": {\n\"a\": {\"type\": \"stdio\", \"command\": \"x\",\n\"defaultTier\": \"write\"},\n\"b\": {\"transport\": \"http\", \"url\": \"https://h/\"}}}",
			`mcp.json:3: servers: mixes VS Code fields ("inputs" on line 2, "type" on line 4) with toolwire fields ("defaultTier" on line 5, "transport" on line 6); ` +
				`write the file in one dialect: VS Code's uses "type" and an "inputs" list, toolwire's uses "transport" and its own fields`},
		{"no dialect", "x.json", `{"theme": "dark"}`, `x.json:1: no configuration found: ` + shapesAccepted},
		{"no dialect names every shape", "x.json", `{"theme": "dark"}`, `"mcpServers"`},
		{"single server without name", "s.json", "{\n\"command\": \"x\"}", `s.json:1: needs "name", the server's name`},
		{"list item without name", "l.yaml", "- command: x\n", `l.yaml:1: [0]: needs "name", the server's name`},
		{"list item not a map", "l.yaml", "- name: a\n  command: x\n- b\n", `l.yaml:3: [1]: want a map of server settings with "name", got string "b"`},
		{"list name invalid", "l.yaml", "- name: a/b\n  command: x\n", `l.yaml:1: [0].name: invalid server name (want 1 to 64 letters, digits, '_', '.' or '-')`},
		{"empty list", "l.json", "[]", `l.json:1: no servers defined`},
		{"duplicate names in a list", "l.yaml", "- name: a\n  command: x\n- name: b\n  command: y\n- name: a\n  url: https://h/\n",
			`l.yaml:5: [2].name: duplicate server name "a" (first defined on line 1)`},
		{"duplicate names in a JSON list", "l.json", "[\n{\"name\": \"a\", \"command\": \"x\"},\n{\"name\": \"a\", \"command\": \"y\"}]",
			`l.json:3: [1].name: duplicate server name "a" (first defined on line 2)`},
		{"duplicate names in a named map", "m.json", "{\n\"a\": {\"command\": \"x\"},\n\"a\": {\"command\": \"y\"}}",
			`m.json:3: a: duplicate server name "a" (first defined on line 2)`},
		{"duplicate names in vscode", "v.json", "{\"servers\": {\n\"a\": {\"type\": \"stdio\", \"command\": \"x\"},\n\"a\": {\"type\": \"stdio\", \"command\": \"y\"}}}",
			`v.json:3: servers.a: duplicate server name "a" (first defined on line 2)`},
		{"command and url in a list", "l.yaml", "- name: a\n  command: x\n  url: https://h/\n",
			`l.yaml:1: [0]: has both "command" (stdio) and "url" (http); keep one`},
		{"command and sseUrl", "m.json", `{"a": {"command": "x", "sseUrl": "https://h/"}}`,
			`m.json:1: a: has both "command" (stdio) and "sseUrl" (sse); keep one`},
		{"url and httpUrl", "m.json", `{"a": {"url": "https://h/", "httpUrl": "https://h/"}}`,
			`m.json:1: a: has both "url" (http) and "httpUrl" (http); keep one`},
		{"sse url with command in vscode", "v.json", "{\"servers\": {\"a\": {\n\"type\": \"sse\", \"command\": \"x\"}}}",
			`v.json:2: servers.a.type: "sse" conflicts with "command", which means stdio`},
		{"http type with sseUrl", "m.json", `{"a": {"type": "http", "sseUrl": "https://h/"}}`,
			`m.json:1: a.type: "http" conflicts with "sseUrl", which means sse`},
		{"sse type without url", "m.json", `{"mcpServers": {"a": {"type": "sse"}}}`,
			`m.json:1: mcpServers.a: needs "url" (type is "sse")`},
		{"type and transport", "l.yaml", "- name: a\n  type: http\n  transport: http\n  url: https://h/\n",
			`l.yaml:3: [0].transport: has both "type" and "transport"; keep one`},
		{"args on an sse server", "l.yaml", "- name: a\n  sseUrl: https://h/\n  args: [x]\n",
			`l.yaml:3: [0].args: only valid for stdio servers, and this server uses "sseUrl" (sse)`},
		{"envFile on an http server", "m.json", "{\"mcpServers\": {\"a\": {\"url\": \"https://h/\",\n\"envFile\": \".env\"}}}",
			`m.json:2: mcpServers.a.envFile: only valid for stdio servers, and this server uses "url" (http)`},
		{"name differs from key", "m.json", `{"a": {"name": "b", "command": "x"}}`,
			`m.json:1: a.name: "b" differs from the server's key "a"; remove it or make them agree`},
		{"disabled not a bool", "m.json", `{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}`,
			`m.json:1: mcpServers.a.disabled: want true or false, got string "yes"`},
		{"unknown field in a named map", "m.json", `{"a": {"command": "x", "comand": "y"}}`,
			`m.json:1: a.comand: unknown field (did you mean "command"?)`},
		{"vscode servers unknown field", "v.json", `{"servers": {"a": {"type": "stdio", "command": "x", "bearerToken": "t"}}}`,
			`v.json:1: servers: mixes VS Code fields ("type" on line 1) with toolwire fields ("bearerToken" on line 1); ` +
				`write the file in one dialect: VS Code's uses "type" and an "inputs" list, toolwire's uses "transport" and its own fields`},
		{"yaml syntax error with column", "t.yaml", "servers:\n  a:\n    command: x\n    args: [a, b}\n",
			`t.yaml:4:11: invalid YAML: did not find expected ',' or ']'`},
		{"json syntax error with column", "t.json", "[\n  {\"name\": \"a\" \"command\": \"x\"}\n]",
			`t.json:2:16: invalid JSON: invalid character '"' after object key:value pair`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, err := Parse(tt.name, []byte(tt.data), "")
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want %q", f, tt.want)
			}
			got := err.Error()
			if strings.HasPrefix(tt.want, tt.name) {
				if got != tt.want {
					t.Errorf("error\n got %q\nwant %q", got, tt.want)
				}
			} else if !strings.Contains(got, tt.want) {
				t.Errorf("error %q lacks %q", got, tt.want)
			}
		})
	}
}

func TestWorkspaceFolder(t *testing.T) {
	const data = `{"mcpServers": {"a": {"command": "${workspaceFolder}/bin/x", "args": ["$${workspaceFolder}", "${workspaceFolder}"], "cwd": "${userHome}/w"}}}`
	tests := []struct {
		dir, wantCommand, wantArg string
	}{
		{"/proj/.vscode", "/proj/bin/x", "/proj"},
		{"/proj/.cursor", "/proj/bin/x", "/proj"},
		{"/proj/conf", "/proj/conf/bin/x", "/proj/conf"},
		{"/a$b", "/a$$b/bin/x", "/a$$b"}, // a "$" in the path is escaped, not expanded later
		{"", "${workspaceFolder}/bin/x", "${workspaceFolder}"},
	}
	for _, tt := range tests {
		f, err := Parse("mcp.json", []byte(data), tt.dir)
		if err != nil {
			t.Fatalf("dir %q: %v", tt.dir, err)
		}
		s := f.Servers[0]
		if s.Command != tt.wantCommand || s.Args[1] != tt.wantArg {
			t.Errorf("dir %q: command %q, arg %q; want %q, %q", tt.dir, s.Command, s.Args[1], tt.wantCommand, tt.wantArg)
		}
		if s.Args[0] != "$${workspaceFolder}" || s.Cwd != "${HOME}/w" {
			t.Errorf("dir %q: escaped placeholder or userHome changed: %q, %q", tt.dir, s.Args[0], s.Cwd)
		}
	}
	// Expanding gives the path back exactly, "$" included.
	f, _ := Parse("mcp.json", []byte(data), "/a$b")
	got, _, err := ExpandServer(f.Servers[0], Resolver{LookupEnv: lookupIn(map[string]string{"HOME": "/h"})})
	if err != nil || got.Command != "/a$b/bin/x" || got.Args[0] != "${workspaceFolder}" || got.Cwd != "/h/w" {
		t.Errorf("expanded: %+v, %v", got, err)
	}
	// In toolwire's own file ${workspaceFolder} is an ordinary variable.
	f, err = Parse("t.yaml", []byte("servers:\n  a:\n    command: ${workspaceFolder}/x\n"), "/proj/.vscode")
	if err != nil || f.Servers[0].Command != "${workspaceFolder}/x" {
		t.Errorf("toolwire file: %+v, %v", f, err)
	}
}

func TestJSONComments(t *testing.T) {
	const data = "{\n" +
		"  // a line comment with \"quotes\" and a { brace\n" +
		"  \"mcpServers\": { /* a block\n" +
		"     comment over lines */\n" +
		"    \"a\": {\"url\": \"https://h//x/*y*/\", \"colour\": 1}\n" +
		"  }\n" +
		"}\n"
	_, err := Parse("c.json", []byte(data), "")
	// The error's line proves the lines survived the comments; the URL
	// inside the string was not cut at "//".
	if err == nil || err.Error() != "c.json:5: mcpServers.a.colour: unknown field" {
		t.Fatalf("err = %v", err)
	}
	f, err := Parse("c.json", []byte(strings.Replace(data, `, "colour": 1`, "", 1)), "")
	if err != nil || f.Servers[0].URL != "https://h//x/*y*/" {
		t.Fatalf("f = %+v, err = %v", f, err)
	}
	// An unterminated block comment is a syntax error at the slash.
	_, err = Parse("c.json", []byte("{\"mcpServers\": {} /* open\n"), "")
	if err == nil || !strings.HasPrefix(err.Error(), "c.json:1:19: invalid JSON") {
		t.Errorf("unterminated comment: %v", err)
	}
}

func TestInputsDeclaration(t *testing.T) {
	tests := []struct {
		desc, name, data, want string
	}{
		{"undeclared input in vscode", "v.json", `{"inputs": [], "servers": {"a": {"type": "stdio", "command": "x", "env": {"K": "${input:key}"}}}}`,
			`v.json:1: servers.a.env.K: input "key" is not declared in "inputs"`},
		{"input in an mcpServers file", "m.json", `{"mcpServers": {"a": {"command": "x", "args": ["${input:key}"]}}}`,
			`m.json:1: mcpServers.a.args[0]: ${input:key} needs an "inputs" declaration, which only VS Code's and toolwire's files have`},
		{"pickString input used", "v.json", `{"inputs": [{"type": "pickString", "id": "r", "options": ["a"]}], "servers": {"a": {"type": "http", "url": "https://h/", "headers": {"X": "${input:r}"}}}}`,
			`v.json:1: servers.a.headers.X: input "r" is a "pickString" input, which toolwire cannot ask for (only "promptString")`},
		{"input with default syntax", "v.json", `{"inputs": [{"type": "promptString", "id": "k"}], "servers": {"a": {"type": "stdio", "command": "x", "env": {"K": "${input:k:-d}"}}}}`,
			`invalid placeholder "${input:k:-d}"`},
		{"duplicate input id", "v.json", "{\"inputs\": [\n{\"type\": \"promptString\", \"id\": \"k\"},\n{\"type\": \"promptString\", \"id\": \"k\"}],\n\"servers\": {\"a\": {\"type\": \"stdio\", \"command\": \"x\"}}}",
			`v.json:3: inputs[1].id: duplicate input "k" (first defined on line 2)`},
		{"input without id", "v.json", "{\"inputs\": [\n{\"type\": \"promptString\"}],\n\"servers\": {\"a\": {\"type\": \"stdio\", \"command\": \"x\"}}}",
			`v.json:2: inputs[0]: needs "id", the name used in ${input:ID}`},
		{"bad input id", "v.json", `{"inputs": [{"type": "promptString", "id": "a b"}], "servers": {"a": {"type": "stdio", "command": "x"}}}`,
			`v.json:1: inputs[0].id: invalid input ID "a b" (want letters, digits, '_', '.' or '-')`},
		{"toolwire undeclared input", "t.yaml", "servers:\n  a:\n    command: x\n    env: {K: '${input:k}'}\n",
			`t.yaml:4: servers.a.env.K: input "k" is not declared in "inputs"`},
		{"toolwire unknown input field", "t.yaml", "inputs:\n  k: {descripton: x}\nservers:\n  a: {command: x}\n",
			`t.yaml:2: inputs.k.descripton: unknown field (did you mean "description"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := Parse(tt.name, []byte(tt.data), "")
			if err == nil {
				t.Fatalf("Parse succeeded, want %q", tt.want)
			}
			if strings.HasPrefix(tt.want, tt.name) && err.Error() != tt.want || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tt.want)
			}
		})
	}

	// toolwire's own inputs: a map, every one a text prompt; a bare ID
	// declares an input with no description.
	f, err := Parse("t.yaml", []byte("inputs:\n  k: {description: Key, password: true, default: d}\n  bare:\nservers:\n  a:\n    command: x\n    env: {K: '${input:k}', B: '${input:bare}'}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Input{"k": {ID: "k", Description: "Key", Password: true, Default: "d"}, "bare": {ID: "bare"}}
	if !reflect.DeepEqual(f.Inputs, want) || !reflect.DeepEqual(f.Servers[0].Inputs, want) {
		t.Errorf("inputs = %+v / %+v", f.Inputs, f.Servers[0].Inputs)
	}
}

func TestExpandServerInputs(t *testing.T) {
	s := Server{Name: "x", Transport: "http", URL: "https://h/${input:path}",
		Headers: map[string]string{"Authorization": "Bearer ${input:api-key}", "X-Again": "${input:api-key}"},
		Inputs:  map[string]Input{"api-key": {ID: "api-key", Description: "API key", Password: true}}}
	env := lookupIn(nil)

	// Without a way to ask: an error per field, naming the input and what
	// it asks for, of type *MissingInputError.
	_, secrets, err := ExpandServer(s, Resolver{LookupEnv: env})
	want := `server "x": url: needs input "path"; run in a terminal to be prompted
server "x": headers.Authorization: needs input "api-key" (Ask: "API key"); run in a terminal to be prompted
server "x": headers.X-Again: needs input "api-key" (Ask: "API key"); run in a terminal to be prompted`
	if err == nil || err.Error() != want || secrets != nil {
		t.Fatalf("err =\n%v\nwant\n%s", err, want)
	}
	var mi *MissingInputError
	if !errorsAs(err, &mi) || mi.ID != "path" {
		t.Errorf("not a MissingInputError: %#v", mi)
	}

	// With a resolver: each input asked once, described, and its value
	// is a secret.
	var asked []Input
	got, secrets, err := ExpandServer(s, Resolver{LookupEnv: env, Input: func(id string, in Input) (string, error) {
		asked = append(asked, in)
		return map[string]string{"api-key": "k-123", "path": "mcp"}[id], nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "https://h/mcp" || got.Headers["Authorization"] != "Bearer k-123" || got.Headers["X-Again"] != "k-123" {
		t.Errorf("got %+v", got)
	}
	wantAsked := []Input{{ID: "path"}, {ID: "api-key", Description: "API key", Password: true}}
	if !reflect.DeepEqual(asked, wantAsked) {
		t.Errorf("asked %+v, want %+v", asked, wantAsked)
	}
	if !reflect.DeepEqual(secrets, []string{"mcp", "k-123"}) {
		t.Errorf("secrets = %q", secrets)
	}

	// A resolver's error is reported for the field, with the input.
	_, _, err = ExpandServer(s, Resolver{LookupEnv: env, Input: func(string, Input) (string, error) { return "", os.ErrDeadlineExceeded }})
	if err == nil || !strings.Contains(err.Error(), `server "x": url: input "path": i/o timeout`) {
		t.Errorf("err = %v", err)
	}

	// Expand alone cannot ask.
	if _, err := Expand("${input:k}", env); err == nil || err.Error() != `needs input "k"; run in a terminal to be prompted` {
		t.Errorf("Expand: %v", err)
	}
}

func TestExpandServerNilLookupUsesEnvironment(t *testing.T) {
	t.Setenv("TOOLWIRE_CONFIG_TEST_VAR", "from-env")
	got, _, err := ExpandServer(Server{Name: "x", Command: "${TOOLWIRE_CONFIG_TEST_VAR}"}, Resolver{})
	if err != nil || got.Command != "from-env" {
		t.Errorf("got %q, %v", got.Command, err)
	}
}

func TestExpandServerEnvFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.env")
	if err := os.WriteFile(path, []byte("# settings\nFROM_FILE=file-value\nOVERRIDDEN=file\nEMPTY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Server{Name: "svc", Transport: "stdio", Command: "x", EnvFile: "${DIR}/app.env",
		Env: map[string]string{"OVERRIDDEN": "${TOKEN}"}}
	got, secrets, err := ExpandServer(s, Resolver{LookupEnv: lookupIn(map[string]string{"DIR": dir, "TOKEN": "t"})})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"FROM_FILE": "file-value", "OVERRIDDEN": "t", "EMPTY": ""}
	if !reflect.DeepEqual(got.Env, want) {
		t.Errorf("Env = %v, want %v", got.Env, want)
	}
	// The env file's values are secrets; the file's own path came from a
	// variable too.
	if !reflect.DeepEqual(secrets, []string{"t", dir, "file-value"}) {
		t.Errorf("secrets = %q", secrets)
	}
	if len(s.Env) != 1 {
		t.Errorf("original Env changed: %v", s.Env)
	}

	// An env file alone creates Env.
	got, _, err = ExpandServer(Server{Name: "svc", Command: "x", EnvFile: path}, Resolver{LookupEnv: lookupIn(nil)})
	if err != nil || got.Env["FROM_FILE"] != "file-value" {
		t.Errorf("got %v, %v", got.Env, err)
	}

	// A missing file is an error naming the server and the file.
	missing := filepath.Join(dir, "nope.env")
	_, _, err = ExpandServer(Server{Name: "svc", Command: "x", EnvFile: missing}, Resolver{LookupEnv: lookupIn(nil)})
	if want := `server "svc": envFile: cannot read ` + missing + `: file does not exist`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	// So is a malformed one, with its line, without showing values.
	bad := filepath.Join(dir, "bad.env")
	if err := os.WriteFile(bad, []byte("OK=1\nsecret-without-equals\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = ExpandServer(Server{Name: "svc", Command: "x", EnvFile: bad}, Resolver{LookupEnv: lookupIn(nil)})
	if want := `server "svc": envFile: ` + bad + `:2: want KEY=VALUE`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestParseEnvFile(t *testing.T) {
	tests := []struct {
		desc, text string
		want       map[string]string
		wantErr    string
	}{
		{"plain", "A=1\nB=two words\n", map[string]string{"A": "1", "B": "two words"}, ""},
		{"comments and blanks", "# top\n\n  # indented\nA=1\n", map[string]string{"A": "1"}, ""},
		{"inline comment on a bare value", "A=1 # one\nB=x#y\n", map[string]string{"A": "1", "B": "x#y"}, ""},
		{"export and spaces", "export A = 1 \n", map[string]string{"A": "1"}, ""},
		{"double quotes with escapes", `A="a\nb \"q\" \\ \t#"` + "\n", map[string]string{"A": "a\nb \"q\" \\ \t#"}, ""},
		{"single quotes are literal", `A='a\n #b'` + "\n", map[string]string{"A": `a\n #b`}, ""},
		{"comment after quotes", `A="x" # c` + "\n", map[string]string{"A": "x"}, ""},
		{"multi-line quoted", "A=\"one\ntwo\"\nB=3\n", map[string]string{"A": "one\ntwo", "B": "3"}, ""},
		{"empty value", "A=\nB=''\n", map[string]string{"A": "", "B": ""}, ""},
		{"equals in value", "A=b=c\n", map[string]string{"A": "b=c"}, ""},
		{"later wins", "A=1\nA=2\n", map[string]string{"A": "2"}, ""},
		{"CRLF", "A=1\r\nB=\"2\"\r\n", map[string]string{"A": "1", "B": "2"}, ""},
		{"no newline at end", "A=1", map[string]string{"A": "1"}, ""},
		{"missing equals", "A=1\nB\n", nil, "f:2: want KEY=VALUE"},
		{"bad name", "1A=x\n", nil, `f:1: invalid variable name "1A"`},
		{"unclosed quote", "A=1\nB=\"open\nC=2\n", nil, "f:2: the quoted value of B is never closed"},
		{"text after quote", "A=\"x\" y\n", nil, "f:1: unexpected text after the closing quote"},
		{"NUL", "A=\x00\n", nil, "f:1: the value of A contains NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := parseEnvFile("f", tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFixtureEnvFiles(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "dialects", "cursor.mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, secrets, err := ExpandServer(f.Servers[0], Resolver{LookupEnv: lookupIn(map[string]string{"SEARCH_API_KEY": "k"})})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"SEARCH_API_KEY": "k", "SEARCH_REGION": "eu", "SEARCH_LIMIT": "25", "SEARCH_SECRET": "s3cr3t #not a comment"}
	if !reflect.DeepEqual(got.Env, want) {
		t.Errorf("Env = %q, want %q", got.Env, want)
	}
	if len(secrets) != 4 {
		t.Errorf("secrets = %q, want the variable and the three file values", secrets)
	}
}

// TestMarshalRoundTripFixtures writes every fixture as toolwire YAML and
// reads it back.
func TestMarshalRoundTripFixtures(t *testing.T) {
	for _, name := range []string{"claude_desktop.json", "claude_code.mcp.json", "cursor.mcp.json", "vscode/.vscode/mcp.json", "list.yaml", "single.json", "namedmap.json"} {
		t.Run(name, func(t *testing.T) {
			f, err := Load(filepath.Join("testdata", "dialects", filepath.FromSlash(name)))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			// Loaded from somewhere else entirely, paths still agree.
			back, err := Parse("imported.yaml", out, "/elsewhere")
			if err != nil {
				t.Fatalf("output does not parse: %v\n%s", err, out)
			}
			if back.Dialect != DialectToolwire || len(back.Servers) != len(f.Servers) {
				t.Fatalf("back = %+v", back)
			}
			for i := range f.Servers {
				a, b := f.Servers[i], back.Servers[i]
				a.Line, b.Line = 0, 0
				// A host file's implied tier is written out: the imported
				// file says what the host file left unsaid.
				if !a.DefaultTierImplied || b.DefaultTierImplied {
					t.Errorf("server %d: tier implied %t before the import, %t after", i, a.DefaultTierImplied, b.DefaultTierImplied)
				}
				a.DefaultTierImplied = false
				if !reflect.DeepEqual(a, b) {
					t.Errorf("server %d\n got %+v\nwant %+v", i, b, a)
				}
			}
			if !reflect.DeepEqual(back.Inputs, f.Inputs) {
				t.Errorf("inputs %+v, want %+v", back.Inputs, f.Inputs)
			}
			if !strings.HasPrefix(string(out), "# toolwire configuration converted from ") {
				t.Errorf("no header comment:\n%s", out)
			}
		})
	}
}

func TestMarshalEveryFieldAndTrickyValues(t *testing.T) {
	f, err := Parse("full.yaml", []byte(fullYAML), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	s := &f.Servers[2] // mid: add the values YAML would misread unquoted
	s.Args = []string{"true", "8080", "", "# not a comment", "a: b", "- x", "null", "${X:-y}", "$$", "multi\nline", "'q'", `"dq"`}
	s.Env = map[string]string{"EMPTY": "", "NUM": "1.5", "YES": "yes"}
	s.OnlyTools = []string{}
	s.Disabled = true
	f.Path = "odd\nname.json" // must not break the header comment
	f.Dialect = DialectMCPServers
	out, err := Marshal(f)
	if err != nil {
		t.Fatalf("Marshal: %v\n%s", err, out)
	}
	back, err := Parse("back.yaml", out, "")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, out)
	}
	for i := range f.Servers {
		a, b := f.Servers[i], back.Servers[i]
		a.Line, b.Line = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Errorf("server %d\n got %#v\nwant %#v", i, b, a)
		}
	}
	if back.Audit != f.Audit {
		t.Errorf("audit = %+v, want %+v", back.Audit, f.Audit)
	}
	if !strings.Contains(string(out), "onlyTools: []") || !strings.Contains(string(out), "timeout: 1m30s") {
		t.Errorf("output:\n%s", out)
	}

	// Marshal refuses what would not load back.
	bad := &File{Servers: []Server{{Name: "a", Transport: "stdio"}}}
	if _, err := Marshal(bad); err == nil || !strings.Contains(err.Error(), "does not load") {
		t.Errorf("Marshal of a server without a command: %v", err)
	}
}

func TestEquivalentServers(t *testing.T) {
	a := Server{Name: "a", Line: 1, Transport: "stdio", Command: "x", Args: []string{}, DefaultTier: "read"}
	b := Server{Name: "a", Line: 9, Transport: "stdio", Command: "x"}
	if !EquivalentServers(a, b) {
		t.Errorf("line, empty args and the default tier should not matter")
	}
	b.OnlyTools = []string{}
	if EquivalentServers(a, b) {
		t.Errorf("onlyTools [] (no tools) must differ from absent (all tools)")
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
