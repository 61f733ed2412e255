package main

// Tests of what a person sees on a terminal: the CLI runs in-process with
// the slave side of a pseudo-terminal as its stderr (or stdout), so it
// sees a TTY, and the test reads the master side, as a terminal would
// show it.

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/toolwire/toolwire/agent/agenttest"
)

// ptyScreen is a pseudo-terminal whose output the test collects.
type ptyScreen struct {
	tty    *os.File // what the program writes to (and reads from)
	master *os.File // the terminal's side: what a person types goes here

	mu   sync.Mutex
	buf  bytes.Buffer
	seen map[string]chan struct{}
	done chan struct{}
}

func newPTY(t *testing.T, cols uint16) *ptyScreen {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	s := &ptyScreen{tty: tty, master: master, seen: map[string]chan struct{}{}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			for text, ch := range s.seen {
				if strings.Contains(s.buf.String(), text) {
					close(ch)
					delete(s.seen, text)
				}
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { tty.Close(); master.Close(); <-s.done })
	return s
}

// Seen returns a channel closed once text has been shown.
func (s *ptyScreen) Seen(text string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(s.buf.String(), text) {
		close(ch)
		return ch
	}
	s.seen[text] = ch
	return ch
}

// wait waits until text has been shown, failing after a deadline.
func (s *ptyScreen) wait(t *testing.T, text string) {
	t.Helper()
	select {
	case <-s.Seen(text):
	case <-time.After(30 * time.Second):
		t.Fatalf("the terminal never showed %q:\n%s", text, s.String())
	}
}

func (s *ptyScreen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// runOnTerminal runs the CLI with stderr on the terminal (and stdout too
// when onStdout), stdin not a terminal.
func (f *fixture) runOnTerminal(t *testing.T, screen *ptyScreen, onStdout bool, vars map[string]string, args ...string) outcome {
	t.Helper()
	var stdout bytes.Buffer
	e := &env{
		stdin: strings.NewReader(""), stdout: &stdout, stderr: screen.tty,
		isTerminal: func() bool { return false },
		lookupEnv:  func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
	if onStdout {
		e.stdout = screen.tty
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCommand(e)
	root.SetArgs(append([]string{"--config", f.config}, args...))
	var errOut bytes.Buffer
	code := exitCode(root.ExecuteContext(ctx), &errOut)
	return outcome{code, stdout.String(), errOut.String()}
}

func TestRunOnATerminalShowsWhatIsHappening(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	screen := newPTY(t, 120)
	srv := agenttest.NewServer(t,
		func(w http.ResponseWriter, r *http.Request) {
			// Answer once the person can see that the model is awaited.
			select {
			case <-screen.Seen("waiting for the model"):
			case <-time.After(20 * time.Second):
			}
			agenttest.OpenAIReply("",
				agenttest.Call{ID: "c1", Name: "demo__slow_count", Args: `{"steps":2,"interval_ms":300}`},
				agenttest.Call{ID: "c2", Name: "demo__echo", Args: `{"text":"hi there"}`},
			)(w, r)
		},
		agenttest.OpenAIReply("All done."),
	)
	o := f.runOnTerminal(t, screen, false, nil, openaiArgs(srv, "count and echo")...)
	o.expect(t, exitOK)
	screen.wait(t, "← demo__slow_count: ok")
	shown := screen.String()
	mustContain(t, "terminal", shown,
		"toolwire: starting demo…", "toolwire: demo ready in ", " s (", // the server, its state and time
		"waiting for the model…",
		"demo__slow_count 1/2", // progress names its call
		"← demo__echo: ok: hi there")
	// The quick call's result is shown when it ends, before the slow one's,
	// though the model asked for the slow one first.
	if e, s := strings.Index(shown, "← demo__echo"), strings.Index(shown, "← demo__slow_count"); e < 0 || s < e {
		t.Errorf("the echo result (at %d) is not shown before the slow call's (at %d):\n%q", e, s, shown)
	}
	if o.stdout != "All done.\n" {
		t.Errorf("stdout = %q", o.stdout)
	}
}

func TestRunOnATerminalCountsDownToARetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	screen := newPTY(t, 120)
	srv := agenttest.NewServer(t,
		agenttest.Status(http.StatusTooManyRequests, "slow down", "Retry-After", "1.5"),
		agenttest.OpenAIReply("fine"))
	o := f.runOnTerminal(t, screen, false, nil, openaiArgs(srv, "x")...)
	o.expect(t, exitOK)
	screen.wait(t, "retrying in ")
	mustContain(t, "terminal", screen.String(), "429 Too Many Requests", "slow down", "; retrying in 1.")
}

func TestRunWithoutATerminalShowsNoLiveLines(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("", agenttest.Call{ID: "c1", Name: "demo__echo", Args: `{"text":"hi"}`}),
		agenttest.OpenAIReply("ok"))
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "x")...)
	o.expect(t, exitOK)
	for _, s := range []string{"ready in", "waiting for the model", "\r", "\033["} {
		if strings.Contains(o.stderr, s) {
			t.Errorf("stderr, not a terminal, has %q:\n%q", s, o.stderr)
		}
	}
	mustContain(t, "stderr", o.stderr, "← demo__echo: ok: hi")
}

func TestToolsFitTheTerminalWidth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	screen := newPTY(t, 70)
	o := f.runOnTerminal(t, screen, true, nil, "tools")
	o.expect(t, exitOK)
	screen.wait(t, "demo__write_note")
	screen.wait(t, "demo__wait_for_cancel")
	for _, line := range strings.Split(strings.ReplaceAll(screen.String(), "\r\n", "\n"), "\n") {
		if n := len([]rune(line)); n > 70 {
			t.Errorf("a line of %d columns on a 70-column terminal: %q", n, line)
		}
	}
}
