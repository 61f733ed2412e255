package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/audit"
)

// Session is what an MCP session of the 2025 protocol revisions is, kept
// in the store so that any replica can serve its requests and a replica's
// loss does not end it. (2026-07-28 requests carry what they need and
// have no session.)
type Session struct {
	// ID is the Mcp-Session-Id.
	ID string
	// Caller is the limits' key of the caller (the gateway's "subject:…"
	// or "ip:…"), Subject the authenticated subject ("" without one).
	Caller  string
	Subject string
	// Credential is the hash of the credential the session is bound to,
	// and Role the role it had when the session opened (see the gateway's
	// session binding).
	Credential string
	Role       string
	// Protocol is the negotiated protocol version.
	Protocol string
	// Capabilities and ClientInfo are the client's, from its initialize
	// request, as JSON.
	Capabilities json.RawMessage
	ClientInfo   json.RawMessage
	// LogLevel is the level the client set with logging/setLevel.
	LogLevel string
	// Subscriptions are the resource URIs the client subscribed to.
	Subscriptions []string

	// Created, LastSeen and Expires are the store's: Put sets the first
	// two (Created only for a new session), Put and Touch set Expires to
	// LastSeen plus the idle timeout they are given (zero: never).
	Created, LastSeen, Expires time.Time
	// Revision is the store's too: it grows with every Put and Update,
	// so that a replica holding a copy of the session knows, from Touch,
	// when to read it again.
	Revision int64
}

// ErrSessionNotFound is returned for a session that is not in the store,
// or has expired.
var ErrSessionNotFound = errors.New("session not found")

// Sessions keeps session records. A session expires when it has not been
// put or touched within its idle timeout; an expired session is not found.
//
// Implementations are safe for concurrent use.
type Sessions interface {
	// Put stores s under s.ID, replacing a session of that ID (whose
	// Created it keeps), and starts its idle timeout (0: none).
	Put(ctx context.Context, s *Session, idle time.Duration) error
	// Get returns the session id, or an error wrapping
	// ErrSessionNotFound.
	Get(ctx context.Context, id string) (*Session, error)
	// Update calls change with session id while holding it locked
	// against every other Update, and stores what change left; the
	// session's times and revision are not change's to set. It returns
	// the new revision. When change fails, nothing is stored and Update
	// returns its error.
	Update(ctx context.Context, id string, change func(*Session) error) (int64, error)
	// Touch records a request of session id now, restarts its idle
	// timeout (0: none) and returns its revision.
	Touch(ctx context.Context, id string, idle time.Duration) (int64, error)
	// Delete removes session id and tells every watcher, on every replica
	// ([Sessions.WatchDeleted]). Removing what is not there is not an
	// error: a DELETE may reach two replicas.
	Delete(ctx context.Context, id string) error
	// Prune removes the expired sessions and returns how many.
	Prune(ctx context.Context) (int64, error)
	// WatchDeleted calls fn with the id of each session deleted, by any
	// replica, until stop is called; with "" when deletions may have been
	// missed (the database connection that listens was lost), so that
	// every copy is checked again. fn must not block.
	WatchDeleted(fn func(id string)) (stop func())
}

func checkSession(s *Session) error {
	switch {
	case s == nil:
		return errors.New("store: session: nil")
	case s.ID == "":
		return errors.New("store: session: empty ID")
	case s.Protocol == "":
		return fmt.Errorf("store: session %q: empty Protocol (the negotiated protocol version)", s.ID)
	}
	for _, raw := range []json.RawMessage{s.Capabilities, s.ClientInfo} {
		if len(raw) > 0 && !json.Valid(raw) {
			return fmt.Errorf("store: session %q: capabilities or client info are not JSON", s.ID)
		}
	}
	return nil
}

// memorySessions keeps sessions in this process, for the files store.
type memorySessions struct {
	mu       sync.Mutex
	m        map[string]*Session
	now      func() time.Time
	next     int
	watchers map[int]func(string)
}

func newMemorySessions() *memorySessions {
	return &memorySessions{m: map[string]*Session{}, now: time.Now, watchers: map[int]func(string){}}
}

func clone(s *Session) *Session {
	c := *s
	c.Capabilities = slices.Clone(s.Capabilities)
	c.ClientInfo = slices.Clone(s.ClientInfo)
	c.Subscriptions = slices.Clone(s.Subscriptions)
	return &c
}

func expiry(now time.Time, idle time.Duration) time.Time {
	if idle <= 0 {
		return time.Time{}
	}
	return now.Add(idle)
}

// live returns session id unless it is missing or expired at now.
func (m *memorySessions) live(id string, now time.Time) *Session {
	s := m.m[id]
	if s == nil || (!s.Expires.IsZero() && !now.Before(s.Expires)) {
		return nil
	}
	return s
}

func (m *memorySessions) Put(_ context.Context, s *Session, idle time.Duration) error {
	if err := checkSession(s); err != nil {
		return err
	}
	now := m.now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	c := clone(s)
	c.Created, c.LastSeen, c.Expires, c.Revision = now, now, expiry(now, idle), 1
	if old := m.m[s.ID]; old != nil {
		c.Revision = old.Revision + 1
		if m.live(s.ID, now) != nil {
			c.Created = old.Created
		}
	}
	m.m[s.ID] = c
	return nil
}

func (m *memorySessions) Get(_ context.Context, id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.live(id, m.now())
	if s == nil {
		return nil, fmt.Errorf("store: session %q: %w", id, ErrSessionNotFound)
	}
	return clone(s), nil
}

func (m *memorySessions) Update(_ context.Context, id string, change func(*Session) error) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.live(id, m.now())
	if s == nil {
		return 0, fmt.Errorf("store: session %q: %w", id, ErrSessionNotFound)
	}
	c := clone(s)
	if err := change(c); err != nil {
		return 0, err
	}
	c.ID, c.Created, c.LastSeen, c.Expires, c.Revision = s.ID, s.Created, s.LastSeen, s.Expires, s.Revision+1
	if err := checkSession(c); err != nil {
		return 0, err
	}
	m.m[id] = c
	return c.Revision, nil
}

func (m *memorySessions) Touch(_ context.Context, id string, idle time.Duration) (int64, error) {
	now := m.now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.live(id, now)
	if s == nil {
		return 0, fmt.Errorf("store: session %q: %w", id, ErrSessionNotFound)
	}
	s.LastSeen, s.Expires = now, expiry(now, idle)
	return s.Revision, nil
}

func (m *memorySessions) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	_, had := m.m[id]
	delete(m.m, id)
	var ws []func(string)
	if had {
		for _, w := range m.watchers {
			ws = append(ws, w)
		}
	}
	m.mu.Unlock()
	for _, w := range ws {
		w(id)
	}
	return nil
}

func (m *memorySessions) WatchDeleted(fn func(id string)) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.next
	m.next++
	m.watchers[k] = fn
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers, k)
	}
}

func (m *memorySessions) Prune(context.Context) (int64, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for id := range m.m {
		if m.live(id, now) == nil {
			delete(m.m, id)
			n++
		}
	}
	return n, nil
}

// sessionTable keeps sessions in toolwire.sessions. Times are the
// database's, so replicas whose clocks disagree agree on expiry. A
// deletion is announced on toolwire_sessions in its own statement.
type sessionTable struct {
	pool     *pgxpool.Pool
	listener *listener
	// touches collects the touches of concurrent requests: those that
	// come while one is in flight go together in the next statement.
	touches audit.Group[*sessionTouch]
}

// sessionTouch is one Touch on its way to the table.
type sessionTouch struct {
	id   string
	idle *time.Duration // nil: no idle expiry
	rev  int64          // the answer: the session's revision, 0 when it is not there
}

// idleInterval is idle as the statements take it: NULL for none.
func idleInterval(idle time.Duration) any {
	if idle <= 0 {
		return nil
	}
	return idle
}

func (t *sessionTable) Put(ctx context.Context, s *Session, idle time.Duration) error {
	if err := checkSession(s); err != nil {
		return err
	}
	_, err := t.pool.Exec(ctx, `
INSERT INTO toolwire.sessions AS s (id, caller, subject, credential, role, protocol, capabilities, client_info,
	log_level, subscriptions, created_at, last_seen, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now(), now(), now() + $11::interval)
ON CONFLICT (id) DO UPDATE SET caller = $2, subject = $3, credential = $4, role = $5, protocol = $6,
	capabilities = $7, client_info = $8, log_level = $9, subscriptions = $10, revision = s.revision + 1,
	-- an expired session of the same id is a new one
	created_at = CASE WHEN s.expires_at IS NULL OR s.expires_at > now() THEN s.created_at ELSE now() END,
	last_seen = now(), expires_at = now() + $11::interval`,
		s.ID, s.Caller, s.Subject, s.Credential, s.Role, s.Protocol, jsonArg(s.Capabilities), jsonArg(s.ClientInfo),
		s.LogLevel, nonNil(s.Subscriptions), idleInterval(idle))
	if err != nil {
		return fmt.Errorf("store: put session %q: %w", s.ID, err)
	}
	return nil
}

// jsonArg passes raw JSON as jsonb text, or NULL when empty.
func jsonArg(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

const sessionColumns = `id, caller, subject, credential, role, protocol, capabilities::text, client_info::text,
	log_level, subscriptions, created_at, last_seen, expires_at, revision`

func scanSession(row pgx.Row) (*Session, error) {
	var (
		s          Session
		caps, info *string
		expires    *time.Time
	)
	if err := row.Scan(&s.ID, &s.Caller, &s.Subject, &s.Credential, &s.Role, &s.Protocol, &caps, &info,
		&s.LogLevel, &s.Subscriptions, &s.Created, &s.LastSeen, &expires, &s.Revision); err != nil {
		return nil, err
	}
	if caps != nil {
		s.Capabilities = json.RawMessage(*caps)
	}
	if info != nil {
		s.ClientInfo = json.RawMessage(*info)
	}
	if expires != nil {
		s.Expires = expires.UTC()
	}
	s.Created, s.LastSeen = s.Created.UTC(), s.LastSeen.UTC()
	if len(s.Subscriptions) == 0 {
		s.Subscriptions = nil
	}
	return &s, nil
}

// liveSession is the condition of a session that has not expired.
const liveSession = "(expires_at IS NULL OR expires_at > now())"

func (t *sessionTable) Get(ctx context.Context, id string) (*Session, error) {
	s, err := scanSession(t.pool.QueryRow(ctx, "SELECT "+sessionColumns+" FROM toolwire.sessions WHERE id = $1 AND "+liveSession, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: session %q: %w", id, ErrSessionNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get session %q: %w", id, err)
	}
	return s, nil
}

func (t *sessionTable) Update(ctx context.Context, id string, change func(*Session) error) (int64, error) {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	s, err := scanSession(tx.QueryRow(ctx, "SELECT "+sessionColumns+" FROM toolwire.sessions WHERE id = $1 AND "+liveSession+" FOR UPDATE", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("store: session %q: %w", id, ErrSessionNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("store: update session %q: %w", id, err)
	}
	if err := change(s); err != nil {
		return 0, err
	}
	s.ID = id
	if err := checkSession(s); err != nil {
		return 0, err
	}
	var rev int64
	err = tx.QueryRow(ctx, `UPDATE toolwire.sessions SET caller = $2, subject = $3, credential = $4, role = $5, protocol = $6,
	capabilities = $7, client_info = $8, log_level = $9, subscriptions = $10, revision = revision + 1 WHERE id = $1 RETURNING revision`,
		id, s.Caller, s.Subject, s.Credential, s.Role, s.Protocol, jsonArg(s.Capabilities), jsonArg(s.ClientInfo),
		s.LogLevel, nonNil(s.Subscriptions)).Scan(&rev)
	if err != nil {
		return 0, fmt.Errorf("store: update session %q: %w", id, err)
	}
	return rev, tx.Commit(ctx)
}

func (t *sessionTable) Touch(ctx context.Context, id string, idle time.Duration) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("store: touch session %q: %w", id, err)
	}
	tc := &sessionTouch{id: id}
	if idle > 0 {
		tc.idle = &idle
	}
	if err := t.touches.Write([]*sessionTouch{tc}, t.touch); err != nil {
		return 0, fmt.Errorf("store: touch session %q: %w", id, err)
	}
	if tc.rev == 0 {
		return 0, fmt.Errorf("store: session %q: %w", id, ErrSessionNotFound)
	}
	return tc.rev, nil
}

// touchSessions touches the live sessions among $1 (each with its idle
// timeout in $2) and returns their ids and revisions. The rows are locked
// in the order of their ids first, so that two replicas' statements never
// lock two sessions in opposite orders.
const touchSessions = `WITH want AS (
	SELECT DISTINCT ON (id) id, idle FROM unnest($1::text[], $2::interval[]) AS u(id, idle) ORDER BY id
), locked AS MATERIALIZED (
	SELECT s.id FROM toolwire.sessions s WHERE s.id IN (SELECT id FROM want) AND ` + liveSession + ` ORDER BY s.id FOR UPDATE OF s
)
UPDATE toolwire.sessions s SET last_seen = now(), expires_at = now() + w.idle
FROM locked l JOIN want w ON w.id = l.id WHERE s.id = l.id
RETURNING s.id, s.revision`

// touchTimeout bounds a statement of grouped touches, which no one
// request's context ends.
const touchTimeout = 10 * time.Second

// touch runs touches in one statement, for the group.
func (t *sessionTable) touch(touches []*sessionTouch) error {
	ctx, cancel := context.WithTimeout(context.Background(), touchTimeout)
	defer cancel()
	ids := make([]string, len(touches))
	idles := make([]*time.Duration, len(touches))
	for i, tc := range touches {
		ids[i], idles[i] = tc.id, tc.idle
	}
	rows, err := t.pool.Query(ctx, touchSessions, ids, idles)
	if err != nil {
		return err
	}
	revs := map[string]int64{}
	var (
		id  string
		rev int64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &rev}, func() error {
		revs[id] = rev
		return nil
	})
	if err != nil {
		return err
	}
	for _, tc := range touches {
		tc.rev = revs[tc.id]
	}
	return nil
}

// deleteSession deletes a session and announces it, in one statement.
const deleteSession = `WITH d AS (DELETE FROM toolwire.sessions WHERE id = $1 RETURNING id)
SELECT pg_notify('` + sessionsChannel + `', id) FROM d`

func (t *sessionTable) Delete(ctx context.Context, id string) error {
	if _, err := t.pool.Exec(ctx, deleteSession, id); err != nil {
		return fmt.Errorf("store: delete session %q: %w", id, err)
	}
	return nil
}

func (t *sessionTable) WatchDeleted(fn func(id string)) (stop func()) {
	return t.listener.watch(sessionsChannel, fn)
}

func (t *sessionTable) Prune(ctx context.Context) (int64, error) {
	tag, err := t.pool.Exec(ctx, "DELETE FROM toolwire.sessions WHERE NOT "+liveSession)
	if err != nil {
		return 0, fmt.Errorf("store: prune sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}
