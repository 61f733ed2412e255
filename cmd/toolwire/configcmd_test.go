package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
)

// configRun is one in-process run of a config subcommand.
type configRun struct {
	code           int
	stdout, stderr string
}

// runConfigCmd runs "toolwire ARGS..." in-process with the config command
// attached to the real root command (once, however the root is wired).
func runConfigCmd(t *testing.T, terminal bool, stdin string, lookup map[string]string, args ...string) configRun {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin:      strings.NewReader(stdin),
		stdout:     &stdout,
		stderr:     &stderr,
		isTerminal: func() bool { return terminal },
		lookupEnv: func(k string) (string, bool) {
			v, ok := lookup[k]
			return v, ok
		},
	}
	root := newRootCommand(e)
	if !hasSubcommand(root, "config") {
		root.AddCommand(newConfigCommand(e, &globalFlags{}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root.SetArgs(args)
	code := exitCode(root.ExecuteContext(ctx), &stderr)
	return configRun{code, stdout.String(), stderr.String()}
}

func hasSubcommand(c *cobra.Command, name string) bool {
	for _, sub := range c.Commands() {
		if sub.Name() == name {
			return true
		}
	}
	return false
}

func (r configRun) want(t *testing.T, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// writeConfigFixture writes a file under a new temporary directory.
func writeConfigFixture(t *testing.T, rel, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mixedVSCode has every kind of server, an input, an ignored field and a
// disabled server.
const mixedVSCode = `{
  "inputs": [
    {"type": "promptString", "id": "api-key", "description": "API key", "password": true}
  ],
  "servers": {
    "files": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${workspaceFolder}/docs dir"],
      "env": {"API_KEY": "${input:api-key}", "LEVEL": "env-value-not-shown"}
    },
    "search": {
      "type": "http",
      "url": "https://search.example.com/mcp",
      "headers": {"Authorization": "Bearer ${env:SEARCH_TOKEN}"},
      "dev": {"watch": "src/**"}
    },
    "events": {
      "type": "sse",
      "url": "http://localhost:3001/sse",
      "disabled": true
    }
  }
}
`

func TestConfigCheckText(t *testing.T) {
	t.Parallel()
	path := writeConfigFixture(t, "proj/.vscode/mcp.json", mixedVSCode)
	proj := filepath.Dir(filepath.Dir(path))
	r := runConfigCmd(t, false, "", map[string]string{"SEARCH_TOKEN": "tok-should-not-appear"}, "config", "check", path)
	r.want(t, exitOK)
	t.Logf("config check output:\n%s", r.stdout)
	for _, want := range []string{
		path + ": a VS Code .vscode/mcp.json file (dialect vscode), 3 servers",
		`  api-key: "API key" (hidden)`,
		"server files (line 6)",
		"  transport     stdio",
		`  command       npx -y @modelcontextprotocol/server-filesystem "` + proj + `/docs dir"`,
		"  env           API_KEY, LEVEL",
		"  inputs        api-key",
		// A host file has no tiers: its tools are confirmed, and the
		// report says the tier is nobody's choice.
		"  defaultTier   write (the default for a host file",
		"server search (line 12)",
		"  transport     http (Streamable HTTP)",
		"  url           https://search.example.com/mcp",
		"  headers       Authorization",
		"  warning       line 16: dev: ignored (VS Code's development mode (watch and debug) applies to VS Code only)",
		"server events (line 18)",
		"  transport     sse (legacy HTTP+SSE)",
		"  disabled      yes: listed but not started",
		"  warning       line 21: disabled: the server is disabled and will not be started",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Warnings are grouped: the dev warning is in the search block.
	search := r.stdout[strings.Index(r.stdout, "server search"):strings.Index(r.stdout, "server events")]
	if !strings.Contains(search, "dev: ignored") {
		t.Errorf("the dev warning is not under its server:\n%s", search)
	}
	// Nothing is expanded: no variable value, and the input stays unasked.
	if strings.Contains(r.stdout, "tok-should-not-appear") || strings.Contains(r.stdout, "env-value-not-shown") {
		t.Errorf("check printed a value it should not:\n%s", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q, want nothing for a valid file", r.stderr)
	}
}

func TestConfigCheckJSON(t *testing.T) {
	t.Parallel()
	path := writeConfigFixture(t, "proj/.vscode/mcp.json", mixedVSCode)
	r := runConfigCmd(t, false, "", nil, "config", "check", "--json", path)
	r.want(t, exitOK)
	var got struct {
		File    string `json:"file"`
		Valid   bool   `json:"valid"`
		Dialect string `json:"dialect"`
		Inputs  []struct {
			ID       string `json:"id"`
			Password bool   `json:"password"`
		} `json:"inputs"`
		Servers []struct {
			Name        string   `json:"name"`
			Transport   string   `json:"transport"`
			Command     string   `json:"command"`
			URL         string   `json:"url"`
			EnvNames    []string `json:"envNames"`
			HeaderNames []string `json:"headerNames"`
			Disabled    bool     `json:"disabled"`
			DefaultTier string   `json:"defaultTier"`
			TierSource  string   `json:"defaultTierSource"`
			Inputs      []string `json:"inputs"`
			OnlyTools   []string `json:"onlyTools"`
			Warnings    []struct {
				Line  int    `json:"line"`
				Field string `json:"field"`
			} `json:"warnings"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if got.File != path || !got.Valid || got.Dialect != "vscode" || len(got.Inputs) != 1 || !got.Inputs[0].Password {
		t.Errorf("report header = %+v", got)
	}
	if len(got.Servers) != 3 {
		t.Fatalf("servers = %+v", got.Servers)
	}
	files, search, events := got.Servers[0], got.Servers[1], got.Servers[2]
	if files.Name != "files" || files.Transport != "stdio" || files.Command != "npx" ||
		!reflect.DeepEqual(files.EnvNames, []string{"API_KEY", "LEVEL"}) || !reflect.DeepEqual(files.Inputs, []string{"api-key"}) {
		t.Errorf("files = %+v", files)
	}
	if files.DefaultTier != "write" || files.TierSource != "default" {
		t.Errorf("files: defaultTier %q from %q, want write from default", files.DefaultTier, files.TierSource)
	}
	if files.OnlyTools != nil {
		t.Errorf("onlyTools = %#v, want null (all tools)", files.OnlyTools)
	}
	if search.Transport != "http" || search.URL != "https://search.example.com/mcp" ||
		!reflect.DeepEqual(search.HeaderNames, []string{"Authorization"}) || len(search.Warnings) != 1 || search.Warnings[0].Field != "dev" {
		t.Errorf("search = %+v", search)
	}
	if events.Transport != "sse" || !events.Disabled || len(events.Warnings) != 1 || events.Warnings[0].Line != 21 {
		t.Errorf("events = %+v", events)
	}
	if strings.Contains(r.stdout, "Bearer") || strings.Contains(r.stdout, "env-value-not-shown") {
		t.Errorf("--json shows env or header values:\n%s", r.stdout)
	}
}

func TestConfigCheckInvalidPrintsEveryError(t *testing.T) {
	t.Parallel()
	path := writeConfigFixture(t, "bad.yaml", "servers:\n  a:\n    command: x\n    url: https://h/\n  b:\n    defaultTier: admin\n    command: y\n")
	r := runConfigCmd(t, false, "", nil, "config", "check", path)
	r.want(t, exitUsage)
	want := []string{
		path + `:2: servers.a: has both "command" (stdio) and "url" (http); keep one`,
		path + `:6: servers.b.defaultTier: unknown tier "admin" (want read, write or destructive)`,
		"toolwire: " + path + " is not a valid configuration (2 problems)",
	}
	if got := strings.Split(strings.TrimSpace(r.stderr), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("stderr:\n got %q\nwant %q", got, want)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}

	// The same with --json: the errors are in the report.
	r = runConfigCmd(t, false, "", nil, "config", "check", "--json", path)
	r.want(t, exitUsage)
	var rep struct {
		Valid  bool     `json:"valid"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if rep.Valid || !reflect.DeepEqual(rep.Errors, want[:2]) {
		t.Errorf("report = %+v", rep)
	}
}

func TestConfigCheckSyntaxErrorHasColumn(t *testing.T) {
	t.Parallel()
	path := writeConfigFixture(t, "mcp.json", "// a comment first\n{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\" \"args\": []}\n  }\n}\n")
	r := runConfigCmd(t, false, "", nil, "config", "check", path)
	r.want(t, exitUsage)
	// A JSON error, at its place in the file, even after a comment (which
	// once made the file YAML).
	if want := path + ":4:26: invalid JSON"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr = %q, want it to start with %q", r.stderr, want)
	}
}

func TestConfigCheckMissingFileAndDefaultPath(t *testing.T) {
	t.Parallel()
	r := runConfigCmd(t, false, "", nil, "config", "check", filepath.Join(t.TempDir(), "nope.yaml"))
	r.want(t, exitUsage)
	if !strings.Contains(r.stderr, "nope.yaml") {
		t.Errorf("stderr does not name the file: %q", r.stderr)
	}
	// Without FILE, --config and then $TOOLWIRE_CONFIG are used.
	path := writeConfigFixture(t, "tw.yaml", "servers:\n  only:\n    command: x\n")
	r = runConfigCmd(t, false, "", nil, "--config", path, "config", "check")
	r.want(t, exitOK)
	if !strings.Contains(r.stdout, "server only") {
		t.Errorf("--config not used:\n%s", r.stdout)
	}
	r = runConfigCmd(t, false, "", map[string]string{"TOOLWIRE_CONFIG": path}, "config", "check")
	r.want(t, exitOK)
	if !strings.HasPrefix(r.stdout, path+": toolwire's own file (dialect toolwire), 1 server") {
		t.Errorf("$TOOLWIRE_CONFIG not used:\n%s", r.stdout)
	}
	// Two files is a usage error.
	runConfigCmd(t, false, "", nil, "config", "check", path, path).want(t, exitUsage)
}

func TestConfigCheckToolwireFileShowsTiersAndFilters(t *testing.T) {
	t.Parallel()
	path := writeConfigFixture(t, "toolwire.yaml", `servers:
  demo:
    command: ./bin/demo
    prefix: d
    defaultTier: write
    tierOverrides: {rm: destructive, ls: read}
    onlyTools: []
    excludeTools: [fail]
    timeout: 90s
    required: true
    bearerToken: ${NOPE}
    url: http://h/
`)
	// Invalid (command and url and bearerToken on stdio): fix it first.
	runConfigCmd(t, false, "", nil, "config", "check", path).want(t, exitUsage)
	data, _ := os.ReadFile(path)
	fixed := strings.Replace(strings.Replace(string(data), "    bearerToken: ${NOPE}\n", "", 1), "    url: http://h/\n", "", 1)
	if err := os.WriteFile(path, []byte(fixed), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runConfigCmd(t, false, "", nil, "config", "check", path)
	r.want(t, exitOK)
	for _, want := range []string{
		"  command       " + filepath.Join(filepath.Dir(path), "bin", "demo"),
		"  prefix        d",
		"  defaultTier   write (set by defaultTier)",
		"  tierOverrides ls=read, rm=destructive",
		"  onlyTools     none (the empty list registers no tools)",
		"  excludeTools  fail",
		"  timeout       1m30s",
		"  required      yes",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// The import of every dialect fixture loads back to the same servers.
func TestConfigImportRoundTripsEveryFixture(t *testing.T) {
	t.Parallel()
	fixtures := []string{
		"claude_desktop.json", "claude_code.mcp.json", "cursor.mcp.json", "vscode/.vscode/mcp.json",
		"list.yaml", "single.json", "namedmap.json",
	}
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("..", "..", "config", "testdata", "dialects", filepath.FromSlash(name))
			orig, err := config.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "elsewhere", "toolwire.yaml")
			if err := os.Mkdir(filepath.Dir(out), 0o700); err != nil {
				t.Fatal(err)
			}
			r := runConfigCmd(t, false, "", nil, "config", "import", src, "-o", out)
			r.want(t, exitOK)
			if !strings.Contains(r.stderr, "wrote "+out) {
				t.Errorf("stderr = %q", r.stderr)
			}
			back, err := config.Load(out)
			if err != nil {
				t.Fatalf("imported file does not load: %v", err)
			}
			if back.Dialect != config.DialectToolwire {
				t.Errorf("imported dialect = %q", back.Dialect)
			}
			if len(back.Servers) != len(orig.Servers) {
				t.Fatalf("%d servers back, want %d", len(back.Servers), len(orig.Servers))
			}
			for i := range orig.Servers {
				a, b := orig.Servers[i], back.Servers[i]
				a.Line, b.Line = 0, 0
				// The host file's implied tier is written out.
				a.DefaultTierImplied = false
				if !reflect.DeepEqual(a, b) {
					t.Errorf("server %d:\n got %+v\nwant %+v", i, b, a)
				}
			}
			if !reflect.DeepEqual(back.Inputs, orig.Inputs) {
				t.Errorf("inputs = %+v, want %+v", back.Inputs, orig.Inputs)
			}
			info, err := os.Stat(out)
			if err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("mode = %v, %v; want 0600", info.Mode(), err)
			}
			// No temporary file is left beside it.
			entries, _ := os.ReadDir(filepath.Dir(out))
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only the output", len(entries))
			}
		})
	}
}

func TestConfigImportToStdoutKeepsPlaceholders(t *testing.T) {
	t.Parallel()
	path := writeConfigFixture(t, "proj/.vscode/mcp.json", mixedVSCode)
	r := runConfigCmd(t, false, "", map[string]string{"SEARCH_TOKEN": "tok-should-not-appear"}, "config", "import", path)
	r.want(t, exitOK)
	for _, want := range []string{
		"API_KEY: ${input:api-key}",
		"Authorization: Bearer ${env:SEARCH_TOKEN}",
		"# ${input:api-key} is asked for on the terminal",
		"  api-key:\n    description: API key\n    password: true\n",
		"# Original line 16: dev: ignored (VS Code's development mode",
		"    transport: sse\n",
		"    disabled: true\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("import output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "tok-should-not-appear") {
		t.Errorf("a variable was expanded into the output")
	}
	if !strings.Contains(r.stderr, "toolwire: warning: "+path+":16: servers.search.dev: ignored") {
		t.Errorf("warnings not shown on stderr: %q", r.stderr)
	}
}

func TestConfigImportRefusesToOverwrite(t *testing.T) {
	t.Parallel()
	src := writeConfigFixture(t, "a.json", `{"mcpServers": {"a": {"command": "x"}}}`)
	out := filepath.Join(t.TempDir(), "toolwire.yaml")
	if err := os.WriteFile(out, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runConfigCmd(t, false, "", nil, "config", "import", src, "-o", out)
	r.want(t, exitUsage)
	if !strings.Contains(r.stderr, "already exists; pass --force") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if data, _ := os.ReadFile(out); string(data) != "keep me\n" {
		t.Errorf("existing file changed to %q", data)
	}
	r = runConfigCmd(t, false, "", nil, "config", "import", src, "-o", out, "--force")
	r.want(t, exitOK)
	f, err := config.Load(out)
	if err != nil || len(f.Servers) != 1 || f.Servers[0].Command != "x" {
		t.Fatalf("forced import = %+v, %v", f, err)
	}
	if info, _ := os.Stat(out); info.Mode().Perm() != 0o600 {
		t.Errorf("mode after --force = %v, want 0600", info.Mode())
	}
}

func TestConfigImportInvalidFile(t *testing.T) {
	t.Parallel()
	src := writeConfigFixture(t, "a.json", `{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}`)
	out := filepath.Join(t.TempDir(), "toolwire.yaml")
	r := runConfigCmd(t, false, "", nil, "config", "import", src, "-o", out)
	r.want(t, exitUsage)
	if !strings.Contains(r.stderr, `has both "command" (stdio) and "url" (http)`) {
		t.Errorf("stderr = %q", r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written for an invalid file (%v)", err)
	}
}

func TestConfigInputPrompter(t *testing.T) {
	t.Parallel()
	if p := configInputPrompter(&env{isTerminal: func() bool { return false }}); p != nil {
		t.Fatal("prompter offered without a terminal")
	}
	var stderr bytes.Buffer
	e := &env{stdin: strings.NewReader("s3cret\n\nunused\n"), stderr: &stderr, isTerminal: func() bool { return true }}
	ask := configInputPrompter(e)
	s := config.Server{Name: "x", Command: "srv", Transport: "stdio",
		Env: map[string]string{"KEY": "${input:api-key}", "REGION": "${input:region}"},
		Inputs: map[string]config.Input{
			"api-key": {ID: "api-key", Description: "API key", Password: true},
			"region":  {ID: "region", Description: "Region", Default: "eu"},
		}}
	got, secrets, err := config.ExpandServer(s, config.Resolver{LookupEnv: func(string) (string, bool) { return "", false }, Input: ask})
	if err != nil {
		t.Fatal(err)
	}
	if got.Env["KEY"] != "s3cret" || got.Env["REGION"] != "eu" {
		t.Errorf("env = %v, want the typed key and the region's default", got.Env)
	}
	if !reflect.DeepEqual(secrets, []string{"s3cret", "eu"}) {
		t.Errorf("secrets = %q", secrets)
	}
	if want := `API key (input "api-key"): Region (input "region") [eu]: `; stderr.String() != want {
		t.Errorf("prompts = %q, want %q", stderr.String(), want)
	}
	// A second server using the same input is not asked again.
	again, _, err := config.ExpandServer(s, config.Resolver{LookupEnv: func(string) (string, bool) { return "", false }, Input: ask})
	if err != nil || again.Env["KEY"] != "s3cret" || strings.Count(stderr.String(), "API key") != 1 {
		t.Errorf("second expansion asked again or failed: %v, %q", err, stderr.String())
	}
}

// TestConfigCheckReportsUnsetVariables: a VS Code file as VS Code writes
// it (a leading comment, trailing commas) is read, and each placeholder
// whose variable is unset and has no default is a problem naming the
// server, the field and the variable, never a value; a default, a set
// variable or a disabled server is none.
func TestConfigCheckReportsUnsetVariables(t *testing.T) {
	t.Parallel()
	path := writeConfigFixture(t, "proj/.vscode/mcp.json", `// Servers for this workspace.
{
  "servers": {
    "db": {
      "type": "stdio",
      "command": "db-mcp",
      "args": ["--mode=${MODE:-ro}", "--host=${DB_HOST}",],
      "env": {"TOKEN": "${DB_TOKEN}", "USER": "${DB_USER}",},
    },
    "off": {"type": "stdio", "command": "${NOPE}", "disabled": true},
  },
}
`)
	env := map[string]string{"DB_HOST": "db-host-value-not-shown"}
	r := runConfigCmd(t, false, "", env, "config", "check", path)
	r.want(t, exitOK)
	for _, want := range []string{
		`  problem       server "db": env.TOKEN: variable DB_TOKEN is not set and the placeholder has no default`,
		`  problem       server "db": env.USER: variable DB_USER is not set and the placeholder has no default`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Count(r.stdout, "problem") != 2 || strings.Contains(r.stdout, "db-host-value-not-shown") {
		t.Errorf("want exactly the two problems and no value:\n%s", r.stdout)
	}

	r = runConfigCmd(t, false, "", env, "config", "check", "--json", path)
	r.want(t, exitOK)
	var rep struct {
		Servers []struct {
			Name     string `json:"name"`
			Problems []struct {
				Field    string `json:"field"`
				Variable string `json:"variable"`
			} `json:"problems"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(rep.Servers) != 2 || len(rep.Servers[0].Problems) != 2 || rep.Servers[0].Problems[0].Field != "env.TOKEN" ||
		rep.Servers[0].Problems[0].Variable != "DB_TOKEN" || len(rep.Servers[1].Problems) != 0 {
		t.Errorf("problems = %+v", rep.Servers)
	}
}

// TestConfigCheckFailOnWarningsFailsCI is issue 23.8: with
// --fail-on-warnings, an ignored field or an unset variable makes config
// check exit 1 (a CI job fails); without it, or for a clean file, 0.
func TestConfigCheckFailOnWarningsFailsCI(t *testing.T) {
	t.Parallel()
	noisy := writeConfigFixture(t, "claude.json", `{"mcpServers": {"a": {"command": "x", "autoApprove": ["y"], "args": ["${TW_TEST_UNSET_VAR}"]}}}`)
	clean := writeConfigFixture(t, "clean.json", `{"mcpServers": {"a": {"command": "x", "args": ["${TW_TEST_UNSET_VAR:-ok}"]}}}`)
	f := &fixture{dir: t.TempDir(), config: clean}
	o := f.run(t, "", false, "config", "check", noisy)
	o.expect(t, exitOK)
	o = f.run(t, "", false, "config", "check", "--fail-on-warnings", noisy)
	o.expect(t, exitToolErr)
	mustContain(t, "stderr", o.stderr, "1 warning and 1 problem (--fail-on-warnings)")
	mustContain(t, "stdout", o.stdout, "autoApprove: ignored", "TW_TEST_UNSET_VAR is not set") // the report still printed
	o = f.run(t, "", false, "config", "check", "--fail-on-warnings", "--json", noisy)
	o.expect(t, exitToolErr)
	o = f.run(t, "", false, "config", "check", "--fail-on-warnings", clean)
	o.expect(t, exitOK)
}
