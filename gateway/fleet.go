package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// A gateway that is one replica of a fleet (several "toolwire serve
// --http" behind a load balancer that does not keep a client on one
// replica) keeps what a client's next request may need on another
// replica in a store they share, through three seams:
//
//   - [SessionStore] ([HTTPOptions].Sessions): what a 2025 session is, so
//     that any replica serves its requests, rebuilding the session from
//     its record when it holds no copy, and a replica's loss does not
//     end it;
//   - [CallLimiter] ([HTTPOptions].CallLimiter): each caller's call rate,
//     one bucket for the fleet;
//   - [Relay] ([Options].Relay): a retry answering a 2026-07-28 call
//     parked on another replica, and an approval page held by another
//     replica, passed to the replica that holds it.
//
// Each has an implementation on PostgreSQL in package store (wired by
// package workspace); without them a gateway keeps all of it in its own
// memory, as one process serving every request does.

// SessionRecord is what a 2025 session is, as a [SessionStore] keeps it.
type SessionRecord struct {
	ID string
	// Caller is the limits' key of the caller, Subject the authenticated
	// subject ("" without one).
	Caller, Subject string
	// Credential and Role are what the session is bound to (see
	// [Gateway.Handler]): a request of the session must show the same.
	Credential, Role string
	// Protocol is the negotiated protocol version.
	Protocol string
	// Capabilities and ClientInfo are the client's, from its initialize
	// request, as JSON.
	Capabilities, ClientInfo json.RawMessage
	// LogLevel is what the client set with logging/setLevel ("" before).
	LogLevel string
	// Subscriptions are the served resource URIs the client subscribed to.
	Subscriptions []string
	// Revision is the store's: it grows with every Put and Update.
	Revision int64
}

// ErrSessionNotFound is what a [SessionStore] returns, wrapped, for a
// session it does not have (never put, deleted, or expired).
var ErrSessionNotFound = errors.New("session not found")

// SessionStore keeps the records of 2025 sessions where every replica of
// a fleet finds them. Implementations are safe for concurrent use, and
// their errors for a missing session wrap [ErrSessionNotFound].
type SessionStore interface {
	// Put stores rec (a session that just initialized) with an idle
	// timeout (0: none).
	Put(ctx context.Context, rec *SessionRecord, idle time.Duration) error
	// Get returns session id.
	Get(ctx context.Context, id string) (*SessionRecord, error)
	// Update changes session id under its lock and returns its new
	// revision.
	Update(ctx context.Context, id string, change func(*SessionRecord)) (int64, error)
	// Touch records a request of session id now, restarting its idle
	// timeout, and returns its revision.
	Touch(ctx context.Context, id string, idle time.Duration) (int64, error)
	// Delete removes session id and tells every replica's WatchDeleted.
	Delete(ctx context.Context, id string) error
	// WatchDeleted calls fn with the id of each session deleted by any
	// replica, or "" when some may have been missed, until stop. fn must
	// not block.
	WatchDeleted(fn func(id string)) (stop func())
}

// CallLimiter takes a call from a caller's token bucket for the whole
// fleet: it refills at perSecond calls a second and holds burst. An
// error (the store is unreachable) refuses the call: failing closed.
type CallLimiter interface {
	Allow(ctx context.Context, caller string, perSecond float64, burst int) (bool, error)
}

// Relay connects the replicas of a fleet for what one holds and a
// client's request to another is about: a parked 2026-07-28 call that
// asked its client something (kind "call", key the SHA-256 of what it is
// parked under: an HMAC of its id, caller and tool) and an approval
// page of URL-mode elicitation (kind "page", key the SHA-256 of its
// token). Implementations are safe for concurrent use.
type Relay interface {
	// Instance names this replica as Holder names holders.
	Instance() string
	// Hold records that this replica holds key of kind, for ttl or until
	// release.
	Hold(ctx context.Context, kind, key string, ttl time.Duration) (release func(), err error)
	// Holder returns the replica holding key of kind, or "" when none
	// does. A holder that is gone is an error whose ReplicaLost method
	// reports true.
	Holder(ctx context.Context, kind, key string) (string, error)
	// Call sends body to method on replica and returns its reply,
	// passing what the replica's handler emits meanwhile to event, in
	// order. A replica lost before it replies is an error whose
	// ReplicaLost method reports true; when ctx ends the handler's
	// context is cancelled and Call returns ctx's error.
	Call(ctx context.Context, replica, method string, body []byte, event func([]byte)) ([]byte, error)
	// Handle serves method for the other replicas until stop. Several
	// gateways may register one method on one Relay: a request goes to
	// each in turn until one returns anything but an error whose
	// NotHandled method reports true; stop removes only its own.
	Handle(method string, fn func(ctx context.Context, body []byte, emit func([]byte)) ([]byte, error)) (stop func())
}

// replicaLost reports whether err says that the replica a request went
// to is gone.
func replicaLost(err error) bool {
	var l interface{ ReplicaLost() bool }
	return errors.As(err, &l) && l.ReplicaLost()
}

// Close stops what the gateway registered on its [Relay] (its handlers of
// the other replicas' requests about its parked calls); another gateway
// on the same relay goes on serving its own. The [Handler]'s Close stops
// the handler's. Close is safe to call more than once; a gateway without
// a relay has nothing to stop.
func (g *Gateway) Close() {
	if p, ok := g.parking.(*relayedParking); ok {
		p.close()
	}
}

// InstanceHeader names, on every response of a gateway that is a replica
// of a fleet (it has a [Relay]), the replica that answered: its instance
// as [Relay.Instance] says, the id the store's audit rows carry
// (toolwire.audit_events.instance), so that an operator can follow a
// session or a call across the replicas.
const InstanceHeader = "Toolwire-Instance"
