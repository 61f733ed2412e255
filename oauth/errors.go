package oauth

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

var (
	// ErrLoginRequired means that the server's authorization cannot be used
	// or renewed without the user: there is no token, the refresh token was
	// refused (invalid_grant), or the handler may not prompt. The error that
	// wraps it is a *LoginRequiredError naming the command to run.
	ErrLoginRequired = errors.New("login required")
	// ErrStoreAuth means that the token store could not be decrypted: the
	// passphrase or key file is not the one it was written with, or the
	// file was modified. The file is left as it is.
	ErrStoreAuth = errors.New("token store failed authentication")
	// ErrStoreCorrupt means that the token store is not a file this package
	// can read (not its format, another version, implausible parameters).
	// The file is left as it is.
	ErrStoreCorrupt = errors.New("token store is unreadable")
	// ErrStateMismatch means that an authorization response carried
	// another state than the request it claims to answer: it may be forged
	// (a login CSRF) or belong to an older attempt.
	ErrStateMismatch = errors.New("authorization response state does not match the request")
	// ErrIssuerMismatch means that an authorization server identified
	// itself with another issuer than the one it was reached as (RFC 8414,
	// section 3.3; RFC 9207), or than the one a client was registered with.
	ErrIssuerMismatch = errors.New("authorization server issuer mismatch")
	// ErrNoPKCE means that the authorization server does not advertise
	// PKCE with the S256 method, which OAuth 2.1 and MCP require.
	ErrNoPKCE = errors.New("authorization server does not advertise PKCE S256")
	// ErrNoMetadata means that no authorization server metadata (RFC 8414
	// or OpenID Connect discovery) was found. Without it nothing proves
	// PKCE support, so toolwire does not guess endpoints.
	ErrNoMetadata = errors.New("no authorization server metadata")
	// ErrNoPendingAuth is returned by [Handler.FinishAuth] when no
	// authorization is pending for the server, or the pending one expired.
	ErrNoPendingAuth = errors.New("no authorization is pending")
	// ErrAccessDenied means that the authorization server answered the
	// authorization request with an error (the user declined, say).
	ErrAccessDenied = errors.New("authorization refused")
)

// LoginCommand is the command a [LoginRequiredError] tells the user to run,
// with %s standing for the server name.
const LoginCommand = "toolwire login %s"

// LoginRequiredError reports a server that needs an interactive login. It
// wraps [ErrLoginRequired].
type LoginRequiredError struct {
	// Server is the configured server name.
	Server string
	// Reason says why, without any token or secret.
	Reason string
	// Caller, if set, is the gateway caller whose own authorization is
	// needed (see [Callers]): then the caller, not the operator, must
	// authorize, and the error the gateway sees is a *[CallerLoginError]
	// with the URL.
	Caller *Caller

	// unbound is set when the stored entry is bound to another server:
	// then no request is sent at all (see expiredGrant).
	unbound bool
}

func (e *LoginRequiredError) Error() string {
	if e.Caller != nil {
		return fmt.Sprintf("server %q: caller %s: %s: the caller must authorize through the gateway", e.Server, e.Caller, e.Reason)
	}
	return fmt.Sprintf("server %q: %s: run `%s`", e.Server, e.Reason, fmt.Sprintf(LoginCommand, e.Server))
}

func (e *LoginRequiredError) Unwrap() error { return ErrLoginRequired }

// expiredGrant is what the token source returns for a login-required
// state. Besides the *LoginRequiredError it carries a synthetic
// invalid_grant *oauth2.RetrieveError: go-sdk's Streamable HTTP transport
// sends a request without a token when its token source fails with
// invalid_grant, so that the server's 401 reaches [Handler.Authorize], which
// then decides (prompt, pending or login required). Any other token source
// error fails the request outright.
type expiredGrant struct {
	*LoginRequiredError
}

func (e expiredGrant) Unwrap() []error {
	return []error{e.LoginRequiredError, &oauth2.RetrieveError{ErrorCode: "invalid_grant"}}
}

// PendingError is returned by [Handler.Authorize] (and so by an MCP
// connect) when the handler defers the user's authorization to the
// embedding application: it carries the URL to send the user to. Complete
// it with [Handler.FinishAuth]; the next connect then succeeds.
type PendingError struct {
	// Server is the configured server name.
	Server string
	// URL is the authorization URL to open in the user's browser.
	URL string
	// State is the state parameter in URL; the redirect back carries it.
	State string
	// Expires is when the pending authorization is forgotten.
	Expires time.Time
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("server %q: authorization pending: send the user to the authorization URL, then call FinishAuth with the redirect's code and state", e.Server)
}

// EndpointError is an error answer from an authorization server endpoint
// (token, registration). It repeats the server's error code and a bounded,
// scrubbed description, never the response body.
type EndpointError struct {
	// Endpoint names the endpoint: "token", "registration".
	Endpoint string
	// Status is the HTTP status, or 0 if unknown.
	Status int
	// Code is the OAuth error code (RFC 6749, section 5.2), if any.
	Code string
	// Description is the server's error_description, shortened.
	Description string
}

func (e *EndpointError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s endpoint refused the request", e.Endpoint)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, ": %s", e.Code)
	}
	if e.Description != "" {
		fmt.Fprintf(&b, ": %q", e.Description)
	}
	return b.String()
}

// maxDescription bounds how much of a server's error text is repeated.
const maxDescription = 200

// endpointError turns an error from golang.org/x/oauth2 into one that
// cannot carry a response body: a RetrieveError's message includes the body
// when the server sent no error code. secrets are values (tokens, client
// secret, verifier) scrubbed from whatever text remains, in case a server
// echoes them.
func endpointError(endpoint string, err error, secrets ...string) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		ee := &EndpointError{Endpoint: endpoint, Code: errorCode(re.ErrorCode), Description: describe(re.ErrorDescription, secrets...)}
		if re.Response != nil {
			ee.Status = re.Response.StatusCode
		}
		return ee
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The token endpoint URL carries no secret; the cause may be a
		// refusal by the URL rule or a network error.
		return err
	}
	return redacted(fmt.Errorf("%s endpoint: %w", endpoint, err), secrets...)
}

// oauthCode returns the OAuth error code inside err, or "".
func oauthCode(err error) string {
	var ee *EndpointError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

// errorCode returns an OAuth error code if code looks like one (RFC 6749
// codes are short words with underscores), else "invalid".
func errorCode(code string) string {
	if code == "" {
		return ""
	}
	if len(code) > 64 {
		return "invalid"
	}
	for _, c := range code {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "invalid"
		}
	}
	return code
}

// describe makes a server's error_description fit to repeat: known
// secrets scrubbed, anything that looks like a credential (a long run of
// token characters: codes, verifiers, tokens, JWTs) redacted, and the rest
// shortened. Prose survives: its words are short.
func describe(desc string, secrets ...string) string {
	return shorten(credentialLike.ReplaceAllString(scrub(desc, secrets...), "[redacted]"))
}

// credentialLike matches runs of characters tokens are made of, long
// enough that no word of an error message is one.
var credentialLike = regexp.MustCompile(`[A-Za-z0-9._~+/=%-]{20,}`)

func shorten(s string) string {
	if len(s) <= maxDescription {
		return s
	}
	return s[:maxDescription] + "…"
}

// scrub replaces each secret in s. Secrets shorter than 4 bytes are not
// worth replacing (and would mangle the text).
func scrub(s string, secrets ...string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// redactedError has the text of another error with secrets removed, and
// unwraps to it so that errors.Is and errors.As still see the cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redacted returns err with the given secret values removed from its
// message, or err itself if its message contains none.
func redacted(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := scrub(msg, secrets...)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// wrapf adds context to *errp, if it is an error. Deferred.
func wrapf(errp *error, format string, args ...any) {
	if *errp != nil {
		*errp = fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), *errp)
	}
}
