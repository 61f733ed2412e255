package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Kinds of provider failure. A [*ProviderError] wraps one of them, so
// errors.Is(err, agent.ErrUnauthorized) tells what went wrong.
var (
	// ErrUnauthorized means the endpoint refused the API key (HTTP 401 or
	// 403), or there was none to send.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrRateLimited means the endpoint kept answering 429 (or was
	// overloaded) after the retries the agent allows, or asked for a wait
	// longer than it allows.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnreachable means no HTTP response came back: the host could not
	// be resolved or connected to, or the connection failed.
	ErrUnreachable = errors.New("unreachable")
	// ErrRequest means the endpoint answered with another error status
	// (a bad request, an unknown model, a server error, which is retried
	// first), or its reply could not be read to the end.
	ErrRequest = errors.New("request failed")
	// ErrStalled means the reply stream sent nothing for longer than the
	// provider's idle timeout, or ended before its terminator (OpenAI's
	// finish_reason, Anthropic's message_stop): what came is incomplete.
	ErrStalled = errors.New("stream stalled")
)

// ProviderError is a provider's failure to get a reply.
type ProviderError struct {
	// Provider names the provider: "openai" or "anthropic".
	Provider string
	// Kind is one of ErrUnauthorized, ErrRateLimited, ErrUnreachable,
	// ErrStalled and ErrRequest.
	Kind error
	// Status is the HTTP status, or 0 when there was no response.
	Status int
	// RetryAfter is how long the endpoint asked the client to wait
	// (Retry-After or retry-after-ms); HasRetryAfter reports whether it
	// asked at all, since zero is a valid request.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Message is a one-line explanation meant for a person.
	Message string
	// Err is the underlying error from the provider's SDK, if any.
	Err error
}

func (e *ProviderError) Error() string { return e.Provider + ": " + e.Message }

// Unwrap returns the kind and the underlying error.
func (e *ProviderError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// reason is the short name of the failure kind, for the audit log.
func (e *ProviderError) reason() string {
	switch e.Kind {
	case ErrUnauthorized:
		return "unauthorized"
	case ErrRateLimited:
		return "rate_limited"
	case ErrUnreachable:
		return "unreachable"
	case ErrStalled:
		return "stalled"
	}
	return "request_failed"
}

// retryable reports whether the same request may succeed if sent again
// later: a rate limit, an endpoint that says it is overloaded (503, and
// Anthropic's 529), or any other server error (500, 502, 504…) but those
// that say the request itself can never work (501 Not Implemented, 505
// HTTP Version Not Supported).
func (e *ProviderError) retryable() bool {
	switch e.Status {
	case http.StatusTooManyRequests, 529:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return e.Status >= 500 && e.Status <= 599
}

// endpoint describes where a provider sends its requests and where its key
// came from, for the messages of its errors.
type endpoint struct {
	provider string
	baseURL  string
	keyEnv   string // the environment variable named as holding the key
	hasKey   bool
}

// statusError classifies an HTTP error status. detail is the endpoint's
// own message, if it sent one.
func (ep *endpoint) statusError(status int, header http.Header, detail string, err error) *ProviderError {
	pe := &ProviderError{Provider: ep.provider, Status: status, Err: err}
	pe.RetryAfter, pe.HasRetryAfter = retryAfter(header, time.Now())
	statusText := strings.TrimSpace(fmt.Sprintf("%d %s", status, http.StatusText(status)))
	if detail = oneLine(detail, 300); detail != "" {
		detail = ": " + detail
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		pe.Kind = ErrUnauthorized
		pe.Message = fmt.Sprintf("%s refused the API key (%s%s); %s", ep.baseURL, statusText, detail, ep.keyHint())
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == 529:
		pe.Kind = ErrRateLimited
		pe.Message = fmt.Sprintf("%s is rate limiting or overloaded (%s%s)", ep.baseURL, statusText, detail)
	default:
		pe.Kind = ErrRequest
		pe.Message = fmt.Sprintf("%s answered %s%s", ep.baseURL, statusText, detail)
	}
	return pe
}

// keyHint says where the key should come from.
func (ep *endpoint) keyHint() string {
	if ep.keyEnv == "" {
		return "check the API key"
	}
	if !ep.hasKey {
		return fmt.Sprintf("no key was sent: set %s (or name another variable with --api-key-env)", ep.keyEnv)
	}
	return fmt.Sprintf("check the key in %s", ep.keyEnv)
}

// transportError classifies an error that came with no HTTP status. It
// returns ctx's error unchanged when ctx is done: a cancellation is not a
// provider failure.
func (ep *endpoint) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	pe := &ProviderError{Provider: ep.provider, Kind: ErrUnreachable, Err: err}
	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
		urlErr *url.Error
	)
	switch {
	case errors.As(err, &dnsErr):
		pe.Message = fmt.Sprintf("cannot reach %s: host %q not found", ep.baseURL, dnsErr.Name)
	case errors.As(err, &opErr):
		pe.Message = fmt.Sprintf("cannot reach %s: %v (is the server running, and is the base URL right?)", ep.baseURL, opErr.Err)
	case errors.As(err, &urlErr):
		pe.Message = fmt.Sprintf("cannot reach %s: %v", ep.baseURL, urlErr.Err)
	default:
		// A stream that broke off, or a reply that could not be decoded.
		pe.Kind = ErrRequest
		pe.Message = fmt.Sprintf("reading the reply from %s: %v", ep.baseURL, err)
	}
	return pe
}

// retryAfter reads how long a response asks the client to wait: the
// retry-after-ms header (OpenAI's, in milliseconds) first, then
// Retry-After in seconds or as an HTTP date (RFC 9110, section 10.2.3).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < float64(24*time.Hour/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	// Seconds may be fractional ("2.5"): the providers' own SDKs read the
	// header as a float, and endpoints behind them send such values.
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s >= 0 && s <= float64(24*time.Hour/time.Second)) { // also NaN
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// oneLine folds s onto one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = truncateUTF8(s, n) + "…"
	}
	return s
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
