package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/audit"
)

// allStates lists every lifecycle state, in declaration order.
var allStates = []State{Configured, Connecting, Initializing, Discovering, Ready, Degraded, Reconnecting, Failed, Stopped}

// legalMoves is the lifecycle as documented on [State], written out here
// rather than read from the code's table, so that a change to either shows.
var legalMoves = map[State][]State{
	// A first start begins; a bad configuration fails before connecting.
	Configured: {Connecting, Failed, Stopped},
	// Each phase of a connection moves on, fails (first start) or goes back
	// to waiting out the backoff (a reconnect attempt that failed).
	Connecting:   {Initializing, Reconnecting, Failed, Stopped},
	Initializing: {Discovering, Reconnecting, Failed, Stopped},
	Discovering:  {Ready, Reconnecting, Failed, Stopped},
	// A ready server can only lose its session or be closed.
	Ready:        {Degraded, Stopped},
	Degraded:     {Reconnecting, Failed, Stopped},
	Reconnecting: {Connecting, Failed, Stopped},
	Failed:       {Stopped},
	Stopped:      nil,
}

func legal(from, to State) bool { return slices.Contains(legalMoves[from], to) }

func TestStateTable(t *testing.T) {
	t.Parallel()
	if len(legalMoves) != len(allStates) {
		t.Fatalf("the test's table covers %d states, want %d", len(legalMoves), len(allStates))
	}
	for _, from := range allStates {
		for _, to := range allStates {
			if got, want := from.CanMoveTo(to), legal(from, to); got != want {
				t.Errorf("%s.CanMoveTo(%s) = %v, want %v", from, to, got, want)
			}
		}
	}
	// Out-of-range states move nowhere and nothing moves to them.
	if State(200).CanMoveTo(Stopped) || Configured.CanMoveTo(State(200)) {
		t.Error("an unknown state takes part in a legal move")
	}
}

func TestStateTerminal(t *testing.T) {
	t.Parallel()
	for _, s := range allStates {
		want := s == Failed || s == Stopped
		if got := s.Terminal(); got != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want)
		}
	}
}

func TestStateNames(t *testing.T) {
	t.Parallel()
	want := map[State]string{
		Configured: "configured", Connecting: "connecting", Initializing: "initializing",
		Discovering: "discovering", Ready: "ready", Degraded: "degraded",
		Reconnecting: "reconnecting", Failed: "failed", Stopped: "stopped",
	}
	for _, s := range allStates {
		if got := s.String(); got != want[s] {
			t.Errorf("State(%d).String() = %q, want %q", uint8(s), got, want[s])
		}
		b, err := s.MarshalText()
		if err != nil || string(b) != want[s] {
			t.Errorf("State(%d).MarshalText() = %q, %v; want %q", uint8(s), b, err, want[s])
		}
	}
	if got := State(42).String(); got != "state(42)" {
		t.Errorf("State(42).String() = %q, want state(42)", got)
	}
	// A Status encodes its state by name, as `toolwire servers --json` shows.
	b, err := json.Marshal(Status{Name: "x", State: Reconnecting})
	if err != nil || !strings.Contains(string(b), `"state":"reconnecting"`) {
		t.Errorf("Status JSON = %s, %v; want the state by name", b, err)
	}
}

// An illegal move is a bug, and the server panics naming both states.
func TestIllegalMovePanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		setup    []State // legal moves made first
		next     State
		from, to string
	}{
		{name: "configured to ready", next: Ready, from: "configured", to: "ready"},
		{name: "failed to connecting", setup: []State{Failed}, next: Connecting, from: "failed", to: "connecting"},
		{name: "ready to failed", setup: []State{Connecting, Initializing, Discovering, Ready}, next: Failed, from: "ready", to: "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(stdioConfig("demo", "demo"), confirmingRegistry(), nil)
			for _, st := range tc.setup {
				s.sup.moveTo(st, nil)
			}
			msg := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						msg = fmt.Sprint(r)
					}
				}()
				s.sup.moveTo(tc.next, nil)
				return ""
			}()
			if msg == "" {
				t.Fatalf("moveTo(%s) from %s did not panic; state is now %s", tc.next, tc.from, s.State())
			}
			want := fmt.Sprintf("illegal move from %s to %s", tc.from, tc.to)
			if !strings.Contains(msg, want) || !strings.Contains(msg, `"demo"`) {
				t.Errorf("panic message %q, want it to say %q and name the server", msg, want)
			}
			// The panic left the lock free and the state unchanged.
			if got := s.State(); got.String() != tc.from {
				t.Errorf("after the refused move the state is %s, want %s", got, tc.from)
			}
		})
	}
	// Moving to the current state is a no-op, not a panic.
	s := newServer(stdioConfig("demo", "demo"), confirmingRegistry(), nil)
	s.sup.moveTo(Configured, nil)
	if s.State() != Configured {
		t.Errorf("state %s after moving to the current state", s.State())
	}
}

// A first start announces exactly connecting, initializing, discovering and
// ready; Close announces stopped.
func TestFirstStartStateChanges(t *testing.T) {
	t.Parallel()
	changes := make(chan Status, 32)
	reg := confirmingRegistry()
	s, err := Connect(boundedCtx(t, waitTime), stdioConfig("demo", "demo"), reg, &Options{StateChanges: changes})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer s.Close()

	// Connect has returned in Ready, so every snapshot of the start has
	// been sent (the channel has room for all of them).
	got := drain(changes)
	if want := []State{Connecting, Initializing, Discovering, Ready}; !slices.Equal(statesOf(got), want) {
		t.Fatalf("snapshots %v, want %v", statesOf(got), want)
	}
	for _, st := range got {
		if st.Name != "demo" || st.Transport != "stdio" || st.Since.IsZero() {
			t.Errorf("snapshot %+v lacks the server's name, transport or time", st)
		}
	}
	ready := got[len(got)-1]
	if ready.PID != s.PID() || ready.PID <= 0 {
		t.Errorf("ready snapshot PID %d, server PID %d; want the child's pid in both", ready.PID, s.PID())
	}
	if ready.Tools != len(s.Tools()) || ready.Tools == 0 {
		t.Errorf("ready snapshot has %d tools, server %d", ready.Tools, len(s.Tools()))
	}
	for _, st := range got[:len(got)-1] {
		if st.Tools != 0 || st.PID != 0 {
			t.Errorf("%s snapshot shows %d tools and pid %d before the server is ready", st.State, st.Tools, st.PID)
		}
	}

	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got := statesOf(drain(changes)); !slices.Equal(got, []State{Stopped}) {
		t.Errorf("snapshots after Close %v, want [stopped]", got)
	}
}

// drain returns the snapshots waiting in ch without blocking.
func drain(ch <-chan Status) []Status {
	var out []Status
	for {
		select {
		case st := <-ch:
			out = append(out, st)
		default:
			return out
		}
	}
}

func statesOf(sts []Status) []State {
	out := make([]State, len(sts))
	for i, st := range sts {
		out[i] = st.State
	}
	return out
}

// awaitState reads snapshots from ch until one of the server named name
// is in want, and returns the snapshots read (of that server), the last one
// being in want. It fails the test when ctx ends first.
func awaitState(t *testing.T, ctx context.Context, ch <-chan Status, name string, want ...State) []Status {
	t.Helper()
	var seen []Status
	for {
		select {
		case st := <-ch:
			if st.Name != name {
				continue
			}
			seen = append(seen, st)
			if slices.Contains(want, st.State) {
				return seen
			}
		case <-ctx.Done():
			t.Fatalf("server %q did not reach %v: %v; snapshots seen: %v", name, want, context.Cause(ctx), statesOf(seen))
			return nil
		}
	}
}

// checkMoves fails the test for a step of seq, starting from from, that the
// lifecycle does not allow.
func checkMoves(t *testing.T, from State, seq []Status) {
	t.Helper()
	prev := from
	for _, st := range seq {
		if !legal(prev, st.State) {
			t.Errorf("snapshots go from %s to %s, which the lifecycle does not allow (sequence %v)", prev, st.State, statesOf(seq))
		}
		prev = st.State
	}
}

// auditWatch is an audit sink that keeps every event and wakes waiters on
// each one.
type auditWatch struct {
	mu     sync.Mutex
	events []audit.Event
	wake   chan struct{} // capacity 1: "something new arrived"
}

func newAuditWatch() (*auditWatch, *audit.Log) {
	w := &auditWatch{wake: make(chan struct{}, 1)}
	return w, audit.NewLog(w, nil)
}

func (w *auditWatch) Write(ev *audit.Event) error {
	w.mu.Lock()
	w.events = append(w.events, *ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

func (w *auditWatch) all() []audit.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// of returns the events of the given kind, in order.
func (w *auditWatch) of(kind audit.Kind) []audit.Event {
	var out []audit.Event
	for _, ev := range w.all() {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func kinds(evs []audit.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Kind)
	}
	return out
}

// waitFor blocks until done holds for the events so far, failing the test
// when ctx ends first.
func (w *auditWatch) waitFor(t *testing.T, ctx context.Context, what string, done func([]audit.Event) bool) []audit.Event {
	t.Helper()
	for {
		evs := w.all()
		if done(evs) {
			return evs
		}
		select {
		case <-w.wake:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; audit has %v", what, context.Cause(ctx), kinds(evs))
			return nil
		}
	}
}

// waitKind waits for the first event of kind and returns it.
func (w *auditWatch) waitKind(t *testing.T, ctx context.Context, kind audit.Kind) audit.Event {
	t.Helper()
	var found audit.Event
	w.waitFor(t, ctx, string(kind), func(evs []audit.Event) bool {
		for _, ev := range evs {
			if ev.Kind == kind {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}
