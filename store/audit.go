package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/audit"
)

// auditWriteTimeout bounds one audit write, retries included: a sink's
// Write has no context, and a call waiting on a database that is gone
// must end (with audit.LogOptions.Required, refused) rather than hang.
const auditWriteTimeout = 30 * time.Second

// auditTable is the audit [audit.Sink] on PostgreSQL: every replica's
// events in toolwire.audit_events, one hash chain across the fleet. Each
// line is built as the file sink builds it ([audit.AppendChain]: the
// event's JSON, "prev", and "sig" with a key), so [audit.Verify] checks
// the table's lines as it checks a file's.
//
// Appends are serialized by the chain's head row: one statement (the
// function toolwire.audit_append) locks the head, moves it from the seq
// this sink believes is last to the next one and inserts the row, or,
// when another replica moved the head first, does nothing; either way it
// returns the head as it is now, so a sink that was beaten builds its
// line again at once. One round trip per event when no other replica
// wrote meanwhile, two when one did.
//
// A call has one outcome, the first recorded: an outcome of a call that
// has one already (given by the replica that took this one for lost, see
// recoverInstance) is not appended, and the logger says so.
type auditTable struct {
	pool     *pgxpool.Pool
	key      ed25519.PrivateKey
	logger   *slog.Logger
	instance atomic.Int32 // written with each row, for the recovery of a lost instance's calls

	mu    sync.Mutex
	known bool // seq and prev are the head as last seen
	seq   int64
	prev  [sha256.Size]byte

	// calls holds the instance each open call was requested under, so
	// that its outcome names the same one when the process took a new
	// claim meanwhile (and is dropped: the call has its outcome).
	callsMu sync.Mutex
	calls   map[callKey]int32
}

// callKey names a call in the audit table (its batch and index).
type callKey struct {
	batch string
	idx   int
}

func newAuditTable(pool *pgxpool.Pool, key ed25519.PrivateKey, instance int32, logger *slog.Logger) *auditTable {
	a := &auditTable{pool: pool, key: key, logger: logger, calls: map[callKey]int32{}}
	a.instance.Store(instance)
	return a
}

// as returns a sink on a's chain whose rows name instance as their
// writer: for the outcomes recovery gives a lost instance's calls. It
// shares a's view of the head.
func (a *auditTable) as(instance int32) audit.Sink {
	return sinkFunc(func(ev *audit.Event) error { return a.write(ev, instance) })
}

type sinkFunc func(*audit.Event) error

func (f sinkFunc) Write(ev *audit.Event) error { return f(ev) }

// appendAudit appends a line if the head is where the sink believes, and
// says where the head is now (see toolwire.audit_append).
const appendAudit = `SELECT appended, head_seq, head_hash FROM toolwire.audit_append($1, $2, $3, $4, $5, $6, $7, $8)`

// appendOutcome appends a call's outcome as appendAudit does, unless the
// call has one already (see toolwire.audit_append_outcome).
const appendOutcome = `SELECT appended, taken, head_seq, head_hash FROM toolwire.audit_append_outcome($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// Write appends ev to the chain. It is safe for concurrent use.
func (a *auditTable) Write(ev *audit.Event) error {
	instance := a.instance.Load()
	if ev.Batch == "" {
		return a.write(ev, instance)
	}
	key := callKey{ev.Batch, ev.Index}
	a.callsMu.Lock()
	switch {
	case ev.Kind == audit.CallRequested:
		a.calls[key] = instance
	case ev.Kind.Ends():
		if at, ok := a.calls[key]; ok {
			instance = at
			delete(a.calls, key)
		}
	}
	a.callsMu.Unlock()
	err := a.write(ev, instance)
	if err != nil && ev.Kind == audit.CallRequested {
		a.callsMu.Lock()
		delete(a.calls, key)
		a.callsMu.Unlock()
	}
	return err
}

// write appends ev to the chain, as written by instance. An event that
// names its instance names this one, as its row does.
func (a *auditTable) write(ev *audit.Event, instance int32) error {
	if ev.Instance != "" {
		ev.Instance = strconv.Itoa(int(instance))
	}
	event, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	// A call's rows name it, so that a lost instance's open calls can be
	// found (see recoverInstance).
	var batch, idx any
	if ev.Batch != "" {
		batch, idx = ev.Batch, ev.Index
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditWriteTimeout)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	line := make([]byte, 0, len(event)+200)
	for {
		if !a.known {
			var hash []byte
			if err := a.pool.QueryRow(ctx, "SELECT seq, hash FROM toolwire.audit_head").Scan(&a.seq, &hash); err != nil {
				return fmt.Errorf("audit table: read the chain's head: %w", err)
			}
			if len(hash) != sha256.Size {
				return fmt.Errorf("audit table: the chain's head hash has %d bytes", len(hash))
			}
			copy(a.prev[:], hash)
			a.known = true
		}
		line = audit.AppendChain(append(line[:0], event...), a.prev, a.key)
		sum := sha256.Sum256(line)
		var (
			appended, taken bool
			hash            []byte
		)
		if batch != nil && ev.Kind.Ends() {
			err = a.pool.QueryRow(ctx, appendOutcome, a.seq, line, sum[:], string(ev.Kind), ev.Time, instance, batch, idx, outcomes).Scan(&appended, &taken, &a.seq, &hash)
		} else {
			err = a.pool.QueryRow(ctx, appendAudit, a.seq, line, sum[:], string(ev.Kind), ev.Time, instance, batch, idx).Scan(&appended, &a.seq, &hash)
		}
		if err != nil {
			a.known = false // the statement may or may not have committed
			return fmt.Errorf("audit table: append: %w", err)
		}
		if len(hash) != sha256.Size {
			a.known = false
			return fmt.Errorf("audit table: the chain's head hash has %d bytes", len(hash))
		}
		copy(a.prev[:], hash)
		if appended {
			return nil
		}
		if taken {
			a.logger.Warn("audit table: a call's second outcome was not recorded: it has one already (the replica that ran it was taken for lost, and the one that recovered it recorded the call as lost)",
				"batch", ev.Batch, "index", ev.Index, "kind", string(ev.Kind), "instance", instance)
			return nil
		}
		// Another writer appended first: the head it left came back.
	}
}

// RowError reports what is wrong with one row of the audit table, as
// [audit.LineError] does for a line of a file.
type RowError struct {
	Seq int64 // the row's seq
	Err error // wraps one of audit's Err* values, or ErrHeadMismatch
}

func (e *RowError) Error() string { return fmt.Sprintf("audit row %d: %v", e.Seq, e.Err) }
func (e *RowError) Unwrap() error { return e.Err }

// ErrHeadMismatch: the chain in the table is intact but does not end
// where the head row says: rows were removed from the end, or the head
// was changed.
var ErrHeadMismatch = errors.New("the chain does not end where its head row says")

// verifyTable checks the audit table's chain (and with opts.PublicKey its
// signatures) in seq order with [audit.Verify], then that it ends at the
// head row: unlike a file, the table keeps its last line's hash apart, so
// rows cut from its end are found too.
func verifyTable(ctx context.Context, pool *pgxpool.Pool, opts *audit.VerifyOptions) (audit.Report, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return audit.Report{}, err
	}
	// One snapshot: the head row read after the rows is the one they end at.
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(ctx, "SELECT seq, line FROM toolwire.audit_events ORDER BY seq")
	if err != nil {
		return audit.Report{}, err
	}
	r := &rowReader{rows: rows}
	rep, verr := audit.Verify(r, opts)
	rows.Close()
	if r.err != nil {
		return rep, fmt.Errorf("audit table: %w", r.err)
	}
	var le *audit.LineError
	if errors.As(verr, &le) {
		seq, err := seqAt(ctx, tx, le.Line)
		if err != nil {
			return rep, err
		}
		return rep, &RowError{Seq: seq, Err: le.Err}
	}
	if verr != nil {
		return rep, verr
	}
	var headSeq int64
	var headHash []byte
	if err := tx.QueryRow(ctx, "SELECT seq, hash FROM toolwire.audit_head").Scan(&headSeq, &headHash); err != nil {
		return rep, fmt.Errorf("audit table: read the chain's head: %w", err)
	}
	if headSeq != r.last || (rep.Head != "" && hex.EncodeToString(headHash) != rep.Head) {
		return rep, &RowError{Seq: r.last, Err: fmt.Errorf("%w: the head names row %d (sha256 %x), the table ends at row %d", ErrHeadMismatch, headSeq, headHash, r.last)}
	}
	return rep, nil
}

// seqAt returns the seq of the n-th row (1-based) in seq order.
func seqAt(ctx context.Context, tx pgx.Tx, n int) (int64, error) {
	var seq int64
	err := tx.QueryRow(ctx, "SELECT seq FROM toolwire.audit_events ORDER BY seq OFFSET $1 LIMIT 1", n-1).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("audit table: find row %d: %w", n, err)
	}
	return seq, nil
}

// rowReader serves the rows' lines as the lines of a file. A newline
// inside a row's line (which the sink never writes: JSON escapes it)
// would split it in two and misplace the error, so it is served as a NUL
// byte, which no JSON admits: the row itself is then not an event.
type rowReader struct {
	rows pgx.Rows
	buf  []byte
	last int64 // seq of the last row read
	err  error
}

func (r *rowReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if !r.rows.Next() {
			if r.err = r.rows.Err(); r.err != nil {
				return 0, r.err
			}
			return 0, io.EOF
		}
		var line []byte
		if err := r.rows.Scan(&r.last, &line); err != nil {
			r.err = err
			return 0, err
		}
		line = bytes.ReplaceAll(line, []byte{'\n'}, []byte{0})
		r.buf = append(line, '\n')
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// AuditLines calls fn with each line of the audit log in order: for
// PostgreSQL the audit table's rows (one snapshot), for files the audit
// file's lines. It stops at fn's first error and returns it. It does not
// verify anything ([Store.VerifyAudit] does).
func (s *Store) AuditLines(ctx context.Context, fn func(line []byte) error) error {
	if s.kind != Postgres {
		if s.auditPath == "" {
			return errors.New("store: no audit file to read")
		}
		f, err := os.Open(s.auditPath)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		defer f.Close()
		return eachLine(f, fn)
	}
	rows, err := s.pool.Query(ctx, "SELECT line FROM toolwire.audit_events ORDER BY seq")
	if err != nil {
		return fmt.Errorf("store: read the audit table: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var line []byte
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("store: read the audit table: %w", err)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	return rows.Err()
}

// eachLine calls fn with each line of r, without its newline.
func eachLine(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(bytes.TrimSuffix(line, []byte{'\n'})); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
