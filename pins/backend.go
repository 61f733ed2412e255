package pins

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Set is the pins of one scope, as a [Backend] keeps them.
type Set struct {
	Scope Scope
	// Tools are the scope's pins by the server's own tool name. A set
	// always has at least one.
	Tools map[string]Pin
	// Noticed maps a tool that a warn-mode check reported as new (and did
	// not pin) to the fingerprint it was reported with, so that later
	// checks report it only when it changes. Nil when there is none.
	Noticed map[string]string
}

// Backend keeps pins elsewhere than the pins file, for a [Store] made by
// [NewStoreOn]: the store package's PostgreSQL tables, shared by a fleet
// of gateways. The Store does the pinning (fingerprints, modes, scope
// adoption); the backend stores sets and serializes changes.
//
// Its methods must be safe for concurrent use, also by other processes
// on the same storage.
type Backend interface {
	// Sets returns the pins of every scope, in any order.
	Sets(ctx context.Context) ([]Set, error)
	// Update calls change with the pins of every scope of the server
	// named server (nil when it has none) while holding a lock on that
	// server's pins that every Backend on the same storage respects, and
	// then stores what change returns as the server's pins: a scope
	// change leaves out loses its pins. When change returns an error,
	// nothing is stored and Update returns that error. change is called
	// once, with sets it may change in place.
	Update(ctx context.Context, server string, change func(sets []Set) ([]Set, error)) error
	// Watch calls fn with a server's name after its pins changed through
	// any Backend on the same storage (this one included), and with ""
	// when changes may have been missed (a lost connection), until stop is
	// called. fn runs on a goroutine of the Backend's and must not block
	// for long.
	Watch(fn func(server string)) (stop func())
}

// NewStoreOn returns a store that keeps its pins in b.
func NewStoreOn(b Backend) *Store {
	return &Store{b: b, now: time.Now}
}

// Change reports that the pins of a server changed: a first use, an
// approval, a forgotten pin, a noticed tool.
type Change struct {
	// Server is the server's configured name, or "" when changes may have
	// been missed: a watcher then checks every server again.
	Server string
}

// Watch calls fn after each change of the pins, until stop is called.
// A store on the pins file reports the changes made through it, in this
// process; a store on a [Backend] reports those made through any store on
// the backend's storage, in any process (for PostgreSQL: every replica of
// a fleet), its own included. A watcher that re-checks its servers on a
// change makes an approval or a quarantine on one replica hold on all.
//
// fn is called after the change is stored, from the goroutine that made
// it (file) or the backend's (PostgreSQL), without any lock of the
// store's held: it may call the store. It must not block for long.
func (s *Store) Watch(fn func(Change)) (stop func()) {
	if s.b != nil {
		return s.b.Watch(func(server string) { fn(Change{Server: server}) })
	}
	return s.watchers.add(fn)
}

// watchers are a file store's watchers.
type watchers struct {
	mu   sync.Mutex
	next int
	m    map[int]func(Change)
}

func (w *watchers) add(fn func(Change)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[int]func(Change){}
	}
	id := w.next
	w.next++
	w.m[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.m, id)
	}
}

func (w *watchers) notify(c Change) {
	w.mu.Lock()
	fns := slices.Collect(maps.Values(w.m))
	w.mu.Unlock()
	for _, fn := range fns {
		fn(c)
	}
}

// fromSets builds the in-memory form of a backend's sets, checking them
// as strictly as a pins file: a backend's rows are no more trusted than
// the file. With server set, every set must be that server's.
func fromSets(sets []Set, server string) (*file, error) {
	f := &file{sets: make(map[Scope]*set, len(sets))}
	for _, st := range sets {
		if server != "" && st.Scope.Server != server {
			return nil, fmt.Errorf("the store's rows: %w: %s returned for server %q", ErrCorrupt, st.Scope, server)
		}
		if st.Scope.Identity != "" && !validHash(st.Scope.Identity) {
			return nil, fmt.Errorf("the store's rows: %w: server %q: malformed identity %q", ErrCorrupt, st.Scope.Server, st.Scope.Identity)
		}
		if _, dup := f.sets[st.Scope]; dup {
			return nil, fmt.Errorf("the store's rows: %w: %s returned twice", ErrCorrupt, st.Scope)
		}
		f.sets[st.Scope] = &set{Tools: st.Tools, Noticed: st.Noticed}
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("the store's rows: %w: %w (fix or remove them; toolwire does not reset them)", ErrCorrupt, err)
	}
	return f, nil
}

// toSets returns f's sets in a backend's form, sorted by scope, leaving
// out the scopes without pins as the file does.
func (f *file) toSets() []Set {
	out := make([]Set, 0, len(f.sets))
	for sc, st := range f.sets {
		if len(st.Tools) == 0 {
			continue
		}
		noticed := st.Noticed
		if len(noticed) == 0 {
			noticed = nil
		}
		out = append(out, Set{Scope: sc, Tools: st.Tools, Noticed: noticed})
	}
	slices.SortFunc(out, func(a, b Set) int {
		return cmp.Or(cmp.Compare(a.Scope.Server, b.Scope.Server), cmp.Compare(a.Scope.Identity, b.Scope.Identity))
	})
	return out
}
