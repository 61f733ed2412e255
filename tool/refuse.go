package tool

import (
	"context"

	"github.com/toolwire/toolwire/audit"
)

// Refuse records a call that was refused before it reached the executor
// (by a gateway: a tool the caller's role is not offered, a limit) and
// returns the error result with reason and msg; nothing runs. The audit
// gets what it gets for the executor's own refusals: the call's
// call.requested event, then its outcome, call.refused, with the caller
// in ctx ([WithIdentity]) on both. c.Name is the name as the caller asked
// for it, which need not be registered (empty when the call was refused
// before its name was read).
func (e *Executor) Refuse(ctx context.Context, c Call, reason Reason, msg string) *Result {
	b := e.newBatch(ctx, []Call{c})
	ev := b.event(0, audit.CallRequested, nil)
	ev.ArgsBytes = len(c.Args)
	if e.logArgs {
		ev.Args = loggable(c.Args)
	}
	_ = b.record(ev) // nothing runs either way
	ev = b.event(0, audit.CallRefused, nil)
	ev.Reason, ev.Error = string(reason), msg
	_ = b.record(ev)
	return ErrorResult(reason, msg)
}
