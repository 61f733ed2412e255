package oauth

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// publicClientHTTP returns client with its token requests fixed for a
// public client (token_endpoint_auth_method "none"). go-sdk hands a
// pre-registered client's token request to x/oauth2 with the auth style the
// authorization server lists first among client_secret_post and
// client_secret_basic; when it lists neither (only "none"), x/oauth2
// auto-detects and sends "Authorization: Basic base64(client_id:)", which
// a server that registered the client as public may refuse. A public
// client identifies itself by client_id in the form (RFC 6749 §3.2.1), so
// such a header, on a POST to the token endpoint, is moved there.
func publicClientHTTP(client *http.Client, tokenEndpoint string) *http.Client {
	if client == nil || tokenEndpoint == "" {
		return client
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *client
	c.Transport = &publicClientTransport{base: base, tokenEndpoint: tokenEndpoint}
	return &c
}

type publicClientTransport struct {
	base          http.RoundTripper
	tokenEndpoint string
}

func (t *publicClientTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	id, ok := emptySecretBasic(req.Header.Get("Authorization"))
	if !ok || req.Method != http.MethodPost || req.URL.String() != t.tokenEndpoint || req.Body == nil {
		return t.base.RoundTrip(req)
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
	form.Set("client_id", id)
	encoded := form.Encode()
	out := req.Clone(req.Context())
	out.Header.Del("Authorization")
	out.Body = io.NopCloser(strings.NewReader(encoded))
	out.ContentLength = int64(len(encoded))
	out.Header.Set("Content-Length", strconv.Itoa(len(encoded)))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(encoded)), nil }
	return t.base.RoundTrip(out)
}

// emptySecretBasic returns the client ID of a Basic authorization with an
// empty password.
func emptySecretBasic(h string) (string, bool) {
	const prefix = "Basic "
	if !strings.HasPrefix(h, prefix) {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(h[len(prefix):])
	if err != nil || !bytes.HasSuffix(raw, []byte(":")) || bytes.Count(raw, []byte(":")) != 1 {
		return "", false
	}
	id, err := url.QueryUnescape(string(raw[:len(raw)-1]))
	if err != nil || id == "" {
		return "", false
	}
	return id, true
}
