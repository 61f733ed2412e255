package tool

import (
	"context"
	"sync/atomic"

	"github.com/toolwire/toolwire/audit"
)

// retryKey carries, in a running call's context, how its handler records
// that it sent the call to its upstream once more (NoteRetry).
type retryKey struct{}

// retryNote records the attempts of one call after its first.
type retryNote struct {
	b        *batch
	p        *pending
	attempts atomic.Int32
}

// withRetryNote gives the handler of call p a way to report a second
// attempt, so the audit shows every attempt under the one call.
func withRetryNote(ctx context.Context, b *batch, p *pending) context.Context {
	return context.WithValue(ctx, retryKey{}, &retryNote{b: b, p: p})
}

// NoteRetry is called by a handler that sends its call to the upstream
// again after the first attempt was lost (the session died under it):
// the executor records a call.retried event under the same call, with
// the attempt's number and why (cause, already masked by the handler).
// Outside a call of an executor it does nothing.
func NoteRetry(ctx context.Context, cause string) {
	n, ok := ctx.Value(retryKey{}).(*retryNote)
	if !ok {
		return
	}
	ev := n.b.event(n.p.index, audit.CallRetried, n.p.tool)
	ev.Attempt = int(n.attempts.Add(1)) + 1
	ev.Error = cause
	_ = n.b.record(ev) // the attempt is made either way; only the log can report this
}
