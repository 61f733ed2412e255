package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/tool"
)

// supervisor owns a server's session and its lifecycle: the first start,
// the state machine (see [State]), the live connection, reconnecting when
// the session is lost, re-listing when the tools change, and the order of
// Close. What the tools are, what the server sends during a call and what
// it offers besides tools are the other parts' (see [Server]); the
// supervisor tells them when the session changes.
//
// Its lock guards the state and the live connection only, and is never
// held while another part runs: the tool set's registry watchers and the
// catalog's watchers may call back into the server.
type supervisor struct {
	set   *settings
	dial  *dialer
	tools *toolSet
	cat   *Catalog

	relist  chan struct{}   // list_changed arrived; capacity 1
	recheck chan struct{}   // the server's pins changed; capacity 1
	unwatch func()          // stops the pins watch; nil without one
	stopCtx context.Context // ends when close is called
	stop    context.CancelFunc
	done    chan struct{} // closed when run has returned

	mu          sync.Mutex
	state       State
	since       time.Time
	lastErr     error
	attempt     int
	conn        *conn  // the live connection; nil unless Ready
	protocol    string // the revision the latest live connection negotiated
	supervising bool   // run was started; it closes done
	// moved is closed and replaced at every change of state, for
	// awaitLive's waiters.
	moved chan struct{}

	closeOnce sync.Once
	closeErr  error

	// quickLosses counts, on run's goroutine, the connections in a row
	// lost because a notification stream ended soon after they were made
	// (see quickLoss).
	quickLosses int
}

// quickLoss is how soon a connection lost because the server ended its
// notification stream (2026-07-28's subscriptions/listen) counts as lost
// quickly: each such loss in a row doubles the wait before reconnecting,
// so that a server that ends every stream at once is not reconnected to
// in a loop. It is not given up on: its calls still work.
const quickLoss = 10 * time.Second

func newSupervisor(set *settings, tools *toolSet, cat *Catalog) *supervisor {
	s := &supervisor{set: set, tools: tools, cat: cat,
		relist:  make(chan struct{}, 1),
		recheck: make(chan struct{}, 1),
		done:    make(chan struct{}),
		moved:   make(chan struct{}),
		state:   Configured, since: time.Now(),
	}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	return s
}

// start makes the first connection and, on success, starts supervising.
// On failure the server is Failed with the reason recorded.
func (s *supervisor) start(ctx context.Context) error {
	cfg := s.set.cfg
	if state := s.currentState(); state != Configured {
		return fmt.Errorf("server %q: already started (%s)", cfg.Name, state)
	}
	if _, err := parseTiers(cfg); err != nil {
		err = fmt.Errorf("server %q: %w", cfg.Name, err)
		s.fail("configure", err)
		return err
	}
	if s.set.opts.Pins != nil && !s.set.opts.PinMode.Valid() {
		// As in package pins, a mode never set is not taken to mean off.
		err := fmt.Errorf("server %q: pins: no valid pin mode set (%s); want off, warn or enforce", cfg.Name, s.set.opts.PinMode)
		s.fail("configure", err)
		return err
	}
	s.watchPins()
	ctx, cancel := contextOf(ctx, s.stopCtx) // Close aborts a start in progress
	defer cancel()
	c, err := s.establish(ctx, false)
	if err != nil {
		s.stopWatchingPins()
		return err
	}
	// close calls stop before it reads supervising, so checking stopCtx
	// here, under the lock, means either close waits for run or run does
	// not start.
	s.mu.Lock()
	closed := s.stopCtx.Err() != nil
	s.supervising = !closed
	s.mu.Unlock()
	if closed {
		_ = c.close()
		return errClosed
	}
	s.set.record(audit.Event{Kind: audit.ServerStarted, Transport: string(cfg.Transport), Tools: s.tools.count(), Sandbox: s.set.sandboxText()})
	go s.run(c)
	return nil
}

// errClosed is why a start or reconnect that raced with Close gave up.
var errClosed = errors.New("server closed")

// establish connects, lists, adapts and registers, moving through
// Connecting, Initializing and Discovering to Ready, then restores the
// catalog's subscriptions and log level on the new session. On a reconnect
// (again), the server's previous tools are swapped for the new ones in one
// step. A failure leaves the server in the phase where it failed for the
// caller to move on from, except that a first start moves to Failed.
func (s *supervisor) establish(ctx context.Context, again bool) (*conn, error) {
	phase := "connect"
	fail := func(err error) (*conn, error) {
		if !again {
			s.fail(phase, err)
		}
		return nil, err
	}
	expanded, err := s.dial.expand()
	if err != nil {
		return fail(err)
	}
	s.moveTo(Connecting, nil)
	c, err := s.dial.dial(ctx, s.stopCtx, expanded, func() { s.moveTo(Initializing, nil) })
	if err != nil {
		return fail(err)
	}
	phase = "discover"
	s.moveTo(Discovering, nil)
	d, err := s.tools.discover(ctx, c)
	if err == nil {
		err = s.activate(c, d)
	}
	if err != nil {
		_ = c.close()
		return fail(err)
	}
	s.cat.restore(ctx)
	for _, sk := range d.skipped {
		s.set.logger.Warn("tool left out", "server", s.set.cfg.Name, "tool", sk.Name, "reason", sk.Reason)
	}
	for _, w := range d.warnings {
		s.set.logger.Warn(w)
	}
	return c, nil
}

// activate makes d's tools the registered ones and c the live connection,
// and moves to Ready. Close either comes first (registering then fails
// with errClosed, and the caller closes c) or finds c to close.
func (s *supervisor) activate(c *conn, d *discovery) error {
	left, err := s.tools.install(d.tools)
	if err != nil {
		return err
	}
	d.skipped = append(d.skipped, left...)
	s.tools.setReport(d.skipped, d.warnings)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == Stopped {
		return errClosed
	}
	s.conn, s.attempt, s.protocol = c, 0, c.protocol
	s.moveLocked(Ready, nil)
	return nil
}

// run watches the live connection until Close: a lost session is
// re-established (see reconnect) and a list_changed notification re-lists
// the tools. It returns when the server is closed or has failed for good,
// and closes s.done.
func (s *supervisor) run(c *conn) {
	defer close(s.done)
	for {
		select {
		case <-s.stopCtx.Done():
			return
		case <-c.lost:
			c = s.reconnect(c)
			if c == nil {
				return
			}
		case <-s.relist:
			s.tools.refresh(s.stopCtx, c)
		case <-s.recheck:
			s.tools.recheck(s.stopCtx)
		}
	}
}

// watchPins, in enforce mode, asks the pin store to report changes of
// this server's pins (or of every server's, after changes may have been
// missed) for run to check the latest listing again: on PostgreSQL an
// approval or a quarantine made by another replica, or by toolwire pins in
// another process, then holds here at once, without polling. It is called
// before the first check, so that a change made between that check and
// run's start is not lost (the signal waits in the channel). Several
// changes in a row fold into one recheck. In warn mode nothing is ever
// quarantined, so there is nothing to apply, and a recheck would only
// repeat warnings (and, between replicas listing different definitions
// of a new tool, rewrite what each has noticed, back and forth).
func (s *supervisor) watchPins() {
	if !s.tools.pinningOn() || s.set.opts.PinMode != pins.Enforce {
		return
	}
	name := s.set.cfg.Name
	stop := s.set.opts.Pins.Watch(func(c pins.Change) {
		if c.Server != "" && c.Server != name {
			return
		}
		select {
		case s.recheck <- struct{}{}:
		default:
		}
	})
	var once sync.Once
	s.mu.Lock()
	s.unwatch = func() { once.Do(stop) }
	s.mu.Unlock()
}

// stopWatchingPins ends what watchPins started; it is safe to call more
// than once, and without a watch.
func (s *supervisor) stopWatchingPins() {
	s.mu.Lock()
	stop := s.unwatch
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// onToolsChanged notes a notifications/tools/list_changed for run; several
// in a row fold into one re-listing.
func (s *supervisor) onToolsChanged(context.Context, *mcp.ToolListChangedRequest) {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}

// reconnect replaces a lost connection: Degraded, then up to MaxAttempts
// tries with capped exponential backoff and jitter, each going through
// Connecting, Initializing and Discovering again. The tools stay registered
// meanwhile (their calls fail fast as unavailable) and are swapped for the
// new listing in one step. It returns the new connection, or nil when the
// server was closed or has Failed.
func (s *supervisor) reconnect(old *conn) *conn {
	// The session may still be open when calls kept failing in its
	// transport: close it before anything else (Wait would block on it).
	cause := old.lostCause()
	_ = old.close()
	s.moveTo(Degraded, cause)
	if errors.Is(cause, errListenEnded) && time.Since(old.made) < quickLoss {
		s.quickLosses++
	} else {
		s.quickLosses = 0
	}
	name := s.set.cfg.Name
	for attempt := 1; attempt <= s.set.policy.MaxAttempts; attempt++ {
		wait := s.backoff(attempt + s.quickLosses)
		s.mu.Lock()
		s.attempt = attempt
		s.moveLocked(Reconnecting, nil)
		s.mu.Unlock()
		s.set.logger.Warn("server lost; reconnecting", "server", name, "attempt", attempt, "backoff", wait, "cause", s.set.secrets.String(cause.Error()))
		s.set.record(audit.Event{Kind: audit.ServerDegraded, Attempt: attempt, Backoff: wait, Error: cause.Error()})

		timer := time.NewTimer(wait)
		select {
		case <-s.stopCtx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		c, err := s.establish(s.stopCtx, true)
		if err == nil {
			s.set.logger.Info("server reconnected", "server", name, "attempt", attempt)
			s.set.record(audit.Event{Kind: audit.ServerReconnected, Attempt: attempt, Tools: s.tools.count(), Sandbox: s.set.sandboxText()})
			return c
		}
		if s.stopCtx.Err() != nil {
			return nil
		}
		cause = err
		if !transient(err) {
			break
		}
		s.moveTo(Reconnecting, err)
	}
	s.fail("reconnect", cause)
	return nil
}

// transient reports whether a failed attempt is worth repeating. A server
// that now lists tools the registry cannot take (no confirmer, a name
// clash), or whose tools cannot be checked against their pins, will not
// change its mind on the next try.
func transient(err error) bool {
	return !errors.Is(err, tool.ErrNeedsConfirmer) && !errors.Is(err, tool.ErrDuplicateName) && !errors.Is(err, ErrPinsUnavailable) && !needsLogin(err)
}

// backoff is the wait before the given attempt: Initial doubled per attempt,
// capped at Max, minus a random jitter of up to half.
func (s *supervisor) backoff(attempt int) time.Duration {
	p := s.set.policy
	d := p.Initial
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	return d/2 + rand.N(d/2+1)
}

// moveTo changes the state, which must be a legal move from the current one
// (see [State.CanMoveTo]); an illegal move is a bug and panics. Moving to
// the current state is a no-op.
func (s *supervisor) moveTo(next State, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moveLocked(next, err)
}

func (s *supervisor) moveLocked(next State, err error) {
	// Stopped is final: a connection attempt that raced with Close finds
	// out when it next takes the lock, and its moves are ignored.
	if s.state == next || s.state == Stopped {
		return
	}
	if !s.state.CanMoveTo(next) {
		panic(fmt.Sprintf("mcpclient: server %q: illegal move from %s to %s", s.set.cfg.Name, s.state, next))
	}
	s.set.logger.Debug("server state", "server", s.set.cfg.Name, "from", s.state.String(), "to", next.String())
	s.state, s.since = next, time.Now()
	if err != nil {
		s.lastErr = s.set.masked(err)
	}
	if next != Ready {
		s.conn = nil
	}
	close(s.moved)
	s.moved = make(chan struct{})
	if ch := s.set.opts.StateChanges; ch != nil {
		select {
		case ch <- s.statusLocked():
		default:
		}
	}
}

// fail moves the server to Failed for good: its tools leave the registry
// first, so that whoever sees the state sees them gone, and the reason is
// kept. phase says what it was doing.
func (s *supervisor) fail(phase string, err error) {
	// With no lock held: the registry's watchers and the catalog's may
	// call back into the server.
	s.tools.withdraw()
	s.mu.Lock()
	if s.state.Terminal() {
		s.mu.Unlock()
		return
	}
	s.moveLocked(Failed, err)
	s.mu.Unlock()
	s.cat.changed() // its resources and prompts go too
	s.set.record(audit.Event{Kind: audit.ServerFailed, Reason: phase, Error: err.Error()})
}

// live returns the live connection, or an error wrapping
// [tool.ErrUnavailable] that says why there is none.
func (s *supervisor) live() (*conn, error) {
	s.mu.Lock()
	c, state, lastErr, attempt := s.conn, s.state, s.lastErr, s.attempt
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	msg := fmt.Sprintf("server %q is %s", s.set.cfg.Name, state)
	if state == Reconnecting || state == Connecting || state == Initializing || state == Discovering {
		msg += fmt.Sprintf(" (attempt %d of %d); retry shortly", attempt, s.set.policy.MaxAttempts)
	}
	if lastErr != nil {
		msg += "; last error: " + lastErr.Error()
	}
	return nil, &maskedError{msg: s.set.secrets.String(msg), err: tool.ErrUnavailable}
}

// awaitLive waits until the server has a live connection other than old
// (the one a call just lost), and returns it. It gives up, with the error
// live would give, when the server fails for good or is closed, and with
// ctx's error when ctx ends first.
func (s *supervisor) awaitLive(ctx context.Context, old *conn) (*conn, error) {
	for {
		s.mu.Lock()
		c, state, moved := s.conn, s.state, s.moved
		s.mu.Unlock()
		if c != nil && c != old {
			return c, nil
		}
		if state.Terminal() {
			return s.live()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-moved:
		}
	}
}

// current returns the live connection while the server is Ready, or nil.
func (s *supervisor) current() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

func (s *supervisor) currentState() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *supervisor) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

// statusLocked reads the tool set's count under s.mu: the tool set's lock
// is a leaf, taken after s.mu and never held while calling out.
func (s *supervisor) statusLocked() Status {
	cfg := s.set.cfg
	st := Status{Name: cfg.Name, Transport: cfg.Transport, State: s.state, Since: s.since, Tools: s.tools.count(), Attempt: s.attempt, Protocol: s.protocol, Sandbox: s.set.confined}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	if s.conn != nil {
		st.PID = s.conn.PID()
	}
	return st
}

// close stops supervising, deregisters the tools and ends the session, in
// that order (see [Server.Close]).
func (s *supervisor) close() error {
	s.closeOnce.Do(func() {
		if live := s.current(); live != nil {
			// Before stop, which ends an SSE connection's event stream.
			live.cancels.flush(live.lost)
		}
		s.stop()
		s.mu.Lock()
		supervising := s.supervising
		s.mu.Unlock()
		if supervising {
			<-s.done
		}
		s.stopWatchingPins()
		// The tool set refuses registrations from now on, so a start
		// racing with Close leaves nothing behind. Watchers run here and
		// below with no lock held.
		s.tools.close()
		s.mu.Lock()
		c := s.conn
		s.moveLocked(Stopped, nil)
		s.mu.Unlock()
		s.cat.changed()
		if c != nil {
			s.closeErr = c.close()
		}
		s.set.record(audit.Event{Kind: audit.ServerStopped})
	})
	return s.closeErr
}

// codeRejected is the code go-sdk gives its "rejected by transport" error
// (jsonrpc2.ErrRejected, not exported): a request the transport could not
// deliver, such as an HTTP POST answered with 503. It has the type of an
// error response but is the transport's failure.
const codeRejected = -32005

// isWireError reports whether err is an error response the server sent,
// which says nothing about the health of the transport.
func isWireError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code != codeRejected
}

// contextOf returns a context that ends when either a or b does.
func contextOf(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
