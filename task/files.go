package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/sharedfile"
)

// Files keeps task records in a directory of one machine: a file per task
// (ID.json, written whole with [sharedfile.WriteAtomic]), changed under
// one lock file (.lock) that every toolwire process using the directory
// takes. Each process is an instance with a lock file of its own
// (instances/ID.lock), locked for as long as it runs: when it dies,
// however it dies, the lock goes, and another process knows it is lost.
type Files struct {
	dir      string
	instance string
	unlock   func()
}

// DefaultDir returns where tasks are kept on one machine unless
// configured otherwise: toolwire/tasks under $XDG_STATE_HOME, or
// ~/.local/state.
func DefaultDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("task: state directory: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "toolwire", "tasks"), nil
}

// OpenFiles opens the task directory dir ("": [DefaultDir]), making it
// (0700) if needed, and registers this process as an instance. Close
// releases the instance.
func OpenFiles(dir string) (*Files, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "instances"), 0o700); err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	f := &Files{dir: dir, instance: NewID()}
	unlock, err := sharedfile.Lock(context.Background(), f.instanceLock(f.instance))
	if err != nil {
		return nil, fmt.Errorf("task: register this instance: %w", err)
	}
	f.unlock = unlock
	return f, nil
}

// Close ends this instance: its lock file goes, and what it held (a task
// not ended) is taken for lost. It is safe to call more than once.
func (f *Files) Close() error {
	if f.unlock != nil {
		f.unlock()
		f.unlock = nil
		return os.Remove(f.instanceLock(f.instance))
	}
	return nil
}

// Dir returns the directory.
func (f *Files) Dir() string { return f.dir }

// Instance implements [Backend].
func (f *Files) Instance() string { return f.instance }

func (f *Files) instanceLock(id string) string {
	return filepath.Join(f.dir, "instances", id+".lock")
}

func (f *Files) path(id string) string { return filepath.Join(f.dir, id+".json") }

// lock takes the directory's lock.
func (f *Files) lock(ctx context.Context) (func(), error) {
	return sharedfile.Lock(ctx, filepath.Join(f.dir, ".lock"))
}

// Insert implements [Backend].
func (f *Files) Insert(ctx context.Context, r *Record) error {
	if err := CheckID(r.ID); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	unlock, err := f.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return sharedfile.CreateAtomic(f.path(r.ID), b)
}

// Load implements [Backend].
func (f *Files) Load(_ context.Context, id string) (*Record, error) {
	if err := CheckID(id); err != nil {
		return nil, ErrNotFound
	}
	return f.read(f.path(id))
}

func (f *Files) read(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Update implements [Backend].
func (f *Files) Update(ctx context.Context, id string, change func(*Record) error) (*Record, error) {
	if err := CheckID(id); err != nil {
		return nil, ErrNotFound
	}
	unlock, err := f.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := f.read(f.path(id))
	if err != nil {
		return nil, err
	}
	if err := change(r); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if err := sharedfile.WriteAtomic(f.path(id), b); err != nil {
		return nil, err
	}
	return r, nil
}

// List implements [Backend].
func (f *Files) List(_ context.Context, q Query, now time.Time) ([]*Record, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, err
	}
	var out []*Record
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || CheckID(id) != nil {
			continue
		}
		r, err := f.read(filepath.Join(f.dir, e.Name()))
		if errors.Is(err, ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, err
		}
		if (!q.All && r.Owner != q.Owner) || !now.Before(r.Expires) || (q.After != nil && !q.After.before(r)) {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Record) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// Prune implements [Backend]. It also removes the lock files of the
// instances that are gone (a killed process leaves its own): one that is
// missing is as lost as one that can be locked.
func (f *Files) Prune(ctx context.Context, now time.Time) (int, error) {
	unlock, err := f.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	if entries, err := os.ReadDir(filepath.Join(f.dir, "instances")); err == nil {
		for _, e := range entries {
			id, ok := strings.CutSuffix(e.Name(), ".lock")
			if !ok || id == f.instance || CheckID(id) != nil {
				continue
			}
			if lost, err := f.Lost(ctx, id); err == nil && lost {
				_ = os.Remove(f.instanceLock(id))
			}
		}
	}
	recs, err := f.List(ctx, Query{All: true}, time.Time{}) // every record, expired or not
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if now.Before(r.Expires) {
			continue
		}
		if err := os.Remove(f.path(r.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// Lost implements [Backend]: instance's lock file is gone, or can be
// locked.
func (f *Files) Lost(ctx context.Context, instance string) (bool, error) {
	if instance == f.instance {
		return false, nil
	}
	if CheckID(instance) != nil {
		return true, nil // no instance of this directory's
	}
	path := f.instanceLock(instance)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	// One try: a lock that is held is a process that runs.
	try, cancel := context.WithCancel(ctx)
	cancel()
	unlock, err := sharedfile.Lock(try, path)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return false, nil
		}
		return false, err
	}
	unlock()
	return true, nil
}
