package approval

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/tool"
)

// newQueues returns two queues on the same files, as two processes of one
// machine see them.
func newQueues(t *testing.T) (holder, operator *FileQueue, grants *Files) {
	t.Helper()
	dir := t.TempDir()
	grants = NewFiles(filepath.Join(dir, "approvals.json"))
	holder = NewFileQueue(filepath.Join(dir, "pending.json"), grants, "serve")
	holder.poll = 10 * time.Millisecond
	operator = NewFileQueue(filepath.Join(dir, "pending.json"), NewFiles(grants.Path()), "cli")
	operator.poll = 10 * time.Millisecond
	return holder, operator, grants
}

func request(deadline time.Duration) Request {
	return Request{
		Key:  tool.ApprovalKey{Caller: "agent-7", Tool: "files__delete", Definition: "d1", Args: "a1"},
		Tool: "files__delete", Server: "files", Tier: "destructive", Caller: "Agent 7",
		Args: json.RawMessage(`{"z":1,"path":"/srv/shared/x\u001b[2J<b>&"}`), Reason: "the client cannot be asked",
		Deadline: time.Now().Add(deadline),
	}
}

func TestFileQueueDecisionInOtherQueueReachesTheWaiter(t *testing.T) {
	t.Parallel()
	holder, operator, grants := newQueues(t)
	ctx := boundedCtx(t)
	r, err := holder.Submit(ctx, request(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == "" || r.State != Waiting || r.Instance != "serve" {
		t.Fatalf("submitted %+v", r)
	}
	pending, err := operator.Pending(ctx)
	if err != nil || len(pending) != 1 || pending[0].ID != r.ID || string(pending[0].Args) != string(request(0).Args) {
		t.Fatalf("Pending = %+v, %v", pending, err)
	}
	got := make(chan error, 1)
	var waited Decision
	go func() {
		var err error
		waited, err = holder.Wait(ctx, r.ID)
		got <- err
	}()
	d, err := operator.Decide(ctx, r.ID, Decision{Approve: true, Scope: Args, By: "cli:ann"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !waited.Approve || waited.By != "cli:ann" || waited.Grant == "" || waited.Grant != d.Grant || waited.At.IsZero() {
		t.Fatalf("waited %+v, decided %+v", waited, d)
	}
	// The decision of scope args is a lasting approval of this key.
	if id, err := grants.Approved(ctx, r.Key); err != nil || id != d.Grant {
		t.Fatalf("Approved = %q, %v; want %q", id, err, d.Grant)
	}
	other := r.Key
	other.Args = "a2"
	if id, _ := grants.Approved(ctx, other); id != "" {
		t.Fatalf("other arguments approved by %s", id)
	}
	if p, _ := operator.Pending(ctx); len(p) != 0 {
		t.Fatalf("still pending: %+v", p)
	}
	// Deciding again says who decided first.
	_, err = operator.Decide(ctx, r.ID, Decision{Approve: false, By: "cli:bob"})
	if !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), "cli:ann") {
		t.Fatalf("second decision: %v; want ErrDecided naming cli:ann", err)
	}
	if _, err := operator.Decide(ctx, "0123456789abcdef", Decision{Approve: true, By: "x"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v; want ErrNotFound", err)
	}
}

func TestFileQueueDenialWithScopeLastsAndOnceDoesNot(t *testing.T) {
	t.Parallel()
	holder, operator, grants := newQueues(t)
	ctx := boundedCtx(t)
	r, _ := holder.Submit(ctx, request(time.Minute))
	d, err := operator.Decide(ctx, r.ID, Decision{Approve: false, Scope: Tool, For: time.Hour, By: "ann", Reason: "not today"})
	if err != nil || d.Grant == "" {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	other := r.Key
	other.Args = "anything"
	g, ok, err := grants.Denied(ctx, other)
	if err != nil || !ok || g.ID != d.Grant || g.Reason != "not today" {
		t.Fatalf("Denied = %+v, %v, %v", g, ok, err)
	}
	if id, _ := grants.Approved(ctx, other); id != "" {
		t.Fatalf("a denial approves: %s", id)
	}
	if _, err := holder.Wait(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	r2, _ := holder.Submit(ctx, request(time.Minute))
	d2, err := operator.Decide(ctx, r2.ID, Decision{Approve: true, Scope: Once, By: "ann"})
	if err != nil || d2.Grant != "" {
		t.Fatalf("once: %+v, %v; want no grant", d2, err)
	}
	list, _ := grants.List(ctx)
	if len(list) != 1 {
		t.Fatalf("grants %+v; want only the denial", list)
	}
}

// TestFileQueueLastingScopeNeedsAKey: a call the executor gave no key (an
// unauthenticated gateway caller) is decided once only; a lasting scope
// is refused and nothing is granted or changed.
func TestFileQueueLastingScopeNeedsAKey(t *testing.T) {
	t.Parallel()
	holder, operator, grants := newQueues(t)
	ctx := boundedCtx(t)
	req := request(time.Minute)
	req.Key = tool.ApprovalKey{}
	r, err := holder.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []Scope{Args, Tool} {
		for _, approve := range []bool{true, false} {
			if _, err := operator.Decide(ctx, r.ID, Decision{Approve: approve, Scope: scope, By: "ann"}); err == nil || !strings.Contains(err.Error(), "no key") {
				t.Errorf("a lasting %s decision (approve %v) of a keyless call: %v; want refused", scope, approve, err)
			}
		}
	}
	if got, _ := operator.Get(ctx, r.ID); got.State != Waiting {
		t.Fatalf("a refused decision changed the request: %s", got.State)
	}
	if all, _ := grants.List(ctx); len(all) != 0 {
		t.Fatalf("lasting grants of a keyless call: %+v", all)
	}
	if _, err := operator.Decide(ctx, r.ID, Decision{Approve: true, By: "ann"}); err != nil {
		t.Fatalf("deciding it once: %v", err)
	}
}

func TestFileQueueSessionScopeNeedsTheSession(t *testing.T) {
	t.Parallel()
	holder, operator, grants := newQueues(t)
	ctx := boundedCtx(t)
	r, _ := holder.Submit(ctx, request(time.Minute))
	if _, err := operator.Decide(ctx, r.ID, Decision{Approve: true, Scope: Session, By: "ann"}); err == nil {
		t.Fatal("a session scope for a call in no session was taken")
	}
	if got, _ := operator.Get(ctx, r.ID); got.State != Waiting {
		t.Fatalf("a failed decision changed the request: %s", got.State)
	}
	req := request(time.Minute)
	req.Session = "sess-1"
	r, _ = holder.Submit(ctx, req)
	d, err := operator.Decide(ctx, r.ID, Decision{Approve: true, Scope: Session, By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	other := r.Key
	other.Args = "other"
	if id, _ := grants.Approved(WithSession(ctx, "sess-1"), other); id != d.Grant {
		t.Fatalf("in the session: %q; want %q", id, d.Grant)
	}
	if id, _ := grants.Approved(WithSession(ctx, "sess-2"), other); id != "" {
		t.Fatalf("another session is approved by %s", id)
	}
	if id, _ := grants.Approved(ctx, other); id != "" {
		t.Fatalf("a call in no session is approved by %s", id)
	}
	if err := grants.EndSession(ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}
	if id, _ := grants.Approved(WithSession(ctx, "sess-1"), other); id != "" {
		t.Fatalf("an ended session's approval applies: %s", id)
	}
}

func TestFileQueueDeadlineAndWithdrawal(t *testing.T) {
	t.Parallel()
	holder, operator, _ := newQueues(t)
	ctx := boundedCtx(t)
	r, _ := holder.Submit(ctx, request(30*time.Millisecond))
	if _, err := holder.Wait(ctx, r.ID); !errors.Is(err, ErrExpired) {
		t.Fatalf("Wait = %v; want ErrExpired", err)
	}
	if _, err := operator.Decide(ctx, r.ID, Decision{Approve: true, By: "late"}); !errors.Is(err, ErrExpired) {
		t.Fatalf("late decision: %v; want ErrExpired", err)
	}
	// Past the deadline, before the holder noticed: too late all the same.
	r, _ = holder.Submit(ctx, request(time.Minute))
	late := NewFileQueue(operator.Path(), nil, "cli")
	late.now = func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := late.Decide(ctx, r.ID, Decision{Approve: true, By: "late"}); !errors.Is(err, ErrExpired) {
		t.Fatalf("decision past the deadline: %v; want ErrExpired", err)
	}
	if _, err := holder.Wait(ctx, r.ID); !errors.Is(err, ErrExpired) {
		t.Fatalf("Wait after a late decision = %v; want ErrExpired", err)
	}
	r, _ = holder.Submit(ctx, request(time.Minute))
	if err := holder.Withdraw(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Decide(ctx, r.ID, Decision{Approve: true, By: "ann"}); !errors.Is(err, ErrWithdrawn) {
		t.Fatalf("decision of a withdrawn call: %v; want ErrWithdrawn", err)
	}
	if _, err := holder.Wait(ctx, r.ID); !errors.Is(err, ErrWithdrawn) {
		t.Fatalf("Wait = %v; want ErrWithdrawn", err)
	}
	if _, err := holder.Submit(ctx, request(-time.Second)); err == nil {
		t.Fatal("a request past its deadline was submitted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	r, _ = holder.Submit(ctx, request(time.Minute))
	if _, err := holder.Wait(cctx, r.ID); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with an ended context: %v", err)
	}
}

// A decision racing the deadline: whichever comes first is the one
// outcome, which the waiter and the decider agree on.
func TestFileQueueDecisionRacingTheDeadlineHasOneOutcome(t *testing.T) {
	t.Parallel()
	holder, operator, _ := newQueues(t)
	ctx := boundedCtx(t)
	var decided, expired int
	for i := range 30 {
		r, err := holder.Submit(ctx, request(time.Duration(5+i%10)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var derr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(r.Deadline.Add(time.Duration(i%5-3) * time.Millisecond))) // aim around the deadline
			_, derr = operator.Decide(ctx, r.ID, Decision{Approve: true, By: "ann"})
		}()
		d, werr := holder.Wait(ctx, r.ID)
		wg.Wait()
		final, _ := operator.Get(ctx, r.ID)
		switch {
		case derr == nil && werr == nil && d.Approve && final.State == Approved:
			decided++
		case errors.Is(derr, ErrExpired) && errors.Is(werr, ErrExpired) && final.State == Expired:
			expired++
		default:
			t.Fatalf("round %d: decide %v, wait %+v %v, state %s: not one outcome", i, derr, d, werr, final.State)
		}
	}
	t.Logf("%d decided, %d expired", decided, expired)
}

func TestFileQueueWatchSeesOtherProcessesChanges(t *testing.T) {
	t.Parallel()
	holder, operator, _ := newQueues(t)
	ctx, cancel := context.WithCancel(t.Context())
	ch := operator.Watch(ctx)
	if _, err := holder.Submit(ctx, request(time.Minute)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not learn of a request submitted elsewhere")
	}
	cancel()
	for range ch { // closed once ctx ended
	}
}

// boundedCtx is the test's context, ended after a minute: a wait that
// never ends fails the test instead of hanging it.
func boundedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
