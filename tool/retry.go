package tool

import (
	"context"

	"github.com/toolwire/toolwire/audit"
)

// NoteRetry is called by a handler that sends its call to the upstream
// again after the first attempt was lost (the session died under it):
// the executor records a call.retried event under the same call, with
// the attempt's number and why (cause, already masked by the handler).
// Outside a call of an executor it does nothing.
func NoteRetry(ctx context.Context, cause string) {
	n, ok := ctx.Value(upstreamKey{}).(*upstreamNote)
	if !ok || n.b == nil {
		return
	}
	ev := n.b.event(n.p.index, audit.CallRetried, n.p.tool)
	ev.Attempt = int(n.attempts.Add(1)) + 1
	ev.Error = cause
	_ = n.b.record(ev) // the attempt is made either way; only the log can report this
}
