package main

// Tests of start-up with a server that never answers beside a working
// one (issue 23.1): a call starts only the server its name names, tools
// says what it still waits for, and run starts the model on the tools
// that are ready.

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/agent/agenttest"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
)

// deadServerMarked is a server that never answers, which leaves a file
// at marker when it is started.
func deadServerMarked(marker, timeout string) string {
	return `  dead:
    command: sh
    args: ["-c", ` + quoteYAML("touch "+marker+"; exec sleep 1000") + `]
    timeout: ` + timeout + `
`
}

// runTweaked runs the CLI with its start-up waits set, stderr on screen
// when screen is not nil.
func (f *fixture) runTweaked(t *testing.T, screen *ptyScreen, startWait, waitNote time.Duration, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		isTerminal: func() bool { return false },
		lookupEnv:  func(string) (string, bool) { return "", false },
		startWait:  startWait, waitNote: waitNote,
	}
	if screen != nil {
		e.stderr = screen.tty
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCommand(e)
	root.SetArgs(append([]string{"--config", f.config}, args...))
	var errOut bytes.Buffer
	code := exitCode(root.ExecuteContext(ctx), &errOut)
	return outcome{code, stdout.String(), stderr.String() + errOut.String()}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestCallStartsOnlyTheServerItsNameNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "dead-started")
	f := newFixture(t, deadServerMarked(marker, "10m"))
	o := f.run(t, "", false, "call", "demo__echo", "text=hi")
	o.expect(t, exitOK)
	if o.stdout != "hi\n" {
		t.Errorf("stdout = %q, want hi", o.stdout)
	}
	if exists(marker) {
		t.Errorf("calling demo__echo started the dead server too")
	}
	if strings.Contains(o.stderr, "dead") {
		t.Errorf("stderr speaks of the server not called:\n%s", o.stderr)
	}
}

func TestCallOfANameNoServerCouldHoldFailsAtOnceWithSuggestions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "dead-started")
	f := newFixture(t, deadServerMarked(marker, "10m")+`  off:
    command: /nonexistent
    disabled: true
`)
	for _, c := range []struct {
		name string
		want string
	}{
		{"demoo__echo", `unknown tool "demoo__echo": a tool's registered name starts with its server's prefix and "__"; did you mean demo__echo?`},
		{"echo", "did you mean dead__echo, demo__echo?"},
		{"off__x", `unknown tool "off__x": its server "off" is disabled in the configuration`},
		{"zzzzzzzz__echo", `unknown tool "zzzzzzzz__echo": a tool's registered name starts with its server's prefix and "__"`},
	} {
		o := f.run(t, "", false, "call", c.name)
		o.expect(t, exitUsage)
		mustContain(t, "stderr", o.stderr, c.want)
		if c.name == "zzzzzzzz__echo" && strings.Contains(o.stderr, "did you mean") {
			t.Errorf("a prefix like no server's gets suggestions:\n%s", o.stderr)
		}
	}
	if exists(marker) {
		t.Errorf("a name no server holds started the dead server")
	}
}

func TestToolsServerFlagListsOnlyThoseServers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "dead-started")
	f := newFixture(t, deadServerMarked(marker, "10m"))
	o := f.run(t, "", false, "tools", "--server", "demo")
	o.expect(t, exitOK)
	mustContain(t, "stdout", o.stdout, "demo__echo")
	if exists(marker) {
		t.Errorf("tools --server demo started the dead server")
	}
	o = f.run(t, "", false, "tools", "--server", "dmo")
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, `--server "dmo": no such server in the configuration; did you mean demo?`)
}

func TestToolsOnATerminalSaysWhichServersItStillWaitsFor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := newFixture(t, deadServerMarked(filepath.Join(dir, "m"), "3s"))
	screen := newPTY(t, 200)
	o := f.runTweaked(t, screen, 0, 100*time.Millisecond, "tools")
	o.expect(t, exitOK)
	mustContain(t, "stdout", o.stdout, "demo__echo")
	screen.wait(t, "toolwire: dead failed after ")
	shown := strings.ReplaceAll(screen.String(), "\r\n", "\n")
	mustContain(t, "terminal", shown, "toolwire: starting demo, dead…", "toolwire: demo ready in ", "toolwire: still waiting for ", "dead (")
	afterReady := shown[strings.Index(shown, "toolwire: demo ready in "):]
	for _, line := range strings.Split(afterReady, "\n") {
		if strings.HasPrefix(line, "toolwire: still waiting for ") && strings.Contains(line, "demo (") {
			t.Errorf("still waiting for demo after it was ready: %q", line)
		}
	}
}

// run starts the model on the tools of the servers ready, while one
// server never answers and another is held back; the held one's tools
// are in the model's next request once it is ready.
func TestRunStartsTheModelOnTheReadyToolsAndAddsLateOnes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	f := newFixture(t, deadServerMarked(filepath.Join(dir, "m"), "10m")+`  late:
    command: sh
    args: ["-c", `+quoteYAML(`for i in $(seq 1 600); do [ -e "$GATE" ] && exec "$DEMO"; sleep 0.05; done; exit 1`)+`]
    env:
      TOOLWIRE_TEST_SERVER: demo
      GATE: `+quoteYAML(gate)+`
      DEMO: `+quoteYAML(os.Args[0])+`
    sandbox:
      read: [`+quoteYAML(filepath.Dir(os.Args[0]))+`, `+quoteYAML(dir)+`]
`)
	screen := newPTY(t, 200)
	srv := agenttest.NewServer(t,
		func(w http.ResponseWriter, r *http.Request) {
			// The first request is made while late is held: let it
			// start, and answer once it is ready.
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Error(err)
			}
			select {
			case <-screen.Seen("toolwire: late ready in "):
			case <-time.After(30 * time.Second):
			}
			agenttest.OpenAIReply("", agenttest.Call{ID: "c1", Name: "demo__echo", Args: `{"text":"hi"}`})(w, r)
		},
		agenttest.OpenAIReply("done"))
	o := f.runTweaked(t, screen, 50*time.Millisecond, time.Hour, openaiArgs(srv, "x")...)
	o.expect(t, exitOK)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	first, second := agenttest.ToolNames(reqs[0]), agenttest.ToolNames(reqs[1])
	if !slices.Contains(first, "demo__echo") || slices.Contains(first, "late__echo") {
		t.Errorf("first request's tools = %v, want demo's and not late's", first)
	}
	if !slices.Contains(second, "late__echo") {
		t.Errorf("second request's tools = %v, want late's too", second)
	}
	for _, names := range [][]string{first, second} {
		for _, n := range names {
			if strings.HasPrefix(n, "dead__") {
				t.Errorf("a tool of the dead server offered: %s", n)
			}
		}
	}
	mustContain(t, "terminal", screen.String(), "toolwire: going on without ", "late (", "dead (", "their tools join when they are ready")
}

// TestStartLinesTakeTheStatesOpenReturned: a server that was ready when
// Open returned, whose change of state has not come through the channel
// yet, is shown ready, never named as one toolwire went on without.
func TestStartLinesTakeTheStatesOpenReturned(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{}
	lines := newStartLines(out, []config.Server{{Name: "demo"}}, time.Hour)
	lines.opened([]mcpclient.Status{{Name: "demo", State: mcpclient.Ready, Since: time.Now(), Tools: 3}})
	lines.finish()
	shown := out.String()
	if strings.Contains(shown, "going on without") || !strings.Contains(shown, "toolwire: demo ready in ") {
		t.Errorf("start-up lines of a server ready at Open's return:\n%s", shown)
	}
}
