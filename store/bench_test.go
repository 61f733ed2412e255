package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/pins"
)

// measure runs op b.N times and reports the median and 99th percentile
// of one op's latency besides the mean: what a call waits on the store is
// the tail as much as the average.
func measure(b *testing.B, op func(i int) error) {
	b.Helper()
	durs := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(t0))
		i++
	}
	slices.Sort(durs)
	at := func(q float64) float64 {
		return float64(durs[min(len(durs)-1, int(q*float64(len(durs))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkStore measures each store operation a gateway does per call
// or per connection, on files (the default) and on PostgreSQL (a local
// server on 127.0.0.1, fsync off: the database's own cost, not a disk's or
// a network's).
//
//	go test -run '^$' -bench Store -benchtime 2000x ./store
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	filesOpts := testOptions()
	filesOpts.PinsFile = filepath.Join(dir, "pins.json")
	filesOpts.OAuthFile = filepath.Join(dir, "oauth.json")
	filesOpts.AuditFile = filepath.Join(dir, "audit.jsonl")
	files, err := Open(ctx, "", filesOpts)
	if err != nil {
		b.Fatal(err)
	}
	defer files.Close()
	pg, err := Open(ctx, pgtest.DB(b), testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()

	// A server of 20 tools, pinned: what every connect and list_changed
	// checks.
	var defs []pins.Definition
	for i := range 20 {
		defs = append(defs, def(fmt.Sprintf("tool_%d", i), fmt.Sprintf("does thing %d with a description of some length", i)))
	}
	sc := pins.Scope{Server: "bench", Identity: identity('b')}
	for _, s := range []*Store{files, pg} {
		if _, err := s.Pins().Check(ctx, sc, defs, pins.Enforce); err != nil {
			b.Fatal(err)
		}
		if err := s.Tokens().Update(ctx, "bench", func(e *oauth.Entry) error {
			e.Resource = "https://mcp.example.com/mcp"
			e.Token = &oauth.Token{AccessToken: "an-access-token-of-some-length-0123456789", RefreshToken: "a-refresh-token-0123456789", Type: "Bearer"}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if err := s.Sessions().Put(ctx, &Session{ID: "bench", Caller: "subject:bench", Protocol: "2025-11-25"}, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	rate := Rate{PerSecond: 1e9, Burst: 1 << 30}
	for _, st := range []struct {
		name string
		s    *Store
	}{{"files", files}, {"postgres", pg}} {
		s := st.s
		b.Run("pins.check/"+st.name, func(b *testing.B) {
			measure(b, func(int) error {
				rep, err := s.Pins().Check(ctx, sc, defs, pins.Enforce)
				if err == nil && rep.Decisions[0].Status != pins.Pinned {
					err = fmt.Errorf("status %s", rep.Decisions[0].Status)
				}
				return err
			})
		})
		b.Run("tokens.get/"+st.name, func(b *testing.B) {
			measure(b, func(int) error { _, err := s.Tokens().Get("bench"); return err })
		})
		b.Run("tokens.update/"+st.name, func(b *testing.B) {
			measure(b, func(i int) error {
				return s.Tokens().Update(ctx, "bench", func(e *oauth.Entry) error {
					e.Token.AccessToken = fmt.Sprintf("an-access-token-of-some-length-%d", i)
					return nil
				})
			})
		})
		b.Run("audit.write/"+st.name, func(b *testing.B) {
			measure(b, func(i int) error { return s.Audit().Write(event("bench", i)) })
		})
		b.Run("limits.allow/"+st.name, func(b *testing.B) {
			measure(b, func(int) error {
				ok, err := s.Limits().Allow(ctx, "subject:bench", rate)
				if err == nil && !ok {
					err = fmt.Errorf("refused")
				}
				return err
			})
		})
		b.Run("sessions.get/"+st.name, func(b *testing.B) {
			measure(b, func(int) error { _, err := s.Sessions().Get(ctx, "bench"); return err })
		})
		b.Run("sessions.touch/"+st.name, func(b *testing.B) {
			measure(b, func(int) error { _, err := s.Sessions().Touch(ctx, "bench", time.Hour); return err })
		})
	}
	b.Run("audit.verify/postgres", func(b *testing.B) {
		measure(b, func(int) error { _, err := pg.VerifyAudit(ctx, &audit.VerifyOptions{}); return err })
	})
}

// BenchmarkLimitsParallel is the rate check under load: 64 callers'
// checks at once on one replica, each its own bucket.
func BenchmarkLimitsParallel(b *testing.B) {
	ctx := context.Background()
	pg, err := Open(ctx, pgtest.DB(b), testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	rate := Rate{PerSecond: 1e9, Burst: 1 << 30}
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		caller := fmt.Sprintf("subject:%p", pb)
		for pb.Next() {
			if _, err := pg.Limits().Allow(ctx, caller, rate); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
