package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// relayedParking is the [Parking] of one replica of a fleet: the calls it
// holds are parked in its own memory (local), and a client's request
// about a call another replica holds (a retry that landed here, or the
// cancellation of a waiting request) is passed to that replica over the
// [Relay], which runs it on its own Parking and sends the notes and the
// next step back. A call is recorded as held (Relay.Hold) when it first
// asks its client something: before that, only the request that started
// it, on this replica, knows of it.
type relayedParking struct {
	local Parking
	relay Relay
	ttl   time.Duration // of a hold: longer than a question may wait, and a result may be kept

	mu      sync.Mutex
	release map[string]func() // the holds of this replica's calls, by id
	stops   []func()          // of the relay's handlers (close)
}

// parkContext separates the parking keys' MAC from the requestState's.
const parkContext = "toolwire parked call v1\x00"

// parkKey is what a parked call is parked under: an HMAC, under the
// requestState key, of the call's id (the one its requestState carries)
// with the caller and the tool it was started for. A retry reaches the
// call only when it comes from that caller for that tool: a state forged
// with another caller or tool beside a real id (by whoever learnt the id
// and the key) names a call that is not parked. Neither the id nor this
// key is kept in a store as it is (see [relayedParking]).
func (s *sealer) parkKey(id, principal, tool string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(parkContext))
	for _, part := range []string{id, principal, tool} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// heldKey is what the store's held table records of a parked call: the
// SHA-256 of its parking key, which finds the holder and opens nothing.
func heldKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// The relay's methods of a relayed Parking.
const (
	relayResume = "parking.resume"
	relayCancel = "parking.cancel"
)

func newRelayedParking(local Parking, relay Relay, keep time.Duration) *relayedParking {
	p := &relayedParking{local: local, relay: relay, ttl: 2 * keep, release: map[string]func(){}}
	p.stops = []func(){relay.Handle(relayResume, p.serveResume), relay.Handle(relayCancel, p.serveCancel)}
	return p
}

// close stops serving the other replicas' requests about this replica's
// calls (another gateway on the same relay goes on serving its own).
func (p *relayedParking) close() {
	p.mu.Lock()
	stops := p.stops
	p.stops = nil
	p.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// notHeld is a relay handler's error for a request about something this
// gateway does not hold: the relay asks the next handler of the method (a
// second gateway on the same relay), and its text, when none holds it,
// is what the replica asking reads.
type notHeld string

func (e notHeld) Error() string { return string(e) }

// NotHandled reports true: see store.Relay.Handle.
func (notHeld) NotHandled() bool { return true }

// parkWire is a request about a parked call, and the reply to one, as
// they cross the relay.
type parkWire struct {
	ID     string          `json:"id"`
	Round  int             `json:"round,omitempty"`
	Answer json.RawMessage `json:"answer,omitempty"`
	Cause  string          `json:"cause,omitempty"`
	Step   *Step           `json:"step,omitempty"`
	Error  string          `json:"error,omitempty"` // one of the codes below, or a message
}

// The errors of a Parking, as they cross the relay.
const (
	codeNotParked     = "not_parked"
	codeRoundAnswered = "round_answered"
)

func parkErrorCode(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotParked):
		return codeNotParked
	case errors.Is(err, ErrRoundAnswered):
		return codeRoundAnswered
	}
	return err.Error()
}

func parkCodeError(code string) error {
	switch code {
	case "":
		return nil
	case codeNotParked:
		return ErrNotParked
	case codeRoundAnswered:
		return ErrRoundAnswered
	}
	return errors.New(code)
}

func (p *relayedParking) Park(ctx context.Context, id string, cancel func(error)) (Holder, error) {
	h, err := p.local.Park(ctx, id, cancel)
	if err != nil {
		return nil, err
	}
	return &relayedHolder{Holder: h, p: p, id: id}, nil
}

// relayedHolder records its call as held before it first asks.
type relayedHolder struct {
	Holder
	p    *relayedParking
	id   string
	once sync.Once
	err  error
	// dropHold releases the hold after a while, for a call that asked
	// (and so is held); nil for one that did not. finished is set by
	// Finish. Both under p.mu.
	dropHold *time.Timer
	finished bool
}

func (h *relayedHolder) Ask(ctx context.Context, q Question) (json.RawMessage, error) {
	h.once.Do(func() {
		release, err := h.p.relay.Hold(ctx, "call", heldKey(h.id), h.p.ttl)
		if err != nil {
			h.err = fmt.Errorf("parking: the call cannot be held for its client's retry on another replica: %w", err)
			return
		}
		h.p.mu.Lock()
		if h.finished {
			// The call ended while its hold was being taken (a question
			// from the upstream can come as the call ends): nothing is
			// left to hold, and Finish set no timer to drop it.
			h.p.mu.Unlock()
			release()
			return
		}
		h.p.release[h.id] = release
		h.p.mu.Unlock()
	})
	if h.err != nil {
		return nil, h.err
	}
	return h.Holder.Ask(ctx, q)
}

func (h *relayedHolder) Finish(res *mcp.CallToolResult) {
	h.Holder.Finish(res)
	p, id := h.p, h.id
	p.mu.Lock()
	defer p.mu.Unlock()
	h.finished = true
	if _, held := p.release[id]; held {
		// Taken or not, the result is dropped after a while: so is the
		// hold. The timer keeps the id, not the holder and its result.
		h.dropHold = time.AfterFunc(p.ttl, func() { p.taken(id) })
	}
}

// taken releases the hold of call id, whose result was taken.
func (p *relayedParking) taken(id string) {
	p.mu.Lock()
	release := p.release[id]
	delete(p.release, id)
	p.mu.Unlock()
	if release != nil {
		release()
	}
}

func (p *relayedParking) Resume(ctx context.Context, id string, round int, answer json.RawMessage, note func(Note)) (Step, error) {
	step, err := p.local.Resume(ctx, id, round, answer, note)
	if !errors.Is(err, ErrNotParked) {
		if err == nil && step.Result != nil {
			p.taken(id)
		}
		return step, err
	}
	holder, err := p.holder(ctx, id)
	if err != nil || holder == "" {
		return Step{}, err
	}
	body, _ := json.Marshal(parkWire{ID: id, Round: round, Answer: answer})
	raw, err := p.relay.Call(ctx, holder, relayResume, body, func(ev []byte) {
		var n Note
		if json.Unmarshal(ev, &n) == nil {
			note(n)
		}
	})
	if err != nil {
		return Step{}, p.callError(ctx, err)
	}
	var rep parkWire
	if err := json.Unmarshal(raw, &rep); err != nil {
		return Step{}, fmt.Errorf("parking: the reply of the replica holding the call: %w", err)
	}
	if err := parkCodeError(rep.Error); err != nil {
		return Step{}, err
	}
	if rep.Step == nil {
		return Step{}, errors.New("parking: the replica holding the call replied without a step")
	}
	return *rep.Step, nil
}

func (p *relayedParking) Cancel(ctx context.Context, id, cause string) error {
	err := p.local.Cancel(ctx, id, cause)
	if !errors.Is(err, ErrNotParked) {
		return err
	}
	holder, err := p.holder(ctx, id)
	if err != nil || holder == "" {
		return err
	}
	body, _ := json.Marshal(parkWire{ID: id, Cause: cause})
	raw, err := p.relay.Call(ctx, holder, relayCancel, body, nil)
	if err != nil {
		return p.callError(ctx, err)
	}
	var rep parkWire
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("parking: the reply of the replica holding the call: %w", err)
	}
	return parkCodeError(rep.Error)
}

// holder returns the other replica holding call id; an error wrapping
// ErrNotParked when none does, or this one does (its own Parking said it
// has no such call), ErrHolderLost when the holder is gone.
func (p *relayedParking) holder(ctx context.Context, id string) (string, error) {
	holder, err := p.relay.Holder(ctx, "call", heldKey(id))
	switch {
	case replicaLost(err):
		return "", fmt.Errorf("%w: %v", ErrHolderLost, err)
	case err != nil:
		return "", fmt.Errorf("parking: find the replica holding the call: %w", err)
	case holder == "" || holder == p.relay.Instance():
		return "", ErrNotParked
	}
	return holder, nil
}

func (p *relayedParking) callError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err.Error() == codeNotParked: // no gateway of the holder's holds it
		return ErrNotParked
	case replicaLost(err):
		return fmt.Errorf("%w: %v", ErrHolderLost, err)
	}
	return fmt.Errorf("parking: pass the request to the replica holding the call: %w", err)
}

// serveResume runs another replica's Resume of a call held here.
func (p *relayedParking) serveResume(ctx context.Context, body []byte, emit func([]byte)) ([]byte, error) {
	var req parkWire
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	step, err := p.local.Resume(ctx, req.ID, req.Round, req.Answer, func(n Note) {
		if b, err := json.Marshal(n); err == nil {
			emit(b)
		}
	})
	if errors.Is(err, ErrNotParked) {
		return nil, notHeld(codeNotParked)
	}
	if err != nil && ctx.Err() != nil {
		return nil, err // the caller gave up: it reads no reply
	}
	rep := parkWire{ID: req.ID, Error: parkErrorCode(err)}
	if err == nil {
		rep.Step = &step
		if step.Result != nil {
			p.taken(req.ID)
		}
	}
	return json.Marshal(rep)
}

// serveCancel runs another replica's Cancel of a call held here.
func (p *relayedParking) serveCancel(ctx context.Context, body []byte, _ func([]byte)) ([]byte, error) {
	var req parkWire
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	err := p.local.Cancel(ctx, req.ID, req.Cause)
	if errors.Is(err, ErrNotParked) {
		return nil, notHeld(codeNotParked)
	}
	return json.Marshal(parkWire{ID: req.ID, Error: parkErrorCode(err)})
}
