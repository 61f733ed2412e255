package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/internal/pgtest"
)

// slow refills about one token in 17 minutes: within a test, a bucket
// holds its burst and nothing more.
var slow = Rate{PerSecond: 0.001, Burst: 10}

// TestRateLimitHoldsForTheFleet: three replicas, many concurrent calls of
// one caller: exactly the burst is admitted, fleet-wide; another caller
// has a bucket of its own.
func TestRateLimitHoldsForTheFleet(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	const replicas, goroutines, calls = 3, 8, 5
	lims := make([]Limiter, replicas)
	for i := range lims {
		lims[i] = openPG(t, url, nil).Limits()
	}
	var allowed, other atomic.Int32
	start := make(chan struct{})
	errs := make(chan error, replicas*goroutines*calls)
	var wg sync.WaitGroup
	for r := range replicas {
		for range goroutines {
			wg.Go(func() {
				<-start
				for range calls {
					ok, err := lims[r].Allow(context.Background(), "subject:alice", slow)
					if err != nil {
						errs <- err
					}
					if ok {
						allowed.Add(1)
					}
				}
				if ok, _ := lims[r].Allow(context.Background(), fmt.Sprintf("subject:bob-%d", r), slow); ok {
					other.Add(1)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := allowed.Load(); got != int32(slow.Burst) {
		t.Errorf("admitted %d of %d calls across %d replicas, want exactly the burst, %d", got, replicas*goroutines*calls, replicas, slow.Burst)
	}
	if got := other.Load(); got != replicas*goroutines {
		t.Errorf("other callers: %d admitted, want %d (their buckets are their own)", got, replicas*goroutines)
	}
}

// TestRateLimitRefills moves a bucket's last update back in time, as time
// passing would: it refills at the rate, never past the burst.
func TestRateLimitRefills(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	lim := openPG(t, url, nil).Limits()
	ctx := context.Background()
	r := Rate{PerSecond: 0.5, Burst: 10}
	drain := func() int {
		n := 0
		for range 2 * r.Burst {
			ok, err := lim.Allow(ctx, "ip:192.0.2.1", r)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				n++
			}
		}
		return n
	}
	if n := drain(); n != r.Burst {
		t.Fatalf("a new bucket admitted %d, want the burst %d", n, r.Burst)
	}
	sql(t, url, "UPDATE toolwire.rate_buckets SET updated = updated - interval '10 seconds'")
	if n := drain(); n != 5 {
		t.Errorf("10 s at 0.5/s refilled %d, want 5", n)
	}
	sql(t, url, "UPDATE toolwire.rate_buckets SET updated = updated - interval '1 hour'")
	if n := drain(); n != r.Burst {
		t.Errorf("an hour refilled %d, want the burst %d", n, r.Burst)
	}
	// A full bucket is what a new caller gets: pruning it changes nothing.
	sql(t, url, "UPDATE toolwire.rate_buckets SET updated = updated - interval '1 hour'")
	n, err := lim.Prune(ctx, r)
	if err != nil || n != 1 {
		t.Errorf("prune: %d, %v; want 1 full bucket removed", n, err)
	}
}

// TestRateLimitSameInMemory: the files store's limiter admits the same.
func TestRateLimitSameInMemory(t *testing.T) {
	t.Parallel()
	lim := openFileStore(t, nil).Limits()
	n := 0
	for range 50 {
		ok, err := lim.Allow(context.Background(), "subject:alice", slow)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			n++
		}
	}
	if n != slow.Burst {
		t.Errorf("admitted %d, want %d", n, slow.Burst)
	}
	// A bucket refilled in a nanosecond is full again and forgotten;
	// alice's, spent, is kept.
	fast := Rate{PerSecond: 1e9, Burst: 1}
	if ok, err := lim.Allow(context.Background(), "subject:bob", fast); !ok || err != nil {
		t.Fatalf("bob: %t, %v", ok, err)
	}
	if n, err := lim.Prune(context.Background(), fast); n != 1 || err != nil {
		t.Errorf("prune: %d, %v; want bob's bucket only", n, err)
	}
}

func TestRateRefusesBadShapes(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	for _, lim := range []Limiter{openFileStore(t, nil).Limits(), openPG(t, url, nil).Limits()} {
		for _, r := range []Rate{{PerSecond: 0, Burst: 1}, {PerSecond: -1, Burst: 1}, {PerSecond: 1, Burst: 0}} {
			_, err := lim.Allow(context.Background(), "c", r)
			if err == nil || !strings.Contains(err.Error(), "want") {
				t.Errorf("%T.Allow(%+v) = %v, want an error naming the field", lim, r, err)
			}
		}
	}
}

// TestRateChecksOfManyCallersGoTogether: three replicas check many
// callers at once, each replica's goroutines in another order of the
// callers, so that the checks one statement carries name several
// callers and two replicas' statements the same ones: every caller is
// admitted exactly its burst, and no statement fails (two statements
// locking the same buckets in opposite orders would deadlock, and
// PostgreSQL would fail one).
func TestRateChecksOfManyCallersGoTogether(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	const replicas, goroutines, callers, rounds = 3, 6, 8, 3
	r := Rate{PerSecond: 0.001, Burst: 4}
	lims := make([]Limiter, replicas)
	for i := range lims {
		lims[i] = openPG(t, url, nil).Limits()
	}
	var allowed [callers]atomic.Int32
	start := make(chan struct{})
	errs := make(chan error, replicas*goroutines*callers*rounds)
	var wg sync.WaitGroup
	for rep := range replicas {
		for g := range goroutines {
			wg.Go(func() {
				<-start
				for i := range callers * rounds {
					c := (i + g) % callers
					if rep%2 == 1 {
						c = callers - 1 - c
					}
					ok, err := lims[rep].Allow(context.Background(), fmt.Sprintf("subject:c%d", c), r)
					if err != nil {
						errs <- err
					}
					if ok {
						allowed[c].Add(1)
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for c := range allowed {
		if got := allowed[c].Load(); got != int32(r.Burst) {
			t.Errorf("caller c%d: admitted %d of %d checks, want exactly the burst, %d", c, got, replicas*goroutines*rounds, r.Burst)
		}
	}
}

// TestPruneNeverWaitsForAChecksLock: a statement of rate checks holds
// one caller's bucket (take_tokens locks the buckets one by one, in the
// callers' order) while a prune runs, then takes another caller's. A prune
// that waited for the held bucket, holding the other's already (it locked
// them in the table's order), deadlocked with it, and PostgreSQL failed
// one of the two: in a fleet, every check of the failed statement was
// refused as unchecked. The prune skips the held bucket, deletes the other
// and ends; the checks go on.
func TestPruneNeverWaitsForAChecksLock(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	lim := openPG(t, url, nil).Limits()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := Rate{PerSecond: 100, Burst: 10}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Two full buckets, a's row first in the table.
	if _, err := conn.Exec(ctx, `INSERT INTO toolwire.rate_buckets (caller, tokens, updated, allowed) VALUES
		('subject:a', 10, now() - interval '1 hour', true), ('subject:b', 10, now() - interval '1 hour', true)`); err != nil {
		t.Fatal(err)
	}
	checks, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer checks.Rollback(ctx)
	if _, err := checks.Exec(ctx, `SELECT toolwire.take_tokens(ARRAY['subject:b'], ARRAY[100::float8], ARRAY[10::float8])`); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		n   int64
		err error
	}
	pruned := make(chan outcome, 1)
	go func() {
		n, err := lim.Prune(ctx, r)
		pruned <- outcome{n, err}
	}()
	// The prune ends, or waits for b's lock (as it did, holding a's).
	watch, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	var done *outcome
	for deadline := time.Now().Add(10 * time.Second); done == nil; {
		select {
		case o := <-pruned:
			done = &o
			continue
		default:
		}
		var waiting bool
		if err := watch.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE query LIKE 'DELETE FROM toolwire.rate_buckets%' AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The statement of checks takes a's bucket next.
	_, takeErr := checks.Exec(ctx, `SELECT toolwire.take_tokens(ARRAY['subject:a'], ARRAY[100::float8], ARRAY[10::float8])`)
	commitErr := checks.Commit(ctx)
	if done == nil {
		o := <-pruned
		done = &o
	}
	if takeErr != nil || commitErr != nil || done.err != nil {
		t.Fatalf("the checks: %v, their commit: %v; the prune: %v; want none to fail", takeErr, commitErr, done.err)
	}
	if done.n != 1 {
		t.Errorf("the prune deleted %d buckets, want a's alone (b's was held)", done.n)
	}
}
