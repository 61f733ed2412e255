package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sink stores events. A [Log] calls Write from one goroutine at a time, so a
// Sink need not be safe for concurrent use unless it is shared between Logs.
type Sink interface {
	Write(ev *Event) error
}

// Redactor removes secrets from an event before it is stored, by editing it
// in place. An error means the event could not be made safe.
type Redactor interface {
	Redact(ev *Event) error
}

// RedactorFunc adapts a function to a [Redactor].
type RedactorFunc func(ev *Event) error

// Redact calls f(ev).
func (f RedactorFunc) Redact(ev *Event) error { return f(ev) }

// LogOptions configures a [Log]. The zero value is usable.
type LogOptions struct {
	// Redactor runs on every event before it is stored. Nil means none.
	Redactor Redactor
	// Logger reports sink failures. Nil means slog.Default().
	Logger *slog.Logger
	// Required makes the audit a condition of every call: an executor
	// refuses a call whose events before it runs cannot be written (see
	// [Log.Required]), rather than running it unrecorded.
	Required bool
	// Instance is written as the Instance of every event that has none:
	// which process (which replica of a fleet) recorded it.
	Instance string
}

// ErrClosed is returned by [Log.Record] after [Log.Close].
var ErrClosed = errors.New("audit log closed")

// outcomeKinds are the kinds of a call's outcome (see [Kind.Ends]).
var outcomeKinds = [...]Kind{ValidationFailed, ConfirmationRejected, CallExecuted, CallErrored, CallRefused}

// Ends reports whether an event of kind k is a call's outcome, the last
// event of that call: its refusal, its result or its failure.
func (k Kind) Ends() bool { return slices.Contains(outcomeKinds[:], k) }

// Outcomes returns the kinds [Kind.Ends] reports true for, in a new
// slice: for a store that looks calls' outcomes up by kind.
func Outcomes() []Kind { return slices.Clone(outcomeKinds[:]) }

// ReasonShutdown is the Reason of the outcome [Log.Close] writes for a call
// that had not ended when the log was closed.
const ReasonShutdown = "shutdown"

// Log records events: it redacts each one, then writes it to its sink. It is
// safe for concurrent use. A nil *Log records nothing, so callers need not
// check whether auditing is on.
//
// With a [BatchSink], the Log writes the events of different calls at the
// same time (the sink writes what was queued meanwhile together), and
// keeps a call's call.requested until the call's next event, which comes
// before the call can run (its validation's outcome), writing the two in
// one batch: an event is never kept past the next event of its call, so
// never past the call's start or its end, and what the executor records
// before a call runs is stored before it runs.
type Log struct {
	mu       sync.Mutex
	sink     Sink
	batch    BatchSink // sink, when it takes batches; nil otherwise
	redactor Redactor
	logger   *slog.Logger
	required bool
	instance string
	failures int
	closed   bool
	// open holds the call.requested event of every call without an
	// outcome yet, so that Close can give each one.
	open  map[callKey]Event
	ended chan struct{} // signalled (without blocking) when a call ends
	// held are the call.requested events kept, redacted, until their
	// call's next event (with a BatchSink).
	held map[callKey]*Event
	// writing counts the batches being written outside mu.
	writing sync.WaitGroup
	// buf is the event being redacted and written. Handing the sink and
	// the redactor a pointer to a field of the (already heap-allocated)
	// Log, under mu, spares every event its own heap copy.
	buf Event
}

// NewLog returns a Log writing to sink. A nil sink means no audit: the
// result is a nil *Log, which records nothing.
func NewLog(sink Sink, opts *LogOptions) *Log {
	if sink == nil {
		return nil
	}
	l := &Log{sink: sink, logger: slog.Default(), open: map[callKey]Event{}, ended: make(chan struct{}, 1)}
	if b, ok := sink.(BatchSink); ok {
		l.batch, l.held = b, map[callKey]*Event{}
	}
	if opts != nil {
		l.redactor = opts.Redactor
		l.required = opts.Required
		l.instance = opts.Instance
		if opts.Logger != nil {
			l.logger = opts.Logger
		}
	}
	return l
}

// callKey identifies a call in the log.
type callKey struct {
	batch string
	index int
}

// Record redacts ev and writes it, and returns the sink's error. A sink
// error is also reported to the logger and counted (see [Log.Failures]);
// whether it stops the call being audited is the caller's decision (see
// [Log.Required]). A nil Log records nothing and returns nil.
//
// With a [BatchSink], a call's call.requested is written with the call's
// next event, and the sink's error for both is returned by the Record of
// that event (see [Log]).
func (l *Log) Record(ev Event) error {
	if l == nil {
		return nil
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	l.mu.Lock()
	if l.closed {
		l.failures++
		l.mu.Unlock()
		l.logger.Error("audit: write after close", "kind", string(ev.Kind))
		return ErrClosed
	}
	if l.batch == nil {
		defer l.mu.Unlock()
		return l.write(ev)
	}
	key, kind := callKey{ev.Batch, ev.Index}, ev.Kind
	e := l.prepare(ev)
	if kind == CallRequested && ev.Batch != "" {
		if old := l.held[key]; old != nil {
			// Two requests under one key (not the executor's way):
			// the first is written now, in order.
			l.held[key] = e
			return l.flush(key, CallRequested, []*Event{old})
		}
		l.held[key] = e
		l.mu.Unlock()
		return nil
	}
	evs := []*Event{e}
	if h := l.held[key]; h != nil && ev.Batch != "" {
		delete(l.held, key)
		evs = []*Event{h, e}
	}
	return l.flush(key, kind, evs)
}

// events keeps the events a Log hands a BatchSink for reuse: a sink
// keeps no reference to them once WriteBatch has returned.
var events = sync.Pool{New: func() any { return new(Event) }}

// prepare returns ev as it is stored: its instance filled, redacted, in
// an Event of the pool. It is called under l.mu.
func (l *Log) prepare(ev Event) *Event {
	if ev.Instance == "" {
		ev.Instance = l.instance
	}
	e := events.Get().(*Event)
	*e = ev
	if l.redactor != nil {
		l.redact(e)
	}
	return e
}

// release returns evs to the pool, emptied (dropping references to the
// events' data).
func release(evs []*Event) {
	for _, e := range evs {
		*e = Event{}
		events.Put(e)
	}
}

// flush writes evs, the last of kind kind, of the call key, to the batch
// sink outside l.mu, which it is called under and releases, then notes
// the outcome.
func (l *Log) flush(key callKey, kind Kind, evs []*Event) error {
	l.writing.Add(1)
	l.mu.Unlock()
	err := l.batch.WriteBatch(evs)
	l.writing.Done()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failures += len(evs)
		l.logger.Error("audit: write failed", "kind", string(kind), "events", len(evs), "err", err)
	}
	if key.batch != "" {
		if len(evs) > 1 && err == nil && !kind.Ends() {
			l.track(key, CallRequested, evs[0], nil)
		}
		l.track(key, kind, evs[len(evs)-1], err)
	}
	release(evs)
	return err
}

// write is Record under l.mu, for a sink that takes one event at a time.
func (l *Log) write(ev Event) error {
	key, kind := callKey{ev.Batch, ev.Index}, ev.Kind
	if ev.Instance == "" {
		ev.Instance = l.instance
	}
	l.buf = ev
	if l.redactor != nil {
		l.redact(&l.buf)
	}
	err := l.sink.Write(&l.buf)
	l.buf = Event{} // drop references to the event's data
	if err != nil {
		l.failures++
		l.logger.Error("audit: write failed", "kind", string(kind), "err", err)
	}
	if ev.Batch != "" {
		l.track(key, kind, &ev, err)
	}
	return err
}

// track notes, under l.mu, that an event of kind (the kind before
// redaction, which may replace it) of the call key was written (err nil)
// or not: a call.requested written opens the call, an outcome ends it.
func (l *Log) track(key callKey, kind Kind, ev *Event, err error) {
	switch {
	case kind == CallRequested && err == nil:
		l.open[key] = Event{Kind: CallErrored, Batch: ev.Batch, Index: ev.Index, CallID: ev.CallID, Caller: ev.Caller,
			Tool: ev.Tool, Source: ev.Source, Original: ev.Original, Tier: ev.Tier}
	case kind.Ends():
		delete(l.open, key)
		select {
		case l.ended <- struct{}{}:
		default:
		}
	}
}

// Required reports whether the log was opened with
// [LogOptions].Required: a call whose events cannot be written must not
// run. A nil Log is not required.
func (l *Log) Required() bool { return l != nil && l.required }

// Close ends the log: it waits, until ctx is done, for every call recorded
// as requested to record its outcome; writes for each call still open a
// call.errored event with Reason [ReasonShutdown], so that every
// call.requested in the log has an outcome; and closes the sink if it is an
// [io.Closer]. Later Records fail with [ErrClosed]. A nil Log closes
// nothing.
func (l *Log) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
wait:
	for {
		l.mu.Lock()
		n := len(l.open) + len(l.held)
		l.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-l.ended:
		case <-ctx.Done():
			break wait
		}
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	// Later Records fail; the batches being written finish first.
	l.closed = true
	l.mu.Unlock()
	l.writing.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	// A call whose call.requested is still held has not run: it is
	// written now, with the outcome below.
	for k, h := range l.held {
		l.open[k] = Event{Kind: CallErrored, Batch: h.Batch, Index: h.Index, CallID: h.CallID, Caller: h.Caller,
			Tool: h.Tool, Source: h.Source, Original: h.Original, Tier: h.Tier}
	}
	keys := slices.SortedFunc(maps.Keys(l.open), func(a, b callKey) int {
		return cmp.Or(strings.Compare(a.batch, b.batch), a.index-b.index)
	})
	for _, k := range keys {
		ev := l.open[k]
		ev.Time = time.Now()
		ev.Reason = ReasonShutdown
		ev.Error = "toolwire shut down before the call ended; its outcome is not known"
		var err error
		if h := l.held[k]; h != nil {
			delete(l.held, k)
			evs := []*Event{h, l.prepare(ev)}
			err = l.batch.WriteBatch(evs)
			release(evs)
			delete(l.open, k)
		} else {
			err = l.write(ev)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("call %d of batch %s: %w", ev.Index, ev.Batch, err))
		}
	}
	if c, ok := l.sink.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Failures returns how many events the sink failed to store.
func (l *Log) Failures() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures
}

// redact runs the redactor on ev in place, turning both an error and a
// panic into an opaque event: an event that could not be cleaned must not be
// stored as it is.
func (l *Log) redact(ev *Event) {
	opaque := Event{Time: ev.Time, Kind: RedactionFailed, Batch: ev.Batch, Index: ev.Index, Instance: ev.Instance}
	defer func() {
		if r := recover(); r != nil {
			// Like an error, the panic value may quote the secret.
			*ev = opaque
			l.logger.Error("audit: redactor panicked; event replaced")
		}
	}()
	if err := l.redactor.Redact(ev); err != nil {
		// The error text itself may quote the secret, so it is not logged.
		l.logger.Error("audit: redaction failed; event replaced")
		*ev = opaque
	}
}
