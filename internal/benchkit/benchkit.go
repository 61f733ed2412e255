//go:build unix

// Package benchkit holds what toolwire's benchmarks share: the process's CPU
// time, latency percentiles, and the audit sinks the benchmarks compare.
package benchkit

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
)

// CPU returns this process's user+system CPU time so far.
func CPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Percentile returns the p-quantile (0 < p < 1) of ds, sorting ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(p*float64(len(ds)-1))]
}

// Micros returns d in microseconds.
func Micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// recycledEvents is how many events a recycling memory sink keeps before
// starting over.
const recycledEvents = 4096

// recyclingMemory writes to an audit.Memory that it replaces every
// recycledEvents events, so a benchmark of millions of calls does not keep
// every event alive. B/op then includes the Memory's slice growth,
// amortized over at most that many events.
type recyclingMemory struct {
	mem *audit.Memory
	n   int
}

func (s *recyclingMemory) Write(ev *audit.Event) error {
	if s.mem == nil || s.n == recycledEvents {
		s.mem, s.n = &audit.Memory{}, 0
	}
	s.n++
	return s.mem.Write(ev)
}

// discard drops every event: what is left is the cost of building, timing,
// sizing and ordering them.
type discard struct{}

func (discard) Write(*audit.Event) error { return nil }

// AuditLog returns an audit log for the named sink: "" (none), "memory",
// "discard" or "file" (a JSON Lines file in a temporary directory).
func AuditLog(tb testing.TB, sink string) *audit.Log {
	switch sink {
	case "":
		return nil
	case "memory":
		return audit.NewLog(&recyclingMemory{}, nil)
	case "discard":
		return audit.NewLog(discard{}, nil)
	case "file":
		f, err := audit.OpenFile(tb.TempDir() + "/audit.jsonl")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = f.Close() })
		return audit.NewLog(f, nil)
	}
	tb.Fatalf("unknown sink %q", sink)
	return nil
}
