package audit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolwire/toolwire/audit"
)

// keepSink keeps every event written.
type keepSink struct{ evs []audit.Event }

func (s *keepSink) Write(ev *audit.Event) error {
	s.evs = append(s.evs, *ev)
	return nil
}

// Issue 22.16: a Log with LogOptions.Instance names it on every event it
// writes without one: a step of a call, a replacement for an event whose
// redaction failed, and the outcome Close gives a call still open; an
// event that names its own instance keeps it.
func TestLogNamesItsInstanceOnEveryEvent(t *testing.T) {
	t.Parallel()
	sink := &keepSink{}
	fail := audit.RedactorFunc(func(ev *audit.Event) error {
		if ev.Tool == "leaky" {
			return errors.New("cannot redact")
		}
		return nil
	})
	log := audit.NewLog(sink, &audit.LogOptions{Instance: "7", Redactor: fail})
	for _, ev := range []audit.Event{
		{Kind: audit.CallRequested, Batch: "b1", Tool: "demo__echo"},
		{Kind: audit.CallRequested, Batch: "b2", Tool: "leaky"},
		{Kind: audit.ServerStarted, Source: "demo", Instance: "3"},
	} {
		if err := log.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
	// Close waits for open calls until its context ends: at once here.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := log.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	want := []struct {
		kind     audit.Kind
		instance string
	}{{audit.CallRequested, "7"}, {audit.RedactionFailed, "7"}, {audit.ServerStarted, "3"}, {audit.CallErrored, "7"},
		{audit.RedactionFailed, "7"}} // b2's outcome, which the redactor fails too
	if len(sink.evs) != len(want) {
		t.Fatalf("%d events written, want %d: %+v", len(sink.evs), len(want), sink.evs)
	}
	for i, w := range want {
		if got := sink.evs[i]; got.Kind != w.kind || got.Instance != w.instance {
			t.Errorf("event %d: %s with instance %q, want %s with %q", i, got.Kind, got.Instance, w.kind, w.instance)
		}
	}
}
