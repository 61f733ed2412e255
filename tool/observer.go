package tool

import (
	"context"

	"github.com/toolwire/toolwire/audit"
)

// Observer watches the calls an [Executor] runs, step by step, as each step
// happens: traces and metrics hook in here, so the executor itself only
// hands them the events it already makes for the audit log. Without one
// (the default) the executor does nothing more than check for it.
//
// CallStarted is called with each call's call.requested event, in input
// order, before the call's tool is looked up. The context it returns is the
// one the call's later steps run under (its confirmation and its handler),
// so it may carry a span for them to nest under. Step is called with each
// later event of that call and that context; a call's last event is one of
// validation.failed, confirmation.rejected, call.executed and call.errored.
// The calls of a batch run concurrently, so Step is called concurrently for
// different calls, in order for any one call. Both must return quickly.
//
// The events are the audit log's before redaction: Args, Result and Error
// may hold the call's data or a secret, which an Observer must not export.
type Observer interface {
	CallStarted(ctx context.Context, ev audit.Event) context.Context
	Step(ctx context.Context, ev audit.Event)
}
