package audit_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
)

func TestEventDurationIsWrittenAsFractionalMilliseconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{1500 * time.Microsecond, `"duration_ms":1.5`},
		{2 * time.Second, `"duration_ms":2000`},
		{time.Microsecond, `"duration_ms":0.001`},
		{1234567 * time.Microsecond, `"duration_ms":1234.567`},
		{1500*time.Microsecond + 999*time.Nanosecond, `"duration_ms":1.5`}, // below a microsecond is dropped
	}
	for _, tt := range tests {
		b, err := json.Marshal(audit.Event{Kind: audit.CallExecuted, Duration: tt.d})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("marshal of %v = %s, want it to contain %s", tt.d, b, tt.want)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		for _, nanosKey := range []string{"Duration", "duration", "duration_ns"} {
			if _, ok := raw[nanosKey]; ok {
				t.Errorf("marshal of %v also wrote %q: %s", tt.d, nanosKey, b)
			}
		}
	}
}

func TestEventDurationIsReadBack(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{`{"kind":"call.executed","duration_ms":1.5}`, 1500 * time.Microsecond},
		{`{"kind":"call.executed","duration_ms":2000}`, 2 * time.Second},
		{`{"kind":"call.executed","duration_ms":0.25}`, 250 * time.Microsecond},
		{`{"kind":"call.executed"}`, 0},
	}
	for _, tt := range tests {
		var ev audit.Event
		if err := json.Unmarshal([]byte(tt.in), &ev); err != nil {
			t.Fatalf("Unmarshal(%s): %v", tt.in, err)
		}
		if ev.Duration != tt.want || ev.Kind != audit.CallExecuted {
			t.Errorf("Unmarshal(%s): Duration=%v Kind=%q, want %v", tt.in, ev.Duration, ev.Kind, tt.want)
		}
	}
}

func TestEventDurationOmittedWhenZero(t *testing.T) {
	b, err := json.Marshal(audit.Event{Kind: audit.CallRequested})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "duration") {
		t.Errorf("zero duration written: %s", b)
	}
}

func TestEventDurationRoundTripIsExactToTheMicrosecond(t *testing.T) {
	for _, us := range []int64{1, 999, 1009, 1023, 2010, 123457, 1234567} {
		d := time.Duration(us) * time.Microsecond
		b, err := json.Marshal(audit.Event{Duration: d})
		if err != nil {
			t.Fatal(err)
		}
		var back audit.Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Duration != d {
			t.Errorf("%v written as %s read back as %v", d, b, back.Duration)
		}
	}
}

func TestEventJSONRoundTripsEveryField(t *testing.T) {
	in := audit.Event{
		Time:        time.Date(2025, 3, 4, 5, 6, 7, 890000000, time.UTC),
		Kind:        audit.CallErrored,
		Batch:       "0123456789abcdef",
		Index:       3,
		CallID:      "call_7",
		Tool:        "srv__op",
		Source:      "srv",
		Original:    "op",
		Tier:        "destructive",
		Duration:    42250 * time.Microsecond,
		ArgsBytes:   17,
		ResultBytes: 99,
		Reason:      "failed",
		Error:       "tool \"srv__op\" failed: boom",
		Args:        json.RawMessage(`{"a":[1,2,{"b":"c"}]}`),
		Result:      json.RawMessage(`{"content":[{"type":"text","text":"x"}],"isError":true}`),
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"time", "kind", "batch", "index", "call_id", "tool", "source", "original", "tier",
		"duration_ms", "args_bytes", "result_bytes", "reason", "error", "args", "result"}
	for _, k := range wantKeys {
		if _, ok := raw[k]; !ok {
			t.Errorf("key %q missing from %s", k, b)
		}
	}
	if len(raw) != len(wantKeys) {
		t.Errorf("marshalled %d keys, want %d: %s", len(raw), len(wantKeys), b)
	}
	var out audit.Event
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

func TestEventJSONOmitsEmptyOptionalFields(t *testing.T) {
	b, err := json.Marshal(audit.Event{Time: time.Unix(0, 0).UTC(), Kind: audit.CallRequested})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"time":"1970-01-01T00:00:00Z","kind":"call.requested","index":0}`
	if string(b) != want {
		t.Errorf("marshal = %s, want %s", b, want)
	}
}

func TestEventUnmarshalRejectsBadJSON(t *testing.T) {
	for _, in := range []string{`{`, `{"duration_ms":"fast"}`, `{"index":"one"}`, `[]`} {
		var ev audit.Event
		if err := json.Unmarshal([]byte(in), &ev); err == nil {
			t.Errorf("Unmarshal(%s) succeeded: %+v", in, ev)
		}
	}
}
