package mcpclient

import (
	"fmt"
	"slices"
)

// State is where a server is in its lifecycle.
//
//	Configured → Connecting → Initializing → Discovering → Ready
//	Ready → Degraded → Reconnecting → Connecting → … → Ready
//	a bad configuration or any phase of a first start → Failed
//	backoff exhausted → Failed
//	anything → Stopped
//
// The legal moves are listed in one table ([State.CanMoveTo]); a move outside
// it is a bug, and [Server] panics rather than record a state that cannot
// be. Once Stopped, a server ignores further moves: a connection attempt
// racing with Close finds out when it next takes the lock.
type State uint8

const (
	// Configured: described, not yet started.
	Configured State = iota
	// Connecting: starting the process or opening the HTTP transport.
	Connecting
	// Initializing: the MCP handshake.
	Initializing
	// Discovering: listing and adapting tools.
	Discovering
	// Ready: tools registered, calls go through.
	Ready
	// Degraded: the session was lost; calls fail fast until reconnected.
	Degraded
	// Reconnecting: waiting out the backoff before the next attempt.
	Reconnecting
	// Failed: gave up; tools deregistered; LastError says why.
	Failed
	// Stopped: closed on purpose. Terminal.
	Stopped
)

var stateNames = [...]string{
	Configured:   "configured",
	Connecting:   "connecting",
	Initializing: "initializing",
	Discovering:  "discovering",
	Ready:        "ready",
	Degraded:     "degraded",
	Reconnecting: "reconnecting",
	Failed:       "failed",
	Stopped:      "stopped",
}

// String returns the state's lower-case name, as shown by `toolwire servers`.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// MarshalText encodes the state as its name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// transitions is the lifecycle's whole transition table.
var transitions = map[State][]State{
	Configured:   {Connecting, Failed, Stopped},
	Connecting:   {Initializing, Reconnecting, Failed, Stopped},
	Initializing: {Discovering, Reconnecting, Failed, Stopped},
	Discovering:  {Ready, Reconnecting, Failed, Stopped},
	Ready:        {Degraded, Stopped},
	Degraded:     {Reconnecting, Failed, Stopped},
	Reconnecting: {Connecting, Failed, Stopped},
	Failed:       {Stopped},
	Stopped:      {},
}

// CanMoveTo reports whether the lifecycle allows moving from s to next.
func (s State) CanMoveTo(next State) bool {
	return slices.Contains(transitions[s], next)
}

// Terminal reports whether no further work happens in this state.
func (s State) Terminal() bool { return s == Failed || s == Stopped }
