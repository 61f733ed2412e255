package audit_test

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/benchkit"
)

// readLines parses every line of the JSON Lines file at path.
func readLines(t *testing.T, path string) []audit.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("file does not end in a newline: %q", data[max(0, len(data)-40):])
	}
	var out []audit.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d is not an event: %v\n%s", len(out)+1, err, sc.Bytes())
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func openFile(t *testing.T, path string) *audit.FileSink {
	t.Helper()
	s, err := audit.OpenFile(path)
	if err != nil {
		t.Fatalf("OpenFile(%s): %v", path, err)
	}
	return s
}

func TestFileSinkWritesOneLinePerEventAndAppendsAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openFile(t, path)
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 3 {
		if err := s.Write(&audit.Event{Time: at, Kind: audit.CallRequested, Index: i, Error: "multi\nline"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openFile(t, path)
	if err := s.Write(&audit.Event{Time: at, Kind: audit.CallExecuted, Index: 3, Duration: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	evs := readLines(t, path)
	if len(evs) != 4 {
		t.Fatalf("file has %d events, want 4 (reopen must append, not truncate)", len(evs))
	}
	for i, ev := range evs {
		if ev.Index != i || !ev.Time.Equal(at) {
			t.Errorf("line %d: Index=%d Time=%v", i, ev.Index, ev.Time)
		}
	}
	if evs[0].Error != "multi\nline" {
		t.Errorf("newline inside a field did not survive: %q", evs[0].Error)
	}
	if evs[3].Kind != audit.CallExecuted || evs[3].Duration != time.Millisecond {
		t.Errorf("appended event = %+v", evs[3])
	}
}

func TestFileSinkCreatesPrivateFileAndDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX permissions")
	}
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "audit.jsonl")
	s := openFile(t, path)
	defer s.Close()
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700, filepath.Dir(dir): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has mode %v, want %v", p, got, want)
		}
	}
}

func TestFileSinkWriteAfterCloseFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openFile(t, path)
	if err := s.Write(&audit.Event{Kind: audit.CallRequested}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err := s.Write(&audit.Event{Kind: audit.CallExecuted})
	if err == nil || !strings.Contains(err.Error(), "closed") || !strings.Contains(err.Error(), path) {
		t.Errorf("Write after Close = %v, want an error naming the closed file", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if evs := readLines(t, path); len(evs) != 1 {
		t.Errorf("file has %d events, want 1", len(evs))
	}
}

func TestOpenFileFailsWhenDirectoryCannotBeCreated(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(blocker, "audit.jsonl")
	s, err := audit.OpenFile(path)
	if err == nil {
		s.Close()
		t.Fatal("OpenFile under a regular file succeeded")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the path", err)
	}
}

func TestFileSinkWriteFailsForUnmarshalableEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openFile(t, path)
	defer s.Close()
	if err := s.Write(&audit.Event{Args: json.RawMessage(`{"broken`)}); err == nil {
		t.Error("Write of an event with invalid Args succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Errorf("a failed write left %q in the file", data)
	}
}

func TestFileSinkConcurrentRecordsYieldCompleteLines(t *testing.T) {
	const goroutines, perG = 8, 50
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openFile(t, path)
	log := audit.NewLog(s, nil)
	// A long field makes a torn or interleaved line very likely to show.
	pad := strings.Repeat("p", 4096)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				// A call's request and outcome: the request is
				// written with the outcome, in one batch.
				log.Record(audit.Event{Kind: audit.CallRequested, Batch: fmt.Sprintf("g%d", g), Index: i, Error: pad})
				log.Record(audit.Event{Kind: audit.CallExecuted, Batch: fmt.Sprintf("g%d", g), Index: i, Error: pad})
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if log.Failures() != 0 {
		t.Errorf("Failures() = %d", log.Failures())
	}
	evs := readLines(t, path)
	if len(evs) != 2*goroutines*perG {
		t.Fatalf("file has %d events, want %d", len(evs), 2*goroutines*perG)
	}
	seen := map[string]bool{}
	lastIndex := map[string]int{}
	for _, ev := range evs {
		key := fmt.Sprintf("%s/%d/%s", ev.Batch, ev.Index, ev.Kind)
		if seen[key] || ev.Error != pad {
			t.Fatalf("duplicate or damaged event %s", key)
		}
		seen[key] = true
		// One goroutine's events keep their order: each call's request,
		// then its outcome, then the next call's.
		last, ok := lastIndex[ev.Batch]
		switch {
		case ev.Kind == audit.CallRequested && ok && ev.Index != last+1:
			t.Errorf("%s: request %d after %d", ev.Batch, ev.Index, last)
		case ev.Kind == audit.CallExecuted && (!ok || ev.Index != last):
			t.Errorf("%s: outcome %d after request %d", ev.Batch, ev.Index, last)
		}
		if !ok && ev.Index != 0 {
			t.Errorf("%s: first request is %d", ev.Batch, ev.Index)
		}
		lastIndex[ev.Batch] = ev.Index
	}
}

func TestFileSinkIsSafeForDirectConcurrentWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openFile(t, path)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := s.Write(&audit.Event{Batch: fmt.Sprint(g), Index: i, Error: strings.Repeat("x", 2000)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if evs := readLines(t, path); len(evs) != 400 {
		t.Errorf("file has %d events, want 400", len(evs))
	}
}

func TestWriterSinkWritesJSONLines(t *testing.T) {
	var buf bytes.Buffer
	s := audit.WriterSink{W: &buf}
	for i := range 2 {
		if err := s.Write(&audit.Event{Kind: audit.CallRequested, Index: i, Duration: 1500 * time.Microsecond}); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	for i, l := range lines {
		var ev audit.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Index != i || ev.Duration != 1500*time.Microsecond {
			t.Errorf("line %d = %s (%v)", i, l, err)
		}
	}
}

func TestMemoryEventsIsACopy(t *testing.T) {
	m := &audit.Memory{}
	ev := audit.Event{Kind: audit.CallRequested, Tool: "a"}
	if err := m.Write(&ev); err != nil {
		t.Fatal(err)
	}
	ev.Tool = "changed after write"
	got := m.Events()
	got[0].Tool = "changed in the copy"
	if again := m.Events(); len(again) != 1 || again[0].Tool != "a" {
		t.Errorf("Memory kept %+v, want the event as written", again)
	}
}

// BenchmarkFileSinkWrite measures one event appended to a JSON Lines file:
// encoding, chaining, and the write under the file lock.
func BenchmarkFileSinkWrite(b *testing.B) {
	benchmarkFileSinkWrite(b, nil)
}

// BenchmarkFileSinkWriteSigned adds an Ed25519 signature to each line.
func BenchmarkFileSinkWriteSigned(b *testing.B) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	benchmarkFileSinkWrite(b, &audit.FileSinkOptions{SigningKey: priv})
}

func benchmarkFileSinkWrite(b *testing.B, opts *audit.FileSinkOptions) {
	s, err := audit.OpenFileWith(filepath.Join(b.TempDir(), "audit.jsonl"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ev := &audit.Event{
		Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Kind: audit.CallExecuted, Batch: "b1", Index: 2,
		Tool: "demo__echo", Source: "demo", Original: "echo", Tier: "read", Duration: 1500 * time.Microsecond, ResultBytes: 120,
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// oneAtATime hides a sink's WriteBatch: a Log then writes each event on
// its own, under its lock, as before batches.
type oneAtATime struct{ s audit.Sink }

func (o oneAtATime) Write(ev *audit.Event) error { return o.s.Write(ev) }

// BenchmarkLogCallToFile records the three events of a read call
// (call.requested, validation.passed, call.executed) through a Log to a
// file: each event written on its own (event), or as the Log writes to a
// FileSink (batched: the request with the validation, and the events of
// concurrent calls together); one call at a time (serial) and from many
// goroutines (parallel).
func BenchmarkLogCallToFile(b *testing.B) {
	for _, mode := range []string{"event", "batched"} {
		for _, par := range []bool{false, true} {
			name := mode + "/serial"
			if par {
				name = mode + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				s, err := audit.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var sink audit.Sink = s
				if mode == "event" {
					sink = oneAtATime{s}
				}
				log := audit.NewLog(sink, nil)
				var n atomic.Int64
				call := func() {
					i := int(n.Add(1))
					ev := audit.Event{Kind: audit.CallRequested, Batch: "b", Index: i, Tool: "demo__echo", Source: "demo", Original: "echo", Tier: "read", ArgsBytes: 20}
					_ = log.Record(ev)
					ev.Kind, ev.Duration = audit.ValidationPassed, 3*time.Microsecond
					_ = log.Record(ev)
					ev.Kind, ev.Duration, ev.ResultBytes = audit.CallExecuted, 120*time.Microsecond, 80
					_ = log.Record(ev)
				}
				b.ReportAllocs()
				cpu0 := benchkit.CPU(b)
				if par {
					b.SetParallelism(4) // 8 goroutines on 2 cores, as the gateway's callers
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							call()
						}
					})
				} else {
					for b.Loop() {
						call()
					}
				}
				b.ReportMetric(float64(benchkit.CPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestFileSinkSignedBatchesVerify: batches of several events, written
// from several goroutines at once to a signed file, make lines each
// signed on its own and chained, in order: the file verifies with the
// public key, every event once, a batch's events side by side.
func TestFileSinkSignedBatchesVerify(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := audit.OpenFileWith(path, &audit.FileSinkOptions{SigningKey: priv})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, batches = 4, 25
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range batches {
				b := fmt.Sprintf("g%d-%d", g, i)
				evs := []*audit.Event{{Kind: audit.CallRequested, Batch: b}, {Kind: audit.ValidationPassed, Batch: b}, {Kind: audit.CallExecuted, Batch: b}}
				if err := s.WriteBatch(evs); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := audit.Verify(f, &audit.VerifyOptions{PublicKey: pub})
	if err != nil || rep.Lines != goroutines*batches*3 || rep.Signed != rep.Lines {
		t.Fatalf("verify: %+v, %v; want %d lines, each signed", rep, err, goroutines*batches*3)
	}
	evs := readLines(t, path)
	for i := 0; i+2 < len(evs); i += 3 {
		if evs[i].Batch != evs[i+1].Batch || evs[i].Batch != evs[i+2].Batch || evs[i].Kind != audit.CallRequested || evs[i+2].Kind != audit.CallExecuted {
			t.Fatalf("lines %d-%d are not one batch in order: %+v %+v %+v", i+1, i+3, evs[i], evs[i+1], evs[i+2])
		}
	}
}
