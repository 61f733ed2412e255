package store

import (
	"bytes"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/oauth"
)

// tokensLockClass is the first key of the advisory locks that serialize
// the changes of one server's OAuth record (the second is the hash of its
// name).
const tokensLockClass int32 = 0x6f617468 // "oath"

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

// Update holds the server's lock for the whole of change, a token refresh
// included: a replica that wants to refresh the same server waits, then
// finds the rotated token in the record and uses it, so a refresh token
// is redeemed once across the fleet. The advisory lock covers a server
// that has no row yet (a first login); the row lock (FOR UPDATE) keeps out
// writers that do not take it.
func (t *tokenTable) Update(ctx context.Context, server string, change func([]byte) ([]byte, error)) error {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", tokensLockClass, server); err != nil {
		return err
	}
	var old []byte
	err = tx.QueryRow(ctx, "SELECT record FROM toolwire.oauth_tokens WHERE server = $1 FOR UPDATE", server).Scan(&old)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	rec, err := change(old)
	if err != nil {
		return err
	}
	switch {
	case rec == nil && old == nil, bytes.Equal(rec, old) && rec != nil:
		return tx.Commit(ctx)
	case rec == nil:
		_, err = tx.Exec(ctx, "DELETE FROM toolwire.oauth_tokens WHERE server = $1", server)
	default:
		_, err = tx.Exec(ctx, `INSERT INTO toolwire.oauth_tokens (server, record, updated_at) VALUES ($1, $2, now())
ON CONFLICT (server) DO UPDATE SET record = $2, updated_at = now()`, server, rec)
	}
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}
