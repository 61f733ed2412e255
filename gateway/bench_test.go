//go:build unix

package gateway

// Benchmarks of a call through the gateway (Gateway.Handler over Streamable
// HTTP, as `toolwire serve --http` serves it) to a stdio upstream, against
// the same call made directly to that upstream and through a bare go-sdk
// pass-through proxy. Three variants, each with its own demo child:
//
//   - direct: a go-sdk client over mcp.CommandTransport to the demo,
//     calling echo;
//   - bare: a go-sdk client over Streamable HTTP (httptest, 127.0.0.1) to a
//     minimal go-sdk server whose tools forward to one upstream go-sdk
//     ClientSession over stdio (no toolwire code), calling echo;
//   - gateway: a go-sdk client over Streamable HTTP to
//     New(executor).Handler(&HTTPOptions{}) over a registry that
//     mcpclient.Connect filled from the demo over stdio (read tier, an
//     Approver as confirmer, an audit.Log to a FileSink in a temporary
//     directory, secrets redaction: what serve sets up), calling demo__echo.
//
// The demo child is this test binary re-executed with
// TOOLWIRE_GATEWAY_BENCH_SERVER=demo (see TestMain). Each variant is set up
// once per test process, on first use, and warmed with 200 calls; TestMain
// closes them after the run. The HTTP clients ask for protocol 2025-11-25
// (the newest the gateway offers; the bare proxy then speaks it too) and
// keep up to 128 idle connections, so that 64 callers do not churn TCP
// connections. The stdio legs (direct, and both proxies' upstream sessions)
// use the SDK's default protocol, as mcpclient does.
//
// BenchmarkGatewaySequential and BenchmarkGatewayLoad interleave the
// variants so that background load on the machine falls on all of them
// alike; one iteration is one round of fixed-length time windows (bounded in
// calls too), so with the default -benchtime each -count runs one round and
// ns/op is suppressed. BenchmarkGatewayCall runs one variant alone, b.N calls,
// for CPU and memory profiles.
//
//	go test -run='^$' -bench='GatewaySequential|GatewayLoad' -count=5 ./gateway/
//	go test -run='^$' -bench='GatewayCall/gateway/callers=1$' -benchtime=5000x \
//	    -cpuprofile=/tmp/gw.cpu -memprofile=/tmp/gw.mem ./gateway/
//
// Metrics: cpu-µs/call is this process's user+system CPU (getrusage) per
// call: for direct the client, for the proxies client + proxy (HTTP server,
// SDK server, executor, audit, upstream client); the demo child is another
// process, reported apart as child-cpu-µs/call (/proc, 10 ms ticks).
// B/call and allocs/call come from runtime.MemStats, this process only.
// added-* is a proxy's figure minus direct's in the same run;
// gw-vs-bare-added-*-% is how much more the gateway adds than the bare proxy.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolwire/toolwire/internal/benchkit"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// benchServerEnv makes the re-executed test binary serve the demo over stdio.
const benchServerEnv = "TOOLWIRE_GATEWAY_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) == "demo" {
		if err := demo.ServeStdio(context.Background(), nil); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "demo server: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	benchFix.close()
	os.Exit(code)
}

const (
	benchText    = "hello"
	benchProto   = "2025-11-25" // what the HTTP clients ask for
	benchWarmup  = 200          // calls per variant before its first measurement
	benchTimeout = 60 * time.Second

	// BenchmarkGatewaySequential: one iteration is benchSeqRounds rounds,
	// each a block per variant of benchSeqBlock (at most benchSeqMaxCalls
	// calls), the order reversed every round.
	benchSeqRounds   = 16
	benchSeqBlock    = 150 * time.Millisecond
	benchSeqMaxCalls = 2000

	// BenchmarkGatewayLoad: one iteration is benchLoadRounds rounds of a
	// window per variant in order, then in reverse; each window ramps up
	// for benchLoadWarm, then measures for benchLoadWindow (at most
	// benchLoadMaxCalls calls).
	benchLoadRounds   = 2
	benchLoadWarm     = 100 * time.Millisecond
	benchLoadWindow   = 400 * time.Millisecond
	benchLoadMaxCalls = 50000
)

var benchArgs = json.RawMessage(`{"text":"hello"}`)

// benchVariantNames in table order.
var benchVariantNames = []string{"direct", "bare", "gateway"}

// benchVariant is one way of making the echo call.
type benchVariant struct {
	name string
	call func(context.Context) error
	pid  int // the demo child behind it
}

// benchFixture holds the variants, set up once per process on first use.
type benchFixture struct {
	mu       sync.Mutex
	variants map[string]*benchVariant
	closers  []func() // run last to first
}

var benchFix benchFixture

func (f *benchFixture) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range slices.Backward(f.closers) {
		c()
	}
	f.closers, f.variants = nil, nil
}

func (f *benchFixture) onClose(c func()) { f.closers = append(f.closers, c) }

// get returns the named variant, setting it up and warming it first if
// this is its first use.
func (f *benchFixture) get(b *testing.B, name string) *benchVariant {
	b.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.variants[name]; ok {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	var (
		v   *benchVariant
		err error
	)
	switch name {
	case "direct":
		v, err = f.direct(ctx)
	case "bare":
		v, err = f.bare(ctx)
	case "gateway":
		v, err = f.gateway(ctx)
	default:
		err = errors.New("unknown variant")
	}
	if err != nil {
		b.Fatalf("setting up %s: %v", name, err)
	}
	for range benchWarmup {
		if err := v.call(ctx); err != nil {
			b.Fatalf("%s warm-up: %v", name, err)
		}
	}
	if f.variants == nil {
		f.variants = map[string]*benchVariant{}
	}
	f.variants[name] = v
	return v
}

// benchDemoEnv is the demo child's environment beyond what it inherits.
// GORACE: a race-enabled child otherwise sleeps a second on exit.
var benchDemoEnv = map[string]string{benchServerEnv: "demo", "GORACE": "atexit_sleep_ms=0"}

// benchDemoCmd is the demo child, with the environment mcpclient gives a
// stdio server (its inherited list plus benchDemoEnv), so that all three
// children run alike (GOGC and the like are not passed to any).
func benchDemoCmd() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	for _, k := range []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range benchDemoEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

var benchImpl = &mcp.Implementation{Name: "bench-client", Version: "0"}

// benchCaller returns one echo call on cs, checking the answer. Each call
// has its own params: the SDK writes _meta into them (protocol 2026-07-28).
func benchCaller(cs *mcp.ClientSession, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: benchArgs})
		if err != nil {
			return err
		}
		if r.IsError || len(r.Content) != 1 {
			return fmt.Errorf("echo = %+v", r)
		}
		if t, ok := r.Content[0].(*mcp.TextContent); !ok || t.Text != benchText {
			return fmt.Errorf("echo = %+v", r.Content[0])
		}
		return nil
	}
}

// httpSession connects a go-sdk client to url over Streamable HTTP with a
// connection pool big enough for 64 callers.
func (f *benchFixture) httpSession(ctx context.Context, url string) (*mcp.ClientSession, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 128
	cs, err := mcp.NewClient(benchImpl, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: t}},
		&mcp.ClientSessionOptions{ProtocolVersion: benchProto})
	if err != nil {
		return nil, err
	}
	f.onClose(func() { _ = cs.Close(); t.CloseIdleConnections() })
	return cs, nil
}

// serve starts an httptest server (127.0.0.1) for h.
func (f *benchFixture) serve(h http.Handler) string {
	ts := httptest.NewServer(h)
	f.onClose(func() { ts.CloseClientConnections(); ts.Close() })
	return ts.URL
}

func (f *benchFixture) direct(ctx context.Context) (*benchVariant, error) {
	cmd := benchDemoCmd()
	cs, err := mcp.NewClient(benchImpl, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	f.onClose(func() { _ = cs.Close() })
	return &benchVariant{name: "direct", call: benchCaller(cs, "echo"), pid: cmd.Process.Pid}, nil
}

// bare is the minimal pass-through: every upstream tool re-exposed as is by
// a go-sdk server whose handler forwards the call on one upstream session.
func (f *benchFixture) bare(ctx context.Context) (*benchVariant, error) {
	cmd := benchDemoCmd()
	up, err := mcp.NewClient(&mcp.Implementation{Name: "bench-proxy", Version: "0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	f.onClose(func() { _ = up.Close() })
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-proxy", Version: "0"}, nil)
	for t, err := range up.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		srv.AddTool(t, benchForward(up, t.Name))
	}
	url := f.serve(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	cs, err := f.httpSession(ctx, url)
	if err != nil {
		return nil, err
	}
	return &benchVariant{name: "bare", call: benchCaller(cs, "echo"), pid: cmd.Process.Pid}, nil
}

// benchForward is the bare proxy's handler of the tool name: the same call
// on the upstream session, its result returned as is.
func benchForward(up *mcp.ClientSession, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return up.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
	}
}

// gateway is toolwire's gateway as `serve --http` assembles it, without
// authentication.
func (f *benchFixture) gateway(ctx context.Context) (*benchVariant, error) {
	dir, err := os.MkdirTemp("", "toolwire-gwbench-")
	if err != nil {
		return nil, err
	}
	f.onClose(func() { _ = os.RemoveAll(dir) })
	sink, err := audit.OpenFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	f.onClose(func() { _ = sink.Close() })
	quiet := slog.New(slog.DiscardHandler)
	secrets := audit.NewSecrets()
	alog := audit.NewLog(sink, &audit.LogOptions{Redactor: secrets, Logger: quiet})
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: NewApprover(ApprovalPolicy{})})
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: alog, Logger: quiet})
	up, err := mcpclient.Connect(ctx, config.Server{
		Name: "demo", Transport: "stdio", Command: os.Args[0], Env: benchDemoEnv, DefaultTier: "read",
	}, reg, &mcpclient.Options{Logger: quiet, Secrets: secrets, Audit: alog})
	if err != nil {
		return nil, err
	}
	f.onClose(func() { _ = up.Close() })
	h := New(ex, nil).Handler(&HTTPOptions{})
	f.onClose(h.Close)
	cs, err := f.httpSession(ctx, f.serve(h)+"/mcp")
	if err != nil {
		return nil, err
	}
	return &benchVariant{name: "gateway", call: benchCaller(cs, "demo__echo"), pid: up.PID()}, nil
}

// --- measurement ---

// benchChildCPU returns a process's user+system CPU from /proc (USER_HZ
// assumed 100), or -1 when it cannot be read.
func benchChildCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// Fields after the command name, which is in parentheses: state is
	// field 3 of the file, utime 14, stime 15.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// benchBusy measures the CPU that other processes used while a benchmark
// ran: the machine's busy time (/proc/stat, steal included) minus this
// process's and the demo children's.
type benchBusy struct {
	start   time.Time
	machine time.Duration
	ours    time.Duration
}

// benchMachineBusy returns the machine's busy CPU time since boot, or -1.
func benchMachineBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func benchOurCPU(b *testing.B, ts []*benchTally) time.Duration {
	d := benchkit.CPU(b)
	for _, t := range ts {
		if c := benchChildCPU(t.v.pid); c > 0 {
			d += c
		}
	}
	return d
}

func benchStartBusy(b *testing.B, ts []*benchTally) *benchBusy {
	return &benchBusy{start: time.Now(), machine: benchMachineBusy(), ours: benchOurCPU(b, ts)}
}

// stop reports bg-cores: other processes' CPU over wall time (±0.1 for a
// run of some seconds, given 10 ms ticks).
func (bb *benchBusy) stop(b *testing.B, ts []*benchTally) {
	m := benchMachineBusy()
	if m < 0 || bb.machine < 0 {
		return
	}
	other := (m - bb.machine) - (benchOurCPU(b, ts) - bb.ours)
	b.ReportMetric(max(other.Seconds(), 0)/time.Since(bb.start).Seconds(), "bg-cores")
}

// benchTally accumulates one variant's measurements.
type benchTally struct {
	v        *benchVariant
	calls    int
	wall     time.Duration // measured time (load windows)
	cpu      time.Duration
	child    time.Duration // -1 when unknown
	bytes    uint64
	mallocs  uint64
	lat      []time.Duration
	childAt0 time.Duration
}

func (t *benchTally) perCall(d time.Duration) float64 {
	return benchkit.Micros(d) / float64(max(t.calls, 1))
}

func benchTallies(b *testing.B) []*benchTally {
	var ts []*benchTally
	for _, name := range benchVariantNames {
		ts = append(ts, &benchTally{v: benchFix.get(b, name)})
	}
	return ts
}

func (t *benchTally) startChild() { t.childAt0 = benchChildCPU(t.v.pid) }

func (t *benchTally) stopChild() {
	now := benchChildCPU(t.v.pid)
	if t.childAt0 < 0 || now < 0 || t.child < 0 {
		t.child = -1
		return
	}
	t.child += now - t.childAt0
}

// report emits the per-variant metrics, then each proxy's added latency
// and CPU over direct and the gateway's over the bare proxy's.
func benchReport(b *testing.B, ts []*benchTally, throughput bool) {
	p50, p99, cpu := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, t := range ts {
		n := t.v.name
		if n == "gateway" {
			n = "gw"
		}
		p50[n] = benchkit.Micros(benchkit.Percentile(t.lat, 0.50))
		p99[n] = benchkit.Micros(benchkit.Percentile(t.lat, 0.99))
		cpu[n] = t.perCall(t.cpu)
		b.ReportMetric(p50[n], n+"-p50-µs")
		b.ReportMetric(p99[n], n+"-p99-µs")
		b.ReportMetric(cpu[n], n+"-cpu-µs/call")
		if t.child >= 0 {
			b.ReportMetric(t.perCall(t.child), n+"-child-cpu-µs/call")
		}
		if throughput {
			b.ReportMetric(float64(t.calls)/t.wall.Seconds(), n+"-calls/s")
		} else {
			b.ReportMetric(float64(t.bytes)/float64(max(t.calls, 1)), n+"-B/call")
			b.ReportMetric(float64(t.mallocs)/float64(max(t.calls, 1)), n+"-allocs/call")
		}
	}
	if throughput {
		rate := func(t *benchTally) float64 { return float64(t.calls) / t.wall.Seconds() }
		direct, bare, gw := rate(ts[0]), rate(ts[1]), rate(ts[2])
		b.ReportMetric(100*(bare/direct-1), "bare-vs-direct-calls/s-%")
		b.ReportMetric(100*(gw/direct-1), "gw-vs-direct-calls/s-%")
		b.ReportMetric(100*(gw/bare-1), "gw-vs-bare-calls/s-%")
	}
	for _, m := range []struct {
		name string
		v    map[string]float64
	}{{"p50-µs", p50}, {"p99-µs", p99}, {"cpu-µs/call", cpu}} {
		bare, gw := m.v["bare"]-m.v["direct"], m.v["gw"]-m.v["direct"]
		b.ReportMetric(bare, "bare-added-"+m.name)
		b.ReportMetric(gw, "gw-added-"+m.name)
		b.ReportMetric(100*(gw/bare-1), "gw-vs-bare-added-"+strings.SplitN(m.name, "-", 2)[0]+"-%")
	}
	b.ReportMetric(0, "ns/op") // an iteration is a round of fixed windows
}

// BenchmarkGatewaySequential: one caller at a time, the three variants in
// blocks of benchSeqBlock whose order reverses every round (no variant
// always follows the same one), CPU and allocation measured per block.
// GC triggered by one block's garbage can run in the next block, so a
// little of each variant's cost lands on another; a block spans many GC
// cycles, which keeps that small.
func BenchmarkGatewaySequential(b *testing.B) {
	ts := benchTallies(b)
	var ms runtime.MemStats
	runtime.GC()
	b.ResetTimer()
	bg := benchStartBusy(b, ts)
	for range b.N {
		for _, t := range ts {
			t.startChild()
		}
		order := slices.Clone(ts)
		for range benchSeqRounds {
			slices.Reverse(order)
			for _, t := range order {
				ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
				runtime.ReadMemStats(&ms)
				alloc0, mallocs0 := ms.TotalAlloc, ms.Mallocs
				cpu0 := benchkit.CPU(b)
				start := time.Now()
				for n := 0; n < benchSeqMaxCalls && time.Since(start) < benchSeqBlock; n++ {
					t0 := time.Now()
					if err := t.v.call(ctx); err != nil {
						b.Fatalf("%s: %v", t.v.name, err)
					}
					t.lat = append(t.lat, time.Since(t0))
					t.calls++
				}
				t.cpu += benchkit.CPU(b) - cpu0
				runtime.ReadMemStats(&ms)
				t.bytes += ms.TotalAlloc - alloc0
				t.mallocs += ms.Mallocs - mallocs0
				cancel()
			}
		}
		for _, t := range ts {
			t.stopChild()
		}
	}
	b.StopTimer()
	bg.stop(b, ts)
	benchReport(b, ts, false)
}

// BenchmarkGatewayLoad measures calls/s, latency under load and CPU per call
// with 1, 8 and 64 callers sharing each variant's one session.
func BenchmarkGatewayLoad(b *testing.B) {
	for _, callers := range []int{1, 8, 64} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			ts := benchTallies(b)
			runtime.GC()
			b.ResetTimer()
			bg := benchStartBusy(b, ts)
			for range b.N {
				back := slices.Clone(ts)
				slices.Reverse(back)
				for range benchLoadRounds {
					for _, t := range append(slices.Clone(ts), back...) {
						benchWindow(b, t, callers)
					}
				}
			}
			b.StopTimer()
			bg.stop(b, ts)
			benchReport(b, ts, true)
		})
	}
}

// benchWindow runs callers goroutines calling t's variant in a loop: for
// benchLoadWarm unmeasured, then for benchLoadWindow (or benchLoadMaxCalls
// calls) measured; calls finishing inside the window count.
func benchWindow(b *testing.B, t *benchTally, callers int) {
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	var (
		measuring, stop atomic.Bool
		counted         atomic.Int64
		wg              sync.WaitGroup
		errOnce         sync.Once
		firstErr        error
		full            = make(chan struct{})
		fullOnce        sync.Once
	)
	lats := make([][]time.Duration, callers)
	for i := range callers {
		wg.Go(func() {
			for !stop.Load() {
				t0 := time.Now()
				err := t.v.call(ctx)
				d := time.Since(t0)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					stop.Store(true)
					fullOnce.Do(func() { close(full) })
					return
				}
				if measuring.Load() {
					lats[i] = append(lats[i], d)
					if counted.Add(1) >= benchLoadMaxCalls {
						fullOnce.Do(func() { close(full) })
					}
				}
			}
		})
	}
	time.Sleep(benchLoadWarm)
	t.startChild()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0, mallocs0 := ms.TotalAlloc, ms.Mallocs
	cpu0 := benchkit.CPU(b)
	start := time.Now()
	measuring.Store(true)
	select {
	case <-time.After(benchLoadWindow):
	case <-full:
	}
	measuring.Store(false)
	t.wall += time.Since(start)
	t.cpu += benchkit.CPU(b) - cpu0
	runtime.ReadMemStats(&ms)
	t.bytes += ms.TotalAlloc - alloc0
	t.mallocs += ms.Mallocs - mallocs0
	t.stopChild()
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("%s with %d callers: %v", t.v.name, callers, firstErr)
	}
	for _, l := range lats {
		t.lat = append(t.lat, l...)
		t.calls += len(l)
	}
}

// BenchmarkGatewayCall makes b.N calls through one variant alone, by one
// caller or by 64 (RunParallel): for profiles of one variant (the others
// are not even set up when the pattern selects one), e.g.
//
//	go test -run='^$' -bench='GatewayCall/gateway/callers=1$' -benchtime=5000x -cpuprofile=gw.cpu ./gateway/
func BenchmarkGatewayCall(b *testing.B) {
	for _, name := range benchVariantNames {
		for _, callers := range []int{1, 64} {
			b.Run(name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				benchCallAlone(b, benchFix.get(b, name), callers)
			})
		}
	}
}

func benchCallAlone(b *testing.B, v *benchVariant, callers int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*benchTimeout)
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchkit.CPU(b)
	if callers == 1 {
		for range b.N {
			t0 := time.Now()
			if err := v.call(ctx); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			lat = append(lat, time.Since(t0))
		}
	} else {
		var failed atomic.Pointer[error]
		b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := v.call(ctx); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
		if err := failed.Load(); err != nil {
			b.Fatalf("%s: %v", v.name, *err)
		}
	}
	cpu := benchkit.CPU(b) - cpu0
	b.StopTimer()
	b.ReportMetric(benchkit.Micros(cpu)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	if callers == 1 {
		b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 0.50)), "p50-µs")
		b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 0.99)), "p99-µs")
	}
}
