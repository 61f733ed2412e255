package oauth

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/url"
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
	if !ok {
		return t.base.RoundTrip(req)
	}
	return rewriteTokenForm(t.base, t.tokenEndpoint, req, func(out *http.Request, form url.Values) error {
		form.Set("client_id", id)
		out.Header.Del("Authorization")
		return nil
	})
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
