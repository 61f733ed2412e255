package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolwire/toolwire/tool"
)

// State is where a [Request] is in its life.
type State string

const (
	// Waiting: no decision yet, and the deadline has not passed.
	Waiting State = "pending"
	// Approved and Denied: an operator decided (see [Request.Decision]).
	Approved State = "approved"
	Denied   State = "denied"
	// Expired: the deadline passed before anyone decided.
	Expired State = "expired"
	// Withdrawn: the call ended (its client went away, or the process
	// holding it stopped waiting) before anyone decided.
	Withdrawn State = "withdrawn"
)

// Request is a call waiting for an operator's decision. Its arguments are
// the validated ones, shown to the operator; whoever shows them escapes
// them first (they are the model's words).
type Request struct {
	ID string `json:"id"`
	// Key is what a lasting approval given with the decision is bound to.
	Key tool.ApprovalKey `json:"key"`
	// Tool is the registered name, Server the server it comes from ("" for
	// a tool the program defined), Tier its tier ("write", "destructive"
	// or, when a rule asks, "read").
	Tool   string `json:"tool"`
	Server string `json:"server,omitempty"`
	Tier   string `json:"tier"`
	// Rule is the policy rule that asks for the call to be confirmed, ""
	// when its tier does.
	Rule string `json:"rule,omitempty"`
	// Caller is who made the call, for people to read (the gateway's
	// principal's display name); "" for the person at the terminal.
	Caller string `json:"caller,omitempty"`
	// Args are the validated arguments, a JSON object.
	Args json.RawMessage `json:"args"`
	// Reason is why it needs approval and why its client could not be
	// asked.
	Reason string `json:"reason,omitempty"`
	// Session is the session the call belongs to (see [WithSession]), to
	// which a decision of scope Session is bound; "" for none.
	Session string `json:"session,omitempty"`
	// Created and Deadline: past the deadline the call is refused.
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline"`
	// Instance is the process holding the call (a replica's id in a fleet,
	// host and pid on one machine).
	Instance string `json:"instance,omitempty"`
	State    State  `json:"state"`
	// Decision is set once State is Approved or Denied.
	Decision *Decision `json:"decision,omitempty"`
	// Closed is when State stopped being Waiting.
	Closed time.Time `json:"closed,omitzero"`
}

// Decision is an operator's answer to a [Request].
type Decision struct {
	// Approve runs the call; false refuses it.
	Approve bool `json:"approve"`
	// Scope is how far the decision reaches: Once (or "") this call only;
	// Args, Tool or Session also make it a lasting approval (a lasting
	// denial, for a refusal) of that scope, lasting For.
	Scope Scope `json:"scope,omitempty"`
	// For is how long a lasting decision lasts; 0 means [DefaultFor].
	For time.Duration `json:"for,omitempty"`
	// By is who decided (an operator's name, "cli:user@host", ...); At
	// when. Decide sets At.
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Reason is what the caller is told of a refusal, or why it was
	// approved.
	Reason string `json:"reason,omitempty"`
	// Grant is the ID of the lasting approval or denial the decision made
	// (set by Decide).
	Grant string `json:"grant,omitempty"`
}

// Check says what is wrong with d as a decision to take, nil when
// nothing.
func (d Decision) Check() error {
	switch d.Scope {
	case "", Once, Args, Tool, Session:
	default:
		return fmt.Errorf("approval: unknown scope %q (want once, args, tool or session)", d.Scope)
	}
	if d.For < 0 {
		return fmt.Errorf("approval: a lifetime of %v: want more than zero", d.For)
	}
	if d.By == "" {
		return errors.New("approval: a decision must say who took it")
	}
	return nil
}

// lasting returns the lifetime of d's lasting approval or denial, 0 for
// none.
func (d Decision) lasting() time.Duration {
	if d.Scope == "" || d.Scope == Once {
		return 0
	}
	if d.For > 0 {
		return d.For
	}
	return DefaultFor(d.Scope)
}

// The errors of a [Queue].
var (
	// ErrDecided: the request was decided already (the error says how
	// and by whom).
	ErrDecided = errors.New("already decided")
	// ErrExpired: the deadline passed before anyone decided.
	ErrExpired = errors.New("nobody decided in time")
	// ErrWithdrawn: the call ended before anyone decided.
	ErrWithdrawn = errors.New("the call ended before a decision")
)

// Queue holds the calls waiting for an operator. Every method is safe for
// concurrent use, and, with a store shared by processes (a file on one
// machine, PostgreSQL in a fleet), from those processes: a request
// submitted by one is decided from another, and the one holding it learns
// the decision.
//
// A request has exactly one outcome: the first of a decision, its
// deadline and its withdrawal. A decision taken after the deadline is
// refused with [ErrExpired] even when the holder has not noticed yet.
type Queue interface {
	// Submit records r (its Key, Tool, Args, Deadline, ... set by the
	// caller) as waiting and returns it with its ID, Created and State
	// set. A Deadline not after now is an error.
	Submit(ctx context.Context, r Request) (Request, error)
	// Wait blocks until the request id has an outcome and returns the
	// decision; [ErrExpired] once its deadline passed (Wait itself
	// records that), [ErrWithdrawn], [ErrNotFound], or ctx's error when
	// ctx ends first (which leaves the request waiting: withdraw it).
	Wait(ctx context.Context, id string) (Decision, error)
	// Get returns the request id, whatever its state; [ErrNotFound]
	// when there is none (or it was dropped, a while after its outcome).
	Get(ctx context.Context, id string) (Request, error)
	// Pending returns the requests waiting now, oldest first.
	Pending(ctx context.Context) ([]Request, error)
	// Decide takes d as the decision of the request id (At set to now)
	// and, for a lasting scope, grants the lasting approval (or denial)
	// in the same step; it returns the decision as recorded. Errors:
	// [ErrNotFound], [ErrDecided] (wrapped with who decided),
	// [ErrExpired], [ErrWithdrawn], or d's own ([Decision.Check]).
	Decide(ctx context.Context, id string, d Decision) (Decision, error)
	// Withdraw records that the call of request id ended; a request with
	// an outcome already keeps it. Unknown ids are not an error.
	Withdraw(ctx context.Context, id string) error
	// Watch returns a channel that receives a value (coalesced: at most
	// one waits) whenever the set of requests may have changed, in this
	// process or another, until ctx ends, when it is closed. A watcher
	// (a console's event stream) then reads Pending again.
	Watch(ctx context.Context) <-chan struct{}
}

// Prepare checks r as [Queue.Submit] receives it and fills in what the
// queue sets, at now: a new ID, Created and the Waiting state.
func Prepare(r Request, now time.Time) (Request, error) {
	if r.Tool == "" {
		return Request{}, errors.New("approval: a request names no tool")
	}
	if !r.Deadline.After(now) {
		return Request{}, fmt.Errorf("approval: request for %q: deadline %s is not after now", r.Tool, r.Deadline.Format(time.RFC3339))
	}
	if len(r.Args) == 0 {
		r.Args = json.RawMessage("{}")
	}
	if !json.Valid(r.Args) {
		return Request{}, fmt.Errorf("approval: request for %q: arguments are not JSON", r.Tool)
	}
	r.ID, r.Created, r.State, r.Decision, r.Closed = NewID(), now, Waiting, nil, time.Time{}
	return r, nil
}

// Outcome returns the result of waiting for r: its decision, or the
// error of its state; ok is false while it is still waiting.
func (r Request) Outcome() (d Decision, err error, ok bool) {
	switch r.State {
	case Approved, Denied:
		if r.Decision == nil {
			return Decision{}, fmt.Errorf("approval %s: %s without a decision", r.ID, r.State), true
		}
		return *r.Decision, nil, true
	case Expired:
		return Decision{}, fmt.Errorf("approval %s: %w", r.ID, ErrExpired), true
	case Withdrawn:
		return Decision{}, fmt.Errorf("approval %s: %w", r.ID, ErrWithdrawn), true
	}
	return Decision{}, nil, false
}

// closedErr is why a request not waiting cannot be decided.
func (r Request) closedErr() error {
	if r.State == Approved || r.State == Denied {
		by := ""
		if r.Decision != nil {
			by = fmt.Sprintf(" by %q at %s", r.Decision.By, r.Decision.At.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("approval %s: %w: %s%s", r.ID, ErrDecided, r.State, by)
	}
	_, err, _ := r.Outcome()
	return err
}

// Transition is the one step every [Queue] takes to give r an outcome at
// now, under whatever makes the step atomic (a file's lock, a row's):
// the decision d (nil: none, so only the deadline can close r), applied
// when r is still waiting and its deadline not past. It reports the
// error of a request that cannot take d, and whether r changed (expired,
// or decided).
func Transition(r *Request, d *Decision, now time.Time) (changed bool, err error) {
	if r.State != Waiting {
		if d == nil {
			return false, nil
		}
		return false, r.closedErr()
	}
	if !now.Before(r.Deadline) {
		r.State, r.Closed = Expired, now
		if d == nil {
			return true, nil
		}
		return true, r.closedErr()
	}
	if d == nil {
		return false, nil
	}
	dd := *d
	dd.At = now
	r.Decision = &dd
	r.State, r.Closed = Denied, now
	if dd.Approve {
		r.State = Approved
	}
	return true, nil
}

// GrantFor makes the lasting approval or denial of decision d on r in
// grants, when d's scope is a lasting one, and records its ID in d.
func GrantFor(ctx context.Context, grants Grants, r Request, d *Decision) error {
	ttl := d.lasting()
	if ttl == 0 {
		return nil
	}
	if grants == nil {
		return errors.New("approval: this store keeps no lasting approvals")
	}
	// The executor gives a call no key when it cannot name what a lasting
	// decision would be bound to (a gateway caller without credentials):
	// a grant of the zero key would cover every such call of every tool.
	if r.Key.Tool == "" {
		return fmt.Errorf("approval %s: the call has no key to bind a lasting %s decision to (its caller is not authenticated): decide it once", r.ID, d.Scope)
	}
	if d.Scope == Session {
		if r.Session == "" {
			return fmt.Errorf("approval %s: scope session for a call in no session", r.ID)
		}
		ctx = WithSession(ctx, r.Session)
	}
	var g Grant
	var err error
	if d.Approve {
		g, err = grants.Grant(ctx, d.Scope, r.Key, ttl)
	} else {
		g, err = grants.Deny(ctx, d.Scope, r.Key, ttl, d.Reason)
	}
	if err != nil {
		return fmt.Errorf("approval %s: keep the lasting %s: %w", r.ID, d.Scope, err)
	}
	d.Grant = g.ID
	return nil
}
