// Package tasktest checks a [task.Backend] against the rules of
// [task.Store]: the same tests for the files of one machine and for a
// fleet's PostgreSQL tables.
package tasktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/task"
)

// Open returns two instances of one backend (two processes sharing it),
// and end, which makes an instance lost as a killed process is (without
// ending anything it held).
type Open func(t *testing.T) (a, b task.Backend, end func(task.Backend))

// Run runs the tests of a backend.
func Run(t *testing.T, open Open) {
	t.Run("Owner", func(t *testing.T) { t.Parallel(); owner(t, open) })
	t.Run("OneOutcome", func(t *testing.T) { t.Parallel(); oneOutcome(t, open) })
	t.Run("List", func(t *testing.T) { t.Parallel(); list(t, open) })
	t.Run("Lost", func(t *testing.T) { t.Parallel(); lost(t, open) })
	t.Run("Expiry", func(t *testing.T) { t.Parallel(); expiry(t, open) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// owner: a task is its owner's; anything else is not found, the same way.
func owner(t *testing.T, open Open) {
	a, b, _ := open(t)
	sa, sb := task.NewStore(a, nil), task.NewStore(b, nil)
	c := ctx(t)
	rec, err := sa.Create(c, &task.Record{Owner: "subject:alice", Tool: "slow"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != task.Working || rec.TTL != time.Hour || task.CheckID(rec.ID) != nil || rec.Instance != a.Instance() {
		t.Fatalf("created %+v; want working, an hour, a valid id, held by %s", rec, a.Instance())
	}
	got, err := sb.Get(c, "subject:alice", rec.ID)
	if err != nil || got.Tool != "slow" || got.Owner != "subject:alice" {
		t.Fatalf("the owner's get on the other instance: %+v, %v", got, err)
	}
	for _, tc := range []struct{ name, owner, id string }{
		{"another caller", "subject:mallory", rec.ID},
		{"the same subject by another credential", `jwt:"https://idp":alice`, rec.ID},
		{"no credential", "", rec.ID},
		{"an unknown id", "subject:alice", task.NewID()},
		{"a path", "subject:alice", "../../../../etc/passwd"},
		{"a huge id", "subject:alice", strings.Repeat("A", 1<<16)},
		{"lowercase", "subject:alice", strings.ToLower(rec.ID)},
	} {
		_, err := sb.Get(c, tc.owner, tc.id)
		if !errors.Is(err, task.ErrNotFound) {
			t.Errorf("%s: %v; want not found", tc.name, err)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("%s: an error of %d bytes echoes the input", tc.name, len(err.Error()))
		}
		if _, err := sb.Cancel(c, tc.owner, false, tc.id, "x"); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("%s: cancel: %v; want not found", tc.name, err)
		}
	}
	got, _ = sa.Get(c, "subject:alice", rec.ID)
	if got.Status != task.Working {
		t.Errorf("after the others' cancellations the task is %s; want working", got.Status)
	}
}

// oneOutcome: a cancellation racing the call's end, from two instances:
// exactly one wins, and what is stored is the winner's.
func oneOutcome(t *testing.T, open Open) {
	a, b, _ := open(t)
	sa, sb := task.NewStore(a, nil), task.NewStore(b, nil)
	c := ctx(t)
	const rounds = 20
	cancels := 0
	for range rounds {
		rec, err := sa.Create(c, &task.Record{Owner: "subject:alice", Tool: "slow"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var finishErr, cancelErr error
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			_, finishErr = sa.Finish(c, rec.ID, task.Outcome{Status: task.Completed, Result: json.RawMessage(`{"content":[]}`)})
		})
		wg.Go(func() {
			<-start
			_, cancelErr = sb.Cancel(c, "subject:alice", false, rec.ID, "cancelled by the client")
		})
		close(start)
		wg.Wait()
		if (finishErr == nil) == (cancelErr == nil) {
			t.Fatalf("finish: %v; cancel: %v; want exactly one to succeed", finishErr, cancelErr)
		}
		loser := finishErr
		if loser == nil {
			loser = cancelErr
		}
		if !errors.Is(loser, task.ErrTerminal) {
			t.Errorf("the loser's error: %v; want ErrTerminal", loser)
		}
		got, err := sb.Get(c, "subject:alice", rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := task.Completed
		if cancelErr == nil {
			want = task.Cancelled
			cancels++
		}
		if got.Status != want {
			t.Errorf("stored %s; want the winner's %s", got.Status, want)
		}
		// Nothing after the end changes it.
		if err := sa.Report(c, rec.ID, "late", 1, 2, false); !errors.Is(err, task.ErrTerminal) {
			t.Errorf("a report after the end: %v; want ErrTerminal", err)
		}
		if _, err := sa.Finish(c, rec.ID, task.Outcome{Status: task.Failed}); !errors.Is(err, task.ErrTerminal) {
			t.Errorf("a second outcome: %v; want ErrTerminal", err)
		}
	}
	t.Logf("%d of %d races went to the cancellation", cancels, rounds)
}

// list: pages of the owner's tasks only; a cursor carries no authority.
func list(t *testing.T, open Open) {
	a, b, _ := open(t)
	sa, sb := task.NewStore(a, nil), task.NewStore(b, nil)
	c := ctx(t)
	want := map[string]bool{}
	for i := range 7 {
		r, err := sa.Create(c, &task.Record{Owner: "subject:alice", Tool: fmt.Sprint("t", i)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		want[r.ID] = true
		if _, err := sa.Create(c, &task.Record{Owner: "subject:bob", Tool: "b"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	var cursor *task.Cursor
	pages := 0
	for {
		recs, next, err := sb.List(c, task.Query{Owner: "subject:alice", After: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range recs {
			if r.Owner != "subject:alice" || seen[r.ID] {
				t.Fatalf("page %d: %s of %s (seen: %v)", pages, r.ID, r.Owner, seen[r.ID])
			}
			seen[r.ID] = true
		}
		if next == "" {
			break
		}
		cur, err := task.ParseCursor(next)
		if err != nil {
			t.Fatal(err)
		}
		cursor = &cur
		if pages > 5 {
			t.Fatal("more pages than tasks")
		}
	}
	if len(seen) != len(want) || pages != 3 {
		t.Errorf("listed %d tasks in %d pages; want %d in 3", len(seen), pages, len(want))
	}
	all, _, err := sb.List(c, task.Query{All: true, Limit: 100})
	if err != nil || len(all) < 14 {
		t.Errorf("an operator's list: %d tasks, %v; want at least 14", len(all), err)
	}
	// A cursor made at bob's task lists alice's after it, no more.
	bobs, _, _ := sb.List(c, task.Query{Owner: "subject:bob", Limit: 1})
	forged := task.Cursor{Created: bobs[0].Created, ID: bobs[0].ID}
	recs, _, err := sb.List(c, task.Query{Owner: "subject:alice", After: &forged})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Owner != "subject:alice" {
			t.Errorf("a forged cursor listed %s's task", r.Owner)
		}
	}
	for _, bad := range []string{"", "x", "!!!!", strings.Repeat("A", 4096), task.Cursor{ID: "../../x"}.String()} {
		if _, err := task.ParseCursor(bad); !errors.Is(err, task.ErrBadCursor) {
			t.Errorf("cursor %.20q: %v; want ErrBadCursor", bad, err)
		}
	}
}

// lost: the instance running a plain call is lost: the next reader ends
// the task failed, saying so, once; a task its upstream runs is adopted
// instead, by one instance.
func lost(t *testing.T, open Open) {
	a, b, end := open(t)
	sa, sb := task.NewStore(a, nil), task.NewStore(b, nil)
	c := ctx(t)
	plain, err := sa.Create(c, &task.Record{Owner: "subject:alice", Tool: "slow"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	up, err := sa.Create(c, &task.Record{Owner: "subject:alice", Tool: "research", Server: "everything"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sa.SetUpstream(c, up.ID, "everything", "upstream-7"); err != nil {
		t.Fatal(err)
	}
	got, err := sb.Get(c, "subject:alice", plain.ID)
	if err != nil || got.Status != task.Working {
		t.Fatalf("while its instance runs: %+v, %v; want working", got, err)
	}
	end(a)
	got, err = sb.Get(c, "subject:alice", plain.ID)
	if err != nil || got.Status != task.Failed || !strings.Contains(got.Message, "was lost") || !strings.Contains(string(got.Result), `"isError":true`) {
		t.Fatalf("after its instance was lost: %+v, %v; want failed, saying why, with an error result", got, err)
	}
	if _, err := sa.Finish(c, plain.ID, task.Outcome{Status: task.Completed}); !errors.Is(err, task.ErrTerminal) {
		t.Errorf("the lost instance's late outcome: %v; want ErrTerminal", err)
	}
	got, err = sb.Get(c, "subject:alice", up.ID)
	if err != nil || got.Status != task.Working || got.UpstreamTask != "upstream-7" {
		t.Fatalf("an upstream's task after its instance was lost: %+v, %v; want working, its upstream id kept", got, err)
	}
	if lost, err := sb.HolderLost(c, got); !lost || err != nil {
		t.Fatalf("HolderLost: %v, %v; want true", lost, err)
	}
	sb2 := task.NewStore(b, nil)
	var wins int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range []*task.Store{sb, sb2, sb} {
		wg.Go(func() {
			ok, err := s.Adopt(c, up.ID, a.Instance())
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got, _ = sb.Get(c, "subject:alice", up.ID)
	if wins != 1 || got.Instance != b.Instance() {
		t.Errorf("%d adoptions, held by %s; want one, by %s", wins, got.Instance, b.Instance())
	}
}

// expiry: a task past its TTL is not found, and pruned.
func expiry(t *testing.T, open Open) {
	a, _, _ := open(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := task.NewStore(a, &task.Options{Now: clock})
	c := ctx(t)
	r, err := s.Create(c, &task.Record{Owner: "subject:alice", Tool: "x"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.TTL != time.Minute {
		t.Errorf("a TTL of a second asked: %v; want the minimum, a minute", r.TTL)
	}
	if r2, _ := s.Create(c, &task.Record{Owner: "subject:alice", Tool: "x"}, 1000*time.Hour); r2.TTL != 24*time.Hour {
		t.Errorf("a TTL of 1000 h asked: %v; want the maximum, a day", r2.TTL)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if _, err := s.Get(c, "subject:alice", r.ID); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("after its TTL: %v; want not found", err)
	}
	recs, _, _ := s.List(c, task.Query{Owner: "subject:alice"})
	for _, x := range recs {
		if x.ID == r.ID {
			t.Error("an expired task listed")
		}
	}
	n, err := s.Prune(c)
	if err != nil || n < 1 {
		t.Errorf("prune: %d, %v; want at least the expired one", n, err)
	}
}
