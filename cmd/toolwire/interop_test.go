package main

// Interoperability: the official MCP TypeScript SDK (npm
// @modelcontextprotocol/sdk, pinned in interop/ts/package.json) as a client
// of "toolwire serve --http". scripts/npm-deps.sh installs the SDK; without
// it, or without node, the test is skipped, except under CI=true, where it
// fails because CI installs both.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	interopStartTimeout  = 90 * time.Second // serve: demo server up and listening (slow under -race)
	interopClientTimeout = 90 * time.Second // node client.mjs from start to exit
	interopStopTimeout   = 20 * time.Second // serve: from cancel to return
)

// interopSDK returns node and the directory of the installed npm packages,
// skipping (or failing, under CI=true) when either is missing.
func interopSDK(t *testing.T) (node, npmDir string) {
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
	npmDir = os.Getenv("TOOLWIRE_NPM_DIR")
	if npmDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			unavailable("no TOOLWIRE_NPM_DIR and no home directory: %v", err)
		}
		npmDir = filepath.Join(home, ".cache", "toolwire-npm")
	}
	sdk := filepath.Join(npmDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	raw, err := os.ReadFile(sdk)
	if err != nil {
		unavailable("the MCP TypeScript SDK is not installed in %s: %v", npmDir, err)
	}
	var installed struct{ Version string }
	var pinned struct{ Dependencies map[string]string }
	_ = json.Unmarshal(raw, &installed)
	manifest, err := os.ReadFile(filepath.Join("..", "..", "interop", "ts", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(manifest, &pinned); err != nil {
		t.Fatalf("interop/ts/package.json: %v", err)
	}
	if want := pinned.Dependencies["@modelcontextprotocol/sdk"]; installed.Version != want {
		unavailable("%s has @modelcontextprotocol/sdk %q, interop/ts/package.json pins %q", npmDir, installed.Version, want)
	}
	t.Logf("node %s, @modelcontextprotocol/sdk %s from %s", node, installed.Version, npmDir)
	return node, npmDir
}

// tsCallResult is a CallToolResult as the TypeScript client printed it.
type tsCallResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (r tsCallResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// TestTypeScriptClientThroughServeHTTP runs "toolwire serve --http"
// in-process over the demo server and has interop/ts/client.mjs, which
// declares no elicitation capability, list the tools and call three of
// them through it.
func TestTypeScriptClientThroughServeHTTP(t *testing.T) {
	t.Parallel() // mostly waiting on other processes: runs beside the rest
	node, npmDir := interopSDK(t)
	client, err := filepath.Abs(filepath.Join("..", "..", "interop", "ts", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}

	// An ES module resolves its imports from its own directory (NODE_PATH
	// does not apply), so the client runs as a copy next to a link to the
	// installed node_modules.
	work := t.TempDir()
	src, err := os.ReadFile(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "client.mjs"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(npmDir, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}

	f := newFixture(t, "")
	// A note the refused delete must leave alone.
	if err := os.WriteFile(f.notes, []byte(`{"x":"keep me"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	// serve --http on a free loopback port, until cancel.
	stderr := &urlStderr{url: make(chan string, 1)}
	e := &env{stdin: strings.NewReader(""), stdout: &syncBuffer{}, stderr: stderr,
		isTerminal: func() bool { return false }, lookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		root := newRootCommand(e)
		// --operator-wait 0s: the client cannot be asked, and its delete is
		// refused at once rather than after waiting for an operator.
		root.SetArgs([]string{"--config", f.config, "serve", "--http", "127.0.0.1:0", "--operator-wait", "0s"})
		done <- exitCode(root.ExecuteContext(ctx), stderr)
	}()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			select {
			case code := <-done:
				if code != exitOK {
					t.Errorf("serve exited %d after cancel, want %d\nstderr:\n%s", code, exitOK, stderr.String())
				}
			case <-time.After(interopStopTimeout):
				t.Errorf("serve did not return within %s of cancel\nstderr:\n%s", interopStopTimeout, stderr.String())
			}
		})
	}
	t.Cleanup(stop)

	var url string
	select {
	case url = <-stderr.url:
	case code := <-done:
		done <- code
		t.Fatalf("serve exited %d before serving\nstderr:\n%s", code, stderr.String())
	case <-time.After(interopStartTimeout):
		t.Fatalf("serve printed no URL within %s\nstderr:\n%s", interopStartTimeout, stderr.String())
	}
	t.Logf("serving at %s", url)

	// The TypeScript client, bounded.
	cctx, ccancel := context.WithTimeout(context.Background(), interopClientTimeout)
	defer ccancel()
	cmd := exec.CommandContext(cctx, node, filepath.Join(work, "client.mjs"), url)
	cmd.Dir = work
	cmd.WaitDelay = 5 * time.Second
	var cout, cerr syncBuffer
	cmd.Stdout, cmd.Stderr = &cout, &cerr
	started := time.Now()
	if err := cmd.Run(); err != nil {
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			err = errors.Join(err, cctx.Err())
		}
		t.Fatalf("node client.mjs %s: %v\nstdout:\n%s\nstderr:\n%s\nserve's stderr:\n%s", url, err, cout.String(), cerr.String(), stderr.String())
	}
	t.Logf("client.mjs ran in %s", time.Since(started).Round(time.Millisecond))
	if s := cerr.String(); s != "" {
		t.Logf("client.mjs stderr:\n%s", s)
	}

	var out struct {
		Server struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"server"`
		ProtocolVersion string `json:"protocolVersion"`
		Tools           []struct {
			Name        string `json:"name"`
			Annotations *struct {
				ReadOnlyHint    *bool `json:"readOnlyHint"`
				DestructiveHint *bool `json:"destructiveHint"`
			} `json:"annotations"`
		} `json:"tools"`
		Echo    tsCallResult `json:"echo"`
		Delete  tsCallResult `json:"delete"`
		Invalid tsCallResult `json:"invalid"`
	}
	if err := json.Unmarshal([]byte(cout.String()), &out); err != nil {
		t.Fatalf("client.mjs printed no JSON object: %v\n%s", err, cout.String())
	}
	t.Logf("TypeScript client talked to %s %s, protocol %s", out.Server.Name, out.Server.Version, out.ProtocolVersion)

	// Listing: the demo's 13 tools, with annotations from their tiers.
	var names []string
	var readOnly, destructive []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
		if a := tl.Annotations; a != nil {
			if a.ReadOnlyHint != nil && *a.ReadOnlyHint {
				readOnly = append(readOnly, tl.Name)
			}
			if a.DestructiveHint != nil && *a.DestructiveHint {
				destructive = append(destructive, tl.Name)
			}
		}
	}
	demoTools := 0
	for _, n := range names {
		if strings.HasPrefix(n, "demo__") {
			demoTools++
		}
	}
	if len(names) != 13 || demoTools != 13 {
		t.Errorf("the TypeScript client lists %v, want the demo's 13 tools", names)
	}
	if !slices.Contains(readOnly, "demo__echo") || slices.Contains(destructive, "demo__echo") {
		t.Errorf("demo__echo: readOnlyHint on %v, destructiveHint on %v; want readOnlyHint only", readOnly, destructive)
	}
	if !slices.Contains(destructive, "demo__delete_note") || slices.Contains(readOnly, "demo__delete_note") {
		t.Errorf("demo__delete_note: readOnlyHint on %v, destructiveHint on %v; want destructiveHint only", readOnly, destructive)
	}

	// A read call runs.
	if out.Echo.IsError || out.Echo.text() != "from typescript" {
		t.Errorf("demo__echo = %+v, want the text back", out.Echo)
	}
	// A destructive call from a client that cannot be asked is refused,
	// and does not run.
	if !out.Delete.IsError || !strings.Contains(out.Delete.text(), "approval required") {
		t.Errorf("demo__delete_note = %+v, want an isError result saying approval is required", out.Delete)
	}
	if titles := f.noteTitles(t); !slices.Equal(titles, []string{"x"}) {
		t.Errorf("notes on disk = %v, want [x]: the refused delete must not run", titles)
	}
	// Invalid arguments are refused by toolwire's validation, naming the field.
	if !out.Invalid.IsError || !strings.Contains(out.Invalid.text(), "/a") {
		t.Errorf("demo__add {a: \"nope\"} = %+v, want an isError result naming /a", out.Invalid)
	}

	stop()
	if s := stderr.String(); strings.Contains(s, "panic") || strings.Contains(s, "DATA RACE") {
		t.Errorf("serve's stderr:\n%s", s)
	}
}
