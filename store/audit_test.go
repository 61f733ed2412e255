package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// TestAuditOneChainAcrossReplicas: three replicas write concurrently into
// one table; the result is one chain that verifies, signed throughout,
// holding every event once.
func TestAuditOneChainAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const writers, n = 3, 60
	sinks := make([]audit.Sink, writers)
	for i := range sinks {
		o := testOptions()
		o.AuditSigningKey = priv
		sinks[i] = openPG(t, url, o).Audit()
	}
	start := make(chan struct{})
	errs := make(chan error, writers*n)
	var wg sync.WaitGroup
	for w, sink := range sinks {
		// Two goroutines per replica: the sink serializes its own.
		for g := range 2 {
			wg.Go(func() {
				<-start
				for i := g; i < n; i += 2 {
					if err := sink.Write(event(fmt.Sprintf("writer-%d", w), i)); err != nil {
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
	if rep.Lines != writers*n || rep.Signed != writers*n || rep.Unchained != 0 {
		t.Errorf("report %+v, want %d lines, all signed", rep, writers*n)
	}
	// Every event once, and the lines verify as a file too: the table
	// holds what the file sink would have written.
	var file bytes.Buffer
	seen := map[string]int{}
	for _, line := range tableLines(t, url) {
		var ev audit.Event
		if err := ev.UnmarshalJSON(line); err != nil {
			t.Fatal(err)
		}
		seen[fmt.Sprintf("%s/%d", ev.Caller, ev.Index)]++
		file.Write(line)
		file.WriteByte('\n')
	}
	for w := range writers {
		for i := range n {
			if k := fmt.Sprintf("writer-%d/%d", w, i); seen[k] != 1 {
				t.Errorf("event %s stored %d times, want 1", k, seen[k])
			}
		}
	}
	if frep, err := audit.Verify(&file, &audit.VerifyOptions{PublicKey: pub}); err != nil || frep.Head != rep.Head {
		t.Errorf("the lines as a file: %+v, %v; want the table's head %s", frep, err, rep.Head)
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

// TestAuditWriterCatchesUp: a sink whose idea of the head is stale (the
// other replica wrote since) builds on the real head, not its own.
func TestAuditWriterCatchesUp(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	for i := range 6 {
		s := a
		if i%3 == 2 {
			s = b
		}
		if err := s.Audit().Write(event("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := a.VerifyAudit(context.Background(), nil); err != nil || rep.Lines != 6 {
		t.Errorf("verify: %+v, %v", rep, err)
	}
}
