package audit

import (
	"log/slog"
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
}

// Log records events: it redacts each one, then writes it to its sink. It is
// safe for concurrent use. A nil *Log records nothing, so callers need not
// check whether auditing is on.
type Log struct {
	mu       sync.Mutex
	sink     Sink
	redactor Redactor
	logger   *slog.Logger
	failures int
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
	l := &Log{sink: sink, logger: slog.Default()}
	if opts != nil {
		l.redactor = opts.Redactor
		if opts.Logger != nil {
			l.logger = opts.Logger
		}
	}
	return l
}

// Record redacts ev and writes it. A sink error is reported to the logger and
// counted (see [Log.Failures]); it does not stop the call being audited.
func (l *Log) Record(ev Event) {
	if l == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = ev
	if l.redactor != nil {
		l.redact(&l.buf)
	}
	if err := l.sink.Write(&l.buf); err != nil {
		l.failures++
		l.logger.Error("audit: write failed", "kind", string(l.buf.Kind), "err", err)
	}
	l.buf = Event{} // drop references to the event's data
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
	opaque := Event{Time: ev.Time, Kind: RedactionFailed, Batch: ev.Batch, Index: ev.Index}
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
