package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// encodingJSON is the line encoding/json's Encoder writes for ev, as the
// file sink wrote every line before appendLine.
func encodingJSON(t testing.TB, ev *Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(ev.wire()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkAppendLine fails unless appendLine writes ev as encoding/json
// does, or declines it (and leaves the buffer as it was) when declined
// is true.
func checkAppendLine(t testing.TB, ev *Event, declined bool) {
	t.Helper()
	checkAppendJSON(t, ev)
	prefix := []byte("kept")
	got, ok := appendLine(bytes.Clone(prefix), ev)
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("appendLine changed what was in the buffer: %q", got)
	}
	got = got[len(prefix):]
	if ok == declined {
		t.Fatalf("appendLine took the event: %v, want %v (%+v)", ok, !declined, ev)
	}
	if !ok {
		if len(got) != 0 {
			t.Fatalf("appendLine declined the event but appended %q", got)
		}
		return
	}
	if want := encodingJSON(t, ev); !bytes.Equal(got, want) {
		t.Fatalf("appendLine wrote\n%s\nencoding/json writes\n%s", got, want)
	}
}

// checkAppendJSON fails unless AppendJSON appends what json.Marshal
// writes for ev, and MarshalJSON returns it, whether appendLine takes the
// event or not.
func checkAppendJSON(t testing.TB, ev *Event) {
	t.Helper()
	want, wantErr := json.Marshal(ev.wire())
	prefix := []byte("kept")
	got, err := AppendJSON(bytes.Clone(prefix), ev)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("AppendJSON: %v; encoding/json: %v", err, wantErr)
	}
	if err != nil {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("AppendJSON failed but changed the buffer: %q", got)
		}
		return
	}
	if !bytes.Equal(got, append(prefix, want...)) {
		t.Fatalf("AppendJSON wrote\n%s\njson.Marshal writes\n%s", got[len(prefix):], want)
	}
	if m, err := ev.MarshalJSON(); err != nil || !bytes.Equal(m, want) {
		t.Fatalf("MarshalJSON: %s, %v; want %s", m, err, want)
	}
}

func TestAppendLineWritesWhatEncodingJSONWrites(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 30, 1, 120_000_000, time.UTC)
	hostile := "<script>&\"\\\x00\x01\x1f\x7f\b\f\n\r\t\u2028\u2029é\xff\xc3(日本 \U0001F600"
	events := []Event{
		{Time: at, Kind: CallRequested, Batch: "b1", Index: 0, CallID: "c-1", Caller: "alice", Instance: "i1",
			Protocol: "2025-11-25", Client: "go-sdk 1.8", Tool: "demo__echo", Source: "demo", Original: "echo", Tier: "read", ArgsBytes: 17},
		{Time: at, Kind: CallExecuted, Index: 3, Duration: 1234567 * time.Nanosecond, ResultBytes: 9, UpstreamIdentity: "shared"},
		{Time: at.In(time.FixedZone("odd", -(9*3600 + 30*60 + 7))), Kind: ServerDegraded, Attempt: 2, Backoff: 1500 * time.Millisecond, Error: hostile},
		{Time: at, Kind: ToolsChanged, Added: []string{"a", hostile}, Removed: []string{""}, Changed: []string{"<x>"}},
		{Time: at, Kind: ToolQuarantined, Fingerprint: "sha256:ab", Pinned: "sha256:cd", Fields: []string{"description"}, Reason: "changed"},
		{Time: at, Kind: ToolsExceeded, Tools: 1001, Limit: 1000, Index: -7},
		{Time: at, Kind: ServerStarted, Transport: "stdio", Sandbox: "landlock", Tools: 13, Rule: "r\u2028"},
		{Time: at, Kind: Kind(hostile), Batch: hostile, CallID: hostile, Caller: hostile, Tool: hostile, Reason: hostile},
		// Durations in every form encoding/json gives a float: under a
		// microsecond is 0, whole, fractional, and in exponent form.
		{Time: at, Kind: CallExecuted, Duration: time.Nanosecond},
		{Time: at, Kind: CallExecuted, Duration: time.Microsecond},
		{Time: at, Kind: CallExecuted, Duration: 3 * time.Second},
		{Time: at, Kind: CallExecuted, Duration: time.Duration(1<<63 - 1), Backoff: 999 * time.Microsecond},
		// Times: the zero time, nanoseconds, the edges encoding/json allows.
		{Kind: CallRequested},
		{Time: time.Unix(0, 1).UTC(), Kind: CallRequested},
		{Time: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.FixedZone("", 23*3600+59*60)), Kind: CallRequested},
		{Time: time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", -(23*3600+59*60))), Kind: CallRequested},
	}
	for i := range events {
		checkAppendLine(t, &events[i], false)
	}
}

func TestAppendLineLeavesToEncodingJSONWhatItDoesNotWrite(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 30, 1, 0, time.UTC)
	for _, ev := range []Event{
		{Time: at, Kind: CallRequested, Args: json.RawMessage(`{ "a" : "<b>" }`)},
		{Time: at, Kind: CallExecuted, Result: json.RawMessage(`[1, 2]`)},
		{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Kind: CallRequested},
		{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), Kind: CallRequested},
		{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)), Kind: CallRequested},
	} {
		checkAppendLine(t, &ev, true)
	}
}

// TestAFileSinkWritesWhatItWroteBefore: the lines of a file sink, taken
// by appendLine or not, hold what encoding/json wrote, chained.
func TestAFileSinkWritesWhatItWroteBefore(t *testing.T) {
	path := t.TempDir() + "/audit.jsonl"
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 2, 30, 1, 0, time.UTC)
	evs := []*Event{
		{Time: at, Kind: CallRequested, Batch: "b", Tool: "t<1>", ArgsBytes: 2},
		{Time: at, Kind: CallExecuted, Batch: "b", Result: json.RawMessage(`{"x": 1}`), Duration: time.Millisecond},
	}
	if err := s.WriteBatch(evs); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(&Event{Time: at, Kind: ServerStopped, Source: "demo&co"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatalf("verify: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := append(evs, &Event{Time: at, Kind: ServerStopped, Source: "demo&co"})
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), data)
	}
	for i, line := range lines {
		enc := strings.TrimSuffix(string(encodingJSON(t, want[i])), "}\n")
		if !strings.HasPrefix(line, enc+`,"prev":`) {
			t.Errorf("line %d:\n%s\nwant encoding/json's\n%s followed by the chain", i+1, line, enc)
		}
	}
}

func FuzzAppendLine(f *testing.F) {
	f.Add("call.requested", "demo__echo", "<&>\u2028", "\xff", int64(1733451001123456789), 0, int64(1500000), 3, 0)
	f.Add("", "", "", "", int64(0), -3600*5, int64(0), 0, -1)
	f.Add("k", "\x00\x1f", "é", "\"\\", int64(-62135596800000000), 3600*23, int64(1), 1<<31, 7)
	f.Fuzz(func(t *testing.T, kind, tool, errText, listItem string, unixNano int64, offset int, durNanos int64, index, tools int) {
		ev := Event{
			Time: time.Unix(0, unixNano).In(time.FixedZone("", offset%(48*3600))),
			Kind: Kind(kind), Tool: tool, Error: errText, Index: index, Tools: tools,
			Duration: time.Duration(durNanos), Backoff: time.Duration(durNanos / 3),
			Added: []string{listItem, tool},
		}
		checkAppendLine(t, &ev, !plainTime(ev.Time))
	})
}

// BenchmarkEventJSON: a call's outcome event as the fleet's audit table
// encodes it, by json.Marshal (its way before) and by AppendJSON.
func BenchmarkEventJSON(b *testing.B) {
	ev := &Event{Time: time.Now(), Kind: CallExecuted, Batch: "b-0123456789", Index: 3, Caller: "subject:caller-07",
		Instance: "2", Protocol: "2025-11-25", Client: "bench/1.0", Tool: "demo__echo", Source: "demo", Original: "echo",
		Tier: "read", ArgsBytes: 16, ResultBytes: 40, Duration: 1234567 * time.Nanosecond}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// As MarshalJSON was: the wire form by reflection, then
			// json.Marshal's scan of what a Marshaler returns.
			raw, err := json.Marshal(ev.wire())
			if err == nil {
				_, err = json.Marshal(json.RawMessage(raw))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AppendJSON(nil, ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
