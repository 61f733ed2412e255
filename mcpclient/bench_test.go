//go:build unix

package mcpclient

// Benchmarks of toolwire's cost on top of the go-sdk.
//
// Calls: BenchmarkCallBareSDK calls the demo server's echo tool with a plain
// go-sdk ClientSession (and, as /matched, the way toolwire drives the SDK);
// BenchmarkCallToolwire calls the same tool of an identical child through
// Connect + tool.Executor (without audit and with three sinks);
// BenchmarkCallPaired does bare, matched and toolwire in rotating blocks
// within one loop, so that the ratios are not skewed by other work on the
// machine changing between benchmarks. Every child is this test binary
// re-executed with TOOLWIRE_TEST_SERVER=demo (see TestMain), started and
// warmed up before the timer starts and closed in b.Cleanup.
//
// Listing: BenchmarkAdapt1000 adapts a 1000-tool listing (names, tiers and
// schema compilation); BenchmarkConnectAndRegister1000 connects to an
// in-process Streamable HTTP server with those 1000 tools, end to end.
//
//	go test -run='^$' -bench=. -benchmem -count=6 ./mcpclient/
//
// Extra metrics: cpu-ns/op is this process's user+system CPU (getrusage)
// over the timed loop per op; for stdio calls that is the client side only,
// since the server is another process. p50-µs, p99-µs and max-µs are
// per-call latencies recorded in the timed loop (max shows stalls that a
// mean in ns/op hides or is dominated by).

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/toolwire/toolwire/internal/benchkit"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// benchArgs are the echo arguments both sides send, byte for byte.
var benchArgs = json.RawMessage(`{"text":"hello"}`)

const benchText = "hello"

// benchWarmup calls are made on each session before the timer starts.
const benchWarmup = 200

// benchDemoEnv makes the re-executed test binary serve the demo over stdio.
// GORACE: a race-enabled child otherwise sleeps a second on exit.
var benchDemoEnv = map[string]string{"TOOLWIRE_TEST_SERVER": "demo", "GORACE": "atexit_sleep_ms=0"}

func benchDemoConfig() config.Server {
	return config.Server{
		Name:        "demo",
		Transport:   "stdio",
		Command:     os.Args[0],
		Env:         benchDemoEnv,
		DefaultTier: "read",
	}
}

// benchLoop runs call b.N times after the warm-up, recording each call's
// latency into a slice allocated before the timer starts, and reports
// cpu-ns/op, p50-µs, p99-µs and max-µs.
func benchLoop(b *testing.B, call func()) {
	for range benchWarmup {
		call()
	}
	lat := make([]time.Duration, b.N)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchkit.CPU(b)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		call()
		lat[i] = time.Since(t0)
	}
	cpu := benchkit.CPU(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 0.50)), "p50-µs")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 0.99)), "p99-µs")
	b.ReportMetric(benchkit.Micros(lat[len(lat)-1]), "max-µs") // sorted by benchPercentile
}

// benchBareSession starts the demo child and connects a plain go-sdk client
// to it: the same binary, environment and transport Connect uses, without
// toolwire.
func benchBareSession(b *testing.B) *mcp.ClientSession {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = childEnv(benchDemoEnv)
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-bare", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("bare connect: %v", err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// benchBareCall returns a function making one bare echo call, checking the
// answer as cheaply as the toolwire side does. With matched set, the call is
// made the way Connect's handler makes it (under a per-call timeout context)
// on a session that has listed its tools (which makes the SDK look the tool
// up on every call): the SDK work toolwire cannot avoid, without toolwire.
func benchBareCall(b *testing.B, cs *mcp.ClientSession, matched bool) func() {
	ctx := context.Background()
	if matched {
		for _, err := range cs.Tools(ctx, nil) {
			if err != nil {
				b.Fatalf("bare list: %v", err)
			}
		}
	}
	check := func(r *mcp.CallToolResult, err error) {
		if err != nil {
			b.Fatalf("bare echo: %v", err)
		}
		if r.IsError || len(r.Content) != 1 {
			b.Fatalf("bare echo = %+v", r)
		}
		if t, ok := r.Content[0].(*mcp.TextContent); !ok || t.Text != benchText {
			b.Fatalf("bare echo = %+v", r)
		}
	}
	if !matched {
		return func() {
			check(cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: benchArgs}))
		}
	}
	return func() {
		cctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
		check(cs.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: benchArgs}))
		cancel()
	}
}

func benchToolwire(b *testing.B, sink string) *tool.Executor {
	b.Helper()
	// The demo has write and destructive tools, so the registry needs a
	// confirmer; echo is read-tier and never reaches it.
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: tool.ConfirmFunc(
		func(context.Context, tool.PendingCall) (bool, error) { return true, nil })})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, benchDemoConfig(), reg, nil)
	if err != nil {
		b.Fatalf("Connect: %v", err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: benchkit.AuditLog(b, sink)})
}

func benchToolwireCall(b *testing.B, ex *tool.Executor) func() {
	ctx := context.Background()
	return func() {
		res := ex.Call(ctx, "demo__echo", benchArgs)
		if res.IsError {
			b.Fatalf("toolwire echo: %s: %s", res.Reason, res.Message)
		}
		if len(res.Content) != 1 {
			b.Fatalf("toolwire echo = %+v", res)
		}
		if t, ok := res.Content[0].(*tool.Text); !ok || t.Text != benchText {
			b.Fatalf("toolwire echo = %+v", res)
		}
	}
}

// BenchmarkCallBareSDK/plain is the baseline, a bare
// ClientSession.CallTool; /matched adds what toolwire makes the SDK do (see
// benchBareCall), so that toolwire minus matched is toolwire's own code.
func BenchmarkCallBareSDK(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		benchLoop(b, benchBareCall(b, benchBareSession(b), false))
	})
	b.Run("matched", func(b *testing.B) {
		benchLoop(b, benchBareCall(b, benchBareSession(b), true))
	})
}

func BenchmarkCallToolwire(b *testing.B) {
	for _, sink := range []string{"", "memory", "discard", "file"} {
		name := "audit=none"
		if sink != "" {
			name = "audit=" + sink
		}
		b.Run(name, func(b *testing.B) {
			benchLoop(b, benchToolwireCall(b, benchToolwire(b, sink)))
		})
	}
}

// BenchmarkCallPaired makes b.N calls on each of three sessions, bare
// (plain), bare (matched) and toolwire (no audit), in blocks of 100 calls
// whose order reverses every round, within one timed loop, measuring CPU
// (getrusage) and allocation (runtime.MemStats) per block. Background load
// on the machine then falls on all three alike, which separate benchmarks
// cannot promise. It reports each side per call and toolwire's overhead over
// both bare sides; ns/op and B/op are per round of three calls. GC triggered by one block's garbage can
// run in the next block, so a little of each side's cost lands on another;
// each block spans several GC cycles, which keeps that small.
func BenchmarkCallPaired(b *testing.B) {
	const block = 100
	type side struct {
		name    string
		call    func()
		cpu     time.Duration
		bytes   uint64
		mallocs uint64
		lat     []time.Duration
	}
	sides := []*side{
		{name: "bare", call: benchBareCall(b, benchBareSession(b), false)},
		{name: "matched", call: benchBareCall(b, benchBareSession(b), true)},
		{name: "tw", call: benchToolwireCall(b, benchToolwire(b, ""))},
	}
	for range benchWarmup {
		for _, s := range sides {
			s.call()
		}
	}
	for _, s := range sides {
		s.lat = make([]time.Duration, 0, b.N)
	}
	var ms runtime.MemStats
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	order := slices.Clone(sides)
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		slices.Reverse(order) // no side always follows the same one
		for _, s := range order {
			runtime.ReadMemStats(&ms)
			alloc0, mallocs0 := ms.TotalAlloc, ms.Mallocs
			cpu0 := benchkit.CPU(b)
			for range n {
				t0 := time.Now()
				s.call()
				s.lat = append(s.lat, time.Since(t0))
			}
			s.cpu += benchkit.CPU(b) - cpu0
			runtime.ReadMemStats(&ms)
			s.bytes += ms.TotalAlloc - alloc0
			s.mallocs += ms.Mallocs - mallocs0
		}
	}
	b.StopTimer()
	n := float64(b.N)
	for _, s := range sides {
		b.ReportMetric(float64(s.cpu.Nanoseconds())/n, s.name+"-cpu-ns/call")
		b.ReportMetric(float64(s.bytes)/n, s.name+"-B/call")
		b.ReportMetric(benchkit.Micros(benchkit.Percentile(s.lat, 0.5)), s.name+"-p50-µs")
		b.ReportMetric(benchkit.Micros(s.lat[len(s.lat)-1]), s.name+"-max-µs")
	}
	bare, matched, tw := sides[0], sides[1], sides[2]
	b.ReportMetric(100*(float64(tw.cpu)/float64(bare.cpu)-1), "tw-vs-bare-cpu-%")
	b.ReportMetric(100*(float64(tw.cpu)/float64(matched.cpu)-1), "tw-vs-matched-cpu-%")
	b.ReportMetric((float64(tw.bytes)-float64(bare.bytes))/n, "tw-vs-bare-B/call")
	b.ReportMetric((float64(tw.mallocs)-float64(bare.mallocs))/n, "tw-vs-bare-allocs/call")
	b.ReportMetric((float64(tw.bytes)-float64(matched.bytes))/n, "tw-vs-matched-B/call")
}

// --- 1000-tool listings ---

const benchListingSize = 1000

// benchProps are property templates; every generated schema draws from them.
var benchProps = []struct{ name, schema string }{
	{"limit", `{"type":"integer","minimum":1,"maximum":100,"default":20,"description":"Maximum number of results to return."}`},
	{"include_archived", `{"type":"boolean","default":false,"description":"Whether archived records are included."}`},
	{"labels", `{"type":"array","items":{"type":"string","minLength":1},"maxItems":20,"uniqueItems":true,"description":"Labels every result must carry."}`},
	{"since", `{"type":"string","format":"date-time","description":"Only records changed at or after this time (RFC 3339)."}`},
	{"project_key", `{"type":"string","pattern":"^[A-Z][A-Z0-9]{1,9}$","description":"Key of the project, such as OPS or WEB2."}`},
	{"score", `{"type":"number","minimum":0,"maximum":1,"description":"Minimum relevance score between 0 and 1."}`},
}

var (
	benchVerbs = []string{"Searches", "Lists", "Updates", "Archives", "Exports", "Counts", "Deletes"}
	benchNouns = []string{"issues", "pull requests", "deployments", "invoices", "calendar events", "support tickets"}
)

// benchToolJSON returns the i-th generated tool as the server would list it:
// a name like tool_0042, a title, a description of about 120 characters, and
// an input schema, different for every tool, of 3 to 6 properties (a
// required string, an enum, a nested object, which every tenth tool declares
// in $defs and refers to with $ref, then integers, booleans, arrays,
// date-times, patterns and numbers), with some required, additionalProperties
// false, and hint annotations. About 1.1 KB per tool on the wire.
func benchToolJSON(i int) string {
	verb, noun := benchVerbs[i%len(benchVerbs)], benchNouns[(i/3)%len(benchNouns)]
	desc := fmt.Sprintf("%s the %s of the workspace that match the given query and filters; results are paginated, newest first (variant %04d).", verb, noun, i)
	var props []string
	required := []string{`"query"`}
	props = append(props,
		// The index in a description makes every schema distinct, as on
		// a real server: a cache keyed by schema bytes gains nothing here.
		fmt.Sprintf(`"query":{"type":"string","minLength":1,"maxLength":256,"description":"Free-text query matched against the titles and bodies of %s (set %04d)."}`, noun, i),
		`"order":{"type":"string","enum":["asc","desc","relevance"],"default":"desc","description":"Sort order of the results."}`)
	filter := `{"type":"object","properties":{"field":{"type":"string","description":"Field to filter on."},"op":{"type":"string","enum":["eq","ne","lt","gt","contains"]},"value":{"type":["string","number","boolean"]}},"required":["field","value"],"additionalProperties":false}`
	defs := ""
	if i%10 == 0 {
		defs = `,"$defs":{"filter":` + filter + `}`
		props = append(props, `"filter":{"type":"array","items":{"$ref":"#/$defs/filter"},"maxItems":10,"description":"Filters, all of which must hold."}`)
	} else {
		props = append(props, `"filter":`+filter)
	}
	if i%2 == 1 {
		required = append(required, `"order"`)
	}
	for k := range i % 4 { // 0 to 3 more: 3 to 6 properties in all
		p := benchProps[(i+2*k)%len(benchProps)]
		props = append(props, fmt.Sprintf("%q:%s", p.name, p.schema))
	}
	annotations := `{"readOnlyHint":true}`
	switch {
	case verb == "Deletes" || verb == "Archives":
		annotations = `{"readOnlyHint":false,"destructiveHint":true}`
	case verb == "Updates":
		annotations = `{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true}`
	}
	return fmt.Sprintf(`{"name":"tool_%04d","title":"%s %s","description":%q,"inputSchema":{"type":"object","properties":{%s},"required":[%s],"additionalProperties":false%s},"annotations":%s}`,
		i, verb, noun, desc, strings.Join(props, ","), strings.Join(required, ","), defs, annotations)
}

// benchListingJSON is the whole listing as a JSON array.
func benchListingJSON(n int) []byte {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = benchToolJSON(i)
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

// benchListing decodes the listing as the go-sdk client hands it over: input
// schemas as map[string]any.
func benchListing(b *testing.B, n int) []*mcp.Tool {
	b.Helper()
	var tools []*mcp.Tool
	if err := json.Unmarshal(benchListingJSON(n), &tools); err != nil {
		b.Fatal(err)
	}
	return tools
}

func benchBigConfig() config.Server {
	return config.Server{Name: "big", Transport: "http", DefaultTier: "read"}
}

func BenchmarkAdapt1000(b *testing.B) {
	wire := benchListingJSON(benchListingSize)
	// cold: every iteration's schemas are new to the compiled-schema cache
	// (a "$comment" differs), as on a server's first connect. warm: the
	// same listing again, as on a reconnect or an unchanged list_changed.
	for _, mode := range []string{"cold", "warm"} {
		b.Run("adapt/"+mode, func(b *testing.B) {
			listing := benchListing(b, benchListingSize)
			cfg := benchBigConfig()
			handler := func(string) tool.Handler {
				return func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil }
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := benchkit.CPU(b)
			for i := 0; i < b.N; i++ {
				if mode == "cold" {
					b.StopTimer()
					stamp(listing, i)
					b.StartTimer()
				}
				ad, err := adapt(cfg, listing, handler)
				if err != nil || len(ad.tools) != benchListingSize || len(ad.skipped) != 0 {
					b.Fatalf("adapt: %d tools, skipped %v, err %v", len(ad.tools), ad.skipped, err)
				}
			}
			cpu := benchkit.CPU(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(len(wire))/benchListingSize, "wire-B/tool")

			// What one adaptation keeps alive (tools, compiled schemas), as
			// opposed to B/op, which is mostly garbage.
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ad, _ := adapt(cfg, listing, handler)
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(ad)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "retained-MiB")
		})
	}
	// compile-only is the schema compilation share of adapt: the same
	// schemas, already as JSON, compiled one tool at a time.
	b.Run("compile-only", func(b *testing.B) {
		var raws []json.RawMessage
		for _, mt := range benchListing(b, benchListingSize) {
			raw, err := json.Marshal(mt.InputSchema)
			if err != nil {
				b.Fatal(err)
			}
			raws = append(raws, raw)
		}
		runtime.GC()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fresh := make([]json.RawMessage, len(raws))
			for j, raw := range raws {
				// A fresh "$comment" misses the compiled-schema cache.
				fresh[j] = append(json.RawMessage(`{"$comment":"`+strconv.Itoa(i)+`",`), raw[1:]...)
			}
			b.StartTimer()
			for _, raw := range fresh {
				t := &tool.Tool{Name: "x", InputSchema: raw}
				if err := t.CompileSchema(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
	})
}

// benchBigServer serves the 1000 generated tools over Streamable HTTP from
// this process and returns the endpoint.
func benchBigServer(b *testing.B) string {
	b.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "0"}, nil)
	var raws []json.RawMessage
	if err := json.Unmarshal(benchListingJSON(benchListingSize), &raws); err != nil {
		b.Fatal(err)
	}
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	for _, raw := range raws {
		var mt mcp.Tool
		var schema struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(raw, &mt); err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			b.Fatal(err)
		}
		mt.InputSchema = schema.InputSchema // served as the raw bytes
		srv.AddTool(&mt, ok)
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(ts.Close)
	return ts.URL
}

// BenchmarkConnectAndRegister1000 measures one whole Connect (initialize,
// tools/list of 1000 tools, adapt, register) plus Close, against the same
// session set up and torn down by a bare go-sdk client that only lists. The
// server runs in this process, so B/op and cpu-ms/op include its side too;
// the difference between the two is toolwire's.
func BenchmarkConnectAndRegister1000(b *testing.B) {
	url := benchBigServer(b)
	run := func(b *testing.B, once func(context.Context)) {
		ctx := context.Background()
		once(ctx) // warm-up: the HTTP connection and the server's caches
		runtime.GC()
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := benchkit.CPU(b)
		for i := 0; i < b.N; i++ {
			once(ctx)
		}
		cpu := benchkit.CPU(b) - cpu0
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/op")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
	}
	b.Run("toolwire", func(b *testing.B) {
		reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: tool.ConfirmFunc(
			func(context.Context, tool.PendingCall) (bool, error) { return true, nil })})
		cfg := benchBigConfig()
		cfg.URL = url
		run(b, func(ctx context.Context) {
			s, err := Connect(ctx, cfg, reg, nil)
			if err != nil {
				b.Fatalf("Connect: %v", err)
			}
			if n := len(s.Tools()); n != benchListingSize {
				b.Fatalf("registered %d tools, want %d (skipped %v)", n, benchListingSize, s.Skipped())
			}
			if err := s.Close(); err != nil {
				b.Fatalf("Close: %v", err)
			}
		})
	})
	b.Run("bare-sdk-list", func(b *testing.B) {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench-bare", Version: "0"}, nil)
		run(b, func(ctx context.Context) {
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
			if err != nil {
				b.Fatalf("bare connect: %v", err)
			}
			n := 0
			for _, err := range cs.Tools(ctx, nil) {
				if err != nil {
					b.Fatalf("bare list: %v", err)
				}
				n++
			}
			if n != benchListingSize {
				b.Fatalf("listed %d tools", n)
			}
			if err := cs.Close(); err != nil {
				b.Fatalf("bare close: %v", err)
			}
		})
	})
}

// stamp gives every schema of listing a "$comment" unique to iteration i,
// so that compiling it cannot hit the compiled-schema cache.
func stamp(listing []*mcp.Tool, i int) {
	for _, t := range listing {
		if m, ok := t.InputSchema.(map[string]any); ok {
			m["$comment"] = strconv.Itoa(i)
		}
	}
}

// BenchmarkManagerStart compares starting ten stdio servers in parallel with
// starting one: each iteration starts one server, then ten, through a
// Manager, and closes them. It reports both times and their ratio; the
// issue's target is a ratio of at most 1.3, i.e. parallel start costs about
// the slowest single start.
//
// Two kinds of server: "demo" answers at once, so its start is CPU work (a
// Go process starting, the handshake) and ten of them share this machine's
// two cores; "slowstart" waits 200 ms before answering, like a server
// launched through npx or one that reaches a network service first, which
// is where starting in parallel pays.
func BenchmarkManagerStart(b *testing.B) {
	for _, mode := range []string{"demo", "slowstart"} {
		b.Run(mode, func(b *testing.B) { benchManagerStart(b, mode) })
	}
}

func benchManagerStart(b *testing.B, mode string) {
	configs := func(n int) []config.Server {
		out := make([]config.Server, n)
		for i := range out {
			cfg := benchDemoConfig()
			cfg.Name = "demo" + strconv.Itoa(i)
			cfg.Env = map[string]string{"TOOLWIRE_TEST_SERVER": mode, "GORACE": "atexit_sleep_ms=0"}
			out[i] = cfg
		}
		return out
	}
	start := func(n int) time.Duration {
		reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) { return true, nil })})
		m := NewManager(configs(n), reg, nil)
		t0 := time.Now()
		if err := m.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		for _, st := range m.Status() {
			if st.State != Ready {
				b.Fatalf("server %s is %s: %s", st.Name, st.State, st.LastError)
			}
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	start(1) // warm the page cache and the binary
	var one, ten []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		one = append(one, start(1))
		ten = append(ten, start(10))
	}
	b.StopTimer()
	slices.Sort(one)
	slices.Sort(ten)
	p50one, p50ten := one[len(one)/2], ten[len(ten)/2]
	b.ReportMetric(float64(p50one.Microseconds())/1e3, "one-ms")
	b.ReportMetric(float64(p50ten.Microseconds())/1e3, "ten-ms")
	b.ReportMetric(float64(p50ten)/float64(p50one), "ten/one")
}
