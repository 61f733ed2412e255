package audit

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// queued returns how many batches wait in g.
func (g *Group[T]) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
}

// TestGroupWritesWhatQueuedTogether: while one write is in progress, the
// batches of other callers queue and go together, in the order they
// came, in one next write, by one of them; each caller gets the error of
// the write that carried its batch; then the group is free again.
func TestGroupWritesWhatQueuedTogether(t *testing.T) {
	var g Group[string]
	release := make(chan struct{})
	var mu sync.Mutex
	var writes [][]string
	failSecond := errors.New("the second write failed")
	write := func(items []string) error {
		mu.Lock()
		writes = append(writes, slices.Clone(items))
		n := len(writes)
		mu.Unlock()
		switch n {
		case 1:
			<-release // the others queue meanwhile
			return nil
		case 2:
			return failSecond
		}
		return nil
	}
	first := make(chan error, 1)
	go func() { first <- g.Write([]string{"a"}, write) }()
	waitFor(t, "the first write", func() bool { mu.Lock(); defer mu.Unlock(); return len(writes) == 1 })
	const others = 5
	errs := make([]chan error, others)
	var want []string
	for i := range others {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- g.Write([]string{fmt.Sprintf("b%d", i), fmt.Sprintf("c%d", i)}, write) }()
		waitFor(t, fmt.Sprintf("caller %d to queue", i), func() bool { return g.queued() == i+1 })
		want = append(want, fmt.Sprintf("b%d", i), fmt.Sprintf("c%d", i))
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first caller: %v", err)
	}
	for i := range others {
		if err := <-errs[i]; !errors.Is(err, failSecond) {
			t.Errorf("caller %d: %v, want the second write's error", i, err)
		}
	}
	mu.Lock()
	got := slices.Clone(writes)
	mu.Unlock()
	if len(got) != 2 || !slices.Equal(got[0], []string{"a"}) || !slices.Equal(got[1], want) {
		t.Fatalf("writes %v, want [a] then %v", got, want)
	}
	// Free again: a caller alone writes at once.
	if err := g.Write([]string{"d"}, write); err != nil || g.busy || g.queued() != 0 {
		t.Errorf("a later write: %v (busy %v, queued %d)", err, g.busy, g.queued())
	}
}
