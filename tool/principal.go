package tool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Principal is the authenticated party a call is made for, as the party
// that verified it (a gateway, from the caller's bearer token) puts it in
// the call's context with [WithPrincipal]. A tool's source that reaches
// its upstream with each caller's own identity (an MCP server with
// per-caller OAuth credentials) obtains the caller's upstream credentials
// from it; a source without such needs ignores it.
type Principal struct {
	// Issuer is who vouches for Subject: the issuer of the caller's JWT,
	// or "" for a caller known by a token of the verifier's own
	// configuration (a static token).
	Issuer string
	// Subject is the caller's subject. A Principal without one is no
	// caller.
	Subject string
	// Token is the caller's own bearer token, as verified. It is what a
	// source may present to an authorization server that exchanges it
	// (RFC 8693), never what it sends to an upstream in the caller's
	// place; it never prints (see [BearerToken]).
	Token BearerToken
	// Expiry is when the verifier stops accepting Token; zero when
	// unknown.
	Expiry time.Time
	// Role is the role the verifier found for the caller (a static
	// token's, or a JWT's role claim); "" when it gives none.
	Role string
	// Credential says what kind of credential the caller presented:
	// [CredentialStatic] or [CredentialJWT]; "" when the verifier does
	// not say.
	Credential string
	// Claims are a JWT caller's verified claims, as JSON decodes them;
	// nil for other callers. A policy rule may read them; they must not
	// be changed.
	Claims map[string]any
}

// The kinds of credential a [Principal] may have presented.
const (
	CredentialStatic = "static" // a token of the gateway's own configuration
	CredentialJWT    = "jwt"    // a JWT the gateway verified
)

type principalKey struct{}

// WithPrincipal returns a context whose calls are made for p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, and whether it carries
// one with a subject.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok && p.Subject != ""
}

// redacted is what a BearerToken prints as, whatever the verb.
const redacted = "[redacted]"

// BearerToken holds a caller's bearer token so that it cannot leak by
// accident: it prints as "[redacted]" with every fmt verb (%v, %+v, %#v,
// %s, %q, %x and the rest), in slog attributes, as JSON and as text, also
// inside a struct printed whole. Only [BearerToken.Reveal] returns the
// token, for the one request that must carry it. The zero value holds no
// token.
type BearerToken struct {
	// A pointer, so that even reflection that walks unexported fields
	// (fmt printing a struct that holds a Principal in an unexported
	// field) finds an address, not the token.
	v *string
}

// NewBearerToken returns token held so that it never prints.
func NewBearerToken(token string) BearerToken {
	if token == "" {
		return BearerToken{}
	}
	return BearerToken{v: &token}
}

// Reveal returns the token, for the request that must carry it.
func (t BearerToken) Reveal() string {
	if t.v == nil {
		return ""
	}
	return *t.v
}

// IsZero reports whether t holds no token.
func (t BearerToken) IsZero() bool { return t.v == nil }

// String returns "[redacted]", or "" for the zero value.
func (t BearerToken) String() string {
	if t.v == nil {
		return ""
	}
	return redacted
}

// GoString is String, for %#v.
func (t BearerToken) GoString() string { return "tool.BearerToken{" + t.String() + "}" }

// Format prints String for every verb.
func (t BearerToken) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		io.WriteString(f, t.GoString())
		return
	}
	io.WriteString(f, t.String())
}

// LogValue keeps the token out of slog's output.
func (t BearerToken) LogValue() slog.Value { return slog.StringValue(t.String()) }

// MarshalJSON keeps the token out of JSON.
func (t BearerToken) MarshalJSON() ([]byte, error) { return []byte(`"` + t.String() + `"`), nil }

// MarshalText keeps the token out of text encodings.
func (t BearerToken) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// An upstream identity is what a call's source reports of the credential
// its call reached the upstream with (see [NoteUpstreamIdentity]), which the
// executor records on the call's outcome event.

// upstreamNote is where a call's handler leaves the upstream identity it
// used. The handler may set it from another goroutine than the
// executor's, so it has a lock.
type upstreamNote struct {
	mu       sync.Mutex
	identity string

	// The call the handler runs for, where NoteRetry records a further
	// attempt (see retry.go); one context value carries both notes.
	b        *batch
	p        *pending
	attempts atomic.Int32
}

type upstreamKey struct{}

// UpstreamShared is the upstream identity of a call that reached its
// upstream with the one credential the operator configured for every
// caller.
const UpstreamShared = "shared"

// NoteUpstreamIdentity tells the executor running the call ctx belongs to
// which identity the call reaches its upstream with: [UpstreamShared], or
// a description of the caller's own (an OAuth handler's, say), never a
// token. The executor records it on the call's outcome event
// (audit.Event.UpstreamIdentity). Outside a call of an executor it does
// nothing; the last note wins.
func NoteUpstreamIdentity(ctx context.Context, identity string) {
	if n, ok := ctx.Value(upstreamKey{}).(*upstreamNote); ok {
		n.mu.Lock()
		n.identity = identity
		n.mu.Unlock()
	}
}

func (n *upstreamNote) get() string {
	if n == nil {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.identity
}

// AuthorizationError is a handler's error for a call that cannot go on
// until the caller authorizes, in a browser, at URL: an upstream reached
// with each caller's own identity has no credential of this caller's
// yet. The executor turns it into a result with [ReasonAuthorization]
// whose Authorization carries the URL for the caller alone. Its message
// leaves the URL out, as it goes to logs and to the audit log.
type AuthorizationError struct {
	Authorization
	// Err is the cause; its message must not hold the URL either.
	Err error
}

func (e *AuthorizationError) Error() string {
	if e.Err == nil {
		return "the caller must authorize at the upstream's authorization server"
	}
	return e.Err.Error()
}

func (e *AuthorizationError) Unwrap() error { return e.Err }

// Authorization is where a caller must authorize before calling again
// (see [AuthorizationError]). It belongs to that caller only: whoever
// completes it links their own account at the upstream to the caller.
type Authorization struct {
	// URL is the authorization URL.
	URL string
	// ID names the authorization without revealing it: the same while URL
	// is, usable as the elicitation ID of a URL-mode elicitation.
	ID string
	// Expires is when URL stops being redeemable; zero when unknown.
	Expires time.Time
	// Source names who asks (the server's name).
	Source string
	// Confirm, when set, gives the code the caller's browser was shown
	// once the sign-in completed, which makes the account it linked the
	// caller's (oauth.CallerLoginError.Confirm). It is bound to the caller
	// whose call this is: ask that caller's client alone.
	Confirm func(ctx context.Context, code string) error `json:"-"`
	// AwaitsCode is set when the caller has signed in already and only
	// the code is wanted (URL is then empty).
	AwaitsCode bool
}

// String leaves the URL out, so that a log line or %v never holds it.
func (a Authorization) String() string {
	return fmt.Sprintf("authorization %s for %s", a.ID, a.Source)
}
