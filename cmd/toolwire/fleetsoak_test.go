package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/audit"
)

// callBound bounds every call of the soak: a call that has not ended by
// then is hung.
const callBound = 30 * time.Second

// soakCall is what became of one call.
type soakCall struct {
	start, end time.Time
	err        error // a protocol error, or the isError result's text
	hung       bool  // callBound passed
	mismatch   bool  // the result was not the text sent
}

// soakCaller is one of the soak's callers: a go-sdk client of one
// revision through haproxy, calling demo__echo with its own texts.
type soakCaller struct {
	i     int
	rev   string // "2025-11-25", or "" for 2026-07-28
	rt    *served
	cs    *mcp.ClientSession
	sid   string // the 2025 session's id when it opened
	calls []soakCall
}

// soakRun drives callers until stop is closed, counting completed calls in
// done and telling progress of each.
type soakRun struct {
	callers []*soakCaller
	done    atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startCallers connects n callers through c's load balancer, half with
// 2025-11-25 sessions and half speaking 2026-07-28, and starts them
// calling; progress is told, without blocking, after every call.
func startCallers(tb testing.TB, c *cluster, n int, progress chan<- struct{}) *soakRun {
	tb.Helper()
	run := &soakRun{stop: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), fleetStart)
	defer cancel()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i := range n {
		sc := &soakCaller{i: i, rt: newServed(c.tokens[i])}
		if i%2 == 0 {
			sc.rev = "2025-11-25"
		}
		run.callers = append(run.callers, sc)
		wg.Go(func() {
			cs, err := dialFleet(ctx, c, sc.rt, sc.rev, nil)
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("caller %d: %w", i, err))
				mu.Unlock()
				return
			}
			sc.cs, sc.sid = cs, cs.ID()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	for _, sc := range run.callers {
		if (sc.rev != "") != (sc.sid != "") {
			tb.Fatalf("caller %d (revision %q) has session %q", sc.i, sc.rev, sc.sid)
		}
		run.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-run.stop:
					return
				default:
				}
				sc.calls = append(sc.calls, sc.call(fmt.Sprintf("caller %d call %d", sc.i, n)))
				run.done.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		})
	}
	return run
}

func (sc *soakCaller) call(text string) soakCall {
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	c := soakCall{start: time.Now()}
	res, err := sc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": text}})
	c.end = time.Now()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		c.hung = true
	case err != nil:
		c.err = err
	case res.IsError:
		b, _ := json.Marshal(res.Content)
		c.err = errors.New(string(b))
	default:
		got := ""
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				got = tc.Text
			}
		}
		c.mismatch = got != text
	}
	return c
}

// finish stops the callers, waits for their last calls, and closes their
// sessions.
func (run *soakRun) finish() {
	close(run.stop)
	run.wg.Wait()
	for _, sc := range run.callers {
		_ = sc.cs.Close()
	}
}

// waitCalls waits until at least n calls completed, or the bound passes.
func (run *soakRun) waitCalls(tb testing.TB, progress <-chan struct{}, n int64, bound time.Duration) {
	tb.Helper()
	timeout := time.After(bound)
	for run.done.Load() < n {
		select {
		case <-progress:
		case <-timeout:
			tb.Fatalf("waited %s for %d calls; %d completed", bound, n, run.done.Load())
		}
	}
}

// soakReport is what the soak counts.
type soakReport struct {
	calls, ok, failed, inFlightAtKill, lost, mismatched, hung int
	sessions, survived                                        int
	recovery, rejoin, elapsed                                 time.Duration
	servedBy                                                  map[string]int
	failures                                                  []string
}

// Issue 17's fleet soak: 64 callers (32 go-sdk clients on 2025-11-25
// sessions, 32 speaking 2026-07-28) call demo__echo through haproxy in
// front of three replicas until at least 10,240 calls are done, while
// replica r1 is killed with SIGKILL (at 30% of the calls) and later
// started again (at 60%). Every call is bounded; it counts the calls lost
// (failed without having been in flight on the killed replica when it
// died), mismatched (answered with another text) and hung, the 2025
// sessions that went on after the kill on the other replicas, and the
// recovery time (from the kill until every caller had a call that started
// after it succeed). Then the fleet's audit, in the store, verifies and
// holds exactly one outcome for every call requested.
func TestFleetSoak(t *testing.T) {
	t.Parallel()
	const callers, target = 64, 10_240
	c := startCluster(t, fleetOptions{replicas: 3, callers: callers, security: "  pins: off\n", volume: true})
	progress := make(chan struct{}, 1)
	started := time.Now()
	run := startCallers(t, c, callers, progress)

	run.waitCalls(t, progress, target*3/10, 5*time.Minute)
	killedAt := time.Now()
	c.kill(1)
	// A call that started before the process was gone may have been sent
	// to it (haproxy notices a second later); one that started after it
	// went to the others, or failed for nothing.
	deadAt := time.Now()
	run.waitCalls(t, progress, target*6/10, 5*time.Minute)
	restartedAt := time.Now()
	if err := c.start(1); err != nil {
		t.Fatal(err)
	}
	if err := c.awaitServed(1, fleetStart); err != nil {
		t.Fatal(err)
	}
	rejoined := time.Now()
	after := run.done.Load()
	run.waitCalls(t, progress, max(target, after+1000), 5*time.Minute)
	run.finish()
	elapsed := time.Since(started)

	r := soakReport{elapsed: elapsed, rejoin: rejoined.Sub(restartedAt), servedBy: map[string]int{}}
	var recoveredAt time.Time
	for _, sc := range run.callers {
		if sc.rev != "" {
			r.sessions++
		}
		var firstAfter time.Time
		for _, call := range sc.calls {
			r.calls++
			switch {
			case call.hung:
				r.hung++
			case call.mismatch:
				r.mismatched++
			case call.err != nil:
				r.failed++
				if call.start.Before(deadAt) && !call.end.Before(killedAt) {
					r.inFlightAtKill++
				} else {
					r.lost++
					r.failures = append(r.failures, fmt.Sprintf("caller %d (%q) at +%s: %v", sc.i, sc.rev, call.start.Sub(started), call.err))
				}
			default:
				r.ok++
				if firstAfter.IsZero() && call.start.After(killedAt) {
					firstAfter = call.end
				}
			}
		}
		if firstAfter.IsZero() {
			t.Errorf("caller %d (%q) had no successful call after the kill", sc.i, sc.rev)
		} else if firstAfter.After(recoveredAt) {
			recoveredAt = firstAfter
		}
		if sc.rev != "" && !firstAfter.IsZero() && sc.cs.ID() == sc.sid {
			r.survived++
		}
		for k, v := range sc.rt.counts() {
			r.servedBy[k] += v
		}
	}
	if !recoveredAt.IsZero() {
		r.recovery = recoveredAt.Sub(killedAt)
	}
	t.Logf("fleet soak: %d calls in %s (%.0f calls/s) from %d callers through haproxy and 3 replicas; %d ok, %d failed "+
		"(%d in flight on the killed replica, %d lost), %d mismatched, %d hung; 2025 sessions that went on after the kill: %d of %d; "+
		"recovery %s (kill to every caller served again), rejoin %s (restart to haproxy sending it requests); responses by replica %v",
		r.calls, r.elapsed.Round(time.Millisecond), float64(r.calls)/r.elapsed.Seconds(), callers, r.ok, r.failed, r.inFlightAtKill, r.lost,
		r.mismatched, r.hung, r.survived, r.sessions, r.recovery.Round(time.Millisecond), r.rejoin.Round(time.Millisecond), r.servedBy)

	if r.calls < target || r.lost != 0 || r.mismatched != 0 || r.hung != 0 {
		t.Errorf("%d calls (want ≥ %d), %d lost, %d mismatched, %d hung; want none lost, mismatched or hung:\n%s",
			r.calls, target, r.lost, r.mismatched, r.hung, strings.Join(first(r.failures, 20), "\n"))
	}
	if r.inFlightAtKill > callers {
		t.Errorf("%d calls failed while in flight on the killed replica; there are only %d callers", r.inFlightAtKill, callers)
	}
	if r.survived != r.sessions {
		t.Errorf("%d of %d 2025 sessions went on after the kill, want all", r.survived, r.sessions)
	}
	for _, name := range []string{"r0", "r1", "r2"} {
		if r.servedBy[name] == 0 {
			t.Errorf("replica %s served nothing through haproxy: %v", name, r.servedBy)
		}
	}

	// The killed replica's calls recorded as requested get their outcome
	// once another replica has taken it for lost (it was unseen for the
	// claim's grace, 10 s; they look every 3 s): a soak shorter than that
	// after the kill must wait for it. Then the fleet's audit: stop every
	// replica (each records what it still had open), verify the chains,
	// and count outcomes per call.
	awaitRecovered(t, c.dbURL, len(c.replicas), time.Minute)
	for i := range c.replicas {
		if err := c.stop(i); err != nil {
			t.Error(err)
		}
	}
	verify := runBinary(t, c.bin, c.env, "audit", "verify")
	verify.expect(t, exitOK)
	if !strings.Contains(verify.stdout, "events, every chain intact to its head row") {
		t.Errorf("audit verify of the fleet's table: %q", verify.stdout)
	}
	checkOutcomes(t, c.dbURL, r.ok)
}

// awaitRecovered waits, until within has passed, for every instance on
// dbURL but the running ones (running of them) to have ended or been
// recovered.
func awaitRecovered(t *testing.T, dbURL string, running int, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var open int
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM toolwire.instances WHERE ended_at IS NULL AND recovered_at IS NULL").Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open <= running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d instances neither ended nor recovered after %s, want the %d running replicas only", open, within, running)
		}
	}
}

// checkOutcomes checks that every call requested in the audit table has
// exactly one outcome, and that at least ok calls of demo__echo were
// executed.
func checkOutcomes(t *testing.T, dbURL string, ok int) {
	t.Helper()
	type key struct {
		batch string
		index int
	}
	requested, outcomes := map[key]bool{}, map[key]int{}
	executed, lost := 0, 0
	for _, ev := range tableEvents(t, dbURL) {
		k := key{ev.Batch, ev.Index}
		switch {
		case ev.Kind == audit.CallRequested:
			if requested[k] {
				t.Errorf("call %v requested twice", k)
			}
			requested[k] = true
		case ev.Kind.Ends():
			outcomes[k]++
			if ev.Kind == audit.CallExecuted && ev.Tool == "demo__echo" {
				executed++
			}
			if ev.Reason == "instance_lost" {
				lost++
			}
		}
	}
	var wrong []string
	for k := range requested {
		if outcomes[k] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s/%d: %d outcomes", k.batch, k.index, outcomes[k]))
		}
	}
	for k, n := range outcomes {
		if !requested[k] {
			wrong = append(wrong, fmt.Sprintf("%s/%d: %d outcomes of a call never requested", k.batch, k.index, n))
		}
	}
	sort.Strings(wrong)
	t.Logf("fleet audit: %d calls requested, %d echo calls executed, %d outcomes given by recovering a lost replica", len(requested), executed, lost)
	if len(wrong) > 0 {
		t.Errorf("%d calls without exactly one outcome:\n%s", len(wrong), strings.Join(first(wrong, 20), "\n"))
	}
	if executed < ok {
		t.Errorf("%d echo calls executed in the audit, fewer than the %d the callers saw succeed", executed, ok)
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
