package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/tool"
)

// TestMain lets the test binary double as the demo MCP server, so the CLI
// under test starts a real child process without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLWIRE_TEST_SERVER") == "demo-recording" {
		os.Exit(serveRecordingDemo()) // see call_cancel_test.go
	}
	if os.Getenv("TOOLWIRE_TEST_SERVER") == "asking" {
		if err := serveAsking(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("TOOLWIRE_TEST_SERVER") == "conditional" {
		if err := serveConditional(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("TOOLWIRE_TEST_SERVER") == "leaky" {
		if err := serveLeaky(context.Background()); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("TOOLWIRE_TEST_SERVER") == "demo" {
		err := demo.ServeStdio(context.Background(), &demo.Options{NotesFile: os.Getenv("DEMO_NOTES_FILE")})
		if os.Getenv("DEMO_IGNORE_EOF") != "" {
			select {} // a server that outlives its stdin, as a careless one may
		}
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Commands pin tools in the user's config directory by default: keep
	// the tests' pins out of the real one.
	configHome, err := os.MkdirTemp("", "toolwire-test-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", configHome)
	// Each sandboxed stdio server gets a state directory under
	// XDG_STATE_HOME: keep those out of the real one too.
	os.Setenv("XDG_STATE_HOME", filepath.Join(configHome, "state"))
	code := pgtest.Main(m) // the fleet tests' PostgreSQL, stopped after the tests
	os.RemoveAll(configHome)
	os.Exit(code)
}

// fixture is a temporary directory with a config naming the demo server.
type fixture struct {
	dir    string
	config string
	audit  string
	notes  string
}

func newFixture(t *testing.T, extraServers string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, config: filepath.Join(dir, "toolwire.yaml"), audit: filepath.Join(dir, "audit.jsonl"), notes: filepath.Join(dir, "notes.json")}
	cfg := `servers:
  demo:
    command: ` + quoteYAML(os.Args[0]) + `
    env:
      TOOLWIRE_TEST_SERVER: demo
      DEMO_NOTES_FILE: ` + quoteYAML(f.notes) + `
    sandbox:
      write: [` + quoteYAML(dir) + `] # the notes file
    tierOverrides:
      write_note: write
` + extraServers + `audit:
  file: audit.jsonl
security:
  pins: off # pinning has its own tests (pins_test.go), with its own fixture
`
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func quoteYAML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// outcome is what one CLI run produced.
type outcome struct {
	code           int
	stdout, stderr string
}

// run executes the CLI in-process with the given stdin and terminal status.
func (f *fixture) run(t *testing.T, stdin string, terminal bool, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin:      strings.NewReader(stdin),
		stdout:     &stdout,
		stderr:     &stderr,
		isTerminal: func() bool { return terminal },
		lookupEnv:  func(string) (string, bool) { return "", false },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCommand(e)
	root.SetArgs(append([]string{"--config", f.config}, args...))
	code := exitCode(root.ExecuteContext(ctx), &stderr)
	return outcome{code, stdout.String(), stderr.String()}
}

func (o outcome) expect(t *testing.T, code int) {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", o.code, code, o.stdout, o.stderr)
	}
}

func TestToolsTableShowsTiersFromConfigAndHints(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "tools")
	o.expect(t, exitOK)
	rows := map[string][]string{}
	for _, line := range strings.Split(o.stdout, "\n")[1:] {
		if fields := strings.Fields(line); len(fields) >= 4 {
			rows[fields[0]] = fields[1:4]
		}
	}
	// Each tier with where it came from: toolwire's default, the
	// operator's override, the server's destructiveHint.
	want := map[string][2]string{"demo__echo": {"read", "default"}, "demo__write_note": {"write", "override"}, "demo__delete_note": {"destructive", "hint"}}
	for name, tier := range want {
		got, ok := rows[name]
		if !ok {
			t.Fatalf("tool %s missing from table:\n%s", name, o.stdout)
		}
		if got[0] != tier[0] || got[1] != tier[1] || got[2] != "demo" {
			t.Errorf("%s: tier/from/server = %v, want %s/%s/demo", name, got, tier[0], tier[1])
		}
	}
	if len(rows) != 13 {
		t.Errorf("table has %d tools, want the demo's 13:\n%s", len(rows), o.stdout)
	}
}

func TestToolsJSONCarriesSchemas(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "tools", "--json")
	o.expect(t, exitOK)
	var tools []struct {
		Name        string          `json:"name"`
		Tier        string          `json:"tier"`
		Original    string          `json:"original"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &tools); err != nil {
		t.Fatalf("tools --json is not JSON: %v\n%s", err, o.stdout)
	}
	found := false
	for _, tl := range tools {
		if tl.Name == "demo__echo" {
			found = true
			if tl.Original != "echo" || tl.Tier != "read" || !bytes.Contains(tl.InputSchema, []byte(`"text"`)) {
				t.Errorf("demo__echo = %+v, want original echo, tier read, a schema naming text", tl)
			}
		}
	}
	if !found {
		t.Fatalf("demo__echo missing from %s", o.stdout)
	}
}

func TestCallReadToolPrintsText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "call", "demo__echo", "text=hello there")
	o.expect(t, exitOK)
	if o.stdout != "hello there\n" {
		t.Errorf("stdout = %q, want the echoed text", o.stdout)
	}
}

func TestCallKeyValueKeepsStringPropertiesAsText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	// echo's text is a string: 007 must stay "007", not become the number 7.
	o := f.run(t, "", false, "call", "demo__echo", "text=007")
	o.expect(t, exitOK)
	if o.stdout != "007\n" {
		t.Errorf("stdout = %q, want 007", o.stdout)
	}
	// add's a and b are numbers: the values parse as JSON.
	o = f.run(t, "", false, "call", "demo__add", "a=2", "b=3.5")
	o.expect(t, exitOK)
	if strings.TrimSpace(o.stdout) != "5.5" {
		t.Errorf("add 2 + 3.5 printed %q, want 5.5", o.stdout)
	}
}

func TestCallArgsFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "call", "demo__echo", "--args", `{"text":"from json"}`)
	o.expect(t, exitOK)
	if o.stdout != "from json\n" {
		t.Errorf("stdout = %q", o.stdout)
	}
	o = f.run(t, "", false, "call", "demo__echo", "--args", `{"text":"x"}`, "text=y")
	o.expect(t, exitUsage)
}

func TestCallWriteToolAsksAndRunsOnYes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "y\n", true, "call", "demo__write_note", "title=groceries", "body=milk")
	o.expect(t, exitOK)
	for _, want := range []string{"demo__write_note is a write tool", `"title": "groceries"`, "Run it? [y/N]"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("prompt lacks %q:\n%s", want, o.stderr)
		}
	}
	if !strings.Contains(o.stdout, `saved note "groceries"`) {
		t.Errorf("stdout = %q, want the server's confirmation", o.stdout)
	}
	if titles := f.noteTitles(t); len(titles) != 1 || titles[0] != "groceries" {
		t.Errorf("notes on disk = %v, want [groceries]", titles)
	}
}

func TestCallDestructiveToolDeclinedDoesNotRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.run(t, "", false, "call", "demo__write_note", "title=keep", "body=x", "--yes").expect(t, exitOK)
	for _, answer := range []string{"n\n", "\n", "yes please\n", ""} {
		o := f.run(t, answer, true, "call", "demo__delete_note", "title=keep")
		o.expect(t, exitDeclined)
		if !strings.Contains(o.stderr, "demo__delete_note is a destructive tool") {
			t.Errorf("answer %q: no prompt shown:\n%s", answer, o.stderr)
		}
	}
	if titles := f.noteTitles(t); len(titles) != 1 {
		t.Errorf("notes on disk = %v, want the note kept", titles)
	}
	o := f.run(t, "y\n", true, "call", "demo__delete_note", "title=keep")
	o.expect(t, exitOK)
	if titles := f.noteTitles(t); len(titles) != 0 {
		t.Errorf("notes on disk = %v after an approved delete, want none", titles)
	}
}

func TestCallWithoutTerminalIsRefusedUnlessYes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "y\n", false, "call", "demo__write_note", "title=t", "body=b")
	o.expect(t, exitDeclined)
	if !strings.Contains(o.stderr, "no terminal") || strings.Contains(o.stderr, "Run it?") {
		t.Errorf("want a refusal naming the missing terminal and no prompt:\n%s", o.stderr)
	}
	if titles := f.noteTitles(t); len(titles) != 0 {
		t.Errorf("refused call wrote notes %v", titles)
	}
	o = f.run(t, "", false, "call", "demo__write_note", "title=t", "body=b", "--yes")
	o.expect(t, exitOK)
	if strings.Contains(o.stderr, "Run it?") {
		t.Errorf("--yes still prompted:\n%s", o.stderr)
	}
}

func TestCallExitStatuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown tool", []string{"call", "demo__nope"}, exitUsage, `unknown tool "demo__nope"`},
		{"schema violation", []string{"call", "demo__add", "a=1", "b=x"}, exitUsage, "/b"},
		{"malformed json", []string{"call", "demo__echo", "--args", "{"}, exitUsage, "not valid JSON"},
		{"tool error", []string{"call", "demo__fail", "reason=boom"}, exitToolErr, "demo failure: boom"},
		{"bad pair", []string{"call", "demo__echo", "text"}, exitUsage, "want key=value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := f.run(t, "", false, c.args...)
			o.expect(t, c.code)
			if !strings.Contains(o.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, o.stderr)
			}
		})
	}
}

func TestCallJSONPrintsWholeResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "call", "demo__mislabeled_image", "--json")
	o.expect(t, exitOK)
	var res struct {
		Content []struct {
			Type     string `json:"type"`
			MIMEType string `json:"mimeType"`
			Data     string `json:"data"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, o.stdout)
	}
	if len(res.Content) == 0 || res.Content[0].Type != "image" {
		t.Fatalf("first block = %+v, want an image", res.Content)
	}
	// The server labels the PNG application/octet-stream; the bytes win.
	if res.Content[0].MIMEType != "image/png" {
		t.Errorf("mimeType = %q, want image/png from sniffing", res.Content[0].MIMEType)
	}
	data, err := base64.StdEncoding.DecodeString(res.Content[0].Data)
	if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("data does not decode to a PNG (err %v)", err)
	}
}

func TestCallShowsProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "call", "demo__slow_count", "steps=3", "interval_ms=5")
	o.expect(t, exitOK)
	if !strings.Contains(o.stderr, "progress 1/3: step 1 of 3") {
		t.Errorf("stderr lacks the first progress report:\n%s", o.stderr)
	}
}

func TestAuditFileRecordsEachStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.run(t, "", false, "call", "demo__echo", "text=secret-free").expect(t, exitOK)
	f.run(t, "n\n", true, "call", "demo__delete_note", "title=x").expect(t, exitDeclined)
	kinds := f.auditKinds(t)
	want := []audit.Kind{
		audit.ServerStarted, audit.CallRequested, audit.ValidationPassed, audit.CallExecuted, audit.ServerStopped,
		audit.ServerStarted, audit.CallRequested, audit.ValidationPassed, audit.ConfirmationRequested, audit.ConfirmationRejected, audit.ServerStopped,
	}
	if strings.Join(kindStrings(kinds), ",") != strings.Join(kindStrings(want), ",") {
		t.Errorf("audit kinds = %v, want %v", kinds, want)
	}
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("secret-free")) {
		t.Errorf("audit log holds argument text although argument logging is off:\n%s", raw)
	}
}

func TestServerThatFailsIsReportedAndOthersWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `  broken:
    command: /nonexistent/mcp-server
    args: [--flag]
`)
	o := f.run(t, "", false, "tools")
	o.expect(t, exitOK)
	if !strings.Contains(o.stderr, `server "broken"`) || !strings.Contains(o.stderr, "/nonexistent/mcp-server --flag") {
		t.Errorf("warning does not name the server and command:\n%s", o.stderr)
	}
	mustContain(t, "stdout", o.stdout, "demo__echo")
	// A call starts only the server its name names: the broken one's
	// failure is the call's.
	o = f.run(t, "", false, "call", "broken__x")
	o.expect(t, exitToolErr)
	mustContain(t, "stderr", o.stderr, `server "broken"`, "/nonexistent/mcp-server --flag", "no server could be started")
}

func TestConfigErrorNamesFieldAndLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("servers:\n  demo:\n    command: x\n    defaultTier: admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, config: path}
	o := f.run(t, "", false, "tools")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, ":4:") || !strings.Contains(o.stderr, "defaultTier") {
		t.Errorf("error does not name line 4 and the field:\n%s", o.stderr)
	}
}

func (f *fixture) noteTitles(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(f.notes)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var notes map[string]string
	if err := json.Unmarshal(raw, &notes); err != nil {
		t.Fatalf("notes file: %v\n%s", err, raw)
	}
	var titles []string
	for k := range notes {
		titles = append(titles, k)
	}
	return titles
}

func (f *fixture) auditKinds(t *testing.T) []audit.Kind {
	t.Helper()
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []audit.Kind
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev audit.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

func kindStrings(ks []audit.Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

func TestServersCombinesConfigFilesOfDifferentDialects(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	claude := filepath.Join(f.dir, "claude_desktop_config.json")
	entry := map[string]any{"command": os.Args[0], "env": map[string]string{"TOOLWIRE_TEST_SERVER": "demo"}}
	raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"other": entry}, "globalShortcut": "Ctrl+Space"})
	if err := os.WriteFile(claude, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	o := f.run(t, "", false, "servers", "--json", "--config", claude)
	o.expect(t, exitOK)
	var sts []struct {
		Name, State, Protocol string
		Tools                 int
	}
	if err := json.Unmarshal([]byte(o.stdout), &sts); err != nil {
		t.Fatalf("servers --json: %v\n%s", err, o.stdout)
	}
	if len(sts) != 2 || sts[0].Name != "demo" || sts[1].Name != "other" {
		t.Fatalf("servers = %+v, want demo then other", sts)
	}
	for _, st := range sts {
		if st.State != "ready" || st.Tools != 13 {
			t.Errorf("server %s: state %s with %d tools, want ready with 13", st.Name, st.State, st.Tools)
		}
		// The demo is a go-sdk v1.8.0 server over stdio.
		if st.Protocol != "2026-07-28" {
			t.Errorf("server %s: protocol %q, want 2026-07-28", st.Name, st.Protocol)
		}
	}

	// The same name in two files is refused, naming both places.
	dup := filepath.Join(f.dir, "dup.json")
	raw, _ = json.Marshal(map[string]any{"mcpServers": map[string]any{"demo": entry}})
	if err := os.WriteFile(dup, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	o = f.run(t, "", false, "servers", "--config", dup)
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, `server "demo" is also defined at `+f.config) || !strings.Contains(o.stderr, dup) {
		t.Errorf("duplicate across files not named:\n%s", o.stderr)
	}
}

func TestServersTableShowsEveryServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, `  broken:
    command: /nonexistent/mcp-server
`)
	o := f.run(t, "", false, "servers")
	o.expect(t, exitOK)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("servers table:\n%s", o.stdout)
	}
	if f := strings.Fields(lines[1]); f[0] != "demo" || f[1] != "stdio" || f[2] != "ready" || f[3] != "13" || f[5] != "2026-07-28" {
		t.Errorf("demo row = %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "broken" || f[2] != "failed" || !strings.Contains(lines[2], "/nonexistent/mcp-server") {
		t.Errorf("broken row = %q", lines[2])
	}
}

func TestCallOfAnUnknownToolSuggestsTheClosestNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "call", "demo__ecko", "text=hi")
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, `unknown tool "demo__ecko"; did you mean demo__echo?`)
	o = f.run(t, "", false, "call", "write_note")
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, "did you mean demo__write_note")
}

func TestMissingConfigFileSaysNoSuchFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.config = filepath.Join(f.dir, "nope.yaml")
	o := f.run(t, "", false, "tools")
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, "configuration "+f.config+": no such file")
	// config check reads the file itself: it too calls it missing, not invalid.
	c := f.run(t, "", false, "config", "check", f.config)
	c.expect(t, exitUsage)
	mustContain(t, "config check's stderr", c.stderr, "configuration "+f.config+": no such file")
	if strings.Contains(c.stderr, "not a valid configuration") {
		t.Errorf("config check's stderr = %s", c.stderr)
	}
}

func TestCallErrorNamesTheToolOnce(t *testing.T) {
	t.Parallel()
	for _, res := range []*tool.Result{
		tool.ErrorResult(tool.ReasonCancelled, `tool "demo__slow" was cancelled`),
		tool.ErrorResult(tool.ReasonTimeout, `tool "demo__slow" timed out: context deadline exceeded`),
		tool.ErrorResult(tool.ReasonTool, `disk full`),
	} {
		err := resultError("demo__slow", res, nil)
		if n := strings.Count(err.Error(), "demo__slow"); n != 1 {
			t.Errorf("%s: error %q names the tool %d times, want once", res.Reason, err, n)
		}
	}
}
