package oauth

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// withGrantParams returns a copy of client whose POSTs of the grant to
// tokenEndpoint carry params besides their own: how a parameter
// golang.org/x/oauth2 has no option for (RFC 8707's resource on a refresh)
// reaches the token endpoint. Other requests go as they are.
func withGrantParams(client *http.Client, tokenEndpoint, grant string, params url.Values) *http.Client {
	if client == nil || tokenEndpoint == "" || len(params) == 0 {
		return client
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *client
	c.Transport = &grantParamsTransport{base: base, tokenEndpoint: tokenEndpoint, grant: grant, params: params}
	return &c
}

type grantParamsTransport struct {
	base                 http.RoundTripper
	tokenEndpoint, grant string
	params               url.Values
}

func (t *grantParamsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return rewriteTokenForm(t.base, t.tokenEndpoint, req, func(_ *http.Request, form url.Values) error {
		if form.Get("grant_type") == t.grant {
			for k, v := range t.params {
				if !form.Has(k) {
					form[k] = v
				}
			}
		}
		return nil
	})
}

// rewriteTokenForm sends req through base; a POST with a body to
// tokenEndpoint first has its form changed by edit (which may also change
// the outgoing request's headers) and re-encoded. It is the one way the
// package adds to what golang.org/x/oauth2 sends a token endpoint.
func rewriteTokenForm(base http.RoundTripper, tokenEndpoint string, req *http.Request, edit func(out *http.Request, form url.Values) error) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.String() != tokenEndpoint || req.Body == nil {
		return base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	if err := edit(out, form); err != nil {
		return nil, err
	}
	encoded := form.Encode()
	out.Body = io.NopCloser(strings.NewReader(encoded))
	out.ContentLength = int64(len(encoded))
	out.Header.Set("Content-Length", strconv.Itoa(len(encoded)))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(encoded)), nil }
	return base.RoundTrip(out)
}
