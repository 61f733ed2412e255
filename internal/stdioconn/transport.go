package stdioconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrNoStream is returned by Transport.Connect when the Reader or the
// Writer is missing.
var ErrNoStream = errors.New("transport needs both a Reader and a Writer")

// A Transport is an mcp.Transport over a reader and a writer, such as a
// process's standard input and output. It stands in for mcp.IOTransport.
type Transport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxMessageSize bounds how many bytes one incoming message may take,
	// with the blank space before it. 0 means DefaultMaxMessageSize; a
	// negative value, no bound.
	MaxMessageSize int
	// AnswerMalformed makes the connection answer a message that is not
	// well-formed JSON-RPC with a parse error (code -32700, id null) and
	// read on, as a JSON-RPC server does; without it such a message ends
	// reading with its error. A message too large to frame always ends it.
	AnswerMalformed bool
}

// Connect returns a *Conn reading Reader and writing Writer. Closing it
// closes both.
func (t *Transport) Connect(context.Context) (mcp.Connection, error) {
	if t.Reader == nil || t.Writer == nil {
		return nil, ErrNoStream
	}
	r, w := t.Reader, t.Writer
	closeBoth := func() error { return errors.Join(r.Close(), w.Close()) }
	return newConn(r, w, closeBoth, t.MaxMessageSize, t.AnswerMalformed, 0), nil
}

// defaultTerminateDuration is go-sdk's default for CommandTransport.
const defaultTerminateDuration = 5 * time.Second

// errUnresponsive is returned by Close when a process outlives SIGKILL by
// a TerminateDuration.
var errUnresponsive = errors.New("process did not exit after SIGKILL")

// A CommandTransport is an mcp.Transport that starts a command and talks to
// it over its standard input and output. It stands in for
// mcp.CommandTransport, with the same process handling.
//
// Closing the connection ends the process as the MCP specification's
// stdio shutdown says (lifecycle, "Shutdown"): it closes the process's
// standard input and waits for it to exit; after TerminateDuration it sends
// SIGTERM and waits again; after another TerminateDuration it sends
// SIGKILL. Close returns the error of the process's exit (as
// exec.Cmd.Wait), so a process stopped by a signal gives an error.
type CommandTransport struct {
	// Command is started by Connect; its Stdin and Stdout must be unset.
	Command *exec.Cmd
	// TerminateDuration is how long Close waits at each step above. Zero
	// or negative means 5s, go-sdk's default.
	TerminateDuration time.Duration
	// MaxMessageSize is as for Transport.
	MaxMessageSize int
	// DiscoverTimeout bounds how long a server/discover request (MCP
	// 2026-07-28's first, SEP-2575) may go unanswered once the server has
	// shown that it reads its input: the Conn writes a ping behind the
	// request and, when the server has answered the ping (with a result or
	// an error) and not the request within DiscoverTimeout, it answers the
	// request itself with "method not found" (-32601), so that the client
	// falls back to initialize. The server's own answer, should it come
	// later, is dropped. A server written before 2026-07-28 often ignores
	// methods it does not know, and the client would otherwise wait for it
	// until its own deadline. A server that has answered neither is still
	// starting, however long it takes: the client waits for it until its
	// own deadline (so a server that ignores ping as well as the methods
	// it does not know is not reached). Zero means DefaultDiscoverTimeout;
	// negative, never.
	DiscoverTimeout time.Duration
}

// DefaultDiscoverTimeout is CommandTransport's default DiscoverTimeout.
const DefaultDiscoverTimeout = time.Second

// Connect starts the command and returns a *Conn over its standard output
// and input. The context is not used: the process lives until the Conn is
// closed.
func (t *CommandTransport) Connect(context.Context) (mcp.Connection, error) {
	stdout, err := t.Command.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.Command.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.Command.Start(); err != nil {
		return nil, err
	}
	grace := t.TerminateDuration
	if grace <= 0 {
		grace = defaultTerminateDuration
	}
	p := &process{cmd: t.Command, stdin: stdin, grace: grace}
	// Standard output is not closed by Close: Wait closes it once the
	// process has exited, which ends the reading goroutine.
	wait := t.DiscoverTimeout
	switch {
	case wait == 0:
		wait = DefaultDiscoverTimeout
	case wait < 0:
		wait = 0
	}
	return newConn(stdout, stdin, p.stop, t.MaxMessageSize, false, wait), nil
}

// A process is a started command and the write end of its standard input.
type process struct {
	cmd   *exec.Cmd
	stdin io.Closer
	grace time.Duration
}

// stop ends the process (see CommandTransport) and returns the error of
// its exit. It is called once.
func (p *process) stop() error {
	// A stdin that fails to close does not stop the ending: the process
	// must still be waited for, signalled and, at worst, killed.
	var closeErr error
	if err := p.stdin.Close(); err != nil {
		closeErr = fmt.Errorf("close stdin of process %d: %w", p.cmd.Process.Pid, err)
	}
	return errors.Join(closeErr, p.end())
}

// end waits for the process to exit after its stdin was closed, then
// signals it, then kills it.
func (p *process) end() error {
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	timer := time.NewTimer(p.grace)
	defer timer.Stop()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-timer.C:
			timer.Reset(p.grace)
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	// A process that cannot be signalled (it has just exited, or the
	// platform has no SIGTERM) goes straight to the next step.
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill process %d: %w", p.cmd.Process.Pid, err)
	}
	if err, ok := wait(); ok {
		return err
	}
	return fmt.Errorf("process %d: %w", p.cmd.Process.Pid, errUnresponsive)
}
