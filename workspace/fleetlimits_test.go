package workspace

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/store"
)

// Issue 22.14: the fleet's rate buckets do not grow by a row per caller
// forever: the gateway's checks forget the buckets that have refilled.
func TestFleetRateBucketsArePruned(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := GatewayLimiter(st).(*gatewayLimiter)
	g.every = time.Hour // no prune while the callers come
	g.pruned = time.Now()
	// Refilled in a microsecond: full again by the next statement.
	const perSecond, burst = 1e6, 1
	for i := range 50 {
		if ok, err := g.Allow(ctx, fmt.Sprintf("caller-%02d", i), perSecond, burst); !ok || err != nil {
			t.Fatalf("caller %d: %v, %v", i, ok, err)
		}
	}
	rows := func() int {
		t.Helper()
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM toolwire.rate_buckets").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 50 {
		t.Fatalf("%d buckets after 50 callers, want 50", n)
	}
	g.every = 0 // the next check prunes
	if ok, err := g.Allow(ctx, "caller-last", perSecond, burst); !ok || err != nil {
		t.Fatalf("the last caller: %v, %v", ok, err)
	}
	if n := rows(); n > 1 {
		t.Errorf("%d buckets after a check that prunes, want at most the last caller's", n)
	}
}
