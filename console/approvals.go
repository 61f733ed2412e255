package console

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Queue is what the console needs of the calls waiting for an operator:
// what waits, a way to answer, and a word when either changes. Its
// methods are called from many requests at once.
type Queue interface {
	// Pending returns the calls waiting now, oldest first.
	Pending(ctx context.Context) ([]Waiting, error)
	// Decide answers the call id. It returns an error wrapping
	// [ErrNotWaiting] when no call id waits (it was answered, or ended).
	Decide(ctx context.Context, id string, v Verdict) error
	// Watch calls fn whenever the calls waiting change, until stop is
	// called; fn must not block.
	Watch(fn func()) (stop func())
}

// ErrNotWaiting is wrapped by [Queue.Decide]'s error when the call is no
// longer waiting.
var ErrNotWaiting = errors.New("no such call is waiting")

// Waiting is one call waiting for an operator, as the console shows it.
// Its text is the servers' and callers' words, escaped when shown.
type Waiting struct {
	ID          string
	Caller      string
	Tool        string
	Server      string
	Tier        string
	Description string
	Args        json.RawMessage // the validated arguments
	Rule        string          // the policy rule that asked, if one did
	Reason      string
	Since       time.Time
	Until       time.Time // when the call stops waiting and is refused
	Scopes      []string  // the scopes an approval of it may take, for the form
}

// Verdict is an operator's answer to a waiting call.
type Verdict struct {
	Allow bool
	// Scope says how far the answer reaches beyond this call: "call"
	// (this call only) or one of the call's [Waiting].Scopes.
	Scope string
	// For is how long a lasting answer lasts; zero for the queue's
	// default.
	For time.Duration
	// By names who answered (the console's operator), for the audit.
	By string
}
