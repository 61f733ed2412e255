package store

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/argon2"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/oauth"
)

// Every process that opens a PostgreSQL store is an instance: a row of
// toolwire.instances, and the session-level advisory lock
// (instanceLockClass, its id), held on its listening connection for as
// long as it runs. The lock is how the others know it is running: when
// the process dies, however it dies, its connections close and
// PostgreSQL frees the lock at once.
//
// An instance that is gone without closing the store (killed, its
// machine lost) leaves calls recorded as requested in the audit table
// without an outcome, parked calls and approval pages nobody holds, and
// messages nobody reads. A replica finds it (its lock can be taken, and
// it was not seen for claimGrace): every replica looks every sweepEvery,
// and one that waits on it (a retry passed to a parked call it held)
// looks at once; a command never does (see [Store.Replica]). The
// replica gives each of its open calls the outcome
// call.errored with reason [ReasonInstanceLost], forgets what it held, and
// tells every instance ("lost:ID" on the fleet channel), once, under its
// lock.

// instanceLockClass is the first key of the instances' advisory locks
// ("tw" and 1), apart from the migration lock's single bigint key.
const instanceLockClass int32 = 0x74770001

// ReasonInstanceLost is the Reason of the outcome given to a call whose
// instance was lost before the call ended.
const ReasonInstanceLost = "instance_lost"

// register adds this process to toolwire.instances and takes its lock on
// conn, in one transaction: no other instance sees the row before the
// lock is held (and takes it for an instance that is gone). It returns
// the instance's id.
func register(ctx context.Context, conn *pgx.Conn) (int32, error) {
	host, _ := os.Hostname()
	var id int32
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "INSERT INTO toolwire.instances (host, pid) VALUES ($1, $2) RETURNING id", host, os.Getpid()).Scan(&id); err != nil {
			return err
		}
		// A session-level lock: it outlives the transaction, and goes
		// with the connection.
		_, err := tx.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", instanceLockClass, id)
		return err
	})
	return id, err
}

// ended records that this instance closed the store itself.
// Its messages are of no use to anyone any more.
func ended(ctx context.Context, pool *pgxpool.Pool, id int32) error {
	b := &pgx.Batch{}
	b.Queue("UPDATE toolwire.instances SET ended_at = now() WHERE id = $1", id)
	b.Queue("DELETE FROM toolwire.mailbox WHERE recipient = $1", id)
	return pool.SendBatch(ctx, b).Close()
}

// outcomes are the kinds that end a call (audit.Kind.Ends), as the
// table's kind column holds them.
var outcomes = func() []string {
	var kinds []string
	for _, k := range audit.Outcomes() {
		kinds = append(kinds, string(k))
	}
	return kinds
}()

// recoverLost finds the instances that are gone without closing the store
// and recovers each (see recoverInstance). It returns how many it
// recovered.
func (s *Store) recoverLost(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM toolwire.instances
WHERE ended_at IS NULL AND recovered_at IS NULL AND id <> $1 AND seen_at < now() - $2::interval ORDER BY id`, s.instance.Load(), s.grace)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		ok, err := s.recoverInstance(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("instance %d: %w", id, err))
		}
		if ok {
			n++
		}
	}
	// What is left of instances long gone is of no use to anyone.
	if _, err := s.pool.Exec(ctx, "DELETE FROM toolwire.instances WHERE coalesce(ended_at, recovered_at) < now() - interval '7 days'"); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// recoverInstance recovers instance id if it is gone: its lock can be
// taken. Holding the lock (so that no other instance recovers it at the
// same time, and the instance itself cannot come back meanwhile), it gives
// each call the instance recorded as requested and nothing ended an
// outcome, through this store's audit sink; deletes its parked calls,
// approval pages and messages; marks it recovered; and tells every
// instance. Recovering twice gives no call a second outcome: only calls
// without one are looked for. It reports whether it recovered id.
func (s *Store) recoverInstance(ctx context.Context, id int32) (bool, error) {
	if !s.recovers.Load() || s.listener.claim() != nil {
		return false, nil // a command, or a replica without its own claim
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", instanceLockClass, id).Scan(&got); err != nil || !got {
		return false, err // running, or being recovered by another
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1, $2)", instanceLockClass, id); err != nil {
			conn.Conn().Close(context.Background()) // the lock goes with the connection
		}
	}()
	// Not when it ended or was recovered; not while it was seen within the
	// grace (its lock may be free only while it reconnects); and not by an
	// instance whose own claim is younger than the grace (after an outage
	// of the database, the others may not be back yet).
	var skip bool
	if err := conn.QueryRow(ctx, `SELECT i.ended_at IS NOT NULL OR i.recovered_at IS NOT NULL OR i.seen_at >= now() - $3::interval
	OR NOT EXISTS (SELECT 1 FROM toolwire.instances me WHERE me.id = $2 AND me.claimed_at < now() - $3::interval AND me.recovered_at IS NULL)
FROM toolwire.instances i WHERE i.id = $1`, id, s.instance.Load(), s.grace).Scan(&skip); err != nil || skip {
		return false, err
	}
	rows, err := conn.Query(ctx, `SELECT line FROM toolwire.audit_events r
WHERE r.instance = $1 AND r.batch IS NOT NULL AND r.kind = 'call.requested'
	AND NOT EXISTS (SELECT 1 FROM toolwire.audit_events e
		WHERE e.instance = $1 AND e.batch = r.batch AND e.idx = r.idx AND e.kind = ANY($2))
ORDER BY r.seq`, id, outcomes)
	if err != nil {
		return false, err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return false, err
	}
	if s.sink != nil {
		// The outcomes are the lost instance's rows: written in its name
		// (the column is not part of the chain), so that a later recovery
		// finds them beside its calls.
		sink := s.sink
		if t, ok := sink.(*auditTable); ok {
			sink = t.as(id)
		}
		for _, line := range lines {
			var req audit.Event
			if err := json.Unmarshal(line, &req); err != nil {
				return false, fmt.Errorf("a call.requested row does not parse: %w", err)
			}
			ev := audit.Event{
				Time: time.Now(), Kind: audit.CallErrored, Batch: req.Batch, Index: req.Index, CallID: req.CallID,
				Caller: req.Caller, Protocol: req.Protocol, Client: req.Client, Tool: req.Tool, Source: req.Source,
				Original: req.Original, Tier: req.Tier, Reason: ReasonInstanceLost,
				Error: "the toolwire that ran the call was lost (instance " + strconv.Itoa(int(id)) + ") before the call ended; its outcome is not known",
			}
			if err := sink.Write(&ev); err != nil {
				return false, err
			}
		}
	}
	b := &pgx.Batch{}
	b.Queue("DELETE FROM toolwire.held WHERE instance = $1", id)
	b.Queue("DELETE FROM toolwire.mailbox WHERE recipient = $1", id)
	b.Queue("UPDATE toolwire.instances SET recovered_at = now() WHERE id = $1", id)
	b.Queue("SELECT pg_notify($1, $2)", fleetChannel, lostPrefix+strconv.Itoa(int(id)))
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	s.logger.Warn("store: recovered a lost toolwire instance", "instance", id, "callsWithoutOutcome", len(lines))
	return true, nil
}

// claimGrace is how long an instance whose lock is free must not have
// been seen (instances.seen_at, by the database's clock) before it is
// taken for lost, and how long a replica must have held its own claim
// before it takes another for lost: longer than a listener takes to
// reconnect once the database is back (its backoff stops at 5 s).
const claimGrace = 10 * time.Second

// sweepEvery is how often a replica looks for instances that are lost.
const sweepEvery = 3 * time.Second

// Replica makes this store's instance one that recovers the others (see
// recoverInstance): a gateway replica of a fleet; [Workspace.Gateway]
// calls it. Until then (a command such as "toolwire pins forget", which
// only changes state) it recovers nobody. A replica looks for instances
// that are lost every few seconds, until Close. It is safe to call more
// than once; it does nothing for files.
func (s *Store) Replica() {
	if s.kind != Postgres || s.recovers.Swap(true) {
		return
	}
	s.sweeping.Go(func() {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-s.sweepCtx.Done():
				return
			case <-t.C:
			}
			if n, err := s.recoverLost(s.sweepCtx); err != nil && s.sweepCtx.Err() == nil {
				s.logger.Warn("store: recover the toolwires that were lost", "recovered", n, "err", err)
			}
		}
	})
}

// lostPrefix starts a fleet notification that an instance was lost.
const lostPrefix = "lost:"

// fleetKey returns the fleet's key of name, making it (32 random bytes)
// if no instance has yet. The table holds it sealed under a key derived
// from passphrase (see sealFleetKey); a key that does not open with it is
// an error wrapping ErrFleetKeySealed.
func fleetKey(ctx context.Context, pool *pgxpool.Pool, name, passphrase string) ([]byte, error) {
	if passphrase == "" {
		return nil, fmt.Errorf("store: the fleet's %s key: %w", name, ErrNoFleetPassphrase)
	}
	// Each sealing and each opening derives a key with Argon2id (64 MiB),
	// so the key is read first, and made only by the first instance.
	var stored []byte
	err := pool.QueryRow(ctx, `SELECT key FROM toolwire.fleet_keys WHERE name = $1`, name).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		fresh := make([]byte, 32)
		if _, err := rand.Read(fresh); err != nil {
			return nil, err
		}
		sealed, serr := sealFleetKey(name, passphrase, fresh)
		if serr != nil {
			return nil, serr
		}
		// Two instances making it at once: the one that waited for the
		// other's insert does not see its row in the statement's
		// snapshot, and reads it again.
		for range 2 {
			err = pool.QueryRow(ctx, `WITH made AS (
	INSERT INTO toolwire.fleet_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING key
)
SELECT key FROM made UNION ALL SELECT key FROM toolwire.fleet_keys WHERE name = $1 LIMIT 1`, name, sealed).Scan(&stored)
			if !errors.Is(err, pgx.ErrNoRows) {
				break
			}
		}
		if err == nil && bytes.Equal(stored, sealed) {
			return fresh, nil // ours: no need to open what was just sealed
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: the fleet's %s key: %w", name, err)
	}
	key, err := openFleetKey(name, passphrase, stored)
	if err != nil {
		return nil, fmt.Errorf("store: the fleet's %s key (toolwire.fleet_keys): %w", name, err)
	}
	return key, nil
}

// ErrNoFleetPassphrase is returned by [Store.FleetKey] without a
// passphrase: a fleet's keys are kept sealed under it.
var ErrNoFleetPassphrase = errors.New("no passphrase to seal it with: set " + oauth.PassphraseEnv + ", the same on every replica")

// ErrFleetKeySealed is returned, wrapped, by [Store.FleetKey] for a key
// that does not open with the passphrase given.
var ErrFleetKeySealed = errors.New("it does not open with this passphrase (" + oauth.PassphraseEnv + "): every replica needs the same one")

// A sealed fleet key is salt (16 bytes) || nonce (12) || AES-256-GCM of
// the key, under Argon2id(passphrase, salt) with the OAuth tokens'
// default cost, its name in the additional data.
const (
	fleetSaltLen   = 16
	fleetSealedLen = fleetSaltLen + 12 + 32 + 16
	fleetKeyAAD    = "toolwire fleet key v1\x00"
)

func fleetKeyAEAD(passphrase string, salt []byte) (cipher.AEAD, error) {
	p := oauth.DefaultArgon2
	block, err := aes.NewCipher(argon2.IDKey([]byte(passphrase), salt, p.Time, p.MemoryKiB, p.Threads, 32))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealFleetKey seals key, the fleet's key of name, under passphrase.
func sealFleetKey(name, passphrase string, key []byte) ([]byte, error) {
	out := make([]byte, fleetSaltLen+12, fleetSealedLen)
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	aead, err := fleetKeyAEAD(passphrase, out[:fleetSaltLen])
	if err != nil {
		return nil, err
	}
	return aead.Seal(out, out[fleetSaltLen:], key, []byte(fleetKeyAAD+name)), nil
}

// openFleetKey opens what sealFleetKey sealed.
func openFleetKey(name, passphrase string, sealed []byte) ([]byte, error) {
	if len(sealed) != fleetSealedLen {
		return nil, fmt.Errorf("%w (it is %d bytes, not a sealed key of %d)", ErrFleetKeySealed, len(sealed), fleetSealedLen)
	}
	aead, err := fleetKeyAEAD(passphrase, sealed[:fleetSaltLen])
	if err != nil {
		return nil, err
	}
	key, err := aead.Open(nil, sealed[fleetSaltLen:fleetSaltLen+12], sealed[fleetSaltLen+12:], []byte(fleetKeyAAD+name))
	if err != nil {
		return nil, ErrFleetKeySealed
	}
	return key, nil
}
