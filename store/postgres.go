package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/pins"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLock is the advisory lock key under which migrations run: the
// bytes of "toolwire" as a big-endian int64.
const migrateLock int64 = 0x746f6f6c77697265

// ErrSchemaTooNew is returned by [Open] for a database that a newer
// toolwire has migrated past the migrations this one carries: its code
// would not know the schema it runs on.
var ErrSchemaTooNew = errors.New("the database's schema is newer than this toolwire")

func openPostgres(ctx context.Context, rawURL, redacted string, opts *Options) (_ *Store, err error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx masks the password of a URL that parses, as this one did.
		return nil, fmt.Errorf("store: PostgreSQL URL: %w", err)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "toolwire"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", redacted, err)
	}
	defer func() {
		if err != nil {
			pool.Close()
		}
	}()
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("store: %s: connect: %w", redacted, err)
	}
	applied, err := migrate(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("store: %s: migrate: %w", redacted, err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	l, err := listen(ctx, cfg.ConnConfig, logger)
	if err != nil {
		return nil, fmt.Errorf("store: %s: listen: %w", redacted, err)
	}
	instance := l.instance.Load()
	tokens, err := oauth.NewStoreOn(&tokenTable{pool: pool, where: "PostgreSQL " + redacted}, opts.OAuth)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{
		kind:     Postgres,
		where:    redacted,
		pool:     pool,
		listener: l,
		applied:  applied,
		logger:   logger,
		pins:     pins.NewStoreOn(&pinTable{pool: pool, listener: l}),
		tokens:   tokens,
		limits:   &tableLimiter{pool: pool},
		session:  &sessionTable{pool: pool, listener: l},
		grace:    claimGrace,
		grants:   &approvalTable{db: pool},
		requests: &requestTable{pool: pool, listener: l, poll: 5 * time.Second},
	}
	s.instance.Store(instance)
	s.requests.instance = &s.instance
	s.sink = newAuditTable(pool, opts.AuditSigningKey, &s.instance, logger)
	s.relay = newRelay(s, cfg.ConnConfig)
	l.onNewClaim(s.newClaim)
	// The replica's sweeps (Replica) run in the background, stopped by
	// Close; the mailbox's first prune too, through the relay, which then
	// waits pruneEvery before its sends prune again.
	s.sweepCtx, s.stopSweep = context.WithCancel(context.Background())
	s.relay.pruneSoon()
	return s, nil
}

// migration is one embedded SQL file, NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order, checking that
// their versions are 1, 2, 3… without gaps or repeats.
func migrations() ([]migration, error) {
	entries, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		base := strings.TrimSuffix(path.Base(e), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", e)
		}
		b, err := migrationFiles.ReadFile(e)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %d (%s): want version %d: versions run 1, 2, 3… without gaps", m.version, m.name, i+1)
		}
	}
	return out, nil
}

// migrate brings the database's schema up to date in one transaction that
// first takes a transaction-level advisory lock: replicas starting
// together queue on the lock, and each finds, once it holds it, what the
// ones before it applied. Either every missing migration is applied or
// none is. It returns the versions it applied.
func migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	// After Commit, Rollback does nothing.
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLock); err != nil {
		return nil, fmt.Errorf("take the migration lock: %w", err)
	}
	// No arguments: pgx sends it with the simple protocol, which allows
	// several statements.
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS toolwire;
CREATE TABLE IF NOT EXISTS toolwire.schema_migrations (
	version    integer     PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, "SELECT version FROM toolwire.schema_migrations")
	if err != nil {
		return nil, err
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	if len(done) > 0 && int(slices.Max(done)) > len(ms) {
		return nil, fmt.Errorf("%w: it is at version %d, this toolwire knows versions up to %d; upgrade toolwire", ErrSchemaTooNew, slices.Max(done), len(ms))
	}
	var applied []int
	for _, m := range ms {
		if slices.Contains(done, int32(m.version)) {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO toolwire.schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return nil, err
		}
		applied = append(applied, m.version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return applied, nil
}
