package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolwire/toolwire/netpolicy"
)

// ErrNoRevocation is returned by [Revoke] when the authorization server
// offers no revocation endpoint: the tokens stay valid until they expire.
var ErrNoRevocation = errors.New("the authorization server offers no revocation endpoint")

// Revoke revokes e's tokens at the revocation endpoint (RFC 7009) its
// authorization server's metadata names: the refresh token first (which
// ends the grant, its access tokens included, at most servers), then the
// access token. The client authenticates as at the token endpoint; secret
// is a configured client's secret ("" for a registered or public client,
// whose own secret, if any, is in e). An entry without a token has nothing
// to revoke (nil). It returns [ErrNoRevocation] (wrapped) when the server
// has no endpoint. Nothing here changes the store: the caller forgets the
// entry whatever Revoke returns.
func Revoke(ctx context.Context, client *http.Client, e *Entry, secret string) (err error) {
	if e == nil || e.Token == nil || e.Client == nil {
		return nil
	}
	defer wrapf(&err, "oauth: server %q: revoke", e.Server)
	return revokeEntry(ctx, client, e, secret, nil)
}

// revokeEntry is Revoke without its context in errors; key, if set,
// authenticates the client with private_key_jwt instead of a secret.
func revokeEntry(ctx context.Context, client *http.Client, e *Entry, secret string, key *ClientKey) error {
	if e == nil || e.Token == nil || e.Client == nil {
		return nil
	}
	asm, err := serverMetadata(ctx, client, e.Client.Issuer)
	if err != nil {
		return err
	}
	if asm.RevocationEndpoint == "" {
		return ErrNoRevocation
	}
	if _, err := netpolicy.CheckURL(asm.RevocationEndpoint); err != nil {
		return fmt.Errorf("revocation_endpoint: %w", err)
	}
	if key != nil {
		secret = ""
		client = withClientAssertion(client, asm.RevocationEndpoint, key, e.Client.ID, asm.Issuer, asm.TokenEndpointAuthSigningAlgValuesSupported)
	} else if secret == "" {
		secret = e.Client.Secret
	}
	tokens := []struct{ token, hint string }{{e.Token.RefreshToken, "refresh_token"}, {e.Token.AccessToken, "access_token"}}
	for _, t := range tokens {
		if t.token == "" {
			continue
		}
		if err := revoke(ctx, client, asm.RevocationEndpoint, e.Client, secret, t.token, t.hint); err != nil {
			return redacted(err, e.Token.RefreshToken, e.Token.AccessToken, secret)
		}
	}
	return nil
}

// revoke sends one RFC 7009 revocation request.
func revoke(ctx context.Context, client *http.Client, endpoint string, c *Client, secret, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	basic := secret != "" && c.AuthMethod != "client_secret_post"
	if !basic {
		form.Set("client_id", c.ID)
		if secret != "" {
			form.Set("client_secret", secret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		// RFC 6749, section 2.3.1: both form-encoded first.
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(secret))
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	// RFC 7009, section 2.2: 200 whether or not the token was valid.
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	ee := &EndpointError{Endpoint: "revocation", Status: resp.StatusCode}
	var oe struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &oe) == nil {
		ee.Code, ee.Description = errorCode(oe.Error), describe(oe.Description, token, secret)
	}
	return ee
}
