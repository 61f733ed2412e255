package agent

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/toolwire/toolwire/netpolicy"
)

// checkBaseURL parses a provider's base URL. Unless allowHTTP is set, it
// applies toolwire's remote-URL rule ([netpolicy.CheckURL]: https anywhere,
// plain http only to loopback), so that an API key and the conversation do
// not travel in the clear to another machine; the error is then a
// *netpolicy.URLError.
func checkBaseURL(raw string, allowHTTP bool) (*url.URL, error) {
	if !allowHTTP {
		return netpolicy.CheckURL(raw)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("base URL %q: want an http or https URL", raw)
	case u.Host == "":
		return nil, fmt.Errorf("base URL %q: no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("base URL %q: credentials in the URL are not accepted; use the API key", raw)
	}
	return u, nil
}

// defaultHTTPClient is the client of a provider given none. It has no
// overall timeout, since a streamed reply may take minutes; the context
// bounds each request. Without allowHTTP it is netpolicy's client, which
// applies the remote-URL rule to every redirect hop and keeps the key on
// the endpoint's origin.
func defaultHTTPClient(allowHTTP bool) *http.Client {
	if allowHTTP {
		return &http.Client{}
	}
	return netpolicy.NewClient(nil)
}
