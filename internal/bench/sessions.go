//go:build unix

package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/benchkit"
	"github.com/toolwire/toolwire/workspace"
)

// Memory per open downstream session on the gateway: a child process
// ("child sessions") opens N sessions the way a go-sdk client does (an
// initialize, the standalone GET stream, one call each) and holds them;
// the gateway's memory is read before and after, and the difference
// divided by N. The client being another process, nothing of its side is
// counted.

// memResult is what a memory row measured, per session; NaN where unknown.
type memResult struct {
	sessions   int
	heap       float64 // bytes of live heap after a forced GC
	stacks     float64 // bytes of goroutine stacks in use
	goroutines float64
	rss        float64 // bytes
	idle       float64 // bytes of the process's resident set with one session, before the N; NaN in-process
	idleAnon   float64 // of idle, the process's own memory (RssAnon); NaN in-process
}

// sessionsSettle is how long the gateway is left alone before each
// reading, so that the sessions' streams are all established.
const sessionsSettle = 500 * time.Millisecond

var readyRE = regexp.MustCompile(`^READY (\d+)$`)

// openSessions starts the sessions child against url and waits (bounded)
// until it holds n sessions. The caller ends the returned process.
func (b *bench) openSessions(ctx context.Context, url, toolName string, n int) (*proc, error) {
	cmd := exec.Command(b.self, "child", "sessions", "-url", url, "-tool", toolName, "-n", strconv.Itoa(n))
	cmd.Env = childEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p, err := b.procs.start("sessions", cmd, false)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	got, err := waitLine(wctx, stdout, readyRE, nil)
	if err != nil {
		p.end()
		return nil, withTail(fmt.Errorf("opening %d sessions: %w", n, err), p.tail)
	}
	if got != strconv.Itoa(n) {
		p.end()
		return nil, fmt.Errorf("opened %s sessions, want %d", got, n)
	}
	return p, nil
}

// memGateway measures gateway.Handler in this process, assembled by
// workspace.Open as toolwire serve assembles it (registry with an
// Approver, executor with a file audit log and secrets masking, pins, a
// stdio demo upstream), served on 127.0.0.1 by net/http. Heap and
// goroutines are read after runtime.GC and debug.FreeOSMemory, so they
// count what the sessions keep alive; goroutine stacks are apart from the
// heap.
func memGateway(ctx context.Context, b *bench) (*memResult, error) {
	if b.demoErr != nil {
		return nil, b.demoErr
	}
	file := &config.File{
		Servers:  []config.Server{{Name: "demo", Transport: "stdio", Command: b.demoBin, Env: passedEnv(), DefaultTier: "read"}},
		Audit:    config.Audit{File: filepath.Join(b.dir, "mem-gateway-audit.jsonl")},
		Security: config.Security{PinsFile: filepath.Join(b.dir, "mem-gateway-pins.json")},
	}
	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{}), Logger: b.quiet})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	for _, st := range w.Manager().Status() {
		b.procs.adopt(st.PID)
	}
	h := w.Handler(w.Gateway(nil), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { _ = hs.Serve(ln); close(served) }()
	defer func() { _ = hs.Close(); <-served }()
	url := "http://" + ln.Addr().String() + "/mcp"

	closeWarm, err := b.warmGateway(ctx, url)
	if err != nil {
		return nil, err
	}
	defer closeWarm()
	read := func() (heap, stacks uint64, goroutines int, rss int64) {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rss, err := benchkit.RSS(os.Getpid())
		if err != nil {
			rss = -1
		}
		return ms.HeapAlloc, ms.StackInuse, runtime.NumGoroutine(), rss
	}
	sleepCtx(ctx, sessionsSettle)
	heap0, stacks0, g0, rss0 := read()
	n := b.opts.Sessions
	p, err := b.openSessions(ctx, url, "demo__echo", n)
	if err != nil {
		return nil, err
	}
	defer p.end()
	sleepCtx(ctx, sessionsSettle)
	heap1, stacks1, g1, rss1 := read()
	res := &memResult{
		sessions:   n,
		heap:       (float64(heap1) - float64(heap0)) / float64(n),
		stacks:     (float64(stacks1) - float64(stacks0)) / float64(n),
		goroutines: float64(g1-g0) / float64(n),
		rss:        math.NaN(),
		idle:       math.NaN(),
		idleAnon:   math.NaN(),
	}
	if rss0 >= 0 && rss1 >= 0 {
		res.rss = float64(rss1-rss0) / float64(n)
	}
	return res, nil
}

// memServe measures a toolwire serve --http process of its own: only its
// resident set is visible from here, read without forcing a collection,
// so it includes garbage not yet collected.
func memServe(ctx context.Context, b *bench) (*memResult, error) {
	url, p, err := b.startServe(ctx, "mem-serve", limitsOff, false)
	if err != nil {
		return nil, err
	}
	b.procs.adoptDescendants(p.pid())
	defer p.end()
	return b.memProcess(ctx, url, p)
}

// memProxy returns the memory row of benchproxy -impl impl, measured as
// memServe measures serve.
func memProxy(impl string) func(context.Context, *bench) (*memResult, error) {
	return func(ctx context.Context, b *bench) (*memResult, error) {
		url, p, _, err := b.startProxy(ctx, impl)
		if err != nil {
			return nil, err
		}
		defer p.end()
		return b.memProcess(ctx, url, p)
	}
}

// memProcess reads the resident set of the gateway process p serving url:
// idle (after the warm-up calls of one session) and per session opened
// after that.
func (b *bench) memProcess(ctx context.Context, url string, p *proc) (*memResult, error) {
	closeWarm, err := b.warmGateway(ctx, url)
	if err != nil {
		return nil, withTail(err, p.tail)
	}
	defer closeWarm()
	sleepCtx(ctx, sessionsSettle)
	rss0, err := benchkit.RSS(p.pid())
	if err != nil {
		return nil, err
	}
	anon0, err := benchkit.AnonRSS(p.pid())
	if err != nil {
		return nil, err
	}
	n := b.opts.Sessions
	s, err := b.openSessions(ctx, url, "demo__echo", n)
	if err != nil {
		return nil, withTail(err, p.tail)
	}
	defer s.end()
	sleepCtx(ctx, sessionsSettle)
	rss1, err := benchkit.RSS(p.pid())
	if err != nil {
		return nil, err
	}
	return &memResult{sessions: n, heap: math.NaN(), stacks: math.NaN(), goroutines: math.NaN(),
		idle: float64(rss0), idleAnon: float64(anon0), rss: float64(rss1-rss0) / float64(n)}, nil
}

// warmGateway opens one session from this process and makes warm-up calls
// on it, so that the gateway's one-time allocations (its servers, pools,
// the upstream path) are made before the first reading. The session stays
// open, the same in both readings, until the caller calls close.
func (b *bench) warmGateway(ctx context.Context, url string) (close func(), err error) {
	cs, err := b.sdkHTTPSession(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting to the gateway: %w", err)
	}
	call := sdkCaller(cs, "demo__echo")
	for range min(b.opts.Warmup, 100) {
		if err := call(ctx); err != nil {
			_ = cs.Close()
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	return func() { _ = cs.Close() }, nil
}

// memory runs the memory rows, one after the other.
func (b *bench) memory(ctx context.Context, sel []*row) map[string]*memRun {
	out := map[string]*memRun{}
	for _, rw := range sel {
		if rw.mem == nil {
			continue
		}
		r := &memRun{row: rw}
		out[rw.name] = r
		if ctx.Err() != nil {
			r.err = context.Cause(ctx)
			continue
		}
		r.res, r.err = rw.mem(ctx, b)
		if r.err != nil {
			b.logf("%s: %v", rw.name, r.err)
		} else {
			b.logf("%s: %d sessions measured", rw.name, r.res.sessions)
		}
	}
	return out
}

type memRun struct {
	row *row
	res *memResult
	err error
}

// holdSessions is the sessions child: it opens -n sessions to -url, each
// with one call of -tool, prints "READY n", and holds them until stdin
// ends, then closes them.
func holdSessions(args []string) error {
	var (
		url, toolName string
		n             int
	)
	if err := childFlags("sessions", args, func(fs *flag.FlagSet) {
		fs.StringVar(&url, "url", "", "the gateway's MCP endpoint")
		fs.StringVar(&toolName, "tool", "demo__echo", "the tool each session calls once")
		fs.IntVar(&n, "n", 100, "sessions to open")
	}); err != nil {
		return err
	}
	if url == "" || n < 1 {
		return errors.New("need -url and a positive -n")
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 2*n, n
	hc := &http.Client{Transport: t}
	client := mcp.NewClient(clientImpl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sessions []*mcp.ClientSession
	defer func() {
		// Closed in parallel, each bounded by the SDK's own DELETE
		// timeout; the parent kills this process if that hangs.
		var wg sync.WaitGroup
		for _, cs := range sessions {
			wg.Go(func() { _ = cs.Close() })
		}
		wg.Wait()
	}()
	for i := range n {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc},
			&mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
		if err != nil {
			return fmt.Errorf("session %d: %w", i+1, err)
		}
		sessions = append(sessions, cs)
		if err := sdkCaller(cs, toolName)(ctx); err != nil {
			return fmt.Errorf("session %d: %w", i+1, err)
		}
	}
	fmt.Printf("READY %d\n", len(sessions))
	hold := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(hold)
	}()
	select {
	case <-hold:
	case <-time.After(10 * time.Minute):
	}
	return nil
}
