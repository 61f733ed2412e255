package approval

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/jsonenc"
)

// FileQueue is the [Queue] of one machine: the requests in one JSON file
// (mode 0600, in a 0700 directory) shared by the toolwire processes there,
// each change made under an advisory lock and written atomically, so that
// `toolwire approvals approve` in one process decides a call `serve`
// holds in another. Waiting and watching read the file again every poll
// interval (and at once after a change this process made).
type FileQueue struct {
	path     string
	grants   Grants
	instance string
	poll     time.Duration
	keep     time.Duration // a request with an outcome stays this long
	now      func() time.Time

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on each change made here
}

// FilePollInterval is how often a [FileQueue] reads its file again while
// a call waits or a watcher watches.
const FilePollInterval = 250 * time.Millisecond

// NewFileQueue returns the queue kept in the file at path, whose lasting
// decisions are granted in grants, for the process named instance. It
// does no I/O: a missing file holds no requests.
func NewFileQueue(path string, grants Grants, instance string) *FileQueue {
	return &FileQueue{path: path, grants: grants, instance: instance, poll: FilePollInterval, keep: 10 * time.Minute,
		now: time.Now, changed: make(chan struct{})}
}

// Path returns the file's path.
func (q *FileQueue) Path() string { return q.path }

type queueFile struct {
	Version  int       `json:"version"`
	Requests []Request `json:"requests"`
}

// Submit implements [Queue].
func (q *FileQueue) Submit(ctx context.Context, r Request) (Request, error) {
	r, err := Prepare(r, q.now())
	if err != nil {
		return Request{}, err
	}
	if r.Instance == "" {
		r.Instance = q.instance
	}
	err = q.update(ctx, func(all *queueFile, _ time.Time) error {
		all.Requests = append(all.Requests, r)
		return nil
	})
	return r, err
}

// Get implements [Queue].
func (q *FileQueue) Get(_ context.Context, id string) (Request, error) {
	all, err := q.read()
	if err != nil {
		return Request{}, err
	}
	if i := index(all, id); i >= 0 {
		return all.Requests[i], nil
	}
	return Request{}, fmt.Errorf("approval %q: %w", id, ErrNotFound)
}

// Pending implements [Queue].
func (q *FileQueue) Pending(context.Context) ([]Request, error) {
	all, err := q.read()
	if err != nil {
		return nil, err
	}
	now := q.now()
	return slices.DeleteFunc(all.Requests, func(r Request) bool { return r.State != Waiting || !now.Before(r.Deadline) }), nil
}

// Decide implements [Queue].
func (q *FileQueue) Decide(ctx context.Context, id string, d Decision) (Decision, error) {
	if err := d.Check(); err != nil {
		return Decision{}, err
	}
	var out Decision
	err := q.update(ctx, func(all *queueFile, now time.Time) error {
		i := index(all, id)
		if i < 0 {
			return fmt.Errorf("approval %q: %w", id, ErrNotFound)
		}
		r := all.Requests[i]
		changed, err := Transition(&r, &d, now)
		if err != nil {
			if changed { // expired by this decision's coming late
				all.Requests[i] = r
				return &keepChange{err}
			}
			return err
		}
		if err := GrantFor(ctx, q.grants, r, r.Decision); err != nil {
			return err
		}
		all.Requests[i] = r
		out = *r.Decision
		return nil
	})
	return out, err
}

// keepChange is an error that still commits the change made: a decision
// that came too late records the expiry it found.
type keepChange struct{ err error }

func (k *keepChange) Error() string { return k.err.Error() }
func (k *keepChange) Unwrap() error { return k.err }

// Withdraw implements [Queue].
func (q *FileQueue) Withdraw(ctx context.Context, id string) error {
	err := q.update(ctx, func(all *queueFile, now time.Time) error {
		i := index(all, id)
		if i < 0 || all.Requests[i].State != Waiting {
			return errUnchanged
		}
		all.Requests[i].State, all.Requests[i].Closed = Withdrawn, now
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

var errUnchanged = errors.New("unchanged")

// Wait implements [Queue].
func (q *FileQueue) Wait(ctx context.Context, id string) (Decision, error) {
	for {
		q.mu.Lock()
		changed := q.changed
		q.mu.Unlock()
		r, err := q.Get(ctx, id)
		if err != nil {
			return Decision{}, err
		}
		if d, err, ok := r.Outcome(); ok {
			return d, err
		}
		wait := q.poll
		if now := q.now(); !now.Before(r.Deadline) {
			// Give it its outcome under the lock: a decision may have
			// come in since the read.
			err := q.update(ctx, func(all *queueFile, now time.Time) error {
				if i := index(all, id); i >= 0 {
					if changed, _ := Transition(&all.Requests[i], nil, now); changed {
						return nil
					}
				}
				return errUnchanged
			})
			if err != nil && !errors.Is(err, errUnchanged) {
				return Decision{}, err
			}
			continue
		} else if left := r.Deadline.Sub(now); left < wait {
			wait = left
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Decision{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Watch implements [Queue]: it reads the file again every poll interval,
// and learns at once of the changes made here.
func (q *FileQueue) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	// The state watched from is the one at the call, not when the
	// goroutine first runs: a change made just after Watch returns is
	// seen.
	last := q.stamp()
	go func() {
		defer close(out)
		t := time.NewTicker(q.poll)
		defer t.Stop()
		for {
			q.mu.Lock()
			changed := q.changed
			q.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-t.C:
			}
			if s := q.stamp(); s != last {
				last = s
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// stamp says whether the file changed: the SHA-256 of its content ("" for
// none). The file is small, and a time of change could repeat.
func (q *FileQueue) stamp() [sha256.Size]byte {
	raw, _ := os.ReadFile(q.path)
	return sha256.Sum256(raw)
}

func index(all *queueFile, id string) int {
	return slices.IndexFunc(all.Requests, func(r Request) bool { return r.ID == id })
}

func (q *FileQueue) read() (*queueFile, error) {
	return readVersioned[queueFile](q.path, "pending approvals")
}

// update changes the file under its lock, dropping the requests whose
// outcome (or deadline) is older than q.keep, and wakes this process's
// waiters. A change returning errUnchanged writes nothing.
func (q *FileQueue) update(ctx context.Context, change func(*queueFile, time.Time) error) error {
	err := updateVersioned(ctx, q.path, "pending approvals", func(all *queueFile) error {
		now := q.now()
		cerr := change(all, now)
		all.Requests = slices.DeleteFunc(all.Requests, func(r Request) bool {
			end := r.Closed
			if end.IsZero() {
				end = r.Deadline
			}
			return now.Sub(end) > q.keep
		})
		return cerr
	}, Encode)
	var kept *keepChange
	if err != nil && !errors.As(err, &kept) {
		return err
	}
	q.mu.Lock()
	close(q.changed)
	q.changed = make(chan struct{})
	q.mu.Unlock()
	return err
}

// Encode encodes v as JSON without indenting or escaping HTML: either
// would change the bytes of the arguments a [Request] holds, which are
// kept as validated. Every store of requests encodes them with it.
func Encode(v any) ([]byte, error) { return jsonenc.Marshal(v) }
