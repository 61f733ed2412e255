package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
)

// bufLogger returns a logger writing to a buffer the test can read.
func bufLogger() (*slog.Logger, *lockedBuffer) {
	b := &lockedBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// flakySink fails the writes whose number (from 1) is in fail.
type flakySink struct {
	n    int
	fail map[int]bool
	mem  audit.Memory
}

func (f *flakySink) Write(ev *audit.Event) error {
	f.n++
	if f.fail[f.n] {
		return errors.New("disk full")
	}
	return f.mem.Write(ev)
}

func TestNilLogRecordsNothing(t *testing.T) {
	var l *audit.Log
	l.Record(audit.Event{Kind: audit.CallRequested}) // must not panic
	if got := l.Failures(); got != 0 {
		t.Errorf("nil Log Failures() = %d", got)
	}
}

func TestLogSinkErrorIsCountedAndLogged(t *testing.T) {
	logger, logs := bufLogger()
	sink := &flakySink{fail: map[int]bool{2: true, 3: true}}
	l := audit.NewLog(sink, &audit.LogOptions{Logger: logger})
	for _, k := range []audit.Kind{audit.CallRequested, audit.ValidationPassed, audit.CallExecuted, audit.CallErrored} {
		l.Record(audit.Event{Kind: k})
	}
	if got := l.Failures(); got != 2 {
		t.Errorf("Failures() = %d, want 2", got)
	}
	if got := len(sink.mem.Events()); got != 2 {
		t.Errorf("sink stored %d events, want 2", got)
	}
	out := logs.String()
	if strings.Count(out, "audit: write failed") != 2 || !strings.Contains(out, "disk full") || !strings.Contains(out, "validation.passed") {
		t.Errorf("logger output = %q, want two write failures naming kind and error", out)
	}
}

func TestLogFillsTimeOnlyWhenMissing(t *testing.T) {
	mem := &audit.Memory{}
	l := audit.NewLog(mem, nil)
	before := time.Now()
	l.Record(audit.Event{Kind: audit.CallRequested})
	fixed := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	l.Record(audit.Event{Kind: audit.CallExecuted, Time: fixed})
	evs := mem.Events()
	if evs[0].Time.Before(before) || evs[0].Time.After(time.Now()) {
		t.Errorf("missing time filled as %v", evs[0].Time)
	}
	if !evs[1].Time.Equal(fixed) {
		t.Errorf("given time replaced: %v", evs[1].Time)
	}
}

func TestLogRedactsBeforeTheSink(t *testing.T) {
	mem := &audit.Memory{}
	l := audit.NewLog(mem, &audit.LogOptions{Redactor: audit.NewSecrets("hunter22")})
	l.Record(audit.Event{Kind: audit.CallErrored, Error: "bad password hunter22", Batch: "b", Index: 4})
	evs := mem.Events()
	if len(evs) != 1 || evs[0].Error != "bad password [REDACTED]" || evs[0].Kind != audit.CallErrored || evs[0].Index != 4 {
		t.Errorf("sink got %+v", evs)
	}
}

func TestLogReplacesEventWhenRedactorFails(t *testing.T) {
	const secret = "sk-live-XYZ"
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	redactors := map[string]audit.Redactor{
		"error": audit.RedactorFunc(func(ev *audit.Event) error {
			ev.Tool = "partly cleaned"
			return errors.New("cannot clean " + ev.Error)
		}),
		"panic": audit.RedactorFunc(func(ev *audit.Event) error {
			var m map[string]int
			m["x"]++ // nil map write: a runtime panic
			return nil
		}),
	}
	for name, red := range redactors {
		t.Run(name, func(t *testing.T) {
			logger, logs := bufLogger()
			mem := &audit.Memory{}
			l := audit.NewLog(mem, &audit.LogOptions{Redactor: red, Logger: logger})
			l.Record(audit.Event{Time: at, Kind: audit.CallErrored, Batch: "batch1", Index: 2, CallID: secret,
				Tool: "t", Source: "s", Original: "o", Tier: "write", Duration: time.Second, ArgsBytes: 3, ResultBytes: 4,
				Reason: "failed", Error: "token " + secret, Args: []byte(`{"k":"` + secret + `"}`), Result: []byte(`{}`)})
			evs := mem.Events()
			want := audit.Event{Time: at, Kind: audit.RedactionFailed, Batch: "batch1", Index: 2}
			if len(evs) != 1 {
				t.Fatalf("sink got %d events, want 1", len(evs))
			}
			if got := evs[0]; !got.Time.Equal(want.Time) || got.Kind != want.Kind || got.Batch != want.Batch || got.Index != want.Index ||
				got.Tool != "" || got.CallID != "" || got.Error != "" || got.Args != nil || got.Result != nil ||
				got.Source != "" || got.Original != "" || got.Tier != "" || got.Reason != "" || got.Duration != 0 ||
				got.ArgsBytes != 0 || got.ResultBytes != 0 {
				t.Errorf("sink got %+v, want only %+v", got, want)
			}
			if !strings.Contains(logs.String(), "event replaced") {
				t.Errorf("replacement not logged: %q", logs.String())
			}
			if strings.Contains(logs.String(), secret) {
				t.Errorf("logger output carries the secret: %q", logs.String())
			}
			if l.Failures() != 0 {
				t.Errorf("a redaction failure counted as a sink failure")
			}
		})
	}
}

func TestLogDoesNotLogPanicValueQuotingTheSecret(t *testing.T) {
	const secret = "sk-live-XYZ"
	logger, logs := bufLogger()
	l := audit.NewLog(&audit.Memory{}, &audit.LogOptions{Logger: logger, Redactor: audit.RedactorFunc(func(ev *audit.Event) error {
		panic("cannot parse args " + string(ev.Args))
	})})
	l.Record(audit.Event{Kind: audit.CallRequested, Args: []byte(`{"k":"` + secret + `"}`)})
	if strings.Contains(logs.String(), secret) {
		t.Errorf("logger output carries the secret: %q", logs.String())
	}
}

func TestLogIsSafeForConcurrentRecord(t *testing.T) {
	mem := &audit.Memory{}
	l := audit.NewLog(mem, &audit.LogOptions{Redactor: audit.NewSecrets("s3cr3t-value")})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				l.Record(audit.Event{Kind: audit.CallRequested, Error: "s3cr3t-value"})
			}
		}()
	}
	wg.Wait()
	evs := mem.Events()
	if len(evs) != 400 {
		t.Fatalf("recorded %d events, want 400", len(evs))
	}
	for _, ev := range evs {
		if ev.Error != audit.Mask {
			t.Fatalf("event not redacted: %+v", ev)
		}
	}
}

// closableSink is a Memory that records being closed.
type closableSink struct {
	audit.Memory
	closed bool
}

func (c *closableSink) Close() error { c.closed = true; return nil }

func TestLogRecordReturnsTheSinkError(t *testing.T) {
	logger, _ := bufLogger()
	f := &flakySink{fail: map[int]bool{2: true}}
	l := audit.NewLog(f, &audit.LogOptions{Logger: logger, Required: true})
	if err := l.Record(audit.Event{Kind: audit.ServerStarted}); err != nil {
		t.Errorf("first Record = %v, want nil", err)
	}
	if err := l.Record(audit.Event{Kind: audit.ServerStopped}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("second Record = %v, want the sink's error", err)
	}
	if !l.Required() {
		t.Error("Required() = false for a log opened with Required")
	}
	if audit.NewLog(f, nil).Required() || (*audit.Log)(nil).Required() {
		t.Error("Required() = true for a log opened without it")
	}
}

// TestLogCloseGivesEveryRequestedCallAnOutcome: a call still running when
// the log closes gets a call.errored "shutdown" outcome, one that ended
// gets none more, and the sink is closed.
func TestLogCloseGivesEveryRequestedCallAnOutcome(t *testing.T) {
	sink := &closableSink{}
	l := audit.NewLog(sink, nil)
	for i := range 3 {
		l.Record(audit.Event{Kind: audit.CallRequested, Batch: "b1", Index: i, Tool: fmt.Sprintf("t%d", i), CallID: fmt.Sprintf("id%d", i), Caller: "alice"})
	}
	l.Record(audit.Event{Kind: audit.ValidationFailed, Batch: "b1", Index: 0})
	l.Record(audit.Event{Kind: audit.ValidationPassed, Batch: "b1", Index: 2})
	l.Record(audit.Event{Kind: audit.ServerStopped, Source: "demo"})

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // calls 1 and 2 never end
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !sink.closed {
		t.Error("Close left the sink open")
	}
	var outcomes []string
	for _, ev := range sink.Events()[6:] {
		if ev.Kind != audit.CallErrored || ev.Reason != audit.ReasonShutdown || ev.Batch != "b1" || ev.Caller != "alice" ||
			ev.Tool != fmt.Sprintf("t%d", ev.Index) || ev.CallID != fmt.Sprintf("id%d", ev.Index) || ev.Time.IsZero() {
			t.Errorf("event written at close: %+v", ev)
		}
		outcomes = append(outcomes, fmt.Sprint(ev.Index))
	}
	if got := strings.Join(outcomes, ","); got != "1,2" {
		t.Errorf("Close wrote outcomes for calls %q, want 1,2", got)
	}
	if err := l.Record(audit.Event{Kind: audit.CallExecuted, Batch: "b1", Index: 1}); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("Record after Close = %v, want ErrClosed", err)
	}
	if n := len(sink.Events()); n != 8 {
		t.Errorf("%d events after a Record past Close, want 8", n)
	}
}

// TestLogCloseWaitsForOpenCallsToEnd: the outcome a call records while
// Close waits is the one kept.
func TestLogCloseWaitsForOpenCallsToEnd(t *testing.T) {
	sink := &closableSink{}
	l := audit.NewLog(sink, nil)
	l.Record(audit.Event{Kind: audit.CallRequested, Batch: "b", Index: 0})
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		closed <- l.Close(ctx)
	}()
	// Close must not return while the call is open; the bound gives it the
	// time to be waiting when the outcome comes, so the wait is exercised.
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a call still open", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.Record(audit.Event{Kind: audit.CallExecuted, Batch: "b", Index: 0})
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := kindsOf(sink.Events()); got != "call.requested call.executed" {
		t.Errorf("events = %s, want the call's own outcome only", got)
	}
}

func kindsOf(evs []audit.Event) string {
	var ks []string
	for _, ev := range evs {
		ks = append(ks, string(ev.Kind))
	}
	return strings.Join(ks, " ")
}

// Every kind that ends a call is an outcome to Close: a call the gateway
// refused (call.refused) gets no second, shutdown outcome.
func TestLogCloseTakesEveryEndingKindAsTheOutcome(t *testing.T) {
	for _, kind := range []audit.Kind{audit.ValidationFailed, audit.ConfirmationRejected, audit.CallExecuted, audit.CallErrored, audit.CallRefused} {
		sink := &closableSink{}
		l := audit.NewLog(sink, nil)
		l.Record(audit.Event{Kind: audit.CallRequested, Batch: "b", Index: 0})
		l.Record(audit.Event{Kind: kind, Batch: "b", Index: 0})
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(sink.Events()); n != 2 {
			t.Errorf("after %s, Close wrote %d events more", kind, n-2)
		}
	}
}
