package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultIdleTimeout is how long a reply stream may send nothing (no
// event, not even a keep-alive) before the request is abandoned, unless a
// provider's options say otherwise. The wait for the first event counts
// too: a model that thinks for minutes before its first token needs a
// longer one.
const DefaultIdleTimeout = 2 * time.Minute

// idleTimeout resolves an options value: zero is the default, negative
// means no limit.
func idleTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultIdleTimeout
	case d < 0:
		return 0
	}
	return d
}

// errIdle is the cause of a request context ended by the idle watch.
var errIdle = errors.New("idle")

// idleWatch bounds the silence of one streamed request. The returned
// context ends with cause errIdle when touch has not been called for d
// (counting from now); stop releases the watch. d <= 0 watches nothing.
func idleWatch(ctx context.Context, d time.Duration) (_ context.Context, touch, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if d <= 0 {
		return ctx, func() {}, func() { cancel(nil) }
	}
	t := time.AfterFunc(d, func() { cancel(errIdle) })
	return ctx, func() { t.Reset(d) }, func() { t.Stop(); cancel(nil) }
}

// idleError is the error of a request the idle watch ended, or nil when
// it did not end it (the caller's own cancellation stays the caller's).
func (ep *endpoint) idleError(ctx context.Context, parent context.Context, d time.Duration) error {
	if parent.Err() != nil || !errors.Is(context.Cause(ctx), errIdle) {
		return nil
	}
	return &ProviderError{Provider: ep.provider, Kind: ErrStalled,
		Message: fmt.Sprintf("%s sent nothing for %v; the reply was abandoned (the idle timeout sets how long to wait)", ep.baseURL, d)}
}

// unterminated is the error of a stream that ended without saying the
// reply was complete: a proxy or server that dropped the connection
// cleanly mid-reply, whose text and calls would otherwise pass for whole.
func (ep *endpoint) unterminated(what string) error {
	return &ProviderError{Provider: ep.provider, Kind: ErrStalled,
		Message: fmt.Sprintf("the reply from %s ended before its %s: it is incomplete", ep.baseURL, what)}
}
