package tool

import (
	"context"
	"time"

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
	res := ErrorResult(reason, msg)
	if e.audit == nil {
		return res
	}
	ev := audit.Event{Kind: audit.CallRequested, Batch: newBatchID(), CallID: c.ID, Caller: IdentityFrom(ctx), Tool: c.Name, ArgsBytes: len(c.Args)}
	if e.logArgs {
		ev.Args = loggable(c.Args)
	}
	ev.Time = time.Now()
	e.audit.Record(ev)
	ev.Kind, ev.Reason, ev.Error, ev.Args, ev.ArgsBytes = audit.CallRefused, string(reason), msg, nil, 0
	ev.Time = time.Now()
	e.audit.Record(ev)
	return res
}
