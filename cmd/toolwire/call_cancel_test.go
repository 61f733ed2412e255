package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/demo"
)

// envCancels names the file to which the recording demo appends the reason
// of every notifications/cancelled it receives.
const envCancels = "TOOLWIRE_TEST_CANCELS"

// serveRecordingDemo serves the demo over stdio, recording the
// cancellations it receives, and returns the exit status. The record is
// written when the SDK handles the notification, which it finishes before
// the session ends, so it is complete once the process has exited. The
// cancellation of a subscriptions/listen stream, which a client of
// protocol 2026-07-28 sends when it closes the session, is left out.
func serveRecordingDemo() int {
	srv := demo.NewServer(nil)
	path := os.Getenv(envCancels)
	listens := &listenIDs{}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CancelledParams); ok && method == "notifications/cancelled" && !listens.has(p.RequestID) {
				if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
					fmt.Fprintln(f, p.Reason)
					_ = f.Close()
				}
			}
			return next(ctx, method, req)
		}
	})
	if err := srv.Run(context.Background(), &listenNoting{Transport: &mcp.StdioTransport{}, ids: listens}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// listenIDs are the ids of the subscriptions/listen requests a server read.
type listenIDs struct{ m sync.Map }

func (l *listenIDs) has(id any) bool { _, ok := l.m.Load(fmt.Sprint(id)); return ok }

// listenNoting is a transport whose connection notes the id of every
// subscriptions/listen request read.
type listenNoting struct {
	mcp.Transport
	ids *listenIDs
}

func (t *listenNoting) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &listenNotingConn{Connection: c, ids: t.ids}, nil
}

type listenNotingConn struct {
	mcp.Connection
	ids *listenIDs
}

func (c *listenNotingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "subscriptions/listen" {
		c.ids.m.Store(fmt.Sprint(r.ID.Raw()), true)
	}
	return m, err
}

// progressSeen is call's stderr: it closes seen once a progress line was
// written, which proves the server's handler is running.
type progressSeen struct {
	syncBuffer
	seen chan struct{}
	once sync.Once
}

func (w *progressSeen) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), "progress") {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// Ctrl-C (the command's context ending) or the server's timeout during
// "toolwire call" reaches the server as notifications/cancelled before
// toolwire closes the session and exits, as docs/cli.md says.
func TestCallCancellationReachesTheServer(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"interrupt", "timeout"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			cancels := filepath.Join(t.TempDir(), "cancels")
			timeout := ""
			if how == "timeout" {
				// Also the start's bound: long enough for the test binary
				// to start as a confined server under the suite's load.
				timeout = "    timeout: 6s\n"
			}
			f := newFixture(t, `  rec:
    command: `+quoteYAML(os.Args[0])+`
    env:
      TOOLWIRE_TEST_SERVER: demo-recording
      `+envCancels+`: `+quoteYAML(cancels)+`
    sandbox:
      write: [`+quoteYAML(filepath.Dir(cancels))+`]
`+timeout)
			stderr := &progressSeen{seen: make(chan struct{})}
			e := &env{stdin: strings.NewReader(""), stdout: &syncBuffer{}, stderr: stderr,
				isTerminal: func() bool { return false }, lookupEnv: func(string) (string, bool) { return "", false }}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan int, 1)
			go func() {
				root := newRootCommand(e)
				root.SetArgs([]string{"--config", f.config, "call", "rec__wait_for_cancel"})
				done <- exitCode(root.ExecuteContext(ctx), stderr)
			}()
			select {
			case <-stderr.seen:
			case code := <-done:
				t.Fatalf("call exited %d before the server reported progress\nstderr:\n%s", code, stderr.String())
			}
			if how == "interrupt" {
				cancel() // what main's signal.NotifyContext does on SIGINT
			}
			select {
			case code := <-done:
				// Ctrl-C is status 130, as in run and chat; the server's
				// timeout is a failed call.
				want := exitToolErr
				if how == "interrupt" {
					want = exitInterrupted
				}
				if code != want {
					t.Errorf("call exited %d, want %d\nstderr:\n%s", code, want, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("call did not exit after its context ended\nstderr:\n%s", stderr.String())
			}
			// call closed its servers before returning, and Close waits for a
			// stdio server's process to exit: the record is complete.
			got, _ := os.ReadFile(cancels)
			want := context.Canceled.Error() + "\n"
			if how == "timeout" {
				want = context.DeadlineExceeded.Error() + "\n"
			}
			if string(got) != want {
				t.Errorf("the server received cancellations with the reasons %q, want %q\nstderr:\n%s", got, want, stderr.String())
			}
		})
	}
}
