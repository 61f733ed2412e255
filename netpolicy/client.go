package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// DefaultMaxRedirects is the number of redirects a client from NewClient
// follows when ClientOptions.MaxRedirects is zero.
const DefaultMaxRedirects = 10

// alwaysSecret are the headers that never leave the origin, whatever the
// configuration says. Authorization is among them because OAuth token
// sources set it per request rather than through configured headers;
// Referer because it carries the origin's URL, query string included.
var alwaysSecret = []string{"Authorization", "Cookie", "Referer"}

// ClientOptions configures NewClient. A nil *ClientOptions means defaults.
type ClientOptions struct {
	// Transport sends the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// MaxRedirects caps the redirects followed for one request: zero means
	// DefaultMaxRedirects, a negative number means none are followed.
	MaxRedirects int
	// SecretHeaders names headers (any case) that, like Authorization,
	// Cookie and Referer, are sent only to the origin of the request the
	// caller made.
	SecretHeaders []string
}

// NewClient returns a client for MCP and OAuth requests that keeps each
// request pinned to its origin (scheme, host and port):
//
//   - every request, the first and each redirect hop, must pass the
//     remote-URL rule (see CheckURL), checked before anything is sent;
//   - a redirect from https to http is refused, even to loopback;
//   - at most MaxRedirects redirects are followed;
//   - from the first hop whose origin differs from the original request's,
//     the secret headers are removed, and they stay removed for the rest
//     of the chain, even if it comes back to the origin.
//
// Go's client copies the caller's headers to every hop and strips only a
// few, only for other domains; the client's CheckRedirect corrects that.
// A refusal is returned as the client returns any error, inside a
// *url.Error; a refused URL is a *URLError.
func NewClient(opts *ClientOptions) *http.Client {
	if opts == nil {
		opts = &ClientOptions{}
	}
	base := opts.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	limit := opts.MaxRedirects
	switch {
	case limit == 0:
		limit = DefaultMaxRedirects
	case limit < 0:
		limit = 0
	}
	secret := append(append([]string(nil), alwaysSecret...), opts.SecretHeaders...)
	return &http.Client{
		Transport: ruleTransport{base},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return checkRedirect(req, via, limit, secret)
		},
	}
}

// checkRedirect is NewClient's redirect policy. It runs after Go's client
// has copied the original request's headers onto req.
func checkRedirect(req *http.Request, via []*http.Request, limit int, secret []string) error {
	// Go's client names the redirect target in the error it returns.
	switch {
	case limit == 0:
		return errors.New("redirect refused: this client follows no redirects")
	case len(via) > limit:
		return fmt.Errorf("stopped after %d redirects", limit)
	}
	if req.URL.Scheme == "http" {
		for _, r := range via {
			if r.URL.Scheme == "https" {
				return errors.New("redirect from https to plain http refused")
			}
		}
	}
	if reason := problem(req.URL); reason != "" {
		return &URLError{URL: display(req.URL), Reason: reason}
	}
	if leftOrigin(req, via) {
		for k := range req.Header {
			for _, s := range secret {
				if strings.EqualFold(k, s) {
					delete(req.Header, k)
				}
			}
		}
	}
	return nil
}

// leftOrigin reports whether req, or any hop before it, is for another
// origin than the first request.
func leftOrigin(req *http.Request, via []*http.Request) bool {
	first := origin(via[0].URL)
	if origin(req.URL) != first {
		return true
	}
	for _, r := range via[1:] {
		if origin(r.URL) != first {
			return true
		}
	}
	return false
}

// ruleTransport refuses a request whose URL breaks the remote-URL rule. It
// catches the first request, which CheckRedirect never sees, so a URL that
// a placeholder filled in after the configuration was checked is refused
// before anything is sent.
type ruleTransport struct {
	base http.RoundTripper
}

func (t ruleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if reason := problem(req.URL); reason != "" {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &URLError{URL: display(req.URL), Reason: reason}
	}
	return t.base.RoundTrip(req)
}

// HeaderTransport adds configured headers, a bearer token among them, to
// requests for one origin and to no other. Once a redirect chain has been
// anywhere else, the rest of the chain goes without them, even back at the
// origin: the other origin chose where it leads.
type HeaderTransport struct {
	base    http.RoundTripper
	origin  string
	headers map[string]string
}

// NewHeaderTransport returns a HeaderTransport that sends requests through
// base (nil means http.DefaultTransport) and adds headers to those for the
// origin of endpoint. The endpoint must pass CheckURL; the error is then
// its *URLError. For a bearer token, put "Authorization": "Bearer "+token
// in headers.
func NewHeaderTransport(endpoint string, headers map[string]string, base http.RoundTripper) (*HeaderTransport, error) {
	u, err := CheckURL(endpoint)
	if err != nil {
		return nil, err
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &HeaderTransport{base: base, origin: origin(u), headers: headers}, nil
}

// RoundTrip sends req through the base transport, with the headers added
// when req and every earlier hop of its redirect chain are for the origin.
// It does not modify req.
func (t *HeaderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for r := req; r != nil; r = previous(r) {
		if origin(r.URL) != t.origin {
			return t.base.RoundTrip(req)
		}
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// previous returns the request whose response redirected to r, or nil.
func previous(r *http.Request) *http.Request {
	if r.Response == nil {
		return nil
	}
	return r.Response.Request
}

// origin returns scheme://host:port, with the host lowercased (an IP
// address in its usual form) and the default port written out, so that
// https://H and https://h:443 are equal.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	host := strings.ToLower(u.Hostname())
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(host, port)
}
