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
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
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

// benchCPU returns the process's user+system CPU time so far.
func benchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRecyclingMemory is an audit sink writing to an audit.Memory that it
// replaces every benchMemoryEvents events, so a benchmark of millions of
// calls does not keep every event alive. B/op then includes the Memory's
// slice growth, amortized over at most that many events.
type benchRecyclingMemory struct {
	mem *audit.Memory
	n   int
}

const benchMemoryEvents = 4096

func (s *benchRecyclingMemory) Write(ev *audit.Event) error {
	if s.mem == nil || s.n == benchMemoryEvents {
		s.mem, s.n = &audit.Memory{}, 0
	}
	s.n++
	return s.mem.Write(ev)
}

// benchDiscard is an audit sink that drops every event: what is left is the
// cost of building, timing, sizing and ordering the events.
type benchDiscard struct{}

func (benchDiscard) Write(*audit.Event) error { return nil }

// benchAudit returns an audit log for the named sink ("" for none).
func benchAudit(b *testing.B, sink string) *audit.Log {
	switch sink {
	case "":
		return nil
	case "memory":
		return audit.NewLog(&benchRecyclingMemory{}, nil)
	case "discard":
		return audit.NewLog(benchDiscard{}, nil)
	case "file":
		f, err := audit.OpenFile(b.TempDir() + "/audit.jsonl")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = f.Close() })
		return audit.NewLog(f, nil)
	}
	b.Fatalf("unknown sink %q", sink)
	return nil
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
			ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: benchAudit(b, c.sink)})
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
			cpu0 := benchCPU(b)
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
			cpu := benchCPU(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			if c.batch > 1 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.batch), "ns/call")
			}
		})
	}
}
