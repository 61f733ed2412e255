package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/oauth"
)

// tokenTable is the OAuth store's [oauth.Records] on PostgreSQL:
// toolwire.oauth_tokens, one sealed record per server. The oauth package
// seals and opens the records; the table sees ciphertext only.
type tokenTable struct {
	pool  *pgxpool.Pool
	where string
}

var _ oauth.Records = (*tokenTable)(nil)

func (t *tokenTable) String() string { return t.where }

func (t *tokenTable) Get(ctx context.Context, server string) ([]byte, error) {
	var rec []byte
	err := t.pool.QueryRow(ctx, "SELECT record FROM toolwire.oauth_tokens WHERE server = $1", server).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return rec, err
}

func (t *tokenTable) List(ctx context.Context) (map[string][]byte, error) {
	rows, err := t.pool.Query(ctx, "SELECT server, record FROM toolwire.oauth_tokens")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var server string
		var rec []byte
		if err := rows.Scan(&server, &rec); err != nil {
			return nil, err
		}
		out[server] = rec
	}
	return out, rows.Err()
}

// Update changes server's record under the server's lease (a row of
// toolwire.token_leases, until an expiry by the database's clock): a
// replica that wants to refresh the same server waits for the lease, then
// finds the rotated token in the record and uses it, so a refresh token
// is redeemed once across the fleet. While change runs (a refresh asks
// the authorization server, for up to its timeout), Update holds neither
// a transaction nor a connection of the pool: slow refreshes do not
// starve the audit, the sessions and the rate checks. The record is
// written only while the lease is still this Update's; a change that
// outlived its lease (tokenLease) is refused, and nothing is stored.
func (t *tokenTable) Update(ctx context.Context, server string, change func([]byte) ([]byte, error)) error {
	holder := rand.Text()
	if err := t.lease(ctx, server, holder); err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = t.pool.Exec(rctx, "DELETE FROM toolwire.token_leases WHERE server = $1 AND holder = $2", server, holder)
	}()
	old, err := t.Get(ctx, server)
	if err != nil {
		return err
	}
	rec, err := change(old)
	if err != nil {
		return err
	}
	var tag pgconn.CommandTag
	switch {
	case rec == nil && old == nil, bytes.Equal(rec, old) && rec != nil:
		return nil
	case rec == nil:
		tag, err = t.pool.Exec(ctx, `DELETE FROM toolwire.oauth_tokens WHERE server = $1
	AND EXISTS (SELECT 1 FROM toolwire.token_leases WHERE server = $1 AND holder = $2 AND expires_at > now())`, server, holder)
		if err == nil && tag.RowsAffected() == 0 && old != nil {
			err = errLeaseLost
		}
	default:
		tag, err = t.pool.Exec(ctx, `INSERT INTO toolwire.oauth_tokens (server, record, updated_at)
SELECT $1, $3, now() FROM toolwire.token_leases WHERE server = $1 AND holder = $2 AND expires_at > now()
ON CONFLICT (server) DO UPDATE SET record = $3, updated_at = now()`, server, holder, rec)
		if err == nil && tag.RowsAffected() == 0 {
			err = errLeaseLost
		}
	}
	if err != nil {
		return fmt.Errorf("store: OAuth record of server %q: %w", server, err)
	}
	return nil
}

// tokenLease is how long a change of a record may take: longer than a
// refresh's timeout (30 s by default) with room to spare.
const tokenLease = 2 * time.Minute

// errLeaseLost refuses a change that outlived its lease: another may have
// changed the record since.
var errLeaseLost = errors.New("the change took longer than its lease (" + tokenLease.String() + ") and was not stored")

// lease takes server's lease for holder, waiting (backing off from 20 to
// 250 ms) while another holds one that has not expired, until ctx ends.
func (t *tokenTable) lease(ctx context.Context, server, holder string) error {
	wait := 20 * time.Millisecond
	for {
		tag, err := t.pool.Exec(ctx, `INSERT INTO toolwire.token_leases (server, holder, expires_at) VALUES ($1, $2, now() + $3::interval)
ON CONFLICT (server) DO UPDATE SET holder = $2, expires_at = now() + $3::interval WHERE token_leases.expires_at <= now()`, server, holder, tokenLease)
		if err != nil {
			return fmt.Errorf("store: take the lease of server %q's OAuth record: %w", server, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: wait for the lease of server %q's OAuth record: %w", server, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}
