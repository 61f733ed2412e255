package mcpclient

// The reference servers from npm (pinned in interop/ts/package.json,
// installed by scripts/npm-deps.sh) as servers of toolwire's client: the
// everything server's task-based tool, over stdio and Streamable HTTP, and
// the filesystem server's roots. Without Node.js or the packages the tests
// are skipped, except under CI=true, where they fail.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// npmServer returns node and the entry point of the installed npm package
// pkg (a path under node_modules), skipping (or failing, under CI=true)
// when either is missing or the installed version is not the pinned one.
func npmServer(t *testing.T, pkg, entry string) (node, script string) {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format+" (CI=true: CI installs node and runs scripts/npm-deps.sh, so this is a failure)", args...)
		}
		t.Skipf(format+"; run scripts/npm-deps.sh (needs Node >= 20) to enable this test", args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node not found: %v", err)
	}
	dir := os.Getenv("TOOLWIRE_NPM_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			unavailable("no TOOLWIRE_NPM_DIR and no home directory: %v", err)
		}
		dir = filepath.Join(home, ".cache", "toolwire-npm")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
	if err != nil {
		unavailable("%s is not installed in %s: %v", pkg, dir, err)
	}
	var installed struct{ Version string }
	_ = json.Unmarshal(raw, &installed)
	manifest, err := os.ReadFile(filepath.Join("..", "interop", "ts", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pinned struct{ Dependencies map[string]string }
	if err := json.Unmarshal(manifest, &pinned); err != nil {
		t.Fatalf("interop/ts/package.json: %v", err)
	}
	if want := pinned.Dependencies[pkg]; installed.Version != want {
		unavailable("%s has %s %q, interop/ts/package.json pins %q", dir, pkg, installed.Version, want)
	}
	return node, filepath.Join(dir, "node_modules", pkg, entry)
}

// everythingStdio is the configuration of the everything server over
// stdio.
func everythingStdio(t *testing.T) config.Server {
	node, script := npmServer(t, "@modelcontextprotocol/server-everything", "dist/index.js")
	return config.Server{Name: "every", Transport: "stdio", Command: node, Args: []string{script, "stdio"}, DefaultTier: "read"}
}

// bindLoopback is a module node preloads into the everything server over
// HTTP: it makes the server listen on 127.0.0.1 on a port of the system's
// choosing (the server would listen on every address, on PORT or 3001)
// and writes "listening on PORT" to stderr.
const bindLoopback = `
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const cb = args.find((a) => typeof a === "function");
  this.once("listening", () => process.stderr.write("listening on " + this.address().port + "\n"));
  return cb ? listen.call(this, 0, "127.0.0.1", cb) : listen.call(this, 0, "127.0.0.1");
};
`

// everythingHTTP starts the everything server over Streamable HTTP on
// 127.0.0.1 for the test and returns its configuration.
func everythingHTTP(t *testing.T) config.Server {
	node, script := npmServer(t, "@modelcontextprotocol/server-everything", "dist/index.js")
	preload := filepath.Join(t.TempDir(), "bind-loopback.cjs")
	if err := os.WriteFile(preload, []byte(bindLoopback), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--require", preload, script, "streamableHttp")
	cmd.Env = childEnv(nil)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killGroup(cmd.Process.Pid)
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				port <- p
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case p := <-port:
		return config.Server{Name: "every", Transport: "http", URL: "http://127.0.0.1:" + p + "/mcp", DefaultTier: "read"}
	case <-boundedCtx(t, waitTime).Done():
		t.Fatal("the everything server did not start listening")
	}
	return config.Server{}
}

// researchCaller answers the research tool's clarification and keeps the
// progress it is shown.
type researchCaller struct {
	answer string // the interpretation chosen

	mu       sync.Mutex
	progress []tool.Progress
	asked    []string // the messages of the elicitations
	first    chan struct{}
	once     sync.Once
}

func (c *researchCaller) Progress(_ context.Context, p tool.Progress) {
	c.mu.Lock()
	c.progress = append(c.progress, p)
	c.mu.Unlock()
	if c.first != nil {
		c.once.Do(func() { close(c.first) })
	}
}

func (c *researchCaller) Ask(_ context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	if kind != tool.Elicitation {
		return nil, tool.ErrNotSupported
	}
	var p struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(params, &p)
	c.mu.Lock()
	c.asked = append(c.asked, p.Message)
	c.mu.Unlock()
	return json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"interpretation": c.answer}})
}

func (c *researchCaller) messages() (progress, asked []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.progress {
		progress = append(progress, p.Message)
	}
	return progress, append([]string(nil), c.asked...)
}

// researchTool is the everything server's tool that requires a task.
const researchTool = "every__simulate-research-query"

// connectEverything connects the everything server with elicitation
// relayed and waits until its research tool is registered: the server
// adds it once initialized, announcing it with list_changed.
func connectEverything(t *testing.T, cfg config.Server) (*Server, *tool.Registry) {
	t.Helper()
	watch, log := newAuditWatch()
	reg := confirmingRegistry()
	s := connect(t, cfg, reg, &Options{Audit: log, Relay: RelayCapabilities{Elicitation: true}})
	if _, ok := reg.Lookup(researchTool); !ok {
		watch.waitFor(t, boundedCtx(t, waitTime), "the research tool", func([]audit.Event) bool {
			_, ok := reg.Lookup(researchTool)
			return ok
		})
	}
	return s, reg
}

// The everything server's simulate-research-query requires a task
// (2025-11-25's design): toolwire calls it as one, over stdio and
// Streamable HTTP, relays its clarification to the call's caller and its
// status messages as progress, and returns the report.
func TestATaskOfTheEverythingServer(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			cfg := everythingStdio(t)
			if transport == "http" {
				cfg = everythingHTTP(t)
			}
			s, reg := connectEverything(t, cfg)
			if p := s.Status().Protocol; p != "2025-11-25" {
				t.Errorf("negotiated %q, want 2025-11-25 (the server answers server/discover with an error)", p)
			}
			c := &researchCaller{answer: "programming"}
			res := tool.NewExecutor(reg, nil).Call(tool.WithCaller(boundedCtx(t, waitTime), c), researchTool,
				json.RawMessage(`{"topic":"python","ambiguous":true}`))
			if res.IsError {
				t.Fatalf("the research call failed: %s", res.Message)
			}
			if !strings.Contains(res.Text(), "# Research Report: python (programming)") {
				t.Errorf("the result is not the report with the clarification: %.200q", res.Text())
			}
			progress, asked := c.messages()
			if len(asked) != 1 || !strings.Contains(asked[0], `"python" could have multiple interpretations`) {
				t.Errorf("the caller was asked %q, want the one clarification", asked)
			}
			// Each status lasts about a second, as long as the server's
			// poll interval, so a poll may fall on either side of one: what
			// is shown is the server's statuses in its order, from the
			// first (which the task's creation carries), with none made up.
			statuses := []string{"Gathering sources...", "Analyzing content...",
				`Found multiple interpretations for "python". Requesting clarification...`,
				`Continuing with interpretation: "programming"...`, "Synthesizing findings...", "Generating report..."}
			if len(progress) == 0 || progress[0] != statuses[0] {
				t.Errorf("progress shown %q, want it to start with %q", progress, statuses[0])
			}
			next := 0
			for _, p := range progress {
				i := slices.Index(statuses[next:], p)
				if i < 0 {
					t.Errorf("progress shown %q: %q is not one of the server's statuses after %q", progress, p, statuses[:next])
					break
				}
				next += i + 1
			}
		})
	}
}

// Cancelling a task's call cancels the task on the server.
func TestCancellingATaskCancelsItOnTheServer(t *testing.T) {
	t.Parallel()
	s, reg := connectEverything(t, everythingStdio(t))
	ctx, cancel := context.WithCancel(boundedCtx(t, waitTime))
	c := &researchCaller{first: make(chan struct{})}
	done := make(chan *tool.Result, 1)
	go func() {
		done <- tool.NewExecutor(reg, nil).Call(tool.WithCaller(ctx, c), researchTool, json.RawMessage(`{"topic":"go"}`))
	}()
	select {
	case <-c.first: // the task is running
	case res := <-done:
		t.Fatalf("the call ended before any progress: %+v", res)
	}
	var id string
	s.relay.tasks.Range(func(k, _ any) bool { id = k.(string); return false })
	cancel()
	if res := <-done; res.Reason != tool.ReasonCancelled {
		t.Fatalf("the cancelled call ended as %+v", res)
	}
	if id == "" {
		t.Fatal("no task was followed")
	}
	got, err := s.getTask(boundedCtx(t, waitTime), s.sup.current(), &taskState{TaskID: id}, tasks2025)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "cancelled" {
		t.Errorf("the task is %q on the server, want cancelled", got.Status)
	}
}

// stderrWatch is a slog.Handler that keeps the stderr lines a server's
// connection logs and tells when one holds a text.
type stderrWatch struct {
	mu    sync.Mutex
	lines []string
	want  string
	seen  chan struct{}
	once  sync.Once
}

func (w *stderrWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *stderrWatch) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *stderrWatch) WithGroup(string) slog.Handler            { return w }

func (w *stderrWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "server stderr" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			line := a.Value.String()
			w.mu.Lock()
			w.lines = append(w.lines, line)
			w.mu.Unlock()
			if strings.Contains(line, w.want) {
				w.once.Do(func() { close(w.seen) })
			}
		}
		return true
	})
	return nil
}

func (w *stderrWatch) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// The filesystem server takes its allowed directories from the roots
// toolwire offers it, in place of those on its command line; offered none,
// it keeps those (and with none on its command line, it allows nothing).
func TestTheFilesystemServerTakesItsDirectoriesFromRoots(t *testing.T) {
	t.Parallel()
	node, script := npmServer(t, "@modelcontextprotocol/server-filesystem", "dist/index.js")
	rooted, listed := t.TempDir(), t.TempDir()
	for _, dir := range []string{rooted, listed} {
		if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("in "+filepath.Base(dir)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name            string
		args, roots     []string
		ready           string // the server's stderr line once its directories are set
		allowed, denied []string
	}{
		{"roots only", nil, []string{rooted}, "Updated allowed directories from MCP roots: 1 valid directories", []string{rooted}, []string{listed}},
		{"roots replace the arguments", []string{listed}, []string{rooted}, "Updated allowed directories from MCP roots: 1 valid directories", []string{rooted}, []string{listed}},
		{"arguments without roots", []string{listed}, nil, "Client does not support MCP Roots", []string{listed}, []string{rooted}},
		{"neither", nil, nil, "Started without allowed directories", nil, []string{rooted, listed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			watch := &stderrWatch{want: tc.ready, seen: make(chan struct{})}
			cfg := config.Server{Name: "fs", Transport: "stdio", Command: node, Args: append([]string{script}, tc.args...), DefaultTier: "read", Roots: tc.roots}
			reg := confirmingRegistry()
			connect(t, cfg, reg, &Options{Logger: slog.New(watch)})
			select {
			case <-watch.seen:
			case <-boundedCtx(t, waitTime).Done():
				t.Fatalf("the server never said %q; its stderr:\n%s", tc.ready, watch.text())
			}
			ex := tool.NewExecutor(reg, nil)
			got := call(t, ex, "fs__list_allowed_directories", `{}`)
			dirs := strings.Split(strings.TrimSpace(strings.TrimPrefix(got.Text(), "Allowed directories:")), "\n")
			if strings.TrimSpace(strings.Join(dirs, "")) == "" {
				dirs = nil
			}
			if strings.Join(dirs, " ") != strings.Join(tc.allowed, " ") {
				t.Errorf("allowed directories %q, want %q", dirs, tc.allowed)
			}
			for _, dir := range tc.allowed {
				res := call(t, ex, "fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "note.txt")))
				if res.IsError || res.Text() != "in "+filepath.Base(dir) {
					t.Errorf("reading in %s: %q (%s)", dir, res.Text(), res.Message)
				}
			}
			for _, dir := range tc.denied {
				res := call(t, ex, "fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "note.txt")))
				if !res.IsError || !strings.Contains(res.Message+res.Text(), "Access denied") {
					t.Errorf("reading in %s: %q (%s), want access denied", dir, res.Text(), res.Message)
				}
			}
		})
	}
}
