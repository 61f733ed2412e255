package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
)

// writeAuditEvents appends n events to the file at path.
func writeAuditEvents(t *testing.T, path string, opts *audit.FileSinkOptions, n int) {
	t.Helper()
	s, err := audit.OpenFileWith(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.Write(&audit.Event{Time: time.Unix(1700000000, 0).UTC(), Kind: audit.CallExecuted, Index: i, Tool: "demo__echo"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAuditVerifyReportsAnIntactChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	path := filepath.Join(f.dir, "log.jsonl")
	writeAuditEvents(t, path, nil, 4)
	data, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'})
	sum := sha256.Sum256(lines[3])

	o := f.run(t, "", false, "audit", "verify", path)
	o.expect(t, exitOK)
	want := path + ": 4 events, chain intact\nlast line sha256: " + hex.EncodeToString(sum[:]) + "\n" +
		"calls: 0 requested; outcomes: call.executed 4; requested without an outcome: 0, with more than one: 0\n"
	if o.stdout != want {
		t.Errorf("stdout = %q, want %q", o.stdout, want)
	}
}

func TestAuditVerifyNamesTheFirstBadLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	path := filepath.Join(f.dir, "log.jsonl")
	writeAuditEvents(t, path, nil, 4)
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(data, []byte{'\n'})
	lines[1] = bytes.Replace(lines[1], []byte(`"index":1`), []byte(`"index":7`), 1)
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}

	o := f.run(t, "", false, "audit", "verify", path)
	o.expect(t, exitToolErr)
	for _, s := range []string{path + ": line 3: hash chain broken", "line 2 was changed", "; line 1 is intact"} {
		if !strings.Contains(o.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, o.stderr)
		}
	}
	// Line 2 is the changed one: it is not also called intact.
	if strings.Contains(o.stderr, "lines 1-2 are intact") {
		t.Errorf("stderr calls the changed line intact:\n%s", o.stderr)
	}
	if o.stdout != "" {
		t.Errorf("stdout = %q, want nothing", o.stdout)
	}
}

func TestAuditVerifyExplainsALogWrittenBeforeChaining(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	path := filepath.Join(f.dir, "old.jsonl")
	var old bytes.Buffer
	for i := range 2 {
		line, _ := json.Marshal(audit.Event{Kind: audit.CallRequested, Index: i})
		old.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, old.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	o := f.run(t, "", false, "audit", "verify", path)
	o.expect(t, exitToolErr)
	if !strings.Contains(o.stderr, "2 events, none hash-chained") {
		t.Errorf("stderr = %q", o.stderr)
	}

	f.run(t, "", false, "audit", "verify", filepath.Join(f.dir, "missing.jsonl")).expect(t, exitUsage)
}

func TestAuditKeygenThenVerifySignatures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	prefix := filepath.Join(f.dir, "signer")
	o := f.run(t, "", false, "audit", "keygen", "--out", prefix)
	o.expect(t, exitOK)
	if !strings.Contains(o.stderr, prefix+".key") || !strings.Contains(o.stderr, prefix+".pub") {
		t.Errorf("stderr does not name both files: %q", o.stderr)
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{prefix + ".key": 0o600, prefix + ".pub": 0o644} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got&^want != 0 {
				t.Errorf("%s has mode %v, want at most %v", p, got, want)
			}
		}
	}
	// An existing key is never overwritten.
	before, _ := os.ReadFile(prefix + ".key")
	f.run(t, "", false, "audit", "keygen", "--out", prefix).expect(t, exitUsage)
	if after, _ := os.ReadFile(prefix + ".key"); !bytes.Equal(before, after) {
		t.Error("a second keygen changed the private key")
	}

	key, err := audit.ReadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "signed.jsonl")
	writeAuditEvents(t, path, &audit.FileSinkOptions{SigningKey: key}, 3)
	o = f.run(t, "", false, "audit", "verify", "--public-key", prefix+".pub", path)
	o.expect(t, exitOK)
	if !strings.HasPrefix(o.stdout, path+": 3 events, chain intact, every chained line signed by the key\n") {
		t.Errorf("stdout = %q", o.stdout)
	}

	other := filepath.Join(f.dir, "other")
	f.run(t, "", false, "audit", "keygen", "--out", other).expect(t, exitOK)
	o = f.run(t, "", false, "audit", "verify", "--public-key", other+".pub", path)
	o.expect(t, exitToolErr)
	if !strings.Contains(o.stderr, "line 1: bad signature") {
		t.Errorf("verify with another key: stderr = %q", o.stderr)
	}
	// A private key passed as the public one is a usage error, not a pass.
	f.run(t, "", false, "audit", "verify", "--public-key", prefix+".key", path).expect(t, exitUsage)
}

// TestAuditLogOfRealCallsVerifies checks the log the CLI itself writes.
func TestAuditLogOfRealCallsVerifies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.run(t, "", false, "call", "demo__echo", "text=one").expect(t, exitOK)
	f.run(t, "", false, "call", "demo__echo", "text=two").expect(t, exitOK)
	o := f.run(t, "", false, "audit", "verify", f.audit)
	o.expect(t, exitOK)
	if !strings.HasPrefix(o.stdout, f.audit+": 10 events, chain intact\n") {
		t.Errorf("stdout = %q, want 10 events (two runs of five steps)", o.stdout)
	}
}

// Issue 22.17: verify counts the calls beside the chain's state: how many
// were requested, their outcomes by kind, and the requested calls with no
// outcome or more than one; --json says the same as one object, and
// says a broken chain as intact false with the error.
func TestAuditVerifyCountsCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	path := filepath.Join(f.dir, "log.jsonl")
	s, err := audit.OpenFileWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []audit.Event{
		{Kind: audit.CallRequested, Batch: "b1"}, {Kind: audit.ValidationPassed, Batch: "b1"}, {Kind: audit.CallExecuted, Batch: "b1"},
		{Kind: audit.CallRequested, Batch: "b2", Index: 1}, {Kind: audit.CallErrored, Batch: "b2", Index: 1}, {Kind: audit.CallErrored, Batch: "b2", Index: 1},
		{Kind: audit.CallRequested, Batch: "b3"},
		{Kind: audit.CallRefused, Batch: "b4"},
	} {
		ev.Time = time.Unix(1700000000, 0).UTC()
		if err := s.Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := f.run(t, "", false, "audit", "verify", path)
	o.expect(t, exitOK)
	want := "calls: 3 requested; outcomes: call.errored 2, call.executed 1, call.refused 1; requested without an outcome: 1, with more than one: 1\n"
	if !strings.HasSuffix(o.stdout, want) || !strings.HasPrefix(o.stdout, path+": 8 events, chain intact\n") {
		t.Errorf("stdout = %q, want the chain's state and then %q", o.stdout, want)
	}
	o = f.run(t, "", false, "audit", "verify", "--json", path)
	o.expect(t, exitOK)
	var got struct {
		Source string
		Intact bool
		Events int
		Head   string
		Calls  struct {
			Requested       int
			Outcomes        map[string]int
			WithoutOutcome  int
			SeveralOutcomes int
		}
	}
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil {
		t.Fatalf("--json printed %q: %v", o.stdout, err)
	}
	if got.Source != path || !got.Intact || got.Events != 8 || got.Head == "" || got.Calls.Requested != 3 ||
		got.Calls.Outcomes["call.errored"] != 2 || got.Calls.Outcomes["call.executed"] != 1 || got.Calls.Outcomes["call.refused"] != 1 ||
		len(got.Calls.Outcomes) != 3 || got.Calls.WithoutOutcome != 1 || got.Calls.SeveralOutcomes != 1 {
		t.Errorf("--json: %+v", got)
	}

	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, bytes.Replace(data, []byte(`"batch":"b3"`), []byte(`"batch":"b9"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	o = f.run(t, "", false, "audit", "verify", "--json", path)
	o.expect(t, exitToolErr)
	var broken struct {
		Intact bool
		Error  string
	}
	if err := json.Unmarshal([]byte(o.stdout), &broken); err != nil || broken.Intact || !strings.Contains(broken.Error, "hash chain broken") {
		t.Errorf("--json of a broken chain: %q (%v)", o.stdout, err)
	}
}
