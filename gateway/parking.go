package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// Parking holds the calls of 2026-07-28 clients while they wait for their
// client's answers. Such a client cannot be sent a request during a call:
// when a call needs its input (an approval, an upstream's elicitation or
// sampling request), the gateway answers the tools/call with the question
// (a multi round-trip request, SEP-2322) and the client asks again with
// the answer. The call itself runs once, in the process that started it
// (its holder), and is parked between those requests.
//
// Everything that crosses between the holder and the requests of the
// client is serialisable (ids, round numbers, [Question], the answer's
// JSON, [Step] with the result, [Note], a cause's text), so that an implementation can
// keep it outside the process: a retry that lands on another replica of a
// fleet then reaches the replica holding the call. [NewLocalParking] keeps
// it in memory, for one process.
//
// A Parking is safe for concurrent use.
type Parking interface {
	// Park registers the call id, held by this process, and returns the
	// holder's side of it. cancel is called, at most once and from any
	// goroutine, when a client's request cancels the call ([Parking.Cancel]).
	Park(ctx context.Context, id string, cancel func(cause error)) (Holder, error)
	// Resume is the client's side. With round > 0 it first delivers answer
	// (the JSON of the client's answer) to the question of that round,
	// which must be the one the call waits on; it fails with an error
	// wrapping [ErrRoundAnswered] when it is not. Round 0 only waits (the
	// request that started the call). It then waits until the call asks
	// its next question or ends, and returns that step; meanwhile, and
	// first for those that came while no request waited, it passes the
	// call's notes to note. An unknown id (never parked here, ended, or
	// its result already taken) is an error wrapping [ErrNotParked]. Only
	// one request waits on a call at a time ([ErrRoundAnswered] for
	// another). When ctx ends, Resume returns ctx's error and the call
	// stays parked.
	Resume(ctx context.Context, id string, round int, answer json.RawMessage, note func(Note)) (Step, error)
	// Cancel cancels the call id with cause (a sentence for the audit
	// log): its holder's cancel is called, unless the call has ended. An
	// unknown id is an error wrapping [ErrNotParked].
	Cancel(ctx context.Context, id, cause string) error
}

// Holder is the side of a parked call that the process running it uses.
// Finish is called from the goroutine running the call; Ask and Note
// also from others (an upstream's question or progress arrives on its
// connection's goroutine), possibly as the call ends.
type Holder interface {
	// Ask makes q the call's next question (the next round) and waits for
	// its answer, until ctx ends.
	Ask(ctx context.Context, q Question) (json.RawMessage, error)
	// Note passes a progress report or log line to the request waiting on
	// the call; with none waiting it is kept, within a bound, for the
	// next. It must not block for long.
	Note(n Note)
	// Finish ends the call with its result, which the waiting request, or
	// the next to resume it, takes. A result nobody takes is dropped after
	// a while. The result is the holder's no more (an implementation in
	// memory hands it over as it is; one that keeps it elsewhere, as JSON).
	Finish(result *mcp.CallToolResult)
}

// Question is what a parked call asks its client: an elicitation or a
// sampling request, as the protocol's JSON.
type Question struct {
	Kind   tool.RequestKind `json:"kind"`
	Params json.RawMessage  `json:"params"`
}

// Step is what a parked call did next: asked the question of Round, or
// ended with Result.
type Step struct {
	Round    int                 `json:"round,omitempty"`
	Question *Question           `json:"question,omitempty"`
	Result   *mcp.CallToolResult `json:"result,omitempty"`
}

// Note is a progress report or a log line of a parked call, for the
// request waiting on it.
type Note struct {
	Progress *tool.Progress   `json:"progress,omitempty"`
	Log      *tool.LogMessage `json:"log,omitempty"`
}

// The errors of a [Parking].
var (
	// ErrNotParked says that no call of that id is parked: it never was,
	// or it ended and its result was taken.
	ErrNotParked = errors.New("no such parked call")
	// ErrRoundAnswered says that an answer was for a question the call no
	// longer waits on (answered already: a replay), or that another
	// request is waiting on the call.
	ErrRoundAnswered = errors.New("that round of the call is not the one it waits on")
	// ErrHolderLost says that the call was held by a replica of a fleet
	// that is gone (see [Relay]): it was in flight there, and its outcome
	// is not known.
	ErrHolderLost = errors.New("the call was in flight on a gateway replica that is gone")
)

// NewLocalParking returns a [Parking] in this process's memory: for a
// gateway that is one process. A result nobody takes is dropped after keep
// (0 means 10 minutes).
func NewLocalParking(keep time.Duration) Parking {
	if keep <= 0 {
		keep = 10 * time.Minute
	}
	return &localParking{keep: keep, calls: map[string]*localCall{}}
}

type localParking struct {
	keep  time.Duration
	mu    sync.Mutex
	calls map[string]*localCall
}

// maxHeldNotes bounds the notes a parked call keeps while no request
// waits on it; the oldest go first.
const maxHeldNotes = 32

// localCall is one parked call. Its fields are guarded by localParking.mu.
type localCall struct {
	p      *localParking
	id     string
	cancel func(error)
	once   sync.Once // cancel is called once

	round    int       // the round of the question outstanding, or of the last one
	question *Question // outstanding; nil when none
	answer   chan json.RawMessage
	result   *mcp.CallToolResult
	done     bool
	changed  chan struct{} // closed, and replaced, when a step is posted
	resuming bool          // a request is in Resume
	waiter   func(Note)    // the waiting request's, once it took the notes kept; or nil
	held     []Note        // notes kept for the next waiter
	// expiry drops the result of a call that ended if nobody takes it
	// within keep; stopped when it is taken, so that it does not hold
	// the call and its result that long.
	expiry *time.Timer
}

func (p *localParking) Park(_ context.Context, id string, cancel func(error)) (Holder, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.calls[id]; dup {
		return nil, errors.New("parking: call id already in use")
	}
	c := &localCall{p: p, id: id, cancel: cancel, changed: make(chan struct{})}
	p.calls[id] = c
	return c, nil
}

func (p *localParking) Resume(ctx context.Context, id string, round int, answer json.RawMessage, note func(Note)) (Step, error) {
	p.mu.Lock()
	c := p.calls[id]
	if c == nil {
		p.mu.Unlock()
		return Step{}, ErrNotParked
	}
	if c.resuming {
		p.mu.Unlock()
		return Step{}, ErrRoundAnswered
	}
	if round > 0 && !c.done {
		if c.question == nil || c.round != round {
			p.mu.Unlock()
			return Step{}, ErrRoundAnswered
		}
		c.question = nil
		c.answer <- answer // buffered, one per round
	}
	c.resuming = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		c.resuming, c.waiter = false, nil
		p.mu.Unlock()
	}()
	// The notes kept meanwhile first, in order, then the new ones as they
	// come.
	for {
		p.mu.Lock()
		held := c.held
		c.held = nil
		if len(held) == 0 {
			c.waiter = note
		}
		p.mu.Unlock()
		if len(held) == 0 {
			break
		}
		for _, n := range held {
			note(n)
		}
	}
	for {
		p.mu.Lock()
		switch {
		case c.done:
			res := c.result
			delete(p.calls, id)
			c.expiry.Stop()
			p.mu.Unlock()
			return Step{Result: res}, nil
		case c.question != nil && c.round > round:
			step := Step{Round: c.round, Question: c.question}
			p.mu.Unlock()
			return step, nil
		}
		changed := c.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return Step{}, ctx.Err()
		}
	}
}

func (p *localParking) Cancel(_ context.Context, id, cause string) error {
	p.mu.Lock()
	c := p.calls[id]
	done := c != nil && c.done
	p.mu.Unlock()
	if c == nil {
		return ErrNotParked
	}
	if !done { // a call that ended has nothing left to cancel
		c.once.Do(func() { c.cancel(errors.New(cause)) })
	}
	return nil
}

// postLocked records a step and wakes the request waiting for one. p.mu is held.
func (c *localCall) postLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *localCall) Ask(ctx context.Context, q Question) (json.RawMessage, error) {
	p := c.p
	p.mu.Lock()
	c.round++
	c.question = &q
	answer := make(chan json.RawMessage, 1)
	c.answer = answer
	c.postLocked()
	p.mu.Unlock()
	select {
	case a := <-answer:
		return a, nil
	case <-ctx.Done():
		p.mu.Lock()
		if c.answer == answer {
			c.question = nil // no longer asked: a late answer is refused
		}
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (c *localCall) Note(n Note) {
	p := c.p
	p.mu.Lock()
	w := c.waiter
	if w == nil {
		if len(c.held) == maxHeldNotes {
			c.held = c.held[1:]
		}
		c.held = append(c.held, n)
	}
	p.mu.Unlock()
	if w != nil {
		w(n)
	}
}

func (c *localCall) Finish(result *mcp.CallToolResult) {
	p := c.p
	p.mu.Lock()
	c.done, c.result, c.question = true, result, nil
	c.expiry = time.AfterFunc(p.keep, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.calls[c.id] == c {
			delete(p.calls, c.id)
		}
	})
	c.postLocked()
	p.mu.Unlock()
}
