//go:build unix

package tool_test

// Benchmarks of the executor on its own: an in-process Go handler, so that
// what is measured is toolwire's per-call cost (lookup, parse, validate,
// re-encode, confirm, audit, result) with no SDK or transport underneath.
// The MCP end-to-end counterparts are in mcpclient/bench_test.go.
//
//	go test -run='^$' -bench=ExecutorOnly -benchmem -count=6 ./tool/
//
// Sub-benchmarks are named batch=N/tier=T/audit=S: N calls per Run (1 is
// Executor.Call), a read tool or a write tool with an always-approving
// confirmer, and no audit, an audit.Memory, a sink that drops events (the
// audit pipeline's own cost) or a FileSink in b.TempDir().
//
// Besides ns/op, B/op and allocs/op, each benchmark reports cpu-ns/op: the
// process's user+system CPU (getrusage) over the timed loop divided by b.N,
// which includes GC work done on the other core.

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/toolwire/toolwire/internal/benchkit"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

// benchEchoSchema is the demo server's echo schema: a small object with one
// required string property.
const benchEchoSchema = `{
	"type": "object",
	"properties": {"text": {"type": "string", "description": "Text to echo back."}},
	"required": ["text"]
}`

// benchArgs are the arguments of every benchmarked call, the same bytes the
// MCP benchmarks send.
var benchArgs = json.RawMessage(`{"text":"hello"}`)

// benchHandler is the trivial tool: it returns a fresh one-block text result.
func benchHandler(context.Context, json.RawMessage) (*tool.Result, error) {
	return tool.TextResult("hello"), nil
}

func BenchmarkExecutorOnly(b *testing.B) {
	approve := tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) { return true, nil })
	cases := []struct {
		tier  tool.Tier
		sink  string // "" for no audit
		batch int
	}{
		{tool.Read, "", 1},
		{tool.Read, "memory", 1},
		{tool.Read, "discard", 1},
		{tool.Read, "file", 1},
		{tool.Write, "", 1},
		{tool.Write, "memory", 1},
		{tool.Read, "", 8},
		{tool.Read, "memory", 8},
	}
	for _, c := range cases {
		sink := c.sink
		if sink == "" {
			sink = "none"
		}
		name := fmt.Sprintf("batch=%d/tier=%s/audit=%s", c.batch, c.tier, sink)
		b.Run(name, func(b *testing.B) {
			reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: approve})
			err := reg.Register(&tool.Tool{
				Name:        "bench__echo",
				Description: "Returns the given text unchanged.",
				InputSchema: json.RawMessage(benchEchoSchema),
				Tier:        c.tier,
				Origin:      tool.Origin{Source: "bench", Name: "echo"},
				Handler:     benchHandler,
			})
			if err != nil {
				b.Fatal(err)
			}
			ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: benchkit.AuditLog(b, c.sink)})
			calls := make([]tool.Call, c.batch)
			for i := range calls {
				calls[i] = tool.Call{Name: "bench__echo", Args: benchArgs}
			}
			ctx := context.Background()
			check := func(results []*tool.Result) {
				for _, res := range results {
					if res.IsError {
						b.Fatalf("call failed: %s: %s", res.Reason, res.Message)
					}
				}
			}
			for range 100 { // warm-up
				check(ex.Run(ctx, calls))
			}

			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := benchkit.CPU(b)
			if c.batch == 1 {
				// Executor.Call, as an application calls one tool.
				for i := 0; i < b.N; i++ {
					if res := ex.Call(ctx, "bench__echo", benchArgs); res.IsError {
						check([]*tool.Result{res})
					}
				}
			} else {
				for i := 0; i < b.N; i++ {
					check(ex.Run(ctx, calls))
				}
			}
			cpu := benchkit.CPU(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			if c.batch > 1 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.batch), "ns/call")
			}
		})
	}
}
