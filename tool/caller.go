package tool

import (
	"context"
	"encoding/json"
	"errors"
)

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

// CallInfo names the call of a batch that a context belongs to, so that a
// [Caller] serving several concurrent calls can tell whose progress it is
// shown.
type CallInfo struct {
	// Index is the call's position in its batch.
	Index int
	// ID is the caller's id for the call ([Call].ID), possibly empty.
	ID string
	// Name is the tool's registered name.
	Name string
}

type callInfoKey struct{}

// CallInfoFrom returns the call the executor is running under ctx, if any.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	c, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return c, ok
}

// ErrNobodyToAsk, wrapped in a [Confirmer]'s error, says that nobody could
// be asked (no terminal, say): the call ends as [ReasonUnconfirmed], not as
// a refusal.
var ErrNobodyToAsk = errors.New("nobody to ask for confirmation")

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

// Client describes the program through which a call arrived, when the
// party making the call knows it (the gateway does): the protocol revision
// its request spoke and its name and version as it announced them. The
// executor puts both on every audit event of the call.
type Client struct {
	// Protocol is the MCP revision of the request, such as "2026-07-28".
	Protocol string
	// Name is the client's name and version as it announced them, such as
	// "claude-code/1.2.0"; what a client says, not checked.
	Name string
}

type clientKey struct{}

// WithClient returns a context whose calls are recorded as arriving
// through c.
func WithClient(ctx context.Context, c Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// ClientFrom returns the client carried by ctx, or the zero Client.
func ClientFrom(ctx context.Context) Client {
	c, _ := ctx.Value(clientKey{}).(Client)
	return c
}

// LogMessage is a log line a source produced while serving a call (an MCP
// server's notifications/message).
type LogMessage struct {
	// Level is the syslog severity name: debug, info, notice, warning,
	// error, critical, alert or emergency.
	Level string
	// Logger optionally names the part of the source that logged.
	Logger string
	// Data is the logged value as JSON (often a string).
	Data json.RawMessage
}

// LogReceiver is a [Caller] that also takes the log lines a source produces
// while serving its call. A source whose caller is not one keeps them to
// itself. Like Progress, Log must not block for long.
type LogReceiver interface {
	Log(ctx context.Context, m LogMessage)
}

// RequestKind names what a source asks of the caller during a call.
type RequestKind string

// The requests an MCP server may make of its client while serving a call.
const (
	// Elicitation asks the caller's user for input (elicitation/create).
	Elicitation RequestKind = "elicitation/create"
	// Sampling asks the caller's model for a completion
	// (sampling/createMessage).
	Sampling RequestKind = "sampling/createMessage"
)

// Asker is a [Caller] that can also answer a source's requests during a
// call: params and the answer are the JSON the protocol defines for kind.
// It returns an error wrapping [ErrNotSupported] when it cannot answer that
// kind (for instance because its own client lacks the capability).
type Asker interface {
	Ask(ctx context.Context, kind RequestKind, params json.RawMessage) (json.RawMessage, error)
}

// ErrNotSupported is wrapped by an [Asker] that cannot answer a kind of
// request.
var ErrNotSupported = errors.New("not supported by the caller")
