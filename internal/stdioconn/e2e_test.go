package stdioconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as the stdio servers the tests start: with
// envChild set, TestMain runs the named child instead of the tests.
const envChild = "STDIOCONN_TEST_CHILD"

// childLifetime bounds how long a child that ignores its input lives, in
// case the test that started it could not end it.
const childLifetime = 30 * time.Second

func TestMain(m *testing.M) {
	switch mode := os.Getenv(envChild); mode {
	case "":
		os.Exit(m.Run())
	case "stock-server":
		// go-sdk's own stdio transport, as most servers use it.
		serveAndExit(&mcp.StdioTransport{})
	case "slow-server":
		// go-sdk's server that takes a while to start (a go run, a first
		// npx download, a JVM): it reads nothing before then.
		time.Sleep(slowStart)
		serveAndExit(&mcp.StdioTransport{})
	case "our-server":
		serveAndExit(&Transport{Reader: os.Stdin, Writer: os.Stdout})
	case "silent", "deafer", "late":
		serveSilently(mode)
	case "deaf", "stubborn":
		// Neither reads standard input nor exits when it closes; the
		// stubborn one also ignores SIGTERM.
		if mode == "stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		fmt.Println(`{"jsonrpc":"2.0","method":"ready"}`)
		time.Sleep(childLifetime)
		os.Exit(3)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", envChild, mode)
		os.Exit(2)
	}
}

func serveAndExit(t mcp.Transport) {
	if err := newServer(nil).Run(context.Background(), t); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childCommand returns a command re-running the test binary as the named
// child.
func childCommand(t testing.TB, mode string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	// Under the race detector a process waits a second before exiting,
	// unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), envChild+"="+mode, "GORACE="+gorace)
	cmd.Stderr = os.Stderr
	return cmd
}

type echoArgs struct {
	Text string `json:"text"`
}

type countdownArgs struct {
	Steps int `json:"steps"`
}

// newServer returns the server of the tests: "echo" (typed), "rawecho"
// (a raw handler, as the gateway registers tools) and "countdown", which
// reports progress and then waits to be cancelled, closing cancelled (when
// not nil) when it is.
func newServer(cancelled chan<- struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "stdioconn-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "rawecho", Description: "Echoes its text.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in echoArgs
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil
		})
	var once sync.Once
	mcp.AddTool(s, &mcp.Tool{Name: "countdown", Description: "Reports progress, then waits to be cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, in countdownArgs) (*mcp.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			for i := range in.Steps {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i + 1), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i+1),
				})
				if err != nil {
					return nil, nil, err
				}
			}
			<-ctx.Done()
			if cancelled != nil {
				once.Do(func() { close(cancelled) })
			}
			return nil, nil, ctx.Err()
		})
	return s
}

// pipeTransports returns the two ends of a connection over io.Pipe pairs:
// go-sdk's IOTransport or ours, as asked for each end.
func pipeTransports(clientOurs, serverOurs bool) (client, server mcp.Transport) {
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	end := func(ours bool, r io.ReadCloser, w io.WriteCloser) mcp.Transport {
		if ours {
			return &Transport{Reader: r, Writer: w}
		}
		return &mcp.IOTransport{Reader: r, Writer: w}
	}
	return end(clientOurs, s2cR, c2sW), end(serverOurs, c2sR, s2cW)
}

// TestSessionOverPipes runs a session between a go-sdk client and server,
// with our connection on either end or both, in the protocol version
// toolwire offers and in go-sdk's latest.
func TestSessionOverPipes(t *testing.T) {
	for _, ends := range []struct {
		name                   string
		clientOurs, serverOurs bool
	}{
		{"ours both ends", true, true},
		{"ours to go-sdk server", true, false},
		{"go-sdk client to ours", false, true},
	} {
		for _, version := range []string{"2025-11-25", ""} {
			t.Run(fmt.Sprintf("%s/version %q", ends.name, version), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				ct, st := pipeTransports(ends.clientOurs, ends.serverOurs)
				cancelled := make(chan struct{})
				ss, err := newServer(cancelled).Connect(ctx, st, nil)
				if err != nil {
					t.Fatal(err)
				}
				exercise(ctx, t, ct, version, cancelled)
				// The answer to the cancelled call may reach a client that
				// has closed its end: the pipe then reports it closed.
				if err := ss.Wait(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
					t.Errorf("server session ended with %v", err)
				}
			})
		}
	}
}

// exercise connects a client over ct and goes through a session:
// initialize, tools/list, tools/call, progress notifications and a
// cancelled call (when cancelled is not nil: the server closes it when its
// handler sees the cancellation), then closes the session.
func exercise(ctx context.Context, t *testing.T, ct mcp.Transport, version string, cancelled <-chan struct{}) {
	t.Helper()
	progress := make(chan *mcp.ProgressNotificationParams, 10)
	client := mcp.NewClient(&mcp.Implementation{Name: "stdioconn-client", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	})
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	if version != "" {
		if got := cs.InitializeResult().ProtocolVersion; got != version {
			t.Errorf("negotiated %q, want %q", got, version)
		}
	}
	if got := cs.InitializeResult().ServerInfo.Name; got != "stdioconn-test" {
		t.Errorf("server name %q", got)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "countdown,echo,rawecho" {
		t.Errorf("tools %s", got)
	}

	text := "héllo <world> \n\t\"quoted\" \u2028"
	for _, name := range []string{"echo", "rawecho"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: echoArgs{Text: text}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != text {
			t.Errorf("%s returned %+v", name, res)
		}
	}
	// A tool error travels as a result, a protocol error as an error.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": 5}}); err != nil || !res.IsError {
		t.Errorf("echo with a number: %+v, %v; want an error result", res, err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "missing"}); err == nil {
		t.Error("calling a missing tool succeeded")
	}

	if cancelled != nil {
		callCtx, cancelCall := context.WithCancel(ctx)
		params := &mcp.CallToolParams{Name: "countdown", Arguments: countdownArgs{Steps: 3}}
		params.SetProgressToken("countdown-1")
		callErr := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(callCtx, params)
			callErr <- err
		}()
		for i := range 3 {
			select {
			case p := <-progress:
				if p.ProgressToken != "countdown-1" || p.Progress != float64(i+1) || p.Total != 3 || p.Message != fmt.Sprintf("step %d", i+1) {
					t.Errorf("progress %d: %+v", i, p)
				}
			case <-ctx.Done():
				t.Fatalf("progress %d never came", i)
			}
		}
		cancelCall()
		if err := <-callErr; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call returned %v", err)
		}
		select {
		case <-cancelled:
		case <-ctx.Done():
			t.Fatal("the server never saw the cancellation")
		}
	}

	if err := cs.Close(); err != nil {
		t.Errorf("closing the client session: %v", err)
	}
}

// TestChildProcess talks to a server in a child process through
// CommandTransport, and checks that closing the session ends the process
// cleanly: its standard input closed, it exits by itself with status 0.
func TestChildProcess(t *testing.T) {
	for _, mode := range []string{"stock-server", "our-server"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := childCommand(t, mode)
			exercise(ctx, t, &CommandTransport{Command: cmd}, "2025-11-25", nil)
			checkGone(t, cmd)
			if !cmd.ProcessState.Success() {
				t.Errorf("child ended with %v", cmd.ProcessState)
			}
		})
	}
}

// TestChildEscalation checks the steps of closing a child that does not
// exit when its standard input closes: SIGTERM after TerminateDuration,
// then SIGKILL.
func TestChildEscalation(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want syscall.Signal
	}{
		{"deaf", syscall.SIGTERM},
		{"stubborn", syscall.SIGKILL},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			cmd := childCommand(t, tc.mode)
			// Each step's wait is long enough for a loaded machine to
			// schedule the child's signal handler (100 ms was not, at a
			// load average of 16): the order of the steps is what is
			// checked, not their speed.
			conn, err := (&CommandTransport{Command: cmd, TerminateDuration: time.Second}).Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// The child says when it is ready, so that SIGTERM does not
			// reach it before it ignores it.
			if msg, err := conn.Read(context.Background()); err != nil {
				t.Fatalf("reading the child's first message: %v, %v", msg, err)
			}
			err = conn.Close()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("Close: %v, want the child's exit error", err)
			}
			status := exit.Sys().(syscall.WaitStatus)
			if !status.Signaled() || status.Signal() != tc.want {
				t.Errorf("child ended with %v, want %v", exit, tc.want)
			}
			checkGone(t, cmd)
			if _, err := conn.Read(context.Background()); err != io.EOF {
				t.Errorf("Read after Close: %v, want io.EOF", err)
			}
		})
	}
}

// checkGone checks that the child has been waited for and no longer
// exists.
func checkGone(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if cmd.ProcessState == nil {
		t.Fatal("the child was not waited for")
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists: kill 0: %v", cmd.Process.Pid, err)
	}
}
