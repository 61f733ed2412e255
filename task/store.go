package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Options configures a [Store]. A nil *Options means defaults.
type Options struct {
	// DefaultTTL is a task's lifetime when its creator asks for none
	// (0: an hour); MaxTTL the longest it may ask for (0: a day), and
	// MinTTL the shortest (0: a minute). A request outside is brought
	// within.
	DefaultTTL, MinTTL, MaxTTL time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Store is the rules of tasks over a [Backend]. It is safe for concurrent
// use.
type Store struct {
	b    Backend
	opts Options

	lost sync.Map // instance → true: known to be gone (it never comes back)

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when this process changes a record
	pruned  time.Time
}

// NewStore returns the store of tasks kept in b.
func NewStore(b Backend, opts *Options) *Store {
	s := &Store{b: b, changed: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.DefaultTTL <= 0 {
		s.opts.DefaultTTL = time.Hour
	}
	if s.opts.MinTTL <= 0 {
		s.opts.MinTTL = time.Minute
	}
	if s.opts.MaxTTL <= 0 {
		s.opts.MaxTTL = 24 * time.Hour
	}
	s.opts.MaxTTL = max(s.opts.MaxTTL, s.opts.MinTTL)
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	return s
}

// Instance names this process among the instances that hold tasks.
func (s *Store) Instance() string { return s.b.Instance() }

func (s *Store) now() time.Time { return s.opts.Now().UTC().Truncate(time.Millisecond) }

// TTL returns the lifetime a task gets when its creator asks for asked
// (≤ 0: none asked).
func (s *Store) TTL(asked time.Duration) time.Duration {
	if asked <= 0 {
		return s.opts.DefaultTTL
	}
	return min(max(asked, s.opts.MinTTL), s.opts.MaxTTL)
}

// Create stores a new task for r's Owner, Tool and Server, working, held
// by this instance, kept for ttl (brought within the store's bounds; ≤ 0:
// the default). It returns the record once it is durable: only then may
// its id be given to the client.
func (s *Store) Create(ctx context.Context, r *Record, ttl time.Duration) (*Record, error) {
	now := s.now()
	rec := &Record{
		ID: NewID(), Owner: r.Owner, Tool: r.Tool, Server: r.Server,
		Status: Working, Created: now, Updated: now,
		Instance: s.b.Instance(),
	}
	rec.TTL = s.TTL(ttl)
	rec.Expires = now.Add(rec.TTL)
	if err := s.b.Insert(ctx, rec); err != nil {
		return nil, fmt.Errorf("task: store a new task: %w", err)
	}
	s.pruneSoon(ctx, now)
	return rec, nil
}

// pruneEvery is how often, at most, a creation also removes the tasks
// that expired.
const pruneEvery = time.Minute

func (s *Store) pruneSoon(ctx context.Context, now time.Time) {
	s.mu.Lock()
	due := now.Sub(s.pruned) >= pruneEvery
	if due {
		s.pruned = now
	}
	s.mu.Unlock()
	if due {
		_, _ = s.b.Prune(ctx, now) // the next one tries again; reads skip what expired
	}
}

// Prune removes the tasks that expired and returns how many.
func (s *Store) Prune(ctx context.Context) (int, error) {
	return s.b.Prune(ctx, s.now())
}

// Get returns task id if it is owner's and has not expired, with its
// outcome settled if the instance that ran it was lost (see the package
// doc). Otherwise it returns an error wrapping [ErrNotFound], whether the
// id is malformed, unknown, expired or another caller's.
func (s *Store) Get(ctx context.Context, owner, id string) (*Record, error) {
	r, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Owner != owner {
		return nil, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	return s.settle(ctx, r)
}

// Lookup is Get for an operator: any owner's task.
func (s *Store) Lookup(ctx context.Context, id string) (*Record, error) {
	r, err := s.load(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.settle(ctx, r)
}

func (s *Store) load(ctx context.Context, id string) (*Record, error) {
	if CheckID(id) != nil {
		return nil, fmt.Errorf("task %q: %w", clip(id), ErrNotFound)
	}
	r, err := s.b.Load(ctx, id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("task %q: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("task %q: %w", id, err)
	}
	if !s.now().Before(r.Expires) {
		return nil, fmt.Errorf("task %q: %w", id, ErrNotFound)
	}
	return r, nil
}

// clip bounds an id a client sent, for an error message.
func clip(id string) string { return trimText(id, 64) }

// List returns the tasks q selects, and the cursor of the next page ("":
// none), settling those whose instance was lost.
func (s *Store) List(ctx context.Context, q Query) ([]*Record, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	q.Limit = limit + 1
	recs, err := s.b.List(ctx, q, s.now())
	if err != nil {
		return nil, "", fmt.Errorf("task: list: %w", err)
	}
	next := ""
	if len(recs) > limit {
		recs = recs[:limit]
		last := recs[limit-1]
		next = Cursor{Created: last.Created, ID: last.ID}.String()
	}
	for i, r := range recs {
		if recs[i], err = s.settle(ctx, r); err != nil {
			return nil, "", err
		}
	}
	return recs, next, nil
}

// HolderLost reports whether the instance holding r, a task not ended,
// is gone: a task an upstream runs may then be adopted ([Store.Adopt]).
func (s *Store) HolderLost(ctx context.Context, r *Record) (bool, error) {
	if r.Status.Terminal() || r.Instance == s.b.Instance() {
		return false, nil
	}
	if _, known := s.lost.Load(r.Instance); known {
		return true, nil
	}
	lost, err := s.b.Lost(ctx, r.Instance)
	if err != nil {
		return false, fmt.Errorf("task %q: is instance %s lost: %w", r.ID, r.Instance, err)
	}
	if lost {
		s.lost.Store(r.Instance, true)
	}
	return lost, nil
}

// LostMessage is the status message of a task failed because the instance
// running it was lost.
func LostMessage(instance string) string {
	return "the gateway replica that ran this call (instance " + instance + ") was lost before the call ended; its outcome is not known"
}

// settle ends r failed if the instance that ran it as a plain call is
// lost: nothing else can give it an outcome.
func (s *Store) settle(ctx context.Context, r *Record) (*Record, error) {
	if r.UpstreamTask != "" {
		return r, nil // another instance may adopt it
	}
	lost, err := s.HolderLost(ctx, r)
	if err != nil || !lost {
		return r, err
	}
	holder := r.Instance
	msg := LostMessage(holder)
	got, err := s.update(ctx, r.ID, func(cur *Record) error {
		if cur.Status.Terminal() || cur.Instance != holder || cur.UpstreamTask != "" {
			return errUnchanged
		}
		cur.Status, cur.Message = Failed, msg
		// Both: an isError result for a 2025-11-25 client's tasks/result,
		// the JSON-RPC error a 2026 client's failed task carries.
		cur.Result = errorResult(msg)
		cur.Error = internalError(msg)
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return s.b.Load(ctx, r.ID) // someone settled it first
	}
	return got, err
}

// errUnchanged aborts an update that finds nothing to change.
var errUnchanged = errors.New("unchanged")

// internalError is a JSON-RPC internal error (-32603) saying msg.
func internalError(msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"code": -32603, "message": msg})
	return b
}

// errorResult is a CallToolResult with isError, saying msg.
func errorResult(msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"content": []any{map[string]any{"type": "text", "text": msg}},
		"isError": true,
	})
	return b
}

// update is the backend's Update that also stamps the record and wakes
// the waiters of this process.
func (s *Store) update(ctx context.Context, id string, change func(*Record) error) (*Record, error) {
	r, err := s.b.Update(ctx, id, func(r *Record) error {
		if err := change(r); err != nil {
			return err
		}
		r.Updated = s.now()
		return nil
	})
	if err == nil {
		s.mu.Lock()
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
	return r, err
}

// Report records the progress of task id while it has not ended: a status
// message ("" keeps the last), a progress report (progress < 0: none), and
// whether it waits for its client's input. It returns an error wrapping
// [ErrTerminal] when the task has ended.
func (s *Store) Report(ctx context.Context, id, message string, progress, total float64, waiting bool) error {
	_, err := s.update(ctx, id, func(r *Record) error {
		if r.Status.Terminal() {
			return fmt.Errorf("task %q: %w (%s)", id, ErrTerminal, r.Status)
		}
		if message != "" {
			r.Message = cleanMessage(message)
		}
		if progress >= 0 {
			r.Progress, r.Total = progress, max(total, 0)
		}
		r.Status = Working
		if waiting {
			r.Status = InputRequired
		}
		return nil
	})
	return err
}

// SetUpstream records that server runs task id as its own task
// upstreamID, so that another instance can poll it if this one is lost.
func (s *Store) SetUpstream(ctx context.Context, id, server, upstreamID string) error {
	_, err := s.update(ctx, id, func(r *Record) error {
		if r.Status.Terminal() {
			return fmt.Errorf("task %q: %w (%s)", id, ErrTerminal, r.Status)
		}
		r.Server, r.UpstreamTask = server, upstreamID
		return nil
	})
	return err
}

// Outcome is how a task ended.
type Outcome struct {
	Status  Status          // Completed, Failed or Cancelled
	Message string          // its status message
	Result  json.RawMessage // the CallToolResult, if the call returned one
	Error   json.RawMessage // the JSON-RPC error object, if it ended in one
}

// Finish gives task id its outcome, if it has none yet, and returns the
// record. A task has one outcome: when it already ended (cancelled while
// the call finished, or settled after its instance was taken for lost),
// Finish changes nothing and returns an error wrapping [ErrTerminal].
func (s *Store) Finish(ctx context.Context, id string, out Outcome) (*Record, error) {
	if !out.Status.Terminal() {
		return nil, fmt.Errorf("task %q: finish with status %q, not an end", id, out.Status)
	}
	return s.update(ctx, id, func(r *Record) error {
		if r.Status.Terminal() {
			return fmt.Errorf("task %q: %w (%s)", id, ErrTerminal, r.Status)
		}
		r.Status, r.Result, r.Error = out.Status, out.Result, out.Error
		if out.Message != "" {
			r.Message = cleanMessage(out.Message)
		}
		return nil
	})
}

// Cancel ends owner's task id cancelled (any owner's when all: an
// operator), and returns the record. A task that ended already is not
// changed: the error wraps [ErrTerminal] (another's task: [ErrNotFound]).
func (s *Store) Cancel(ctx context.Context, owner string, all bool, id, message string) (*Record, error) {
	var r *Record
	var err error
	if all {
		r, err = s.Lookup(ctx, id)
	} else {
		r, err = s.Get(ctx, owner, id)
	}
	if err != nil {
		return nil, err
	}
	if r.Status.Terminal() {
		return r, fmt.Errorf("task %q: %w (%s)", id, ErrTerminal, r.Status)
	}
	return s.update(ctx, id, func(cur *Record) error {
		if cur.Status.Terminal() {
			return fmt.Errorf("task %q: %w (%s)", id, ErrTerminal, cur.Status)
		}
		cur.Status, cur.Message = Cancelled, cleanMessage(message)
		cur.Result = errorResult(cur.Message)
		return nil
	})
}

// Adopt makes this instance the holder of task id, which instance from
// held, if it still does and the task has not ended; it reports whether
// it did. Of several instances adopting one task, one does.
func (s *Store) Adopt(ctx context.Context, id, from string) (bool, error) {
	me := s.b.Instance()
	_, err := s.update(ctx, id, func(r *Record) error {
		if r.Status.Terminal() || r.Instance != from {
			return errUnchanged
		}
		r.Instance = me
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return false, nil
	}
	return err == nil, err
}

// Wait returns owner's task id once it has ended, or when ctx is done. It
// polls the backend (another instance may end it), sooner when this
// process changes a record.
func (s *Store) Wait(ctx context.Context, owner, id string, poll time.Duration) (*Record, error) {
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	wait := 20 * time.Millisecond
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		r, err := s.Get(ctx, owner, id)
		if err != nil || r.Status.Terminal() {
			return r, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, poll)
	}
}

// Backend returns the backend the store keeps its records in.
func (s *Store) Backend() Backend { return s.b }
