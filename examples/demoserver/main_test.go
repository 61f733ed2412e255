package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runAsMainEnv, when set to 1, makes the test binary behave as demoserver,
// so tests can run the real command as a child process without building it
// separately.
const runAsMainEnv = "DEMOSERVER_TEST_RUN_MAIN"

// eventTimeout bounds every wait on the server, so a broken server fails the
// test instead of hanging it.
const eventTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(runAsMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// demoCommand returns a command running demoserver with args.
func demoCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("locating test binary: %v", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), runAsMainEnv+"=1")
	return cmd
}

// connect connects a new client over transport and checks that it reached
// the demo server.
func connect(t *testing.T, transport mcp.Transport, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "demoserver-test", Version: "0"}, opts)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "toolwire-demo" || info.Version != "0.1.0" {
		t.Errorf("server info = %+v, want toolwire-demo 0.1.0", info)
	}
	return cs
}

// checkEcho calls echo through cs and checks the reply.
func checkEcho(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	const text = "ping through the real process"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("calling echo: %v", err)
	}
	if len(res.Content) != 1 || res.IsError {
		t.Fatalf("echo returned isError=%v with %d blocks, want one text block", res.IsError, len(res.Content))
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != text {
		t.Errorf("echo returned %#v, want text %q", res.Content[0], text)
	}
}

// awaitListening reads lines from r until the "listening on" line, returns
// its URL, and keeps draining r in the background so the writer never
// blocks.
func awaitListening(t *testing.T, r io.Reader) string {
	t.Helper()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		found := false
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "listening on "); ok && !found {
				found = true
				urls <- url
			}
		}
		// Discard anything a scanner error left unread.
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case url := <-urls:
		if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") || strings.HasSuffix(url, ":0/mcp") {
			t.Fatalf("listening URL = %q, want http://127.0.0.1:PORT/mcp with a real port", url)
		}
		return url
	case <-time.After(eventTimeout):
		t.Fatal("server never printed its listening address")
		return ""
	}
}

func TestListenTCPRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		ln, err := listenTCP(addr, false)
		if err == nil {
			ln.Close()
			t.Errorf("listenTCP(%q) succeeded, want a refusal", addr)
		} else if !strings.Contains(err.Error(), "-insecure-any-host") {
			t.Errorf("listenTCP(%q) error = %q, want it to mention -insecure-any-host", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := listenTCP(addr, false)
		if err != nil {
			t.Errorf("listenTCP(%q) = %v, want success for a loopback address", addr, err)
			continue
		}
		ln.Close()
	}
}

func TestRunRejectsBadUsage(t *testing.T) {
	for _, args := range [][]string{{"stray"}, {"-no-such-flag"}} {
		err := run(t.Context(), args, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
	err := run(t.Context(), []string{"-http", "0.0.0.0:0"}, io.Discard)
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("run with a non-loopback address = %v, want a loopback refusal", err)
	}
}

func TestRunServesHTTPUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	defer pr.Close()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-http", "127.0.0.1:0"}, pw)
		pw.Close()
	}()

	url := awaitListening(t, pr)
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	checkEcho(t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("closing session: %v", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after cancellation = %v, want nil", err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("run did not return after its context was cancelled")
	}
}

// waitExit waits for cmd to exit and returns its error.
func waitExit(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(eventTimeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("demoserver did not exit")
		return nil
	}
}

func TestStdioChildProcess(t *testing.T) {
	cmd := demoCommand(t)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, nil)
	checkEcho(t, cs)
	// Closing stdin is how a stdio client ends the session; the server
	// must then exit cleanly on its own.
	if err := cs.Close(); err != nil {
		t.Errorf("closing session: %v\nstderr:\n%s", err, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("demoserver exit code = %d, want 0\nstderr:\n%s", code, stderr.String())
	}
}

func TestHTTPChildProcessStopsOnSIGTERM(t *testing.T) {
	cmd := demoCommand(t, "-http", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("stderr pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting demoserver: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	url := awaitListening(t, stderr)
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	checkEcho(t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("closing session: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("sending SIGTERM: %v", err)
	}
	if err := waitExit(t, cmd); err != nil {
		t.Errorf("demoserver after SIGTERM: %v, want a clean exit", err)
	}
}

func TestStdioChildProcessStopsOnSIGTERMDuringCall(t *testing.T) {
	cmd := demoCommand(t)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	started := make(chan struct{}, 1)
	cs := connect(t, &mcp.CommandTransport{Command: cmd}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			started <- struct{}{}
		},
	})

	params := &mcp.CallToolParams{Name: "wait_for_cancel"}
	params.SetProgressToken("stop-token")
	callErr := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(t.Context(), params)
		callErr <- err
	}()
	select {
	case <-started:
	case <-time.After(eventTimeout):
		t.Fatal("wait_for_cancel never reported that it started")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("sending SIGTERM: %v", err)
	}
	// The call can only end now by the server process going away, so its
	// end shows that the parked call did not hold up the shutdown.
	select {
	case err := <-callErr:
		if err == nil {
			t.Error("wait_for_cancel succeeded, want an error once the server stopped")
		}
	case <-time.After(eventTimeout):
		t.Fatalf("demoserver kept running after SIGTERM\nstderr:\n%s", stderr.String())
	}
	_ = cs.Close() // reaps the process; its error reflects the lost connection
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("demoserver exit code after SIGTERM = %d, want 0\nstderr:\n%s", code, stderr.String())
	}
}
