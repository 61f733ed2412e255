package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/internal/pgtest"
)

// TestSessions checks the semantics of session records on both stores:
// what is put is got (by another replica too), updates keep the times,
// touching extends, expiry and deletion make a session not found.
func TestSessions(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	mem := openFileStore(t, nil).Sessions()
	for _, tc := range []struct {
		name string
		// one and two are two replicas' views of one store.
		one, two Sessions
		// expire makes session id expired, as its idle timeout passing
		// would.
		expire func(id string)
	}{
		{"memory", mem, mem, func(id string) {
			m := mem.(*memorySessions)
			m.mu.Lock()
			m.m[id].Expires = time.Now().Add(-time.Second)
			m.mu.Unlock()
		}},
		{"postgres", openPG(t, url, nil).Sessions(), openPG(t, url, nil).Sessions(), func(id string) {
			sql(t, url, "UPDATE toolwire.sessions SET expires_at = now() - interval '1 second' WHERE id = $1", id)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			in := &Session{
				ID: "s-1", Caller: "subject:alice", Subject: "alice", Credential: "sha256:abc", Role: "ops",
				Protocol: "2025-11-25", Capabilities: json.RawMessage(`{"elicitation":{}}`), ClientInfo: json.RawMessage(`{"name":"c","version":"1"}`),
				LogLevel: "info", Subscriptions: []string{"toolwire://files/a"},
			}
			if err := tc.one.Put(ctx, in, time.Hour); err != nil {
				t.Fatal(err)
			}
			got, err := tc.two.Get(ctx, "s-1")
			if err != nil {
				t.Fatal(err)
			}
			if got.Caller != in.Caller || got.Subject != in.Subject || got.Credential != in.Credential || got.Role != in.Role ||
				got.Protocol != in.Protocol || !jsonEqual(got.Capabilities, in.Capabilities) || !jsonEqual(got.ClientInfo, in.ClientInfo) ||
				got.LogLevel != in.LogLevel || !slices.Equal(got.Subscriptions, in.Subscriptions) {
				t.Errorf("got %+v\nput %+v", got, in)
			}
			if got.Created.IsZero() || !got.Created.Equal(got.LastSeen) || !got.Expires.After(got.LastSeen) {
				t.Errorf("times: created %v, last seen %v, expires %v", got.Created, got.LastSeen, got.Expires)
			}

			if got.Revision != 1 {
				t.Errorf("a new session's revision is %d, want 1", got.Revision)
			}

			// An update on one replica, seen on the other; the times stay,
			// the revision grows.
			rev, err := tc.two.Update(ctx, "s-1", func(s *Session) error {
				s.LogLevel = "debug"
				s.Subscriptions = append(s.Subscriptions, "toolwire://files/b")
				s.Created = time.Time{} // not change's to set
				s.Revision = 77         // nor this
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			up, err := tc.one.Get(ctx, "s-1")
			if err != nil || up.LogLevel != "debug" || len(up.Subscriptions) != 2 || !up.Created.Equal(got.Created) || rev != 2 || up.Revision != 2 {
				t.Errorf("after update (revision %d): %+v, %v", rev, up, err)
			}
			failed := errors.New("no")
			if _, err := tc.one.Update(ctx, "s-1", func(s *Session) error { s.LogLevel = "error"; return failed }); !errors.Is(err, failed) {
				t.Errorf("a failing update: %v", err)
			}
			if s, _ := tc.two.Get(ctx, "s-1"); s.LogLevel != "debug" || s.Revision != 2 {
				t.Errorf("a failing update stored its change: %q, revision %d", s.LogLevel, s.Revision)
			}

			// Touch restarts the idle timeout (0 means none) and says the
			// revision, which it leaves.
			if rev, err := tc.two.Touch(ctx, "s-1", 0); err != nil || rev != 2 {
				t.Fatalf("touch: revision %d, %v; want 2", rev, err)
			}
			if s, err := tc.one.Get(ctx, "s-1"); err != nil || !s.Expires.IsZero() || s.LastSeen.Before(got.LastSeen) || s.Revision != 2 {
				t.Errorf("after touch without timeout: %+v, %v", s, err)
			}
			if _, err := tc.two.Touch(ctx, "s-1", time.Minute); err != nil {
				t.Fatal(err)
			}

			tc.expire("s-1")
			for what, err := range map[string]error{
				"get":    func() error { _, err := tc.one.Get(ctx, "s-1"); return err }(),
				"touch":  func() error { _, err := tc.one.Touch(ctx, "s-1", time.Minute); return err }(),
				"update": func() error { _, err := tc.one.Update(ctx, "s-1", func(*Session) error { return nil }); return err }(),
			} {
				if !errors.Is(err, ErrSessionNotFound) {
					t.Errorf("%s of an expired session: %v, want ErrSessionNotFound", what, err)
				}
			}
			// An expired session is pruned; a put of its id starts anew.
			if n, err := tc.two.Prune(ctx); err != nil || n != 1 {
				t.Errorf("prune: %d, %v; want 1", n, err)
			}
			if err := tc.one.Put(ctx, &Session{ID: "s-2", Caller: "ip:192.0.2.1", Protocol: "2025-06-18"}, time.Hour); err != nil {
				t.Fatal(err)
			}
			// A deletion is told to the watchers of every replica.
			deleted := make(chan string, 4)
			stop := tc.two.WatchDeleted(func(id string) { deleted <- id })
			defer stop()
			if err := tc.one.Delete(ctx, "s-2"); err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-deleted:
				if id != "s-2" {
					t.Errorf("the watcher was told of %q, want s-2", id)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the other replica's watcher was not told of the deletion")
			}
			if err := tc.two.Delete(ctx, "s-2"); err != nil {
				t.Errorf("deleting twice: %v", err)
			}
			if _, err := tc.two.Get(ctx, "s-2"); !errors.Is(err, ErrSessionNotFound) {
				t.Errorf("get after delete: %v", err)
			}
			for _, bad := range []*Session{{Protocol: "2025-06-18"}, {ID: "x"}, {ID: "x", Protocol: "p", Capabilities: json.RawMessage(`{`)}} {
				if err := tc.one.Put(ctx, bad, time.Hour); err == nil {
					t.Errorf("put %+v succeeded", bad)
				}
			}
		})
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestSessionTouchesGoTogether: three replicas touch many sessions at
// once, each replica's goroutines in another order of them, so that one
// statement carries several sessions' touches and two replicas'
// statements the same sessions (locked in opposite orders they would
// deadlock, and PostgreSQL would fail one). Every touch of a live session
// gets its revision and moves its expiry; in the same statements, a
// session deleted or expired is not found, and a session without an idle
// timeout keeps none.
func TestSessionTouchesGoTogether(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	ctx := context.Background()
	const replicas, goroutines, sessions, rounds = 3, 6, 8, 3
	reps := make([]Sessions, replicas)
	for i := range reps {
		reps[i] = openPG(t, url, nil).Sessions()
	}
	id := func(i int) string { return fmt.Sprintf("s-%d", i) }
	for i := range sessions {
		idle := time.Hour
		if i == 1 {
			idle = 0 // no idle expiry
		}
		if err := reps[0].Put(ctx, &Session{ID: id(i), Caller: "subject:alice", Protocol: "2025-11-25"}, idle); err != nil {
			t.Fatal(err)
		}
	}
	sql(t, url, "UPDATE toolwire.sessions SET expires_at = now() - interval '1 second' WHERE id = 's-2'")
	sql(t, url, "UPDATE toolwire.sessions SET expires_at = now() + interval '1 second' WHERE id = 's-3'")
	if err := reps[0].Delete(ctx, id(4)); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	errs := make(chan error, replicas*goroutines*sessions*rounds)
	var wg sync.WaitGroup
	for r := range replicas {
		for g := range goroutines {
			wg.Go(func() {
				<-start
				for i := range sessions * rounds {
					s := (i + g) % sessions
					if r%2 == 1 {
						s = sessions - 1 - s
					}
					idle := time.Hour
					if s == 1 {
						idle = 0
					}
					rev, err := reps[r].Touch(ctx, id(s), idle)
					gone := s == 2 || s == 4
					switch {
					case gone && !errors.Is(err, ErrSessionNotFound):
						errs <- fmt.Errorf("touch of %s, which is gone: %d, %v", id(s), rev, err)
					case !gone && (err != nil || rev != 1):
						errs <- fmt.Errorf("touch of %s: revision %d, %v; want 1", id(s), rev, err)
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The touches moved s-3's expiry an hour on; s-1 still has none.
	var s3, s1 bool
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.QueryRow(ctx, "SELECT (SELECT expires_at > now() + interval '50 minutes' FROM toolwire.sessions WHERE id = 's-3'), (SELECT expires_at IS NULL FROM toolwire.sessions WHERE id = 's-1')").Scan(&s3, &s1); err != nil {
		t.Fatal(err)
	}
	if !s3 || !s1 {
		t.Errorf("after the touches: s-3's expiry moved %v, s-1 without one %v", s3, s1)
	}
}
