package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/tool"
)

// db is what the approvals' statements run on: the pool, or the
// transaction of a decision that also grants.
type db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// approvalTable keeps the lasting approvals and denials in
// toolwire.approvals, whose times are the database's: replicas whose
// clocks disagree agree on what has expired.
type approvalTable struct {
	db db
}

var _ approval.Grants = (*approvalTable)(nil)

func (t *approvalTable) Approved(ctx context.Context, key tool.ApprovalKey) (string, error) {
	g, ok, err := t.find(ctx, key, false)
	if !ok {
		return "", err
	}
	return g.ID, nil
}

func (t *approvalTable) Denied(ctx context.Context, key tool.ApprovalKey) (approval.Grant, bool, error) {
	return t.find(ctx, key, true)
}

// find returns the oldest unexpired approval (or denial) that covers key,
// with the rule of [approval.Grant.Covers].
func (t *approvalTable) find(ctx context.Context, key tool.ApprovalKey, deny bool) (approval.Grant, bool, error) {
	g := approval.Grant{Key: key, Deny: deny}
	err := t.db.QueryRow(ctx, `
SELECT id, scope, args_hash, session, reason, created_at, expires_at FROM toolwire.approvals
 WHERE caller = $1 AND tool = $2 AND definition = $3 AND policy = $4 AND deny = $5 AND expires_at > now()
   AND (scope = 'tool' OR (scope = 'args' AND args_hash = $6) OR (scope = 'session' AND session <> '' AND session = $7))
 ORDER BY created_at, id LIMIT 1`,
		key.Caller, key.Tool, key.Definition, key.Policy, deny, key.Args, approval.SessionFrom(ctx)).
		Scan(&g.ID, &g.Scope, &g.Key.Args, &g.Session, &g.Reason, &g.Created, &g.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return approval.Grant{}, false, nil
	}
	if err != nil {
		return approval.Grant{}, false, fmt.Errorf("store: find approval of %q: %w", key.Tool, err)
	}
	return g, true, nil
}

func (t *approvalTable) Grant(ctx context.Context, scope approval.Scope, key tool.ApprovalKey, ttl time.Duration) (approval.Grant, error) {
	g, err := approval.NewGrant(ctx, scope, key, time.Now(), ttl)
	if err != nil {
		return approval.Grant{}, err
	}
	return t.add(ctx, g, ttl)
}

func (t *approvalTable) Deny(ctx context.Context, scope approval.Scope, key tool.ApprovalKey, ttl time.Duration, reason string) (approval.Grant, error) {
	g, err := approval.NewGrant(ctx, scope, key, time.Now(), ttl)
	if err != nil {
		return approval.Grant{}, err
	}
	g.Deny, g.Reason = true, reason
	return t.add(ctx, g, ttl)
}

// add inserts g, created now by the database's clock and lasting ttl.
func (t *approvalTable) add(ctx context.Context, g approval.Grant, ttl time.Duration) (approval.Grant, error) {
	k := g.Key
	err := t.db.QueryRow(ctx, `
INSERT INTO toolwire.approvals (id, scope, caller, tool, definition, args_hash, policy, session, deny, reason, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now(), now() + $11::interval)
RETURNING created_at, expires_at`,
		g.ID, g.Scope, k.Caller, k.Tool, k.Definition, k.Args, k.Policy, g.Session, g.Deny, g.Reason, ttl).Scan(&g.Created, &g.Expires)
	if err != nil {
		return approval.Grant{}, fmt.Errorf("store: keep approval of %q: %w", k.Tool, err)
	}
	return g, nil
}

// List returns the unexpired approvals and denials, oldest first. db must
// be able to query many rows: it is the pool.
func (t *approvalTable) List(ctx context.Context) ([]approval.Grant, error) {
	pool, ok := t.db.(*pgxpool.Pool)
	if !ok {
		return nil, errors.New("store: list approvals inside a transaction")
	}
	rows, err := pool.Query(ctx, `
SELECT id, scope, caller, tool, definition, args_hash, policy, session, deny, reason, created_at, expires_at
  FROM toolwire.approvals WHERE expires_at > now() ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	defer rows.Close()
	var out []approval.Grant
	for rows.Next() {
		var g approval.Grant
		k := &g.Key
		if err := rows.Scan(&g.ID, &g.Scope, &k.Caller, &k.Tool, &k.Definition, &k.Args, &k.Policy, &g.Session, &g.Deny, &g.Reason, &g.Created, &g.Expires); err != nil {
			return nil, fmt.Errorf("store: list approvals: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	return out, nil
}

func (t *approvalTable) Revoke(ctx context.Context, id string) error {
	tag, err := t.db.Exec(ctx, "DELETE FROM toolwire.approvals WHERE id = $1 AND expires_at > now()", id)
	if err != nil {
		return fmt.Errorf("store: revoke approval %q: %w", id, err)
	}
	// The expired are dropped here too, as the files drop them on change.
	_, _ = t.db.Exec(ctx, "DELETE FROM toolwire.approvals WHERE expires_at <= now()")
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("approval %q: %w", id, approval.ErrNotFound)
	}
	return nil
}

func (t *approvalTable) EndSession(ctx context.Context, session string) error {
	if session == "" {
		return nil
	}
	if _, err := t.db.Exec(ctx, "DELETE FROM toolwire.approvals WHERE scope = 'session' AND session = $1", session); err != nil {
		return fmt.Errorf("store: end the approvals of a session: %w", err)
	}
	return nil
}

// requestTable is the [approval.Queue] of a fleet: the requests in
// toolwire.approval_requests, each change announced on toolwire_approvals
// in its own transaction, so that the replica holding a call learns of a
// decision taken on any other at once. Deadlines are the database's.
type requestTable struct {
	pool     *pgxpool.Pool
	listener *listener
	instance *atomic.Int32 // the store's: a new id once it claims again after being taken for lost
	// poll bounds a wait between two reads of a request: notifications
	// are the way a waiter learns, this the way it cannot miss one.
	poll time.Duration
}

var _ approval.Queue = (*requestTable)(nil)

// requestKeep is how long a request with an outcome stays to be read
// (by Get, by an operator who decided too late).
const requestKeep = 10 * time.Minute

const requestColumns = "body, state, decision, created_at, deadline, closed_at, clock_timestamp()"

// scanRequest reads a row of requestColumns, and the database's time.
func scanRequest(row pgx.Row) (approval.Request, time.Time, error) {
	var (
		body     string
		state    string
		decision *string
		r        approval.Request
		closed   *time.Time
		now      time.Time
	)
	var created, deadline time.Time
	if err := row.Scan(&body, &state, &decision, &created, &deadline, &closed, &now); err != nil {
		return approval.Request{}, now, err
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return approval.Request{}, now, fmt.Errorf("corrupt request: %w", err)
	}
	r.State, r.Created, r.Deadline, r.Decision, r.Closed = approval.State(state), created, deadline, nil, time.Time{}
	if closed != nil {
		r.Closed = *closed
	}
	if decision != nil {
		var d approval.Decision
		if err := json.Unmarshal([]byte(*decision), &d); err != nil {
			return approval.Request{}, now, fmt.Errorf("corrupt decision: %w", err)
		}
		r.Decision = &d
	}
	return r, now, nil
}

func (t *requestTable) Submit(ctx context.Context, r approval.Request) (approval.Request, error) {
	local := time.Now()
	r, err := approval.Prepare(r, local)
	if err != nil {
		return approval.Request{}, err
	}
	if r.Instance == "" {
		r.Instance = strconv.Itoa(int(t.instance.Load()))
	}
	wait := r.Deadline.Sub(local)
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return approval.Request{}, fmt.Errorf("store: submit approval request: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Done with, a while ago: dropped.
	if _, err := tx.Exec(ctx, "DELETE FROM toolwire.approval_requests WHERE coalesce(closed_at, deadline) < clock_timestamp() - $1::interval", requestKeep); err != nil {
		return approval.Request{}, fmt.Errorf("store: submit approval request: %w", err)
	}
	if err := tx.QueryRow(ctx, "SELECT clock_timestamp(), clock_timestamp() + $1::interval", wait).Scan(&r.Created, &r.Deadline); err != nil {
		return approval.Request{}, fmt.Errorf("store: submit approval request: %w", err)
	}
	body, err := approval.Encode(r)
	if err != nil {
		return approval.Request{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO toolwire.approval_requests (id, body, state, created_at, deadline) VALUES ($1, $2, 'pending', $3, $4)`,
		r.ID, string(body), r.Created, r.Deadline); err != nil {
		return approval.Request{}, fmt.Errorf("store: submit approval request: %w", err)
	}
	if err := t.commit(ctx, tx, r.ID); err != nil {
		return approval.Request{}, fmt.Errorf("store: submit approval request: %w", err)
	}
	return r, nil
}

// commit announces the change of request id and commits tx: the
// notification is delivered with the commit, never before.
func (t *requestTable) commit(ctx context.Context, tx pgx.Tx, id string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", approvalsChannel, id); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (t *requestTable) get(ctx context.Context, id string) (approval.Request, time.Time, error) {
	r, now, err := scanRequest(t.pool.QueryRow(ctx, "SELECT "+requestColumns+" FROM toolwire.approval_requests WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return approval.Request{}, now, fmt.Errorf("approval %q: %w", id, approval.ErrNotFound)
	}
	if err != nil {
		return approval.Request{}, now, fmt.Errorf("store: approval request %q: %w", id, err)
	}
	return r, now, nil
}

func (t *requestTable) Get(ctx context.Context, id string) (approval.Request, error) {
	r, _, err := t.get(ctx, id)
	return r, err
}

func (t *requestTable) Pending(ctx context.Context) ([]approval.Request, error) {
	rows, err := t.pool.Query(ctx, "SELECT "+requestColumns+" FROM toolwire.approval_requests WHERE state = 'pending' AND deadline > clock_timestamp() ORDER BY created_at, id")
	if err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	defer rows.Close()
	var out []approval.Request
	for rows.Next() {
		r, _, err := scanRequest(rows)
		if err != nil {
			return nil, fmt.Errorf("store: pending approvals: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: pending approvals: %w", err)
	}
	return out, nil
}

func (t *requestTable) Decide(ctx context.Context, id string, d approval.Decision) (approval.Decision, error) {
	if err := d.Check(); err != nil {
		return approval.Decision{}, err
	}
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return approval.Decision{}, fmt.Errorf("store: decide approval %q: %w", id, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	r, now, err := scanRequest(tx.QueryRow(ctx, "SELECT "+requestColumns+" FROM toolwire.approval_requests WHERE id = $1 FOR UPDATE", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return approval.Decision{}, fmt.Errorf("approval %q: %w", id, approval.ErrNotFound)
	}
	if err != nil {
		return approval.Decision{}, fmt.Errorf("store: decide approval %q: %w", id, err)
	}
	changed, terr := approval.Transition(&r, &d, now)
	if terr == nil {
		// The lasting approval is granted in the same transaction: both
		// are kept, or neither.
		if err := approval.GrantFor(ctx, &approvalTable{db: tx}, r, r.Decision); err != nil {
			return approval.Decision{}, err
		}
	}
	if changed {
		var decision any
		if r.Decision != nil {
			raw, _ := json.Marshal(r.Decision)
			decision = string(raw)
		}
		if _, err := tx.Exec(ctx, "UPDATE toolwire.approval_requests SET state = $2, decision = $3, closed_at = $4 WHERE id = $1",
			id, string(r.State), decision, r.Closed); err != nil {
			return approval.Decision{}, fmt.Errorf("store: decide approval %q: %w", id, err)
		}
		if err := t.commit(ctx, tx, id); err != nil {
			return approval.Decision{}, fmt.Errorf("store: decide approval %q: %w", id, err)
		}
	}
	if terr != nil {
		return approval.Decision{}, terr
	}
	return *r.Decision, nil
}

func (t *requestTable) Withdraw(ctx context.Context, id string) error {
	return t.close(ctx, id, "UPDATE toolwire.approval_requests SET state = 'withdrawn', closed_at = clock_timestamp() WHERE id = $1 AND state = 'pending'")
}

// expire gives request id its outcome at its deadline, if it is still
// waiting then (by the database's clock): the row's lock orders it with a
// decision, so the two cannot both happen.
func (t *requestTable) expire(ctx context.Context, id string) error {
	return t.close(ctx, id, "UPDATE toolwire.approval_requests SET state = 'expired', closed_at = clock_timestamp() WHERE id = $1 AND state = 'pending' AND deadline <= clock_timestamp()")
}

func (t *requestTable) close(ctx context.Context, id, update string) error {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: approval request %q: %w", id, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	tag, err := tx.Exec(ctx, update, id)
	if err != nil {
		return fmt.Errorf("store: approval request %q: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	if err := t.commit(ctx, tx, id); err != nil {
		return fmt.Errorf("store: approval request %q: %w", id, err)
	}
	return nil
}

func (t *requestTable) Wait(ctx context.Context, id string) (approval.Decision, error) {
	wake := make(chan struct{}, 1)
	stop := t.listener.watch(approvalsChannel, func(payload string) {
		if payload == id || payload == "" { // "": reconnected, notifications may be lost
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	for {
		r, now, err := t.get(ctx, id)
		if err != nil {
			return approval.Decision{}, err
		}
		if d, err, ok := r.Outcome(); ok {
			return d, err
		}
		left := r.Deadline.Sub(now)
		if left <= 0 {
			if err := t.expire(ctx, id); err != nil {
				return approval.Decision{}, err
			}
			continue
		}
		timer := time.NewTimer(min(left, t.poll))
		select {
		case <-ctx.Done():
			timer.Stop()
			return approval.Decision{}, ctx.Err()
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (t *requestTable) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	var mu sync.Mutex
	closed := false
	stop := t.listener.watch(approvalsChannel, func(string) {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			select {
			case out <- struct{}{}:
			default:
			}
		}
	})
	context.AfterFunc(ctx, func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		close(out)
	})
	return out
}
