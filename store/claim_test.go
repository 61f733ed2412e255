package store

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/tool"
)

// loginAs makes a role of its own for one instance of the test's database
// (a superuser, as the test's own), and returns url with it, and a func
// that stops or lets again the role's new connections: a replica whose
// connections to the database fail while the others' do not.
func loginAs(t *testing.T, url string) (string, func(allow bool)) {
	t.Helper()
	admin, name := adminConn(t, url)
	role := "lost_" + name
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN SUPERUSER PASSWORD 'lost-role-pw'"); err != nil {
		t.Fatal(err)
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(role, "lost-role-pw")
	return u.String(), func(allow bool) {
		t.Helper()
		login := "NOLOGIN"
		if allow {
			login = "LOGIN"
		}
		if _, err := admin.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" "+login); err != nil {
			t.Fatal(err)
		}
	}
}

// terminateClaim ends the connection that holds instance's lock.
func terminateClaim(t *testing.T, url string, instance int32) {
	t.Helper()
	if n := sql(t, url, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2 AND mode = 'ExclusiveLock' AND granted`,
		int64(instanceLockClass), int64(instance)); n != 1 {
		t.Fatalf("terminated %d connections holding instance %d's lock, want 1", n, instance)
	}
}

// callRows returns, for each call (batch/index) of the audit table, its
// outcomes' kinds and reasons, and the instance its rows name.
func callRows(t *testing.T, url string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, ev := range auditRows(t, url) {
		if ev.Kind.Ends() && ev.Batch != "" {
			k := ev.Batch + "/" + strconv.Itoa(ev.Index)
			out[k] = append(out[k], string(ev.Kind)+" "+ev.Reason)
		}
	}
	return out
}

// Issue 22.11: a replica whose claim goes (its listening connection is
// ended, and it cannot connect again for longer than the grace) is taken
// for lost by another, which gives its open calls their outcome. The
// lost replica refuses calls while it has no claim; an outcome it records
// afterwards for a call that has one is dropped (one outcome per call in
// the audit); what it runs under the old claim is cancelled once it
// learns it was taken for lost; and once it can connect again it takes a
// new claim, as a new instance, without a restart, and records under it.
func TestATakenForLostReplicaClaimsAgainAndGivesNoSecondOutcome(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), relayWait)
	defer cancel()
	aURL, allow := loginAs(t, url)
	a, b := openPG(t, aURL, nil), openPG(t, url, nil)
	b.grace = 200 * time.Millisecond
	// A replica, recovering only when the test asks (no sweeps racing it).
	b.recovers.Store(true)
	old := a.instance.Load()

	write := func(s *Store, evs ...audit.Event) {
		t.Helper()
		for _, ev := range evs {
			ev.Time = time.Now()
			if err := s.Audit().Write(&ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One call ended before the loss, two open across it; a's events
	// name their instance, as the gateway's do.
	write(a,
		audit.Event{Kind: audit.CallRequested, Batch: "b-1", Tool: "demo__echo", Instance: "a"},
		audit.Event{Kind: audit.CallExecuted, Batch: "b-1", Tool: "demo__echo", Instance: "a"},
		audit.Event{Kind: audit.CallRequested, Batch: "b-2", Tool: "demo__write_note", Instance: "a"},
		audit.Event{Kind: audit.CallRequested, Batch: "b-3", Tool: "demo__echo", Instance: "a"},
	)
	running, stop := a.Claimed(ctx)
	defer stop()

	allow(false)
	terminateClaim(t, url, old)
	for a.Claim() == nil {
		if ctx.Err() != nil {
			t.Fatal("a still holds its claim with its listening connection gone")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// b-3 ends while a has no claim, before anyone took a for lost: its
	// outcome is the one a records.
	write(a, audit.Event{Kind: audit.CallExecuted, Batch: "b-3", Tool: "demo__echo", Instance: "a"})

	// Unseen for longer than the grace, by the database's clock, and b's
	// own claim older than it: b takes a for lost.
	sql(t, url, "UPDATE toolwire.instances SET seen_at = now() - interval '1 minute' WHERE id = $1", old)
	sql(t, url, "UPDATE toolwire.instances SET claimed_at = now() - interval '1 minute' WHERE id = $1", b.instance.Load())
	if ok, err := b.recoverInstance(ctx, old); !ok || err != nil {
		t.Fatalf("b's recovery of a: %v, %v; want a recovered", ok, err)
	}
	if err := a.Claim(); err == nil {
		t.Error("a, taken for lost and not connected, says it holds a claim")
	}
	// b-2 ends on a after that: a call with an outcome (instance_lost)
	// gets no second one.
	write(a, audit.Event{Kind: audit.CallExecuted, Batch: "b-2", Tool: "demo__write_note", Instance: "a"})
	if err := context.Cause(running); err != nil {
		t.Errorf("a's call context before a knew it was taken for lost: %v, want it running", err)
	}

	// a can connect again: it learns it was taken for lost, cancels what
	// runs under the old claim, and holds a new one.
	allow(true)
	for a.Claim() != nil {
		if ctx.Err() != nil {
			t.Fatalf("a did not take a new claim once it could connect again: %v", a.Claim())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cur := a.instance.Load()
	if cur == old || a.Relay().Instance() != strconv.Itoa(int(cur)) {
		t.Errorf("a's instance after its new claim: %d (relay %s), was %d; want a new one, the same in both", cur, a.Relay().Instance(), old)
	}
	if !errors.Is(context.Cause(running), ErrTakenForLost) {
		t.Errorf("the cause of a call context of the old claim: %v, want ErrTakenForLost", context.Cause(running))
	}
	// What it holds from now on is named by the new id, a call waiting
	// for an operator too.
	waiting, err := a.Pending().Submit(ctx, approval.Request{Key: tool.ApprovalKey{Caller: "c", Tool: "demo__write_note"},
		Tool: "demo__write_note", Deadline: time.Now().Add(time.Minute)})
	if err != nil || waiting.Instance != strconv.Itoa(int(cur)) {
		t.Errorf("a call waiting for an operator after the new claim: held by %q, %v; want %d", waiting.Instance, err, cur)
	}
	fresh, stopFresh := a.Claimed(ctx)
	defer stopFresh()
	if err := context.Cause(fresh); err != nil {
		t.Errorf("a call context of the new claim: %v, want it running", err)
	}
	if n := sql(t, url, "SELECT 1 FROM toolwire.instances WHERE id = $1 AND recovered_at IS NULL AND ended_at IS NULL", cur); n != 1 {
		t.Errorf("the new instance's row: %d rows running, want 1", n)
	}
	write(a,
		audit.Event{Kind: audit.CallRequested, Batch: "b-4", Tool: "demo__echo", Instance: "a"},
		audit.Event{Kind: audit.CallExecuted, Batch: "b-4", Tool: "demo__echo", Instance: "a"},
	)

	got := callRows(t, url)
	want := map[string][]string{
		"b-1/0": {"call.executed "}, "b-2/0": {"call.errored " + ReasonInstanceLost},
		"b-3/0": {"call.executed "}, "b-4/0": {"call.executed "},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outcomes by call: %v\nwant one each: %v", got, want)
	}
	// The new call's rows name the new instance, in the column and in
	// the event.
	if n := sql(t, url, "SELECT 1 FROM toolwire.audit WHERE event->>'batch' = 'b-4' AND instance = $1 AND event->>'instance' = $2", cur, strconv.Itoa(int(cur))); n != 2 {
		t.Errorf("%d of the new call's 2 rows name the new instance %d", n, cur)
	}
	if _, err := b.VerifyAudit(ctx, nil); err != nil {
		t.Errorf("the audit chain: %v", err)
	}
}

// Issue 22.11: the outcome of a call written by its replica and the one
// the replica that took it for lost gives it, written at the same moment,
// are ordered by the chain's lock: exactly one of them is recorded.
func TestACallsTwoOutcomesAtOnceRecordOne(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	const calls = 40
	for i := range calls {
		ev := audit.Event{Time: time.Now(), Kind: audit.CallRequested, Batch: "race", Index: i, Tool: "demo__echo"}
		if err := a.Audit().Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	recovering := b.sink.(*auditTable).as(a.instance.Load())
	var wg sync.WaitGroup
	errs := make(chan error, 2*calls)
	for i := range calls {
		for _, w := range []struct {
			sink audit.Sink
			ev   audit.Event
		}{
			{a.Audit(), audit.Event{Kind: audit.CallExecuted, Batch: "race", Index: i}},
			{recovering, audit.Event{Kind: audit.CallErrored, Batch: "race", Index: i, Reason: ReasonInstanceLost}},
		} {
			wg.Go(func() {
				w.ev.Time = time.Now()
				errs <- w.sink.Write(&w.ev)
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := callRows(t, url)
	for i := range calls {
		if k := "race/" + strconv.Itoa(i); len(got[k]) != 1 {
			t.Errorf("call %s: outcomes %q, want exactly one", k, got[k])
		}
	}
	if _, err := a.VerifyAudit(context.Background(), nil); err != nil {
		t.Errorf("the audit chain: %v", err)
	}
}

// TestAClaimsEndCancelsItsContextsBeforeItReturns: the contexts made under
// a claim are cancelled, with ErrTakenForLost, by the time the claim's end
// returns (the listener then says the new claim holds), not later in
// goroutines of their own; one made after the end is cancelled at once.
func TestAClaimsEndCancelsItsContextsBeforeItReturns(t *testing.T) {
	t.Parallel()
	l := &listener{}
	l.term.Store(newClaimTerm())
	var ctxs []context.Context
	for range 50 {
		ctx, stop := l.claimedCtx(context.Background())
		defer stop()
		ctxs = append(ctxs, ctx)
	}
	ended := l.term.Swap(newClaimTerm())
	ended.cancel(ErrTakenForLost)
	for i, ctx := range ctxs {
		if !errors.Is(context.Cause(ctx), ErrTakenForLost) {
			t.Fatalf("context %d of the ended claim: cause %v, want ErrTakenForLost", i, context.Cause(ctx))
		}
	}
	late, cancelLate := context.WithCancelCause(context.Background())
	ended.add(cancelLate)
	if !errors.Is(context.Cause(late), ErrTakenForLost) {
		t.Errorf("a context added to an ended claim: cause %v, want ErrTakenForLost", context.Cause(late))
	}
	fresh, stop := l.claimedCtx(context.Background())
	defer stop()
	if fresh.Err() != nil {
		t.Errorf("a context of the new claim: %v, want running", context.Cause(fresh))
	}
}
