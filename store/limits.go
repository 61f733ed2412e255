package store

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/time/rate"

	"github.com/toolwire/toolwire/audit"
)

// Rate is a token bucket's shape: it refills at PerSecond tokens a second
// and holds at most Burst. A new caller's bucket starts full. This is
// what the gateway's Limits.CallRate and CallBurst say.
type Rate struct {
	PerSecond float64
	Burst     int
}

func (r Rate) check() error {
	switch {
	case !(r.PerSecond > 0) || math.IsInf(r.PerSecond, 0):
		return fmt.Errorf("store: rate: PerSecond %v, want a positive number", r.PerSecond)
	case r.Burst < 1:
		return fmt.Errorf("store: rate: Burst %d, want at least 1", r.Burst)
	}
	return nil
}

// Limiter is a per-caller token bucket, the call rate limit of the
// gateway's callers. The files store's holds the buckets of one process
// in memory; the PostgreSQL store's holds one bucket per caller for the
// whole fleet.
//
// Implementations are safe for concurrent use.
type Limiter interface {
	// Allow takes one token from caller's bucket, shaped by r, and
	// reports whether there was one. r is given on every call so that a
	// reloaded configuration applies at once; the bucket keeps its level.
	// An error (the database is unreachable) says nothing about the
	// bucket: a gateway refuses the call, failing closed.
	Allow(ctx context.Context, caller string, r Rate) (bool, error)
	// Prune forgets the buckets that have refilled to r's burst: a caller
	// without one gets a full bucket, so nothing changes for anyone but
	// the space they took. It returns how many it forgot.
	Prune(ctx context.Context, r Rate) (int64, error)
}

// memoryLimiter keeps buckets in memory, as the gateway's tracker does.
type memoryLimiter struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newMemoryLimiter() *memoryLimiter {
	return &memoryLimiter{buckets: map[string]*rate.Limiter{}}
}

func (m *memoryLimiter) Allow(_ context.Context, caller string, r Rate) (bool, error) {
	if err := r.check(); err != nil {
		return false, err
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[caller]
	if b == nil {
		if len(m.buckets) >= 64 {
			// A full bucket is what a new caller gets: forgetting those
			// keeps the map as large as the callers who spent something.
			for k, old := range m.buckets {
				if old.TokensAt(now) >= float64(old.Burst()) {
					delete(m.buckets, k)
				}
			}
		}
		b = rate.NewLimiter(rate.Limit(r.PerSecond), r.Burst)
		m.buckets[caller] = b
	}
	if b.Limit() != rate.Limit(r.PerSecond) {
		b.SetLimitAt(now, rate.Limit(r.PerSecond))
	}
	if b.Burst() != r.Burst {
		b.SetBurstAt(now, r.Burst)
	}
	return b.AllowN(now, 1), nil
}

func (m *memoryLimiter) Prune(_ context.Context, r Rate) (int64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k, b := range m.buckets {
		if b.TokensAt(now) >= float64(r.Burst) {
			delete(m.buckets, k)
			n++
		}
	}
	return n, nil
}

// tableLimiter keeps one bucket per caller in toolwire.rate_buckets and
// takes a token with one statement: the row lock orders the requests of
// one caller across the fleet, and the time is the database's (now(), the
// statement's start), so the replicas' clocks play no part. The checks
// that come while one is in flight go together in the next statement
// (toolwire.take_tokens, through an [audit.Group]): one round trip for
// all of them, each the same check as alone.
//
// The bound is exact: in any interval of length T, the fleet admits at
// most Burst + PerSecond·T calls of one caller, however many replicas
// serve it. (A request that waited for the row lock, or for the statement
// that carried it, is credited the refill up to that statement's start
// only, never more, so the bound is not exceeded; it may be short by a
// wait's worth of refill.)
type tableLimiter struct {
	pool  *pgxpool.Pool
	group audit.Group[*rateCheck]
}

// rateCheck is one Allow on its way to the table.
type rateCheck struct {
	caller      string
	rate, burst float64
	allowed     bool // the answer, set by the statement that carried it
}

// rateCheckTimeout bounds a statement of grouped checks, whose callers'
// own contexts do not end it: one caller's cancelled request must not
// fail the others'.
const rateCheckTimeout = 10 * time.Second

const takeTokens = `SELECT toolwire.take_tokens($1, $2, $3)`

func (t *tableLimiter) Allow(ctx context.Context, caller string, r Rate) (bool, error) {
	if err := r.check(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("store: rate limit of caller: %w", err)
	}
	c := &rateCheck{caller: caller, rate: r.PerSecond, burst: float64(r.Burst)}
	if err := t.group.Write([]*rateCheck{c}, t.take); err != nil {
		return false, fmt.Errorf("store: rate limit of caller: %w", err)
	}
	return c.allowed, nil
}

// take runs checks in one statement, for the group.
func (t *tableLimiter) take(checks []*rateCheck) error {
	ctx, cancel := context.WithTimeout(context.Background(), rateCheckTimeout)
	defer cancel()
	callers := make([]string, len(checks))
	rates := make([]float64, len(checks))
	bursts := make([]float64, len(checks))
	for i, c := range checks {
		callers[i], rates[i], bursts[i] = c.caller, c.rate, c.burst
	}
	var allowed []bool
	if err := t.pool.QueryRow(ctx, takeTokens, callers, rates, bursts).Scan(&allowed); err != nil {
		return err
	}
	if len(allowed) != len(checks) {
		return fmt.Errorf("%d answers to %d checks", len(allowed), len(checks))
	}
	for i, c := range checks {
		c.allowed = allowed[i]
	}
	return nil
}

// pruneBuckets deletes the full buckets ($1 a second, burst $2) that no
// check holds: it never waits for a bucket's row lock. A delete that
// waited would lock its rows in the table's order while a statement of
// checks locks them in the callers' order (take_tokens), and the two
// could deadlock: PostgreSQL would fail one, and every check of a failed
// statement would be refused as unchecked (TestPruneNeverWaitsForAChecksLock).
// A bucket skipped now is pruned by a later prune.
const pruneBuckets = `DELETE FROM toolwire.rate_buckets WHERE caller IN (
	SELECT caller FROM toolwire.rate_buckets b
	WHERE toolwire.bucket_level(b.tokens, b.updated, $1, $2) >= $2
	FOR UPDATE SKIP LOCKED)`

func (t *tableLimiter) Prune(ctx context.Context, r Rate) (int64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	tag, err := t.pool.Exec(ctx, pruneBuckets, r.PerSecond, float64(r.Burst))
	if err != nil {
		return 0, fmt.Errorf("store: prune rate buckets: %w", err)
	}
	return tag.RowsAffected(), nil
}
