package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
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
// events in toolwire.audit_events, each process's in a hash chain of its
// own (chain = its instance id), all of them verified together
// ([Store.VerifyAudit]). Each line is built as the file sink builds it
// ([audit.AppendChain]: the event's JSON, "prev", and "sig" with a key),
// so [audit.Verify] checks a chain's lines as it checks a file's.
//
// Nothing but this process appends to its chain, so appends do not wait
// for other replicas. The events written meanwhile by concurrent callers
// go together ([audit.Group]): one statement (toolwire.audit_append_chain)
// inserts them all and moves the chain's head, when the head is where
// the sink believes; when it is not (a statement whose outcome the sink
// could not know), it returns the head as it is and the sink builds its
// lines again. One round trip per group of events.
//
// A call has one outcome, the first recorded: an outcome of a call that
// has one already (given by the replica that took this one for lost, see
// recoverInstance) is not appended, and the logger says so.
type auditTable struct {
	pool   *pgxpool.Pool
	key    ed25519.PrivateKey
	logger *slog.Logger
	// instance is this process's instance id: the chain it appends to,
	// and the instance written with the rows of calls requested under
	// it, for the recovery of a lost instance's calls: the store's, which
	// changes when the process claims again after it was taken for lost
	// (newClaim).
	instance *atomic.Int32

	group audit.Group[tableRow]

	mu    sync.Mutex // the head, under the group's writer
	chain int32      // the chain seq and prev are of
	known bool       // seq and prev are the head as last seen
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

// tableRow is one event on its way to the table.
type tableRow struct {
	event    []byte // its JSON, without the chain's members
	kind     string
	at       time.Time
	instance int32 // the instance it belongs to
	batch    *string
	idx      *int32
}

func newAuditTable(pool *pgxpool.Pool, key ed25519.PrivateKey, instance *atomic.Int32, logger *slog.Logger) *auditTable {
	return &auditTable{pool: pool, key: key, logger: logger, instance: instance, calls: map[callKey]int32{}}
}

// as returns a sink on a's chain whose rows name instance as their
// writer: for the outcomes recovery gives a lost instance's calls.
func (a *auditTable) as(instance int32) audit.Sink {
	return sinkFunc(func(ev *audit.Event) error { return a.write([]*audit.Event{ev}, instance) })
}

type sinkFunc func(*audit.Event) error

func (f sinkFunc) Write(ev *audit.Event) error { return f(ev) }

// appendAudit appends lines to a chain if its head is where the sink
// believes and none of them is a second outcome of a call, and says where
// the head is now and which lines were such outcomes (see
// toolwire.audit_append_chain).
const appendAudit = `SELECT appended, taken, head_seq, head_hash FROM toolwire.audit_append_chain($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// Write appends ev to the chain. It is safe for concurrent use.
func (a *auditTable) Write(ev *audit.Event) error { return a.write([]*audit.Event{ev}, -1) }

// WriteBatch appends evs to the chain in order, in one statement with
// what other callers wrote meanwhile (see [audit.BatchSink]). It is safe
// for concurrent use.
func (a *auditTable) WriteBatch(evs []*audit.Event) error { return a.write(evs, -1) }

// write appends evs to the chain, as belonging to instance, or, for -1,
// to the instance each call was requested under (this process's as it is
// now for a call it does not know).
func (a *auditTable) write(evs []*audit.Event, instance int32) error {
	rows := make([]tableRow, len(evs))
	var requested []callKey
	for i, ev := range evs {
		inst := instance
		if inst < 0 {
			inst = a.callInstance(ev)
			if ev.Batch != "" && ev.Kind == audit.CallRequested {
				requested = append(requested, callKey{ev.Batch, ev.Index})
			}
		}
		// An event that names its instance names the one its row does.
		if ev.Instance != "" {
			ev.Instance = strconv.Itoa(int(inst))
		}
		event, err := audit.AppendJSON(nil, ev)
		if err != nil {
			return err
		}
		rows[i] = tableRow{event: event, kind: string(ev.Kind), at: ev.Time, instance: inst}
		// A call's rows name it, so that a lost instance's open calls
		// can be found (see recoverInstance).
		if ev.Batch != "" {
			b, idx := ev.Batch, int32(ev.Index)
			rows[i].batch, rows[i].idx = &b, &idx
		}
	}
	err := a.group.Write(rows, a.append)
	if err != nil && len(requested) > 0 {
		a.callsMu.Lock()
		for _, k := range requested {
			delete(a.calls, k)
		}
		a.callsMu.Unlock()
	}
	return err
}

// callInstance is the instance ev's row belongs to: for a call, the one
// it was requested under (remembered from its call.requested until its
// outcome); otherwise this process's as it is now.
func (a *auditTable) callInstance(ev *audit.Event) int32 {
	instance := a.instance.Load()
	if ev.Batch == "" {
		return instance
	}
	key := callKey{ev.Batch, ev.Index}
	a.callsMu.Lock()
	defer a.callsMu.Unlock()
	switch {
	case ev.Kind == audit.CallRequested:
		a.calls[key] = instance
	case ev.Kind.Ends():
		if at, ok := a.calls[key]; ok {
			instance = at
			delete(a.calls, key)
		}
	default:
		if at, ok := a.calls[key]; ok {
			instance = at
		}
	}
	return instance
}

// append appends rows to the chain in one statement; the group calls it
// from one caller at a time. A row that is a call's second outcome is
// left out (and logged), the others appended.
func (a *auditTable) append(rows []tableRow) error {
	ctx, cancel := context.WithTimeout(context.Background(), auditWriteTimeout)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.instance.Load(); c != a.chain {
		a.chain, a.known = c, false // a new claim: a chain of its own
	}
	for attempt := 0; len(rows) > 0; {
		var (
			lines     = make([][]byte, len(rows))
			kinds     = make([]string, len(rows))
			ats       = make([]time.Time, len(rows))
			instances = make([]int32, len(rows))
			batches   = make([]*string, len(rows))
			idxs      = make([]*int32, len(rows))
		)
		for i, r := range rows {
			kinds[i], ats[i], instances[i], batches[i], idxs[i] = r.kind, r.at, r.instance, r.batch, r.idx
		}
		if !a.known {
			if err := a.readHead(ctx); err != nil {
				return err
			}
		}
		// The lines, each chained to the one before (each signs only
		// itself: its own slice).
		prev := a.prev
		for i, r := range rows {
			lines[i] = audit.AppendChain(append(make([]byte, 0, len(r.event)+200), r.event...), prev, a.key)
			prev = sha256.Sum256(lines[i])
		}
		var (
			appended bool
			taken    []int32
			seq      int64
			hash     []byte
		)
		err := a.pool.QueryRow(ctx, appendAudit, a.chain, a.seq, lines, prev[:], kinds, ats, instances, batches, idxs, outcomes).Scan(&appended, &taken, &seq, &hash)
		if err != nil {
			a.known = false // the statement may or may not have committed
			return fmt.Errorf("audit table: append: %w", err)
		}
		if len(hash) != sha256.Size {
			a.known = false
			return fmt.Errorf("audit table: the chain's head hash has %d bytes", len(hash))
		}
		a.seq = seq
		copy(a.prev[:], hash)
		if appended {
			return nil
		}
		if len(taken) > 0 {
			rows = a.dropTaken(rows, taken)
			continue
		}
		// The head was not where this sink believed: a statement it
		// could not know the outcome of committed, or another process
		// writes this chain. The head it found came back.
		if attempt++; attempt > 3 {
			return fmt.Errorf("audit table: chain %d: its head moved under every append (another process writes it?)", a.chain)
		}
	}
	return nil
}

// dropTaken leaves out of rows the ones taken names (ordinals from 1):
// outcomes of calls that have one already. Each is logged.
func (a *auditTable) dropTaken(rows []tableRow, taken []int32) []tableRow {
	kept := rows[:0:0]
	for i, r := range rows {
		if slices.Contains(taken, int32(i+1)) {
			var batch string
			var idx int32
			if r.batch != nil {
				batch, idx = *r.batch, *r.idx
			}
			a.logger.Warn("audit table: a call's second outcome was not recorded: it has one already (the replica that ran it was taken for lost, and the one that recovered it recorded the call as lost)",
				"batch", batch, "index", idx, "kind", r.kind, "instance", r.instance)
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

// readHead reads the chain's head (none yet: before its first row).
func (a *auditTable) readHead(ctx context.Context) error {
	var hash []byte
	err := a.pool.QueryRow(ctx, "SELECT seq, hash FROM toolwire.audit_chains WHERE chain = $1", a.chain).Scan(&a.seq, &hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		a.seq, a.prev, a.known = 0, [sha256.Size]byte{}, true
		return nil
	case err != nil:
		return fmt.Errorf("audit table: read the chain's head: %w", err)
	case len(hash) != sha256.Size:
		return fmt.Errorf("audit table: the chain's head hash has %d bytes", len(hash))
	}
	copy(a.prev[:], hash)
	a.known = true
	return nil
}

// RowError reports what is wrong with one row of the audit table, as
// [audit.LineError] does for a line of a file.
type RowError struct {
	Seq      int64 // the row's seq (its place in the fleet's order); 0 for a chain with no row at fault (ErrHeadMismatch on an empty chain)
	Chain    int32 // the chain it is in: the instance that wrote it (0: the one chain of the fleet before chains per instance)
	ChainRow int64 // its place in that chain, from 1
	Err      error // wraps one of audit's Err* values, or ErrHeadMismatch
}

func (e *RowError) Error() string {
	return fmt.Sprintf("audit row %d (row %d of chain %d): %v", e.Seq, e.ChainRow, e.Chain, e.Err)
}
func (e *RowError) Unwrap() error { return e.Err }

// ErrHeadMismatch: a chain in the table is intact but does not end where
// its head row says: rows were removed from its end, or the head was
// changed, or the chain has rows and no head.
var ErrHeadMismatch = errors.New("the chain does not end where its head row says")

// verifyTable checks every chain of the audit table (and with
// opts.PublicKey their signatures), each in its order with
// [audit.Verify], then that each ends at its head row: unlike a file, the
// table keeps each chain's last line's hash apart, so rows cut from a
// chain's end are found too, and so is a chain whose head row is left
// when its rows are gone, or rows without a head. It stops at the first
// chain at fault; the Report is then that chain's (its rows up to the
// fault), and the error a *[RowError]. Intact, the Report adds up every
// chain, and its Head is the head of the chain that holds the table's
// last row.
func verifyTable(ctx context.Context, pool *pgxpool.Pool, opts *audit.VerifyOptions) (audit.Report, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return audit.Report{}, err
	}
	// One snapshot: the head rows are those the rows end at.
	defer func() { _ = tx.Rollback(context.Background()) }()
	type head struct {
		seq    int64
		hash   []byte
		rows   bool  // it has rows
		last   int64 // the largest seq among them
		hashed bool  // it has a head row
	}
	heads := map[int32]*head{}
	rows, err := tx.Query(ctx, `SELECT coalesce(h.chain, e.chain), h.seq, h.hash, e.chain IS NOT NULL, coalesce(e.last, 0)
FROM toolwire.audit_chains h FULL JOIN (SELECT chain, max(seq) AS last FROM toolwire.audit_events GROUP BY chain) e ON e.chain = h.chain`)
	if err != nil {
		return audit.Report{}, fmt.Errorf("audit table: read the chains' heads: %w", err)
	}
	for rows.Next() {
		var (
			c    int32
			seq  *int64
			hash []byte
			h    head
		)
		if err := rows.Scan(&c, &seq, &hash, &h.rows, &h.last); err != nil {
			rows.Close()
			return audit.Report{}, fmt.Errorf("audit table: read the chains' heads: %w", err)
		}
		if seq != nil {
			h.seq, h.hash, h.hashed = *seq, hash, true
		}
		heads[c] = &h
	}
	if err := rows.Err(); err != nil {
		return audit.Report{}, fmt.Errorf("audit table: read the chains' heads: %w", err)
	}
	chains := slices.Sorted(maps.Keys(heads))
	var (
		total     audit.Report
		lastSeq   int64
		unchained int
	)
	for _, c := range chains {
		h := heads[c]
		rep, err := verifyChain(ctx, tx, c, opts)
		if err != nil {
			return rep.Report, err
		}
		r := rep.last
		switch {
		case c != 0 && rep.Unchained > 0:
			// Only the fleet's one chain of old may start with rows
			// written before chaining; a chain per instance is chained
			// from its first row.
			first := rep.first
			return audit.Report{}, &RowError{Seq: first.seq, Chain: c, ChainRow: first.chainRow,
				Err: fmt.Errorf("%w: no prev member, although every chain per instance is chained from its first row", audit.ErrBrokenChain)}
		case !h.hashed:
			return rep.Report, &RowError{Seq: r.seq, Chain: c, ChainRow: r.chainRow, Err: fmt.Errorf("%w: chain %d has %d rows and no head row", ErrHeadMismatch, c, rep.Lines)}
		case h.seq != r.chainRow || (rep.Head != "" && hex.EncodeToString(h.hash) != rep.Head) || (rep.Head == "" && h.seq != 0):
			return rep.Report, &RowError{Seq: r.seq, Chain: c, ChainRow: r.chainRow, Err: fmt.Errorf("%w: the head of chain %d names its row %d (sha256 %x), the chain ends at its row %d", ErrHeadMismatch, c, h.seq, h.hash, r.chainRow)}
		}
		total.Lines += rep.Lines
		total.Intact += rep.Intact
		total.Signed += rep.Signed
		unchained += rep.Unchained
		if h.last >= lastSeq && rep.Head != "" {
			lastSeq, total.Head = h.last, rep.Head
		}
	}
	total.Unchained = unchained
	if total.Lines > 0 && total.Unchained == total.Lines {
		return total, audit.ErrUnchained
	}
	return total, nil
}

// chainReport is what verifyChain found in one chain.
type chainReport struct {
	audit.Report
	first, last rowPlace // the first and the last row read
}

// rowPlace names a row: its seq and its place in its chain.
type rowPlace struct{ seq, chainRow int64 }

// verifyChain checks chain c's rows in order with [audit.Verify]: a row
// changed, removed, inserted, moved to another chain or reordered breaks
// the prev of the row after it; one removed from the start breaks the
// first row's. A chain of rows written before chaining reports them as
// unchained rather than failing: the caller decides for the table.
func verifyChain(ctx context.Context, tx pgx.Tx, c int32, opts *audit.VerifyOptions) (chainReport, error) {
	rows, err := tx.Query(ctx, "SELECT seq, chain_seq, line FROM toolwire.audit_events WHERE chain = $1 ORDER BY chain_seq", c)
	if err != nil {
		return chainReport{}, fmt.Errorf("audit table: read chain %d: %w", c, err)
	}
	r := &rowReader{rows: rows}
	rep, verr := audit.Verify(r, opts)
	rows.Close()
	out := chainReport{Report: rep, last: r.last}
	if len(r.places) > 0 {
		out.first = r.places[0]
	}
	if r.err != nil {
		return out, fmt.Errorf("audit table: read chain %d: %w", c, r.err)
	}
	var le *audit.LineError
	if errors.As(verr, &le) {
		at := r.places[le.Line-1]
		return out, &RowError{Seq: at.seq, Chain: c, ChainRow: at.chainRow, Err: le.Err}
	}
	if verr != nil && !errors.Is(verr, audit.ErrUnchained) {
		return out, verr
	}
	return out, nil
}

// rowReader serves the rows' lines as the lines of a file. A newline
// inside a row's line (which the sink never writes: JSON escapes it)
// would split it in two and misplace the error, so it is served as a NUL
// byte, which no JSON admits: the row itself is then not an event.
type rowReader struct {
	rows   pgx.Rows
	buf    []byte
	last   rowPlace   // the last row read
	places []rowPlace // every row read, in order: where a line number points
	err    error
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
		if err := r.rows.Scan(&r.last.seq, &r.last.chainRow, &line); err != nil {
			r.err = err
			return 0, err
		}
		r.places = append(r.places, r.last)
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
