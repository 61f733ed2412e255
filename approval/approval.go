// Package approval keeps the lasting approvals a person gives to tool
// calls, and the calls waiting for an operator's decision.
//
// A lasting approval ([Grant]) covers a tool with exactly these
// arguments, a tool whatever its arguments for some minutes, or a tool for
// one session; each is bound to the caller, the tool's definition and the
// policy's revision (see [tool.ApprovalKey]) and expires. A lasting denial
// is the same with Deny set: the calls it covers are refused without
// asking anyone. [Grants] is where they are kept: [Files] on one machine
// (package store keeps them in PostgreSQL for a fleet); it is the
// [tool.Approvals] an executor consults before it asks anyone.
//
// A call whose client cannot be asked waits for an operator as a
// [Request] in a [Queue]: it is listed ([Queue.Pending]), an operator
// decides it ([Queue.Decide]) from any process that reaches the same
// store, and the process holding the call learns the [Decision]
// ([Queue.Wait]). A sketch of the holder's side:
//
//	r, err := q.Submit(ctx, approval.Request{Key: key, Tool: name, Deadline: time.Now().Add(wait), ...})
//	defer q.Withdraw(context.WithoutCancel(ctx), r.ID)
//	d, err := q.Wait(ctx, r.ID) // ErrExpired once the deadline passed
//	run := err == nil && d.Approve
package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolwire/toolwire/tool"
)

// Scope says what an approval covers.
type Scope string

const (
	// Args covers calls of the tool with exactly the approved arguments.
	Args Scope = "args"
	// Tool covers every call of the tool, whatever its arguments.
	Tool Scope = "tool"
	// Session covers every call of the tool in one session (an MCP
	// session, or a 2026 client's chain of requestStates): see
	// [WithSession].
	Session Scope = "session"
	// Once is an operator's decision of one call only: nothing lasts.
	Once Scope = "once"
)

// ParseScope returns the scope named s.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case Once, Args, Tool, Session:
		return sc, nil
	}
	return "", fmt.Errorf("unknown approval scope %q (want once, args, tool or session)", s)
}

// DefaultFor is how long a lasting approval of scope lasts when its giver
// does not say: these arguments for a day, the tool for a quarter of an
// hour, the session for a day (or until it ends).
func DefaultFor(scope Scope) time.Duration {
	switch scope {
	case Args, Session:
		return 24 * time.Hour
	case Tool:
		return 15 * time.Minute
	}
	return 0
}

type sessionKey struct{}

// WithSession returns ctx carrying the session a call belongs to: the
// gateway's MCP session id, or the id of a 2026 client's requestState
// chain. Approvals of scope [Session] are bound to it; a call without one
// is covered by none.
func WithSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionKey{}, id)
}

// SessionFrom returns the session ctx carries ([WithSession]), or "".
func SessionFrom(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}

// Grants keeps lasting approvals and denials. Its methods are safe for
// concurrent use, and, for the kinds of store that share it, from other
// processes at the same time.
type Grants interface {
	tool.Approvals
	// Grant adds an approval of scope (Args, Tool or Session) for key,
	// lasting ttl. Scope Session binds it to [SessionFrom](ctx), which
	// must be set.
	Grant(ctx context.Context, scope Scope, key tool.ApprovalKey, ttl time.Duration) (Grant, error)
	// Deny adds a lasting denial, as Grant adds an approval, with the
	// reason the refused calls are given.
	Deny(ctx context.Context, scope Scope, key tool.ApprovalKey, ttl time.Duration, reason string) (Grant, error)
	// Denied returns the unexpired denial that covers key (in the
	// session of ctx), if any.
	Denied(ctx context.Context, key tool.ApprovalKey) (Grant, bool, error)
	// List returns the unexpired approvals and denials, oldest first.
	List(ctx context.Context) ([]Grant, error)
	// Revoke removes one; [ErrNotFound] when no unexpired one has id.
	Revoke(ctx context.Context, id string) error
	// EndSession removes the approvals and denials bound to session, which
	// ended.
	EndSession(ctx context.Context, session string) error
}

// Grant is one lasting approval, or denial.
type Grant struct {
	ID    string           `json:"id"`
	Scope Scope            `json:"scope"`
	Key   tool.ApprovalKey `json:"key"` // Key.Args is empty for Tool and Session
	// Session is the session a Session scope is bound to.
	Session string `json:"session,omitempty"`
	// Deny makes it a lasting denial, Reason what the refused are told.
	Deny   bool   `json:"deny,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Created and Expires bound when it applies.
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Covers reports whether g applies at now to a call with key in session
// ("" for a call in none).
func (g Grant) Covers(key tool.ApprovalKey, session string, now time.Time) bool {
	k := g.Key
	if !now.Before(g.Expires) || k.Caller != key.Caller || k.Tool != key.Tool || k.Definition != key.Definition || k.Policy != key.Policy {
		return false
	}
	switch g.Scope {
	case Args:
		return k.Args == key.Args
	case Tool:
		return true
	case Session:
		return g.Session != "" && g.Session == session
	}
	return false
}

// NewGrant returns a grant of scope for key (in the session of ctx for
// Session), created at now and lasting ttl, with a new ID: what a
// [Grants] keeps, checked.
func NewGrant(ctx context.Context, scope Scope, key tool.ApprovalKey, now time.Time, ttl time.Duration) (Grant, error) {
	if scope != Args && scope != Tool && scope != Session {
		return Grant{}, fmt.Errorf("approval: unknown lasting scope %q (want args, tool or session)", scope)
	}
	if ttl <= 0 {
		return Grant{}, fmt.Errorf("approval: a lifetime of %v: want more than zero", ttl)
	}
	g := Grant{ID: NewID(), Scope: scope, Key: key, Created: now, Expires: now.Add(ttl)}
	if scope != Args {
		g.Key.Args = ""
	}
	if scope == Session {
		if g.Session = SessionFrom(ctx); g.Session == "" {
			return Grant{}, errors.New("approval: a session approval for a call in no session")
		}
	}
	return g, nil
}

// NewID returns a new random ID of an approval or a request: 16 hex
// digits.
func NewID() string {
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	return hex.EncodeToString(id[:])
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

// Approved implements [tool.Approvals]: the approvals, not the denials.
func (f *Files) Approved(ctx context.Context, key tool.ApprovalKey) (string, error) {
	g, ok, err := f.find(ctx, key, false)
	if !ok {
		return "", err
	}
	return g.ID, nil
}

// Denied implements [Grants].
func (f *Files) Denied(ctx context.Context, key tool.ApprovalKey) (Grant, bool, error) {
	return f.find(ctx, key, true)
}

func (f *Files) find(ctx context.Context, key tool.ApprovalKey, deny bool) (Grant, bool, error) {
	all, err := f.read()
	if err != nil {
		return Grant{}, false, err
	}
	now, session := f.now(), SessionFrom(ctx)
	for _, g := range all.Approvals {
		if g.Deny == deny && g.Covers(key, session, now) {
			return g, true, nil
		}
	}
	return Grant{}, false, nil
}

// Grant adds an approval of scope for key, lasting ttl, and returns it.
// For scopes Tool and Session the arguments are left out of its key.
func (f *Files) Grant(ctx context.Context, scope Scope, key tool.ApprovalKey, ttl time.Duration) (Grant, error) {
	g, err := NewGrant(ctx, scope, key, f.now(), ttl)
	if err != nil {
		return Grant{}, err
	}
	return g, f.add(ctx, g)
}

// Deny implements [Grants].
func (f *Files) Deny(ctx context.Context, scope Scope, key tool.ApprovalKey, ttl time.Duration, reason string) (Grant, error) {
	g, err := NewGrant(ctx, scope, key, f.now(), ttl)
	if err != nil {
		return Grant{}, err
	}
	g.Deny, g.Reason = true, reason
	return g, f.add(ctx, g)
}

func (f *Files) add(ctx context.Context, g Grant) error {
	return f.update(ctx, func(all *file) error {
		all.Approvals = append(all.Approvals, g)
		return nil
	})
}

// EndSession implements [Grants].
func (f *Files) EndSession(ctx context.Context, session string) error {
	if session == "" {
		return nil
	}
	return f.update(ctx, func(all *file) error {
		all.Approvals = slices.DeleteFunc(all.Approvals, func(g Grant) bool { return g.Scope == Session && g.Session == session })
		return nil
	})
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

func (f *Files) read() (*file, error) { return readVersioned[file](f.path, "approvals") }

// update changes the file under its lock, dropping expired approvals.
func (f *Files) update(ctx context.Context, change func(*file) error) error {
	return updateVersioned(ctx, f.path, "approvals", func(all *file) error {
		if err := change(all); err != nil {
			return err
		}
		now := f.now()
		all.Approvals = slices.DeleteFunc(all.Approvals, func(g Grant) bool { return !now.Before(g.Expires) })
		return nil
	}, indent)
}

func indent(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

var _ Grants = (*Files)(nil)
