package tool

import (
	"context"
	"encoding/json"
)

// PendingCall is what a [Confirmer] is shown: a call whose arguments have
// been validated against the tool's schema. Render confirmation prompts from
// these fields only, never from a model's raw output.
type PendingCall struct {
	Name        string
	Tier        Tier
	Args        json.RawMessage
	Description string
}

// Confirmer decides whether a write or destructive call may run.
//
// Confirm is called concurrently for the calls of one batch. It returns true
// to let the call run. False, an error, or a context ending all mean the call
// does not run; an error's text is shown to the caller as the reason.
type Confirmer interface {
	Confirm(ctx context.Context, call PendingCall) (bool, error)
}

// ConfirmFunc adapts a function to a [Confirmer].
type ConfirmFunc func(ctx context.Context, call PendingCall) (bool, error)

// Confirm calls f(ctx, call).
func (f ConfirmFunc) Confirm(ctx context.Context, call PendingCall) (bool, error) {
	return f(ctx, call)
}
