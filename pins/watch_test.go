package pins

import (
	"context"
	"encoding/json"
	"testing"
)

// TestFileStoreWatch: a file store tells its watchers of the changes made
// through it, once each, after they are written, and not of checks that
// change nothing.
func TestFileStoreWatch(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	var seen []Change
	stop := s.Watch(func(c Change) {
		// Called after the write: the change is in the file.
		if es, err := s.List(); err != nil || len(es) == 0 {
			t.Errorf("watcher called before the change was written: %v, %v", es, err)
		}
		seen = append(seen, c)
	})
	a := Definition{Name: "a", InputSchema: json.RawMessage(`{}`)}
	sc := Scope{Server: "srv"}
	if _, err := s.Check(ctx, sc, []Definition{a}, Enforce); err != nil { // first use: written
		t.Fatal(err)
	}
	if _, err := s.Check(ctx, sc, []Definition{a}, Enforce); err != nil { // nothing changes
		t.Fatal(err)
	}
	if err := s.Approve(ctx, Scope{Server: "other"}, []Definition{a}, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, sc, "zz"); err == nil { // refused: nothing changes
		t.Fatal("forgetting an unpinned tool succeeded")
	}
	stop()
	if err := s.Forget(ctx, sc, ""); err != nil {
		t.Fatal(err)
	}
	want := []Change{{Server: "srv"}, {Server: "other"}}
	if len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("changes seen %v, want %v", seen, want)
	}
}
