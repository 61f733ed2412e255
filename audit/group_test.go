package audit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
)

// batchRecorder is a BatchSink that keeps each batch it was given, and
// can be made to fail or to wait.
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]audit.Event
	fail    error
	// inWrite, if set, is called inside each WriteBatch before it
	// stores anything.
	inWrite func()
}

func (r *batchRecorder) Write(ev *audit.Event) error { return r.WriteBatch([]*audit.Event{ev}) }

func (r *batchRecorder) WriteBatch(evs []*audit.Event) error {
	if r.inWrite != nil {
		r.inWrite()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	var b []audit.Event
	for _, ev := range evs {
		b = append(b, *ev)
	}
	r.batches = append(r.batches, b)
	return nil
}

func (r *batchRecorder) kinds() [][]audit.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]audit.Kind
	for _, b := range r.batches {
		var ks []audit.Kind
		for _, ev := range b {
			ks = append(ks, ev.Kind)
		}
		out = append(out, ks)
	}
	return out
}

// TestLogWritesARequestWithItsCallsNextEvent: with a BatchSink, a call's
// call.requested is written with the call's next event (its validation,
// which comes before the call can run), in one batch; its outcome on its
// own; an event of no call, or of another call, at once.
func TestLogWritesARequestWithItsCallsNextEvent(t *testing.T) {
	sink := &batchRecorder{}
	log := audit.NewLog(sink, nil)
	rec := func(k audit.Kind, batch string, i int) {
		t.Helper()
		if err := log.Record(audit.Event{Kind: k, Batch: batch, Index: i, Tool: "demo__echo"}); err != nil {
			t.Fatal(err)
		}
	}
	rec(audit.CallRequested, "b1", 0)
	rec(audit.CallRequested, "b1", 1)
	if got := sink.kinds(); len(got) != 0 {
		t.Fatalf("a request alone was written: %v", got)
	}
	rec(audit.ConfigReloaded, "", 0) // no call: at once
	rec(audit.ValidationPassed, "b1", 1)
	rec(audit.ValidationFailed, "b1", 0) // an outcome: the call ends
	rec(audit.CallExecuted, "b1", 1)
	want := [][]audit.Kind{
		{audit.ConfigReloaded},
		{audit.CallRequested, audit.ValidationPassed},
		{audit.CallRequested, audit.ValidationFailed},
		{audit.CallExecuted},
	}
	if got := sink.kinds(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	if b := sink.batches[1]; b[0].Index != 1 || b[1].Index != 1 {
		t.Errorf("call 1's batch holds calls %d and %d", b[0].Index, b[1].Index)
	}
	// Every call ended: Close has no outcome to give.
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.kinds()); n != 4 {
		t.Errorf("Close wrote %d batches, want none", n-4)
	}
}

// TestLogRequiredRefusesACallWhoseRequestCannotBeWritten: the request
// kept for its call's next event fails with it, and that event's Record
// returns the error, which with audit.required refuses the call before it
// runs; both events count as failures, and the call, never recorded as
// requested, gets no outcome at Close.
func TestLogRequiredRefusesACallWhoseRequestCannotBeWritten(t *testing.T) {
	sink := &batchRecorder{fail: errors.New("disk full")}
	logger, _ := bufLogger()
	log := audit.NewLog(sink, &audit.LogOptions{Required: true, Logger: logger})
	if err := log.Record(audit.Event{Kind: audit.CallRequested, Batch: "b", Index: 0}); err != nil {
		t.Fatalf("the request, kept: %v", err)
	}
	err := log.Record(audit.Event{Kind: audit.ValidationPassed, Batch: "b", Index: 0})
	if err == nil || !log.Required() {
		t.Fatalf("validation.passed: %v; want the sink's error, for the executor to refuse the call", err)
	}
	if n := log.Failures(); n != 2 {
		t.Errorf("Failures() = %d, want 2", n)
	}
	sink.mu.Lock()
	sink.fail = nil
	sink.mu.Unlock()
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sink.kinds(); len(got) != 0 {
		t.Errorf("Close wrote %v for a call never recorded", got)
	}
}

// TestLogCloseWritesAKeptRequestWithItsOutcome: a call whose request is
// still kept when the log closes (its next event never came) is written
// with the shutdown outcome, so every call.requested has an outcome.
func TestLogCloseWritesAKeptRequestWithItsOutcome(t *testing.T) {
	sink := &batchRecorder{}
	log := audit.NewLog(sink, nil)
	if err := log.Record(audit.Event{Kind: audit.CallRequested, Batch: "b", Index: 3, Tool: "demo__echo"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // do not wait for the call
	if err := log.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := [][]audit.Kind{{audit.CallRequested, audit.CallErrored}}
	if got := sink.kinds(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	if ev := sink.batches[0][1]; ev.Reason != audit.ReasonShutdown || ev.Index != 3 || ev.Tool != "demo__echo" {
		t.Errorf("the outcome %+v", ev)
	}
	if err := log.Record(audit.Event{Kind: audit.CallRequested, Batch: "b", Index: 4}); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("Record after Close: %v", err)
	}
}

// TestLogWritesCallsAtTheSameTime: with a BatchSink, a Log does not hold
// its lock while the sink writes: a second call's event reaches the sink
// while the first one's write is in progress (one at a time, the first
// write would wait for the second forever; the test gives up after 10 s).
func TestLogWritesCallsAtTheSameTime(t *testing.T) {
	both := make(chan struct{})
	var once sync.Once
	var n sync.WaitGroup
	n.Add(2)
	sink := &batchRecorder{}
	sink.inWrite = func() {
		n.Done()
		once.Do(func() {
			go func() { n.Wait(); close(both) }()
		})
		select {
		case <-both:
		case <-time.After(10 * time.Second):
		}
	}
	log := audit.NewLog(sink, nil)
	errs := make(chan error, 2)
	start := time.Now()
	for i := range 2 {
		go func() {
			errs <- log.Record(audit.Event{Kind: audit.ToolsChanged, Index: i})
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-both:
	default:
		t.Fatalf("the second write did not start while the first was in progress (gave up after %s)", time.Since(start).Round(time.Second))
	}
}
