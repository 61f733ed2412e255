package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/store"
)

// A workspace on a PostgreSQL store serves its gateway as one replica of a
// fleet: [Workspace.Gateway] gives the gateway the store's relay (retries
// and approval pages passed to the replica holding them) and the fleet's
// requestState key, and [Workspace.Handler] the store's session records
// and per-caller rate buckets. On files the gateway keeps all of it in
// memory, as one process.

// stateKeyName names the fleet's requestState key in the store.
const stateKeyName = "request_state"

// fleetStateKeyWait bounds reading (or making) the fleet's requestState
// key.
const fleetStateKeyWait = 30 * time.Second

// fleetStateKey reads (or makes) the fleet's requestState key, sealed in
// the store under passphrase, for a PostgreSQL store; nil for files. When
// it cannot (no passphrase, another one than the fleet's, the database
// unreachable) it says why in the log and returns nil: the gateway then
// seals its requestStates with a key of its own process, and a retry that
// reaches another replica is refused there (it cannot open the state)
// rather than accepted on a key anyone could read.
func fleetStateKey(st *store.Store, passphrase string, logger *slog.Logger) []byte {
	if st.Kind() != store.Postgres {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetStateKeyWait)
	defer cancel()
	key, err := st.FleetKey(ctx, stateKeyName, passphrase)
	if err != nil {
		logger.Error("the fleet's requestState key: this replica seals the requestState of its parked calls with a key of its own, and a client's retry that reaches another replica is refused", "err", err)
		return nil
	}
	return key
}

// GatewaySessions returns st's session records as a gateway's
// [gateway.SessionStore] ([gateway.HTTPOptions].Sessions): what
// [Workspace.Handler] gives the gateway on a PostgreSQL store. Putting a
// session also removes the expired ones, once a minute at most.
func GatewaySessions(st *store.Store) gateway.SessionStore {
	return &gatewaySessions{s: st.Sessions()}
}

// GatewayLimiter returns st's per-caller rate buckets as a gateway's
// [gateway.CallLimiter] ([gateway.HTTPOptions].CallLimiter). Once a
// minute at most, a check also forgets the buckets that have refilled
// (a caller without one gets a full bucket): the table holds the callers
// who spent something lately, not every caller ever seen.
func GatewayLimiter(st *store.Store) gateway.CallLimiter {
	return &gatewayLimiter{l: st.Limits(), every: pruneEvery}
}

// gatewaySessions is the store's session records as the gateway's
// [gateway.SessionStore].
type gatewaySessions struct {
	s store.Sessions

	mu     sync.Mutex
	pruned time.Time
}

// pruneEvery is how often, at most, putting a session also removes the
// expired ones.
const pruneEvery = time.Minute

func toRecord(s *store.Session) *gateway.SessionRecord {
	return &gateway.SessionRecord{
		ID: s.ID, Caller: s.Caller, Subject: s.Subject, Credential: s.Credential, Role: s.Role, Protocol: s.Protocol,
		Capabilities: s.Capabilities, ClientInfo: s.ClientInfo, LogLevel: s.LogLevel, Subscriptions: s.Subscriptions,
		Revision: s.Revision,
	}
}

func fromRecord(r *gateway.SessionRecord, s *store.Session) {
	s.Caller, s.Subject, s.Credential, s.Role, s.Protocol = r.Caller, r.Subject, r.Credential, r.Role, r.Protocol
	s.Capabilities, s.ClientInfo, s.LogLevel, s.Subscriptions = r.Capabilities, r.ClientInfo, r.LogLevel, r.Subscriptions
}

// notFound makes the store's ErrSessionNotFound the gateway's.
func notFound(err error) error {
	if errors.Is(err, store.ErrSessionNotFound) {
		return fmt.Errorf("%w: %w", gateway.ErrSessionNotFound, err)
	}
	return err
}

func (g *gatewaySessions) Put(ctx context.Context, r *gateway.SessionRecord, idle time.Duration) error {
	s := &store.Session{ID: r.ID}
	fromRecord(r, s)
	if err := g.s.Put(ctx, s, idle); err != nil {
		return err
	}
	g.mu.Lock()
	prune := time.Since(g.pruned) >= pruneEvery
	if prune {
		g.pruned = time.Now()
	}
	g.mu.Unlock()
	if prune {
		_, _ = g.s.Prune(ctx) // what fails now is pruned by a later put
	}
	return nil
}

func (g *gatewaySessions) Get(ctx context.Context, id string) (*gateway.SessionRecord, error) {
	s, err := g.s.Get(ctx, id)
	if err != nil {
		return nil, notFound(err)
	}
	return toRecord(s), nil
}

func (g *gatewaySessions) Update(ctx context.Context, id string, change func(*gateway.SessionRecord)) (int64, error) {
	rev, err := g.s.Update(ctx, id, func(s *store.Session) error {
		r := toRecord(s)
		change(r)
		fromRecord(r, s)
		return nil
	})
	return rev, notFound(err)
}

func (g *gatewaySessions) Touch(ctx context.Context, id string, idle time.Duration) (int64, error) {
	rev, err := g.s.Touch(ctx, id, idle)
	return rev, notFound(err)
}

func (g *gatewaySessions) Delete(ctx context.Context, id string) error { return g.s.Delete(ctx, id) }

func (g *gatewaySessions) WatchDeleted(fn func(id string)) (stop func()) { return g.s.WatchDeleted(fn) }

// gatewayLimiter is the store's rate buckets as the gateway's
// [gateway.CallLimiter].
type gatewayLimiter struct {
	l     store.Limiter
	every time.Duration // between prunes

	mu     sync.Mutex
	pruned time.Time
}

func (g *gatewayLimiter) Allow(ctx context.Context, caller string, perSecond float64, burst int) (bool, error) {
	r := store.Rate{PerSecond: perSecond, Burst: burst}
	ok, err := g.l.Allow(ctx, caller, r)
	if err != nil {
		return ok, err
	}
	g.mu.Lock()
	prune := time.Since(g.pruned) >= g.every
	if prune {
		g.pruned = time.Now()
	}
	g.mu.Unlock()
	if prune {
		// With the rate of this check: the configuration's, the same for
		// every caller. What fails now is pruned by a later check.
		_, _ = g.l.Prune(ctx, r)
	}
	return ok, nil
}

// storeReady bounds the readiness check's query to the store.
const storeReady = 2 * time.Second

// claimed refuses every tools/call while st holds no claim in the fleet
// ([store.Store.Claim]): its connection that holds the instance's lock is
// down (another replica may take it for lost once the claim's grace has
// passed, and give its open calls their outcome). Refused, the client
// calls again, on another replica. A call it takes runs under its claim
// ([store.Store.Claimed]): if the replica learns that another took it for
// lost meanwhile (and recorded the call as lost), the call is cancelled;
// the replica goes on under a new claim. Everything else is served as
// before.
func claimed(st *store.Store) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			if err := st.Claim(); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "this gateway replica cannot take calls now: " + err.Error() + "; call again (another replica may take it)"}
			}
			ctx, stop := st.Claimed(ctx)
			defer stop()
			return next(ctx, method, req)
		}
	}
}
