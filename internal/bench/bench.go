//go:build unix

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/benchkit"
)

// bench holds what the rows share: options, binaries, the temporary
// directory, the processes and the HTTP transport. It is used by one
// goroutine at a time, except procs, which is safe for concurrent use.
type bench struct {
	opts     Options
	progress io.Writer
	started  time.Time

	dir  string // temporary: binaries, audit files, configuration
	self string // this executable, for the children

	// The demo server, toolwire and benchproxy binaries, or why they are
	// missing.
	demoBin, toolwireBin, proxyBin string
	demoErr, toolwireErr, proxyErr error

	procs *procSet
	// httpClient keeps up to 128 idle connections per host, so that 64
	// concurrent callers do not open and close TCP connections on every
	// call (net/http keeps 2 by default).
	httpClient *http.Client
	quiet      *slog.Logger

	// tools is the listing server, started on first use.
	tools struct {
		url  string
		pids []int
		err  error
	}

	closers []func() // run last to first by close
}

// maxIdlePerHost is the HTTP connection pool per server; see httpClient.
const maxIdlePerHost = 128

func newBench(ctx context.Context, o *Options, progress io.Writer) (*bench, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable: %w", err)
	}
	dir, err := os.MkdirTemp("", "toolwire-bench-")
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 8*maxIdlePerHost, maxIdlePerHost
	b := &bench{
		opts: *o, progress: progress, started: time.Now(),
		dir: dir, self: self,
		procs:      &procSet{},
		httpClient: &http.Client{Transport: t},
		quiet:      slog.New(slog.DiscardHandler),
	}
	if o.Verbose {
		b.procs.verbose = progress
	}
	b.binaries(ctx)
	return b, nil
}

// close closes every session and server (last opened first), ends every
// process and removes the temporary directory.
func (b *bench) close() {
	for _, c := range slices.Backward(b.closers) {
		c()
	}
	b.closers = nil
	b.procs.endAll()
	b.httpClient.CloseIdleConnections()
	_ = os.RemoveAll(b.dir)
}

func (b *bench) onClose(f func()) { b.closers = append(b.closers, f) }

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, "toolwire-bench %6.1fs: %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

// binaries builds the demo server and toolwire into the temporary
// directory, or finds them in -bin. A failure is kept for the rows that
// need the binary: the others still run.
func (b *bench) binaries(ctx context.Context) {
	if b.opts.BinDir != "" {
		b.demoBin, b.demoErr = findBinary(b.opts.BinDir, "demoserver")
		b.toolwireBin, b.toolwireErr = findBinary(b.opts.BinDir, "toolwire")
		b.proxyBin, b.proxyErr = findBinary(b.opts.BinDir, "benchproxy")
		return
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		b.demoErr, b.toolwireErr, b.proxyErr = err, err, err
		return
	}
	overlay, err := b.overlayArgs(root, "examples/demoserver", "cmd/toolwire", "internal/bench/benchproxy")
	if err != nil {
		b.demoErr, b.toolwireErr, b.proxyErr = err, err, err
		return
	}
	what := ""
	if overlay != nil {
		what = " with the profiling hook"
	}
	b.logf("building demoserver, toolwire and benchproxy%s in %s", what, b.dir)
	// Three go commands at once: their compiles share the build cache,
	// and their links, the slow part once it is warm, run side by side.
	var wg sync.WaitGroup
	wg.Go(func() {
		b.demoBin, b.demoErr = goBuild(ctx, root, filepath.Join(b.dir, "demoserver"), "./examples/demoserver", overlay...)
	})
	wg.Go(func() {
		b.toolwireBin, b.toolwireErr = goBuild(ctx, root, filepath.Join(b.dir, "toolwire"), "./cmd/toolwire", overlay...)
	})
	wg.Go(func() {
		b.proxyBin, b.proxyErr = goBuild(ctx, root, filepath.Join(b.dir, "benchproxy"), "./internal/bench/benchproxy", overlay...)
	})
	wg.Wait()
}

func findBinary(dir, name string) (string, error) {
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("-bin: %w", err)
	}
	return p, nil
}

// moduleRoot returns the directory of toolwire's go.mod, as the go command
// finds it from the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w (build demoserver and toolwire yourself and pass -bin)", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module: run in toolwire's module or pass -bin")
	}
	raw, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(raw), "module github.com/toolwire/toolwire\n") {
		return "", fmt.Errorf("%s is not toolwire's go.mod: run in toolwire's module or pass -bin", gomod)
	}
	return filepath.Dir(gomod), nil
}

func goBuild(ctx context.Context, root, out, pkg string, flags ...string) (string, error) {
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(string(msg)))
	}
	return out, nil
}

// inheritedEnv are the variables children inherit, the list mcpclient
// passes to a stdio server, so that every demo child runs alike whoever
// starts it.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// gcEnv returns GOGC and GOMEMLIMIT as set for this process: they are
// passed to every child, including those that mcpclient and toolwire
// serve start, so that a run's GC settings apply to all its processes.
func gcEnv() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	return m
}

// childEnv is the environment of the children this process starts.
func childEnv(extra ...string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range passedEnv() {
		env = append(env, k+"="+v)
	}
	return append(env, extra...)
}

// auditLog opens an audit log to a JSON Lines file in the temporary
// directory, set up as toolwire's CLI sets it up (a secrets redactor, a
// logger for sink failures). The file is closed by b.close.
func (b *bench) auditLog(name string) (*audit.Log, *audit.Secrets, error) {
	sink, err := audit.OpenFile(filepath.Join(b.dir, name+"-audit.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	b.onClose(func() { _ = sink.Close() })
	secrets := audit.NewSecrets()
	return audit.NewLog(sink, &audit.LogOptions{Redactor: secrets, Logger: b.quiet}), secrets, nil
}

// ourCPU returns the CPU used so far by this process and every process the
// bench knows of (for the background-load figure); processes that have
// ended are skipped.
func (b *bench) ourCPU() time.Duration {
	total, _ := benchkit.SelfCPU()
	b.procs.mu.Lock()
	var pids []int
	for _, p := range b.procs.own {
		pids = append(pids, p.pid())
	}
	for _, st := range b.procs.adopted {
		pids = append(pids, st.PID)
	}
	b.procs.mu.Unlock()
	for _, pid := range pids {
		if c, err := benchkit.ProcessCPU(pid); err == nil {
			total += c
		}
	}
	return total
}

// loadMeter measures the CPU that other processes on the machine use
// while a phase runs: machine busy time minus ours, per second of wall
// time, in cores.
type loadMeter struct {
	b           *bench
	t0          time.Time
	busy0, our0 time.Duration
	ok          bool
}

func (b *bench) startLoad() *loadMeter {
	busy, err := benchkit.MachineBusy()
	return &loadMeter{b: b, t0: time.Now(), busy0: busy, our0: b.ourCPU(), ok: err == nil}
}

// cores returns the background load since startLoad, or -1 if unknown.
// /proc/stat counts in 10 ms ticks, so short phases read ±0.1 core or so.
func (m *loadMeter) cores() float64 {
	busy, err := benchkit.MachineBusy()
	if !m.ok || err != nil {
		return -1
	}
	other := (busy - m.busy0) - (m.b.ourCPU() - m.our0)
	return max(0, other.Seconds()/time.Since(m.t0).Seconds())
}

// measure runs the phases for the selected rows (calls: sequential, then
// throughput; then listings; then memory) and returns the report. Call
// rows are closed before the listings, so that their sessions sit in no
// later phase's heap.
func (b *bench) measure(ctx context.Context, sel []*row) *report {
	rep := &report{opts: b.opts, started: b.started, bg: map[string]float64{}}
	rep.machine = b.machine()

	calls := b.openCalls(ctx, sel)
	if len(live(calls)) > 0 {
		m := b.startLoad()
		b.sequential(ctx, calls)
		rep.bg["sequential calls"] = m.cores()
		if b.opts.TputRounds > 0 {
			m = b.startLoad()
			b.throughput(ctx, calls)
			rep.bg["concurrent calls"] = m.cores()
		}
	}
	rep.calls = calls
	var profiles []profiled
	if b.opts.ProfileDir != "" && ctx.Err() == nil {
		profiles = b.profileCalls(ctx, calls)
	}
	for _, c := range slices.Backward(b.closers) {
		c()
	}
	b.closers = nil

	if slices.ContainsFunc(sel, func(r *row) bool { return r.list != nil }) {
		m := b.startLoad()
		rep.lists = b.listings(ctx, sel)
		rep.bg["listings"] = m.cores()
		if b.opts.ProfileDir != "" && ctx.Err() == nil {
			profiles = append(profiles, b.profileLists(ctx, rep.lists)...)
		}
	}
	if slices.ContainsFunc(sel, func(r *row) bool { return r.mem != nil }) {
		m := b.startLoad()
		mems := b.memory(ctx, sel)
		rep.bg["sessions"] = m.cores()
		for _, r := range sel {
			if mr, ok := mems[r.name]; ok {
				rep.mems = append(rep.mems, mr)
			}
		}
	}
	if b.opts.FleetTest != "" && ctx.Err() == nil {
		rep.fleet = b.fleet(ctx)
		profiles = append(profiles, rep.fleet.profiles...)
		if err := rep.fleet.profileErr; err != nil {
			rep.notes = append(rep.notes, "The fleet's profiles: "+oneLine(err)+".")
		}
	}
	if b.opts.ProfileDir != "" {
		// Written last, with the fleet's; its breakdowns are read even
		// when the run was cut short, since the profiles are on disk.
		if err := b.writeProfileIndex(context.WithoutCancel(ctx), profiles); err != nil {
			rep.notes = append(rep.notes, "Profiles: writing the index failed: "+oneLine(err)+".")
		} else {
			during := ""
			if rep.fleet != nil && len(rep.fleet.profiles) > 0 {
				during = "; the fleet's replicas' during its measured calls, which a profile at 100 Hz slows by about 1 %"
			}
			rep.notes = append(rep.notes, fmt.Sprintf("Profiles (the rows' taken after the measurements, not during them%s): %s, listed in %s.",
				during, b.opts.ProfileDir, filepath.Join(b.opts.ProfileDir, "profiles.md")))
		}
	}
	if ctx.Err() != nil {
		// Rows cut short by Ctrl-C or -timeout did not fail.
		stopped := func(err error) error {
			if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				return fmt.Errorf("%w: %w", errStopped, err)
			}
			return err
		}
		for _, r := range rep.calls {
			r.err = stopped(r.err)
		}
		for _, r := range rep.lists {
			r.err = stopped(r.err)
		}
		for _, r := range rep.mems {
			r.err = stopped(r.err)
		}
		if rep.fleet != nil {
			rep.fleet.err = stopped(rep.fleet.err)
		}
	}
	if b.toolwireErr == nil && slices.ContainsFunc(sel, func(r *row) bool { return r.stack == "gw" }) {
		if text, err := binaryMakeup(b.toolwireBin, 15); err != nil {
			rep.notes = append(rep.notes, "The binary's makeup: "+oneLine(err)+".")
		} else {
			rep.binary = text
		}
	}
	rep.wall = time.Since(b.started)
	return rep
}

// errStopped marks a row that the run's end (Ctrl-C, -timeout) cut short.
var errStopped = errors.New("stopped before it was measured")
