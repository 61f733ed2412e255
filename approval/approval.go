// Package approval keeps the lasting approvals a person gives to tool
// calls, in a file on one machine: an approval of a tool with exactly
// these arguments, or of a tool whatever its arguments for some minutes.
// Each is bound to the caller, the tool's definition and the policy's
// revision (see [tool.ApprovalKey]) and expires. A [Files] is the
// [tool.Approvals] an executor consults before it asks anyone.
package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/toolwire/toolwire/internal/sharedfile"
	"github.com/toolwire/toolwire/tool"
)

// Scope says what an approval covers.
type Scope string

const (
	// Args covers calls of the tool with exactly the approved arguments.
	Args Scope = "args"
	// Tool covers every call of the tool, whatever its arguments.
	Tool Scope = "tool"
)

// Grant is one lasting approval.
type Grant struct {
	ID    string           `json:"id"`
	Scope Scope            `json:"scope"`
	Key   tool.ApprovalKey `json:"key"` // Key.Args is empty for Tool
	// Created and Expires bound when it applies.
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// covers reports whether g applies to a call with key at now.
func (g Grant) covers(key tool.ApprovalKey, now time.Time) bool {
	k := g.Key
	return now.Before(g.Expires) && k.Caller == key.Caller && k.Tool == key.Tool && k.Definition == key.Definition &&
		k.Policy == key.Policy && (g.Scope == Tool || (g.Scope == Args && k.Args == key.Args))
}

// ErrNotFound is returned by [Files.Revoke] for an ID no unexpired
// approval has.
var ErrNotFound = errors.New("no such approval")

// Files keeps approvals in one JSON file (mode 0600, in a 0700
// directory), shared by the toolwire processes of one machine: each change
// is made under an advisory lock and written atomically. Its methods are
// safe for concurrent use.
type Files struct {
	path string
	now  func() time.Time
}

// NewFiles returns the approvals kept in the file at path. It does no
// I/O: a missing file holds none.
func NewFiles(path string) *Files { return &Files{path: path, now: time.Now} }

// Path returns the file's path.
func (f *Files) Path() string { return f.path }

type file struct {
	Version   int     `json:"version"`
	Approvals []Grant `json:"approvals"`
}

// Approved implements [tool.Approvals].
func (f *Files) Approved(_ context.Context, key tool.ApprovalKey) (string, error) {
	all, err := f.read()
	if err != nil {
		return "", err
	}
	now := f.now()
	for _, g := range all.Approvals {
		if g.covers(key, now) {
			return g.ID, nil
		}
	}
	return "", nil
}

// Grant adds an approval of scope for key, lasting ttl, and returns it.
// For scope Tool the arguments are left out of its key.
func (f *Files) Grant(ctx context.Context, scope Scope, key tool.ApprovalKey, ttl time.Duration) (Grant, error) {
	if scope != Args && scope != Tool {
		return Grant{}, fmt.Errorf("approval: unknown scope %q (want args or tool)", scope)
	}
	if ttl <= 0 {
		return Grant{}, fmt.Errorf("approval: a lifetime of %v: want more than zero", ttl)
	}
	if scope == Tool {
		key.Args = ""
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Grant{}, err
	}
	now := f.now()
	g := Grant{ID: hex.EncodeToString(id[:]), Scope: scope, Key: key, Created: now, Expires: now.Add(ttl)}
	err := f.update(ctx, func(all *file) error {
		all.Approvals = append(all.Approvals, g)
		return nil
	})
	return g, err
}

// List returns the unexpired approvals, oldest first.
func (f *Files) List(context.Context) ([]Grant, error) {
	all, err := f.read()
	if err != nil {
		return nil, err
	}
	now := f.now()
	return slices.DeleteFunc(all.Approvals, func(g Grant) bool { return !now.Before(g.Expires) }), nil
}

// Revoke removes the approval id; [ErrNotFound] when no unexpired one
// has it.
func (f *Files) Revoke(ctx context.Context, id string) error {
	return f.update(ctx, func(all *file) error {
		n := len(all.Approvals)
		all.Approvals = slices.DeleteFunc(all.Approvals, func(g Grant) bool { return g.ID == id })
		if len(all.Approvals) == n {
			return fmt.Errorf("approval %q: %w", id, ErrNotFound)
		}
		return nil
	})
}

func (f *Files) read() (*file, error) {
	raw, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &file{Version: 1}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("approvals %s: %w", f.path, err)
	}
	var all file
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("approvals %s: corrupt: %w", f.path, err)
	}
	if all.Version != 1 {
		return nil, fmt.Errorf("approvals %s: version %d: want 1", f.path, all.Version)
	}
	return &all, nil
}

// update changes the file under its lock, dropping expired approvals.
func (f *Files) update(ctx context.Context, change func(*file) error) error {
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return fmt.Errorf("approvals %s: %w", f.path, err)
	}
	unlock, err := sharedfile.Lock(ctx, f.path+".lock")
	if err != nil {
		return fmt.Errorf("approvals %s: lock: %w", f.path, err)
	}
	defer unlock()
	all, err := f.read()
	if err != nil {
		return err
	}
	if err := change(all); err != nil {
		return err
	}
	now := f.now()
	all.Approvals = slices.DeleteFunc(all.Approvals, func(g Grant) bool { return !now.Before(g.Expires) })
	raw, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := sharedfile.WriteAtomic(f.path, raw); err != nil {
		return fmt.Errorf("approvals %s: %w", f.path, err)
	}
	return nil
}

var _ tool.Approvals = (*Files)(nil)
