package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/tool"
)

func pgRequest(deadline time.Duration) approval.Request {
	return approval.Request{
		Key:  tool.ApprovalKey{Caller: "agent-7", Tool: "files__delete", Definition: "d1", Args: "a1", Policy: "p1"},
		Tool: "files__delete", Server: "files", Tier: "destructive", Caller: "Agent 7",
		// Kept byte for byte: key order and spacing as validated.
		Args:     json.RawMessage(`{"z":1,"path":"/srv/x\u001b[2J<b>"}`),
		Reason:   "the client cannot be asked",
		Deadline: time.Now().Add(deadline),
	}
}

// A decision taken on one replica reaches the call another holds by
// NOTIFY: the holder's poll is an hour, so nothing else could wake it.
func TestPostgresDecisionOnAnotherReplicaWakesTheHolder(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	a.requests.poll = time.Hour
	ctx := t.Context()
	r, err := a.Pending().Submit(ctx, pgRequest(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.Instance != a.Relay().Instance() || r.State != approval.Waiting {
		t.Fatalf("submitted %+v", r)
	}
	list, err := b.Pending().Pending(ctx)
	if err != nil || len(list) != 1 || list[0].ID != r.ID || string(list[0].Args) != string(pgRequest(0).Args) || list[0].Caller != "Agent 7" {
		t.Fatalf("Pending on b = %+v, %v", list, err)
	}
	type waited struct {
		d   approval.Decision
		err error
	}
	got := make(chan waited, 1)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		d, err := a.Pending().Wait(wctx, r.ID)
		got <- waited{d, err}
	}()
	d, err := b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: true, Scope: approval.Args, By: "cli:ann"})
	if err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w.err != nil {
		t.Fatalf("Wait: %v (only the notification could have ended it)", w.err)
	}
	if !w.d.Approve || w.d.By != "cli:ann" || w.d.Grant == "" || w.d.Grant != d.Grant {
		t.Fatalf("waited %+v; decided %+v", w.d, d)
	}
	// The lasting approval, granted with the decision, covers the key on
	// every replica; other arguments it does not.
	if id, err := a.Approvals().Approved(ctx, r.Key); err != nil || id != d.Grant {
		t.Fatalf("Approved on a = %q, %v; want %q", id, err, d.Grant)
	}
	other := r.Key
	other.Args = "a2"
	if id, _ := a.Approvals().Approved(ctx, other); id != "" {
		t.Fatalf("other arguments approved by %s", id)
	}
	if _, err := a.Pending().Decide(ctx, r.ID, approval.Decision{Approve: false, By: "cli:bob"}); !errors.Is(err, approval.ErrDecided) || !strings.Contains(err.Error(), "cli:ann") {
		t.Fatalf("second decision: %v; want ErrDecided naming cli:ann", err)
	}
	if _, err := a.Pending().Decide(ctx, "no-such-id", approval.Decision{Approve: true, By: "x"}); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	grants, _ := b.Approvals().List(ctx)
	if len(grants) != 1 || grants[0].ID != d.Grant || grants[0].Scope != approval.Args || grants[0].Key != r.Key {
		t.Fatalf("List = %+v", grants)
	}
	if err := b.Approvals().Revoke(ctx, d.Grant); err != nil {
		t.Fatal(err)
	}
	if err := b.Approvals().Revoke(ctx, d.Grant); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if id, _ := a.Approvals().Approved(ctx, r.Key); id != "" {
		t.Fatalf("a revoked approval applies: %s", id)
	}
}

func TestPostgresLastingDenialAndSessionScope(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	ctx := t.Context()
	r, _ := a.Pending().Submit(ctx, pgRequest(time.Hour))
	if _, err := b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: true, Scope: approval.Session, By: "ann"}); err == nil {
		t.Fatal("a session scope for a call in no session was taken")
	}
	if got, _ := b.Pending().Get(ctx, r.ID); got.State != approval.Waiting {
		t.Fatalf("a failed decision changed the request: %s", got.State)
	}
	d, err := b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: false, Scope: approval.Tool, For: time.Hour, By: "ann", Reason: "not today"})
	if err != nil {
		t.Fatal(err)
	}
	anyArgs := r.Key
	anyArgs.Args = "zzz"
	g, ok, err := a.Approvals().Denied(ctx, anyArgs)
	if err != nil || !ok || g.ID != d.Grant || g.Reason != "not today" {
		t.Fatalf("Denied = %+v, %v, %v", g, ok, err)
	}
	if id, _ := a.Approvals().Approved(ctx, anyArgs); id != "" {
		t.Fatalf("a denial approves: %s", id)
	}

	req := pgRequest(time.Hour)
	req.Session = "sess-1"
	req.Key.Tool = "files__write"
	r, _ = a.Pending().Submit(ctx, req)
	d, err = b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: true, Scope: approval.Session, By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	key := req.Key
	key.Args = "other"
	if id, _ := a.Approvals().Approved(approval.WithSession(ctx, "sess-1"), key); id != d.Grant {
		t.Fatalf("in the session: %q; want %q", id, d.Grant)
	}
	for _, s := range []string{"sess-2", ""} {
		if id, _ := a.Approvals().Approved(approval.WithSession(ctx, s), key); id != "" {
			t.Fatalf("session %q approved by %s", s, id)
		}
	}
	if err := b.Approvals().EndSession(ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}
	if id, _ := a.Approvals().Approved(approval.WithSession(ctx, "sess-1"), key); id != "" {
		t.Fatalf("an ended session's approval applies: %s", id)
	}
}

func TestPostgresDeadlineWithdrawalAndWatch(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	ctx := t.Context()
	wctx, stop := context.WithCancel(ctx)
	changes := b.Pending().Watch(wctx)

	r, _ := a.Pending().Submit(ctx, pgRequest(50*time.Millisecond))
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("the other replica's watcher did not hear of the request")
	}
	if _, err := a.Pending().Wait(ctx, r.ID); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("Wait = %v; want ErrExpired", err)
	}
	if _, err := b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: true, By: "late"}); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("late decision: %v; want ErrExpired", err)
	}
	// Past its deadline by the database's clock, before the holder
	// noticed: too late all the same.
	r, _ = a.Pending().Submit(ctx, pgRequest(time.Hour))
	sql(t, url, "UPDATE toolwire.approval_requests SET deadline = clock_timestamp() - interval '1 second' WHERE id = $1", r.ID)
	if _, err := b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: true, By: "late"}); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("decision past the deadline: %v; want ErrExpired", err)
	}
	if _, err := a.Pending().Wait(ctx, r.ID); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("Wait after it = %v; want ErrExpired", err)
	}

	r, _ = a.Pending().Submit(ctx, pgRequest(time.Hour))
	if err := a.Pending().Withdraw(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: true, By: "ann"}); !errors.Is(err, approval.ErrWithdrawn) {
		t.Fatalf("decision of a withdrawn call: %v", err)
	}
	if p, _ := b.Pending().Pending(ctx); len(p) != 0 {
		t.Fatalf("still pending: %+v", p)
	}
	stop()
	for range changes { // closed once its context ended
	}
}

// A decision racing the deadline: one outcome, which the waiter and the
// decider (on another replica) agree on.
func TestPostgresDecisionRacingTheDeadlineHasOneOutcome(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	ctx := t.Context()
	var decided, expired int
	for i := range 20 {
		r, err := a.Pending().Submit(ctx, pgRequest(time.Duration(10+i%10)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var derr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(5+i%10) * time.Millisecond) // around the deadline
			_, derr = b.Pending().Decide(ctx, r.ID, approval.Decision{Approve: true, By: "ann"})
		}()
		d, werr := a.Pending().Wait(ctx, r.ID)
		wg.Wait()
		final, _ := b.Pending().Get(ctx, r.ID)
		switch {
		case derr == nil && werr == nil && d.Approve && final.State == approval.Approved:
			decided++
		case errors.Is(derr, approval.ErrExpired) && errors.Is(werr, approval.ErrExpired) && final.State == approval.Expired:
			expired++
		default:
			t.Fatalf("round %d: decide %v, wait %+v %v, state %s: not one outcome", i, derr, d, werr, final.State)
		}
	}
	t.Logf("%d decided, %d expired", decided, expired)
}
