package tool

import "context"

// Caller is what a tool's source may ask of whoever made the call while it
// runs. The party making the call supplies one in the call's context (see
// [WithCaller]): the CLI one backed by the terminal, a gateway one backed by
// its connected client. A source with no Caller in its context drops such
// requests.
type Caller interface {
	// Progress reports how far a long call has got. It must not block for
	// long: the source calls it from its message loop.
	Progress(ctx context.Context, p Progress)
}

// Progress is one progress report from a running call.
type Progress struct {
	// Progress is how far the call has got; it rises with each report.
	Progress float64
	// Total is the value Progress will reach, or 0 when unknown.
	Total float64
	// Message optionally says what is happening.
	Message string
}

type callerKey struct{}

// WithCaller returns a context carrying c for the calls made with it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller carried by ctx, or nil.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

type identityKey struct{}

// WithIdentity returns a context whose calls are attributed to who (an
// authenticated subject) in the audit log.
func WithIdentity(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, identityKey{}, who)
}

// IdentityFrom returns the identity carried by ctx, or "".
func IdentityFrom(ctx context.Context) string {
	who, _ := ctx.Value(identityKey{}).(string)
	return who
}
