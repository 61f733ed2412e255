package audit_test

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
)

var zeros = strings.Repeat("0", 64)

// testEvent is the i-th event the tests write.
func testEvent(i int) *audit.Event {
	return &audit.Event{
		Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Kind: audit.CallExecuted, Index: i,
		Tool: fmt.Sprintf("tool%d", i), Duration: time.Duration(i+1) * time.Millisecond,
	}
}

// writeEvents appends events from..to-1 to the file at path.
func writeEvents(t *testing.T, path string, opts *audit.FileSinkOptions, from, to int) {
	t.Helper()
	s, err := audit.OpenFileWith(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		if err := s.Write(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawLines returns the file's lines without their newlines.
func rawLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'})
}

// joinLines is the file holding lines.
func joinLines(lines [][]byte) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func verifyBytes(data []byte, pub ed25519.PublicKey) (audit.Report, error) {
	return audit.Verify(bytes.NewReader(data), &audit.VerifyOptions{PublicKey: pub})
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func newKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

var (
	unsignedLine = regexp.MustCompile(`^\{.*,"prev":"([0-9a-f]{64})"\}$`)
	signedLine   = regexp.MustCompile(`^(\{.*,"prev":"([0-9a-f]{64})")(,"sig":"([A-Za-z0-9+/]{86}==)")\}$`)
)

func TestFileSinkChainsEachLineToThePreviousOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, path, nil, 0, 4)
	lines := rawLines(t, path)
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4", len(lines))
	}
	want := zeros
	for i, l := range lines {
		m := unsignedLine.FindSubmatch(l)
		if m == nil {
			t.Fatalf("line %d does not end in a prev member: %s", i+1, l)
		}
		if string(m[1]) != want {
			t.Errorf("line %d: prev %s, want %s", i+1, m[1], want)
		}
		want = sha(l)
		// Readers that know nothing of the chain still read the event.
		var ev audit.Event
		if err := json.Unmarshal(l, &ev); err != nil || ev.Tool != fmt.Sprintf("tool%d", i) || ev.Duration != time.Duration(i+1)*time.Millisecond {
			t.Errorf("line %d reads as %+v (%v)", i+1, ev, err)
		}
	}
	data, _ := os.ReadFile(path)
	rep, err := verifyBytes(data, nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep != (audit.Report{Lines: 4, Intact: 4, Head: sha(lines[3])}) {
		t.Errorf("Report = %+v", rep)
	}
}

func TestFileSinkSignsEachLine(t *testing.T) {
	pub, priv := newKey(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, path, &audit.FileSinkOptions{SigningKey: priv}, 0, 3)
	lines := rawLines(t, path)
	prev := zeros
	for i, l := range lines {
		m := signedLine.FindSubmatch(l)
		if m == nil {
			t.Fatalf("line %d is not a signed line: %s", i+1, l)
		}
		if string(m[2]) != prev {
			t.Errorf("line %d: prev %s, want %s", i+1, m[2], prev)
		}
		// The signature covers the line as it was before sig was added.
		sig, _ := base64.StdEncoding.DecodeString(string(m[4]))
		if !ed25519.Verify(pub, append(m[1], '}'), sig) {
			t.Errorf("line %d: signature does not cover the line without its sig member", i+1)
		}
		prev = sha(l) // the hash covers the sig too
	}
	rep, err := verifyBytes(joinLines(lines), pub)
	if err != nil || rep.Lines != 3 || rep.Signed != 3 {
		t.Errorf("Verify = %+v, %v; want 3 lines, 3 signed", rep, err)
	}
	// Without the key the chain still verifies; signatures are not counted.
	if rep, err := verifyBytes(joinLines(lines), nil); err != nil || rep.Lines != 3 || rep.Signed != 0 {
		t.Errorf("Verify without key = %+v, %v", rep, err)
	}
}

// These are the limits Verify's documentation admits: they hold today and
// a change that lifted one should update the documentation with the test.
// rechain recomputes every prev from line from on, as anyone able to write
// an unsigned file can: the chain alone holds no secret.
func TestFileSinkResumesChainAfterReopen(t *testing.T) {
	_, priv := newKey(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, path, &audit.FileSinkOptions{SigningKey: priv}, 0, 3)
	writeEvents(t, path, &audit.FileSinkOptions{SigningKey: priv}, 3, 5)
	lines := rawLines(t, path)
	if m := signedLine.FindSubmatch(lines[3]); m == nil || string(m[2]) != sha(lines[2]) {
		t.Fatalf("line 4, first after reopening, does not chain to line 3: %s", lines[3])
	}
	if rep, err := verifyBytes(joinLines(lines), nil); err != nil || rep.Lines != 5 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
}

func TestOpenFileRefusesATornOrForeignLastLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail string
		is   error
	}{
		{"torn", `{"time":"2025-01-02T03:04:05Z","kind":"call.exe`, audit.ErrIncomplete},
		{"foreign", "not an event\n", audit.ErrNotEvent},
		{"blank", "\n", audit.ErrNotEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			writeEvents(t, path, nil, 0, 3)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tc.tail)
			f.Close()
			before, _ := os.ReadFile(path)

			s, err := audit.OpenFile(path)
			if err == nil {
				s.Close()
				t.Fatal("OpenFile succeeded")
			}
			var le *audit.LineError
			if !errors.As(err, &le) || le.Line != 4 || !errors.Is(err, tc.is) {
				t.Errorf("OpenFile = %v, want a line 4 error wrapping %v", err, tc.is)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "line 4") {
				t.Errorf("error %q does not name the file and line 4", msg)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("a refused OpenFile changed the file")
			}
		})
	}
}

func TestFileSinkChainsFromLinesAnotherSinkAppended(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, s := range []*audit.FileSink{a, b, b, a, b, a, a} {
		if err := s.Write(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	if rep, err := verifyBytes(data, nil); err != nil || rep.Lines != 7 {
		t.Errorf("Verify = %+v, %v; want 7 intact lines", rep, err)
	}
}

func TestFileSinkWriteRefusesToChainFromATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(testEvent(0)); err != nil {
		t.Fatal(err)
	}
	// Another writer dies halfway through its line.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"time":`)
	f.Close()
	before, _ := os.ReadFile(path)
	err = s.Write(testEvent(1))
	var le *audit.LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, audit.ErrIncomplete) {
		t.Errorf("Write after a torn line = %v, want a line 2 incomplete error", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("the refused Write changed the file: %q", after[len(before):])
	}
}

func TestOpenFileWithRejectsAMalformedSigningKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if s, err := audit.OpenFileWith(path, &audit.FileSinkOptions{SigningKey: make(ed25519.PrivateKey, 10)}); err == nil {
		s.Close()
		t.Error("OpenFileWith accepted a 10-byte signing key")
	}
}

// TestFileSinksOnOneFileKeepOneChain has two sinks on one file written from
// several goroutines each. Without the file lock, or without re-reading the
// tail when the other sink has written, two lines would carry the same prev.
func TestFileSinksOnOneFileKeepOneChain(t *testing.T) {
	const perSink, goroutines, perG = 2, 3, 500
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var wg sync.WaitGroup
	var sinks []*audit.FileSink
	for range perSink {
		s, err := audit.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, s)
	}
	for si, s := range sinks {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perG {
					if err := s.Write(&audit.Event{Kind: audit.CallRequested, Batch: fmt.Sprintf("s%dg%d", si, g), Index: i}); err != nil {
						t.Error(err)
						return
					}
					runtime.Gosched() // let the sinks take turns often
				}
			}()
		}
	}
	wg.Wait()
	for _, s := range sinks {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	rep, err := verifyBytes(data, nil)
	if want := perSink * goroutines * perG; err != nil || rep.Lines != want {
		t.Errorf("Verify = %+v, %v; want %d intact lines", rep, err, want)
	}
	if evs := readLines(t, path); len(evs) != perSink*goroutines*perG {
		t.Errorf("%d events", len(evs))
	}
}

// TestFileSinkChainAcrossProcesses runs copies of the test binary that
// append to one file at once.
func TestFileSinkChainAcrossProcesses(t *testing.T) {
	const perProcess = 1000
	if path := os.Getenv("AUDIT_TEST_WRITE_TO"); path != "" {
		s, err := audit.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Say the file is open, then start when the parent closes stdin,
		// together with the others.
		fmt.Println("ready")
		if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
			t.Fatal(err)
		}
		for i := range perProcess {
			if err := s.Write(&audit.Event{Kind: audit.CallRequested, Batch: os.Getenv("AUDIT_TEST_WRITER"), Index: i}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "openbsd", "dragonfly", "illumos":
	default:
		t.Skip("no advisory file lock on " + runtime.GOOS)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const processes = 3
	cmds := make([]*exec.Cmd, processes)
	outs := make([]bytes.Buffer, processes)
	starts := make([]io.WriteCloser, processes)
	readies := make([]*bufio.Reader, processes)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestFileSinkChainAcrossProcesses$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), "AUDIT_TEST_WRITE_TO="+path, "AUDIT_TEST_WRITER=p"+strconv.Itoa(i))
		cmds[i].Stderr = &outs[i]
		stdout, err := cmds[i].StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		readies[i] = bufio.NewReader(stdout)
		if starts[i], err = cmds[i].StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until every child has the file open, then start them all.
	for i, r := range readies {
		if line, err := r.ReadString('\n'); line != "ready\n" {
			t.Fatalf("writer %d did not get ready: %q, %v\n%s", i, line, err, outs[i].Bytes())
		}
	}
	for _, w := range starts {
		w.Close()
	}
	for i, c := range cmds {
		rest, _ := io.ReadAll(readies[i]) // every read before Wait
		if err := c.Wait(); err != nil {
			t.Fatalf("writer %d: %v\n%s%s", i, err, rest, outs[i].Bytes())
		}
	}
	data, _ := os.ReadFile(path)
	rep, err := verifyBytes(data, nil)
	if err != nil || rep.Lines != processes*perProcess {
		t.Errorf("Verify = %+v, %v; want %d intact lines", rep, err, processes*perProcess)
	}
	// The writers really overlapped, or this test proves nothing.
	batches := map[string]bool{}
	switches := 0
	prev := ""
	for _, ev := range readLines(t, path) {
		if ev.Batch != prev {
			switches++
			prev = ev.Batch
		}
		batches[ev.Batch] = true
	}
	if len(batches) != processes {
		t.Errorf("events from %d writers, want %d", len(batches), processes)
	}
	t.Logf("%d switches between writers", switches-1)
}
