//go:build unix

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/internal/benchkit"
)

// procSet owns the processes the benchmark starts, and knows of those that
// others start for it (the SDK's CommandTransport, mcpclient, toolwire
// serve, the relay floor), so that every one of them is ended by its PID
// when the benchmark ends.
//
// Its methods are safe for concurrent use. endAll is called once, last.
type procSet struct {
	verbose io.Writer // where children's stderr goes with -v; nil: kept as a tail only

	mu      sync.Mutex
	own     []*proc
	adopted []benchkit.ProcessStat
}

// proc is a child that the set started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	term   bool          // SIGTERM before SIGKILL: the program shuts down on it
	exited chan struct{} // closed when Wait has returned
	tail   *tail         // the last lines of its stderr
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// start starts cmd (whose Stdin, Stderr unless set, and SysProcAttr it
// sets; Stdout is the caller's) and owns it from then on. With term, ending
// it also sends SIGTERM, for programs that do not watch their stdin.
func (s *procSet) start(name string, cmd *exec.Cmd, term bool) (*proc, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, stdin: stdin, term: term, exited: make(chan struct{}), tail: newTail(s.verbose, name)}
	if cmd.Stderr == nil {
		cmd.Stderr = p.tail
	}
	childAttrs(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	s.mu.Lock()
	s.own = append(s.own, p)
	s.mu.Unlock()
	return p, nil
}

// adopt records a process that another part of the program (or one of our
// children) started, identified by PID and start time, so that endAll can
// kill it should it outlive its owner. Unknown or exited PIDs are ignored.
func (s *procSet) adopt(pid int) {
	st, err := benchkit.Stat(pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.adopted = append(s.adopted, st)
	s.mu.Unlock()
}

// adoptDescendants adopts every process below pid and returns their PIDs.
func (s *procSet) adoptDescendants(pid int) []int {
	ds, _ := benchkit.Descendants(pid)
	var pids []int
	for _, d := range ds {
		s.adopt(d.PID)
		pids = append(pids, d.PID)
	}
	return pids
}

// endGrace is how long a process has to exit after each step of endAll.
const endGrace = 3 * time.Second

// endAll ends the owned processes (see proc.end), all at once; then it
// kills any adopted process that is still alive (the same PID with the
// same start time).
func (s *procSet) endAll() {
	s.mu.Lock()
	own, adopted := slices.Clone(s.own), slices.Clone(s.adopted)
	s.mu.Unlock()
	// In parallel, so that ending them all takes at most two grace periods.
	var wg sync.WaitGroup
	for _, p := range own {
		wg.Go(p.end)
	}
	wg.Wait()
	for _, st := range adopted {
		killIfSame(st)
	}
}

// end ends p: it closes p's stdin, sends SIGTERM at once if p stops on
// that rather than on the end of its input, and sends SIGKILL if p has not
// exited endGrace later. It is safe to call more than once, and returns
// when p has exited (or a last grace period has passed).
func (p *proc) end() {
	_ = p.stdin.Close()
	if p.term {
		// os.Process signals through a pidfd on Linux: never another
		// process, even once the PID is free again.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	if p.waitExit(endGrace) {
		return
	}
	_ = p.cmd.Process.Kill()
	p.waitExit(endGrace)
}

func (p *proc) waitExit(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// killIfSame sends SIGKILL to st.PID if that PID still names the process
// that was adopted, waiting (bounded) for it to go.
func killIfSame(st benchkit.ProcessStat) {
	now, err := benchkit.Stat(st.PID)
	if err != nil || now.Start != st.Start {
		return // gone, or the PID was reused
	}
	proc, err := os.FindProcess(st.PID)
	if err != nil {
		return
	}
	// Check again now that proc holds a pidfd for this PID.
	if now, err = benchkit.Stat(st.PID); err != nil || now.Start != st.Start {
		return
	}
	_ = proc.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(endGrace)
	for time.Now().Before(deadline) {
		now, err := benchkit.Stat(st.PID)
		if err != nil || now.Start != st.Start {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLine reads r line by line until a line matches re, and returns the
// first submatch (or the whole match). After that, or when ctx ends first,
// r is still drained in the background into t, so that the writer never
// blocks on a full pipe, until it ends; then it is closed if it is an
// io.Closer.
func waitLine(ctx context.Context, r io.Reader, re *regexp.Regexp, t *tail) (string, error) {
	found := make(chan string, 1)
	go func() {
		if c, ok := r.(io.Closer); ok {
			defer c.Close()
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if t != nil {
				_, _ = t.Write([]byte(line + "\n"))
			}
			if !sent {
				if m := re.FindStringSubmatch(line); m != nil {
					found <- m[len(m)-1]
					sent = true
				}
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case s, ok := <-found:
		if !ok {
			return "", fmt.Errorf("output ended without a line matching %q", re)
		}
		return s, nil
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for a line matching %q: %w", re, context.Cause(ctx))
	}
}

// tail keeps the last lines written to it, for error messages, and passes
// them on to out (tagged with the child's name) when out is set.
type tail struct {
	name string
	out  io.Writer

	mu    sync.Mutex
	lines []string
	part  []byte
}

const tailLines = 20

func newTail(out io.Writer, name string) *tail { return &tail{name: name, out: out} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := slices.Index(t.part, '\n')
		if i < 0 {
			break
		}
		line := string(t.part[:i])
		t.part = t.part[i+1:]
		if t.out != nil {
			fmt.Fprintf(t.out, "[%s] %s\n", t.name, line)
		}
		t.lines = append(t.lines, line)
		if len(t.lines) > tailLines {
			t.lines = t.lines[len(t.lines)-tailLines:]
		}
	}
	if len(t.part) > 4096 {
		t.part = t.part[:0] // a runaway line is not worth keeping
	}
	return len(p), nil
}

// String returns the kept lines, for an error message.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// withTail adds a child's last stderr lines to err.
func withTail(err error, t *tail) error {
	if s := t.String(); s != "" {
		return fmt.Errorf("%w; its stderr ends:\n%s", err, s)
	}
	return err
}

// errNoCPU is returned by cpuOf when a process's CPU cannot be read.
var errNoCPU = errors.New("process CPU unavailable")

// cpuOf returns the CPU time used so far by this process and pids.
func cpuOf(pids []int) (time.Duration, error) {
	total, err := benchkit.SelfCPU()
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		c, err := benchkit.ProcessCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", errNoCPU, err)
		}
		total += c
	}
	return total, nil
}
