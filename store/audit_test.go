package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/pgtest"
)

func event(writer string, i int) *audit.Event {
	return &audit.Event{
		Time: time.Date(2026, 7, 1, 12, 0, 0, i*1000, time.UTC), Kind: audit.CallExecuted,
		Caller: writer, Tool: "demo__echo", Index: i, Duration: time.Duration(i) * time.Microsecond,
		Args: []byte(`{"text":"<b>hé\u2028</b>"}`),
	}
}

func tableLines(t *testing.T, url string) [][]byte {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT line FROM toolwire.audit_events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// chainLines returns the lines of instance chain c in its order.
func chainLines(t *testing.T, url string, c int32) [][]byte {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT line FROM toolwire.audit_events WHERE chain = $1 ORDER BY chain_seq", c)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestAuditChainPerReplica: three replicas write concurrently into one
// table, one event at a time and in batches; each replica's rows are a
// chain of their own that verifies as a file would, signed throughout,
// in the order each goroutine wrote them, and the table verifies with
// every event once.
func TestAuditChainPerReplica(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const writers, n = 3, 60
	stores := make([]*Store, writers)
	for i := range stores {
		o := testOptions()
		o.AuditSigningKey = priv
		stores[i] = openPG(t, url, o)
	}
	start := make(chan struct{})
	errs := make(chan error, writers*n)
	var wg sync.WaitGroup
	for w, st := range stores {
		sink := st.Audit().(audit.BatchSink)
		// Four goroutines per replica, two writing one event at a time,
		// two writing pairs: their writes meet in the sink's groups.
		for g := range 4 {
			wg.Go(func() {
				<-start
				for i := g; i < n; i += 4 {
					var err error
					if g%2 == 0 {
						err = sink.Write(event(fmt.Sprintf("writer-%d", w), i))
					} else {
						err = sink.WriteBatch([]*audit.Event{event(fmt.Sprintf("writer-%d", w), i), event(fmt.Sprintf("writer-%d-pair", w), i)})
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := openPG(t, url, nil)
	rep, err := st.VerifyAudit(context.Background(), &audit.VerifyOptions{PublicKey: pub})
	if err != nil {
		t.Fatalf("verify: %v (report %+v)", err, rep)
	}
	const perWriter = n + n/2 // the pairs' second events
	if rep.Lines != writers*perWriter || rep.Signed != writers*perWriter || rep.Unchained != 0 {
		t.Errorf("report %+v, want %d lines, all signed", rep, writers*perWriter)
	}
	for w, wst := range stores {
		// The chain holds its writer's events only, each once, each
		// goroutine's in its order, a pair's two side by side; and it
		// verifies as a file.
		var file bytes.Buffer
		seen := map[string]int{}
		last := map[int]int{}
		var prev audit.Event
		for _, line := range chainLines(t, url, wst.instance.Load()) {
			var ev audit.Event
			if err := ev.UnmarshalJSON(line); err != nil {
				t.Fatal(err)
			}
			switch ev.Caller {
			case fmt.Sprintf("writer-%d", w):
				g := ev.Index % 4
				if l, ok := last[g]; ok && ev.Index != l+4 {
					t.Errorf("writer %d: goroutine %d wrote %d after %d", w, g, ev.Index, l)
				}
				last[g] = ev.Index
			case fmt.Sprintf("writer-%d-pair", w):
				if prev.Caller != fmt.Sprintf("writer-%d", w) || prev.Index != ev.Index {
					t.Errorf("writer %d: the pair's second event %d follows %s/%d", w, ev.Index, prev.Caller, prev.Index)
				}
			default:
				t.Errorf("writer %d's chain holds an event of %s", w, ev.Caller)
			}
			seen[fmt.Sprintf("%s/%d", ev.Caller, ev.Index)]++
			prev = ev
			file.Write(line)
			file.WriteByte('\n')
		}
		for i := range n {
			if k := fmt.Sprintf("writer-%d/%d", w, i); seen[k] != 1 {
				t.Errorf("event %s stored %d times, want 1", k, seen[k])
			}
		}
		if frep, err := audit.Verify(&file, &audit.VerifyOptions{PublicKey: pub}); err != nil || frep.Lines != perWriter {
			t.Errorf("writer %d's chain as a file: %+v, %v", w, frep, err)
		}
	}
}

// TestAuditVerifyFindsACutOrForgedChain tampers with the chains of three
// replicas as someone with write access to the database could: rows
// reordered, removed (from a chain's start, middle or end, which the
// table's own end does not show), moved or copied from one chain to
// another, a chain's head or rows removed, a chain forged. VerifyAudit
// names the row and the chain at fault, whichever chain it is in.
func TestAuditVerifyFindsACutOrForgedChain(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// Each case gets the chains' ids a, b, c (the replicas', in order)
	// and tampers with them. b is the middle one: a cut of it does not
	// move the table's last row, which c holds.
	for _, tc := range []struct {
		name     string
		signed   bool
		tamper   []string // %[1]d a, %[2]d b, %[3]d c
		wantRow  int64    // the row of the chain at fault named, 0 for an empty chain
		wantHead bool     // ErrHeadMismatch, else ErrBrokenChain (or wantErr)
		wantErr  error
	}{
		{name: "two rows of a chain swapped", tamper: []string{
			"UPDATE toolwire.audit_events SET chain_seq = -chain_seq WHERE chain = %[2]d AND chain_seq IN (2, 3)",
			"UPDATE toolwire.audit_events SET chain_seq = 5 + chain_seq WHERE chain = %[2]d AND chain_seq IN (-2, -3)",
		}, wantRow: 2},
		{name: "a row removed from a chain's middle", tamper: []string{
			"DELETE FROM toolwire.audit_events WHERE chain = %[2]d AND chain_seq = 3",
		}, wantRow: 4},
		{name: "a chain's first row removed", tamper: []string{
			"DELETE FROM toolwire.audit_events WHERE chain = %[2]d AND chain_seq = 1",
		}, wantRow: 2},
		{name: "a chain cut at its end, not the table's", tamper: []string{
			"DELETE FROM toolwire.audit_events WHERE chain = %[2]d AND chain_seq = 5",
		}, wantRow: 4, wantHead: true},
		{name: "a chain cut and its head moved back, unsigned", tamper: []string{
			"DELETE FROM toolwire.audit_events WHERE chain = %[2]d AND chain_seq = 5",
			"UPDATE toolwire.audit_chains SET seq = 4 WHERE chain = %[2]d",
		}, wantRow: 4, wantHead: true}, // the hash still names row 5
		{name: "a chain's rows removed, its head left", tamper: []string{
			"DELETE FROM toolwire.audit_events WHERE chain = %[2]d",
		}, wantRow: 0, wantHead: true},
		{name: "a chain's head removed, its rows left", tamper: []string{
			"DELETE FROM toolwire.audit_chains WHERE chain = %[2]d",
		}, wantRow: 5, wantHead: true},
		{name: "a row moved to the end of another chain", tamper: []string{
			"UPDATE toolwire.audit_events SET chain = %[1]d, chain_seq = 6 WHERE chain = %[2]d AND chain_seq = 3",
			"UPDATE toolwire.audit_chains h SET seq = 6, hash = sha256(e.line) FROM toolwire.audit_events e WHERE h.chain = %[1]d AND e.chain = %[1]d AND e.chain_seq = 6",
		}, wantRow: 6},
		{name: "a signed row of one chain replayed at the end of another", signed: true, tamper: []string{
			"INSERT INTO toolwire.audit_events (chain, chain_seq, line, kind, at) SELECT %[1]d, 6, line, kind, at FROM toolwire.audit_events WHERE chain = %[3]d AND chain_seq = 5",
			"UPDATE toolwire.audit_chains h SET seq = 6, hash = sha256(e.line) FROM toolwire.audit_events e WHERE h.chain = %[1]d AND e.chain = %[1]d AND e.chain_seq = 6",
		}, wantRow: 6},
		{name: "a forged chain of rows without prev", tamper: []string{
			`INSERT INTO toolwire.audit_events (chain, chain_seq, line, kind, at) VALUES (%[3]d + 7, 1, convert_to('{"time":"2026-07-01T12:00:00Z","kind":"call.executed","tool":"x"}', 'UTF8'), 'call.executed', now())`,
			`INSERT INTO toolwire.audit_chains (chain, seq, hash) SELECT %[3]d + 7, 1, sha256(line) FROM toolwire.audit_events WHERE chain = %[3]d + 7`,
		}, wantRow: 1},
		{name: "a row changed, signed", signed: true, tamper: []string{
			"UPDATE toolwire.audit_events SET line = convert_to(replace(convert_from(line, 'UTF8'), 'writer', 'hacker'), 'UTF8') WHERE chain = %[2]d AND chain_seq = 2",
		}, wantRow: 2, wantErr: audit.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.DB(t)
			o := testOptions()
			if tc.signed {
				o.AuditSigningKey = priv
			}
			var ids []any
			var sts []*Store
			for range 3 {
				st := openPG(t, url, o)
				sts = append(sts, st)
				ids = append(ids, st.instance.Load())
			}
			for i := range 5 {
				for w, st := range sts {
					if err := st.Audit().Write(event(fmt.Sprintf("writer-%d", w), i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			vo := &audit.VerifyOptions{}
			if tc.signed {
				vo.PublicKey = pub
			}
			if rep, err := sts[0].VerifyAudit(context.Background(), vo); err != nil || rep.Lines != 15 {
				t.Fatalf("before tampering: %+v, %v", rep, err)
			}
			for _, stmt := range tc.tamper {
				sql(t, url, fmt.Sprintf(stmt, ids...))
			}
			_, err := sts[0].VerifyAudit(context.Background(), vo)
			var re *RowError
			want := tc.wantErr
			switch {
			case want != nil:
			case tc.wantHead:
				want = ErrHeadMismatch
			default:
				want = audit.ErrBrokenChain
			}
			if !errors.As(err, &re) || re.ChainRow != tc.wantRow || !errors.Is(err, want) {
				t.Fatalf("verify = %v, want row %d of a chain: %v", err, tc.wantRow, want)
			}
		})
	}
}

// TestAuditLinesAreTheFileSinksLines: one writer, the same events, the
// same key: the table's lines are byte for byte the file's.
func TestAuditLinesAreTheFileSinksLines(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	fsink, err := audit.OpenFileWith(path, &audit.FileSinkOptions{SigningKey: priv})
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.AuditSigningKey = priv
	table := openPG(t, url, o).Audit()
	for i := range 5 {
		for _, s := range []audit.Sink{fsink, table} {
			if err := s.Write(event("one", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsink.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'})
	got := tableLines(t, url)
	if len(got) != len(want) {
		t.Fatalf("%d rows, %d lines", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("row %d:\n %s\nline %d:\n %s", i+1, got[i], i+1, want[i])
		}
	}
}

// TestAuditVerifyNamesTheBadRow tampers with rows as someone with write
// access to the database could, and checks that VerifyAudit names the
// first row that is not intact.
func TestAuditVerifyNamesTheBadRow(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		signed  bool
		tamper  string
		wantSeq int64
		want    error
		intact  int
	}{
		{"changed, unsigned", false, "UPDATE toolwire.audit_events SET line = convert_to(replace(convert_from(line, 'UTF8'), 'writer', 'hacker'), 'UTF8') WHERE seq = 5", 6, audit.ErrBrokenChain, 4},
		{"changed, signed", true, "UPDATE toolwire.audit_events SET line = convert_to(replace(convert_from(line, 'UTF8'), 'writer', 'hacker'), 'UTF8') WHERE seq = 5", 5, audit.ErrBadSignature, 4},
		{"removed", false, "DELETE FROM toolwire.audit_events WHERE seq = 7", 8, audit.ErrBrokenChain, 5},
		{"not an event", false, "UPDATE toolwire.audit_events SET line = 'not json'::bytea WHERE seq = 3", 3, audit.ErrNotEvent, 2},
		{"cut from the end", false, "DELETE FROM toolwire.audit_events WHERE seq > 8", 8, ErrHeadMismatch, 8},
		{"split by a newline", false, `UPDATE toolwire.audit_events SET line = convert_to(replace(convert_from(line, 'UTF8'), '","', E'",\n"'), 'UTF8') WHERE seq = 4`, 4, audit.ErrNotEvent, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.DB(t)
			o := testOptions()
			if tc.signed {
				o.AuditSigningKey = priv
			}
			st := openPG(t, url, o)
			for i := range 10 {
				if err := st.Audit().Write(event("writer", i)); err != nil {
					t.Fatal(err)
				}
			}
			vo := &audit.VerifyOptions{}
			if tc.signed {
				vo.PublicKey = pub
			}
			if _, err := st.VerifyAudit(context.Background(), vo); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			sql(t, url, tc.tamper)
			rep, err := st.VerifyAudit(context.Background(), vo)
			var re *RowError
			if !errors.As(err, &re) || re.Seq != tc.wantSeq || !errors.Is(err, tc.want) {
				t.Fatalf("verify = %v, want row %d: %v", err, tc.wantSeq, tc.want)
			}
			if rep.Intact != tc.intact {
				t.Errorf("intact = %d, want %d", rep.Intact, tc.intact)
			}
		})
	}
}

// TestAuditWriterCatchesUp: a sink whose idea of its chain's head is
// stale (a statement it could not know the outcome of committed)
// builds on the real head, not its own.
func TestAuditWriterCatchesUp(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	st := openPG(t, url, nil)
	a := st.Audit().(*auditTable)
	// Another sink on the same chain: what a's lost statement wrote.
	other := newAuditTable(st.pool, nil, &st.instance, slog.New(slog.DiscardHandler))
	for i := range 6 {
		s := a
		if i%3 == 2 {
			s = other
		}
		if err := s.Write(event("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := st.VerifyAudit(context.Background(), nil); err != nil || rep.Lines != 6 {
		t.Errorf("verify: %+v, %v", rep, err)
	}
	if n := len(chainLines(t, url, st.instance.Load())); n != 6 {
		t.Errorf("the chain has %d rows, want 6", n)
	}
}

// oldAppend appends ev to the fleet's one chain as a toolwire before
// chains per instance did: the head from toolwire.audit_head, the line
// through toolwire.audit_append.
func oldAppend(t *testing.T, c *pgx.Conn, ev *audit.Event) {
	t.Helper()
	ctx := context.Background()
	var seq int64
	var hash []byte
	if err := c.QueryRow(ctx, "SELECT seq, hash FROM toolwire.audit_head").Scan(&seq, &hash); err != nil {
		t.Fatal(err)
	}
	event, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	line := audit.AppendChain(event, [32]byte(hash), nil)
	sum := sha256.Sum256(line)
	var appended bool
	if err := c.QueryRow(ctx, "SELECT appended, head_seq, head_hash FROM toolwire.audit_append($1, $2, $3, $4, $5, $6, NULL, NULL)",
		seq, line, sum[:], string(ev.Kind), ev.Time, int32(0)).Scan(&appended, &seq, &hash); err != nil || !appended {
		t.Fatalf("the old append: %v (appended %v)", err, appended)
	}
}

// TestAuditMigratesTheFleetsOneChain: a database whose audit is the one
// chain of the fleet (schema version 7) is migrated: its rows become
// chain 0, which verifies with the new chains beside it; a replica of the
// toolwire before, during a rolling update, still appends to chain 0;
// and a cut of chain 0 is found.
func TestAuditMigratesTheFleetsOneChain(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE SCHEMA toolwire;
CREATE TABLE toolwire.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:7] {
		if _, err := c.Exec(ctx, m.sql); err != nil {
			t.Fatalf("migration %d: %v", m.version, err)
		}
		if _, err := c.Exec(ctx, "INSERT INTO toolwire.schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		oldAppend(t, c, event("old", i))
	}

	st := openPG(t, url, nil) // migrates
	for i := range 3 {
		if err := st.Audit().Write(event("new", i)); err != nil {
			t.Fatal(err)
		}
	}
	oldAppend(t, c, event("old", 4)) // a replica not yet updated
	rep, err := st.VerifyAudit(ctx, nil)
	if err != nil || rep.Lines != 8 {
		t.Fatalf("verify after the migration: %+v, %v; want 8 rows intact", rep, err)
	}
	if n := len(chainLines(t, url, 0)); n != 5 {
		t.Errorf("chain 0 has %d rows, want the old chain's 5", n)
	}
	if n := len(chainLines(t, url, st.instance.Load())); n != 3 {
		t.Errorf("the replica's chain has %d rows, want 3", n)
	}
	// The fleet's order is kept across the migration.
	var seqs []int64
	rows, err := c.Query(ctx, "SELECT seq FROM toolwire.audit_events WHERE chain = 0 ORDER BY chain_seq")
	if err != nil {
		t.Fatal(err)
	}
	if seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(seqs) || seqs[0] != 1 || seqs[3] != 4 || seqs[4] <= 7 {
		t.Errorf("chain 0's seqs %v: want 1…4 kept and the fifth after the replica's rows", seqs)
	}

	sql(t, url, "DELETE FROM toolwire.audit_events WHERE chain = 0 AND chain_seq = 5")
	_, err = st.VerifyAudit(ctx, nil)
	var re *RowError
	if !errors.As(err, &re) || re.Chain != 0 || !errors.Is(err, ErrHeadMismatch) {
		t.Errorf("chain 0 cut at its end: verify = %v, want its head mismatch", err)
	}
}

// TestOutcomeAppendsProbeTheTableByCall: the one-outcome check of every
// append looks a call up through the table's index, never by reading the
// whole table. A check written as one query over a batch's calls was
// planned while the table was empty, as a scan of it, and kept that plan
// as the table grew: 1.2 ms an append after 6,000 calls in the fleet
// benchmark, two thirds of the database's time. The table's scan count
// says which plan ran, whatever the machine's speed.
func TestOutcomeAppendsProbeTheTableByCall(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	st := openPG(t, url, nil)
	const calls = 40
	sink := st.Audit().(audit.BatchSink)
	for i := range calls {
		at := time.Now()
		err := sink.WriteBatch([]*audit.Event{
			{Time: at, Kind: audit.CallRequested, Batch: "probe", Index: i, Tool: "demo__echo"},
			{Time: at, Kind: audit.CallExecuted, Batch: "probe", Index: i, Tool: "demo__echo"},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A backend hands its counts to the statistics when it exits.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var seqScans, indexScans int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := conn.QueryRow(ctx, `SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_user_tables
			WHERE schemaname = 'toolwire' AND relname = 'audit_events'`).Scan(&seqScans, &indexScans)
		if err != nil {
			t.Fatal(err)
		}
		if indexScans >= calls || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if indexScans < calls {
		t.Fatalf("the statistics show %d index scans and %d whole scans of audit_events after %d appends with an outcome each; want an index scan a call", indexScans, seqScans, calls)
	}
	// The store's own start-up reads may scan it; the appends must not.
	if seqScans >= calls/4 {
		t.Errorf("audit_events was scanned whole %d times in %d appends: the outcome check does not use the index", seqScans, calls)
	}
}
