// Package task keeps the records of tasks: tool calls that a gateway runs
// in the background for a client, which polls for their status and
// fetches their result later, from any replica (MCP 2025-11-25's tasks,
// 2026-07-28's tasks extension; docs/protocol.md#tasks-through-the-gateway).
//
// A [Store] holds the rules (who may see a task, which status may follow
// which, that a task has one outcome) over a [Backend] that only keeps
// records: [Files] on one machine (a directory under the state directory),
// or package store's PostgreSQL tables in a fleet.
//
//	st := task.NewStore(backend)
//	rec, err := st.Create(ctx, &task.Record{Owner: caller, Tool: name}, ttl)
//	// ... the call runs; then, once:
//	st.Finish(ctx, rec.ID, task.Outcome{Status: task.Completed, Result: res})
//	// the client, later, from any replica:
//	rec, err = st.Get(ctx, caller, rec.ID)
//
// A record names the instance (the gateway process) that holds it. When
// that instance is gone (killed, its machine lost: [Backend.Lost] says
// so), a task it ran as a plain call can have no outcome any more, and
// the next reader ends it failed, saying so; a task an upstream runs as
// its own keeps its upstream's task id, and another instance may take it
// over ([Store.Adopt]) and poll the upstream.
package task

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Status is where a task is in its life (2025-11-25, basic/utilities/tasks,
// "Task Status Lifecycle").
type Status string

const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Terminal reports whether s ends a task: no other status may follow.
func (s Status) Terminal() bool {
	return s == Completed || s == Failed || s == Cancelled
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case Working, InputRequired, Completed, Failed, Cancelled:
		return true
	}
	return false
}

// Record is one task.
type Record struct {
	// ID is the task's id: 26 characters of base32 (128 random bits),
	// made by [Store.Create]; nobody can guess another's.
	ID string `json:"id"`
	// Owner is the caller who created the task, as the gateway keys its
	// callers (credential kind, issuer and subject); "" for a caller
	// without a credential. Only its owner sees a task.
	Owner string `json:"owner"`
	// Tool is the tool called, by the name the client used.
	Tool    string `json:"tool"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"` // the status message
	// Progress and Total are the call's latest progress report (Total 0:
	// unknown).
	Progress float64 `json:"progress,omitempty"`
	Total    float64 `json:"total,omitempty"`
	// Result is the call's result as served (a CallToolResult), once the
	// call returned one; Error a JSON-RPC error object, when the call
	// ended in one instead. A task that ended without its call's outcome
	// (its instance lost) has both: an isError result saying so, and the
	// internal error (-32603) saying the same.
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// Created and Updated are set by the store.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// TTL is how long the task is kept from its creation; Expires is
	// Created+TTL. After it, the task is gone whatever its status.
	TTL     time.Duration `json:"ttl"`
	Expires time.Time     `json:"expires"`
	// Instance is the gateway process that runs the task (or polls its
	// upstream), as its [Backend] names instances.
	Instance string `json:"instance"`
	// Server is the upstream server the tool belongs to, and UpstreamTask
	// the task id that server gave the call, when it runs it as a task of
	// its own ("" otherwise).
	Server       string `json:"server,omitempty"`
	UpstreamTask string `json:"upstreamTask,omitempty"`
}

// Errors of the store. Each is returned wrapped, with what it is about.
var (
	// ErrNotFound: no task of that id is the caller's (it never was, it
	// is another's, or it expired): the three are not told apart.
	ErrNotFound = errors.New("task not found")
	// ErrTerminal: the task already ended, and keeps its outcome.
	ErrTerminal = errors.New("task already ended")
	// ErrBadID: the id is not one a store makes.
	ErrBadID = errors.New("not a task id")
	// ErrBadCursor: a list cursor that no list returned.
	ErrBadCursor = errors.New("not a cursor of this list")
)

// idLen is the length of an id: rand.Text's 26 base32 characters.
const idLen = 26

// NewID returns a fresh task id.
func NewID() string { return rand.Text() }

// CheckID returns an error wrapping [ErrBadID] unless id has the form of
// an id the store makes (so that an id is never more than a name: the
// file backend uses it as one).
func CheckID(id string) error {
	if len(id) != idLen {
		return fmt.Errorf("%w: want %d characters, got %d", ErrBadID, idLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return fmt.Errorf("%w: character %d is not of A-Z or 2-7", ErrBadID, i+1)
		}
	}
	return nil
}

// Cursor is a position in a list of tasks, ordered by creation then id.
type Cursor struct {
	Created time.Time
	ID      string
}

// maxCursor bounds the length of a cursor a client may send.
const maxCursor = 128

// String encodes c for a client, which must treat it as opaque.
func (c Cursor) String() string {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.Created.UnixNano()))
	b = append(b, c.ID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor decodes a cursor that [Cursor.String] made, or returns an
// error wrapping [ErrBadCursor]. A cursor carries no authority: a list
// shows only the caller's tasks wherever it starts.
func ParseCursor(s string) (Cursor, error) {
	if len(s) > maxCursor {
		return Cursor{}, fmt.Errorf("%w: %d characters, at most %d", ErrBadCursor, len(s), maxCursor)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 8+idLen {
		return Cursor{}, fmt.Errorf("%w: it does not decode", ErrBadCursor)
	}
	c := Cursor{Created: time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC(), ID: string(b[8:])}
	if CheckID(c.ID) != nil {
		return Cursor{}, fmt.Errorf("%w: it does not decode", ErrBadCursor)
	}
	return c, nil
}

// after reports whether r comes after c in a list.
func (c Cursor) before(r *Record) bool {
	if !r.Created.Equal(c.Created) {
		return r.Created.After(c.Created)
	}
	return r.ID > c.ID
}

// Query selects tasks to list.
type Query struct {
	// Owner's tasks only, unless All (an operator's listing).
	Owner string
	All   bool
	// After: the tasks after this position (nil: from the first).
	After *Cursor
	// Limit: at most this many (≤ 0: 100).
	Limit int
}

// Backend keeps task records. Its methods are safe for concurrent use,
// by several processes sharing one backend too.
type Backend interface {
	// Instance names this process among the backend's instances.
	Instance() string
	// Insert stores a new record, durably before it returns.
	Insert(ctx context.Context, r *Record) error
	// Load returns record id (expired or not), or an error wrapping
	// ErrNotFound.
	Load(ctx context.Context, id string) (*Record, error)
	// Update calls change with record id while holding it locked against
	// every other Update, and stores what change left (durably) unless
	// change fails, whose error it then returns.
	Update(ctx context.Context, id string, change func(*Record) error) (*Record, error)
	// List returns the records q selects that have not expired by now,
	// in order of creation then id.
	List(ctx context.Context, q Query, now time.Time) ([]*Record, error)
	// Prune removes the records expired by now and returns how many.
	Prune(ctx context.Context, now time.Time) (int, error)
	// Lost reports whether instance is gone without having ended what
	// it held (killed; its machine lost).
	Lost(ctx context.Context, instance string) (bool, error)
}

// trimText bounds s, a text a record keeps (a status message, an id in
// an error), to n bytes, cut at a character's start and marked "…".
func trimText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// maxMessage bounds a status message.
const maxMessage = 1024

// cleanMessage keeps a status message to one bounded line.
func cleanMessage(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return trimText(s, maxMessage)
}
