package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveStdio runs "toolwire serve --stdio" in-process on pipes and connects
// a go-sdk client to it with opts. The demo server behind it is a real
// child process.
func (f *fixture) serveStdio(t *testing.T, opts *mcp.ClientOptions, extra ...string) *mcp.ClientSession {
	t.Helper()
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	var stderr syncBuffer
	e := &env{stdin: toServer, stdout: fromServer, stderr: &stderr, isTerminal: func() bool { return false }, lookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan int, 1)
	go func() {
		root := newRootCommand(e)
		root.SetArgs(append([]string{"--config", f.config, "serve", "--stdio"}, extra...))
		done <- exitCode(root.ExecuteContext(ctx), &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		_ = fromClient.Close()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("serve exited %d\n%s", code, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop\n%s", stderr.String())
		}
	})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts).Connect(ctx,
		&mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatalf("connect to serve --stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestServeStdioOffersTheRegistryThroughThePolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	var asked []string
	cs := f.serveStdio(t, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		approve := strings.Contains(req.Params.Message, "write_note") // approve writes, refuse deletes
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		byName[tl.Name] = tl
	}
	if len(byName) != 13 {
		t.Fatalf("serve lists %d tools, want the demo's 13", len(byName))
	}
	if a := byName["demo__echo"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("demo__echo annotations = %+v, want readOnlyHint", a)
	}
	if a := byName["demo__delete_note"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("demo__delete_note annotations = %+v, want destructiveHint", a)
	}
	if a := byName["demo__write_note"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint != nil {
		t.Errorf("demo__write_note annotations = %+v, want neither hint", a)
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if res := call("demo__echo", map[string]any{"text": "through the gateway"}); res.IsError || resultText(res) != "through the gateway" {
		t.Errorf("echo = %q", resultText(res))
	}
	if res := call("demo__write_note", map[string]any{"title": "kept", "body": "b"}); res.IsError {
		t.Errorf("approved write = %q", resultText(res))
	}
	res := call("demo__delete_note", map[string]any{"title": "kept"})
	if !res.IsError || !strings.Contains(resultText(res), "declined") {
		t.Errorf("refused delete = %q", resultText(res))
	}
	if titles := f.noteTitles(t); len(titles) != 1 || titles[0] != "kept" {
		t.Errorf("notes on disk = %v, want [kept]: the refused delete must not run", titles)
	}
	if len(asked) != 2 || !strings.Contains(asked[1], `"title": "kept"`) {
		t.Errorf("approval prompts = %q", asked)
	}
	kinds := strings.Join(kindStrings(f.auditKinds(t)), " ")
	if !strings.Contains(kinds, "confirmation.requested confirmation.rejected") || !strings.Contains(kinds, "confirmation.accepted call.executed") {
		t.Errorf("audit = %s", kinds)
	}
}

func TestServeStdioRefusesWritesWhenTheClientCannotBeAsked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	cs := f.serveStdio(t, nil, "--operator-wait", "0s") // refused at once, not after waiting for an operator
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": "x", "body": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(resultText(res), "approval required") {
		t.Errorf("write without elicitation = %q", resultText(res))
	}
	if titles := f.noteTitles(t); len(titles) != 0 {
		t.Errorf("notes written without approval: %v", titles)
	}
}

func TestServeFlags(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "exactly one of --stdio and --http"},
		{[]string{"serve", "--stdio", "--http", "127.0.0.1:0"}, "exactly one"},
		{[]string{"serve", "--stdio", "--stateless"}, "--stateless goes with --http"},
		{[]string{"serve", "--http", "0.0.0.0:0"}, "only loopback"},
		{[]string{"serve", "--stdio", "--approve-write", "maybe"}, `unknown approval "maybe"`},
	} {
		o := f.run(t, "", false, c.args...)
		o.expect(t, exitUsage)
		if !strings.Contains(o.stderr, c.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", c.args, c.want, o.stderr)
		}
	}
}

func TestServeUnprefixed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	cs := f.serveStdio(t, nil, "--unprefixed")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "plain name"}})
	if err != nil || res.IsError || resultText(res) != "plain name" {
		t.Fatalf("echo under its own name = %v, %v", res, err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Error("the prefixed name is still served")
	}

	// Two upstreams with the same tools collide: refused, naming both.
	g := newFixture(t, `  second:
    command: `+quoteYAML(os.Args[0])+`
    env: {TOOLWIRE_TEST_SERVER: demo}
`)
	o := g.run(t, "", false, "serve", "--stdio", "--unprefixed")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, `"demo__add"`) || !strings.Contains(o.stderr, `"second__add"`) {
		t.Errorf("collision not named:\n%s", o.stderr)
	}
}

// A client's progress token and its cancellation travel through the
// gateway to the upstream server: the upstream's progress report reaches
// the client under the client's token, and cancelling the client's call
// cancels the upstream call (its stats count it).
func TestServeRelaysProgressAndCancellationUpstream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	started := make(chan struct{}, 1)
	cs := f.serveStdio(t, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		if req.Params.ProgressToken == "client-token" {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	callCtx, cancelCall := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "demo__wait_for_cancel", Arguments: map[string]any{}}
		params.SetProgressToken("client-token")
		_, err := cs.CallTool(callCtx, params)
		done <- err
	}()
	select {
	case <-started: // the upstream call is running: its first progress report arrived
	case <-ctx.Done():
		t.Fatal("no progress from the upstream reached the client")
	}
	cancelCall()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the cancelled call returned a result")
		}
	case <-ctx.Done():
		t.Fatal("the cancelled call did not return")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__stats", Arguments: map[string]any{"wait_for_cancelled": 1}})
	if err != nil || res.IsError {
		t.Fatalf("stats = %v, %v", res, err)
	}
	var stats struct{ Cancelled int }
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &stats); err != nil || stats.Cancelled < 1 {
		t.Errorf("upstream stats = %s, want at least one cancelled call", raw)
	}
}

// TestServeHostFileToolsAreNotReadOnly: a Claude Desktop file has no
// tiers, so its tools are write: serve neither runs them unasked nor tells
// its clients that they only read.
func TestServeHostFileToolsAreNotReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	raw, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"demo": map[string]any{
		"command": os.Args[0],
		"env":     map[string]string{"TOOLWIRE_TEST_SERVER": "demo", "DEMO_NOTES_FILE": f.notes},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	f.config = filepath.Join(f.dir, "claude_desktop_config.json")
	if err := os.WriteFile(f.config, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cs := f.serveStdio(t, nil, "--operator-wait", "0s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var echo *mcp.Tool
	for _, tl := range list.Tools {
		if tl.Name == "demo__echo" {
			echo = tl
		}
	}
	if echo == nil || echo.Annotations == nil || echo.Annotations.ReadOnlyHint {
		t.Fatalf("demo__echo from a host file: %+v, want listed without readOnlyHint", echo)
	}
	// And it is asked for: this client cannot be asked, so it is refused.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || resultText(res) == "hi" {
		t.Errorf("unconfirmed write ran: %+v", res)
	}
}

// A malformed line gets a JSON-RPC parse error and the gateway serves on.
func TestServeStdioAnswersAMalformedLineAndKeepsServing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	var stderr syncBuffer
	e := &env{stdin: toServer, stdout: fromServer, stderr: &stderr, isTerminal: func() bool { return false }, lookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		root := newRootCommand(e)
		root.SetArgs([]string{"--config", f.config, "serve", "--stdio"})
		done <- exitCode(root.ExecuteContext(ctx), &stderr)
	}()
	lines := bufio.NewReader(toClient)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(fromClient, s+"\n"); err != nil {
			t.Fatalf("write %q: %v\n%s", s, err, stderr.String())
		}
	}
	read := func() string {
		t.Helper()
		type got struct {
			line string
			err  error
		}
		ch := make(chan got, 1)
		go func() { line, err := lines.ReadString('\n'); ch <- got{line, err} }()
		select {
		case g := <-ch:
			if g.err != nil {
				t.Fatalf("read: %v\n%s", g.err, stderr.String())
			}
			return g.line
		case <-time.After(20 * time.Second):
			t.Fatalf("no answer from serve --stdio in 20 s\n%s", stderr.String())
		}
		return ""
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize",oops}`)
	if got := read(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`) {
		t.Errorf("answer to a malformed line = %q, want a parse error", got)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if got := read(); !strings.Contains(got, `"id":2`) || !strings.Contains(got, `"result"`) {
		t.Errorf("answer to initialize after the malformed line = %q", got)
	}
	_ = fromClient.Close()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve exited %d\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("serve did not stop\n%s", stderr.String())
	}
}
