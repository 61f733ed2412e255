package mcpclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/oauth"
)

// OAuthFunc returns the OAuth handler of a remote server that may require
// OAuth 2.1, or nil for none. client is the HTTP client the handler must
// send every request with (discovery, registration, tokens): it applies the
// remote-URL rule to every URL an authorization server names and, with an
// egress policy, refuses private and metadata addresses.
type OAuthFunc func(cfg config.Server, client *http.Client) (auth.OAuthHandler, error)

// oauthHandler returns the server's OAuth handler, made on first use and
// kept for every later connection, so that a reconnect reuses its tokens.
func (d *dialer) oauthHandler(cfg config.Server) (auth.OAuthHandler, error) {
	d.oauthOnce.Do(func() {
		client, err := d.oauthClient(cfg)
		if err != nil {
			d.oauthErr = err
			return
		}
		d.oauth, d.oauthErr = d.set.opts.OAuth(cfg, client)
	})
	return d.oauth, d.oauthErr
}

// oauthClient is the client for a server's OAuth requests. The authorization
// server is on another host than the MCP server as a rule, so the egress
// guard cannot name it in advance: with a policy, it may reach any public
// address (and loopback when the MCP server itself is on loopback), never a
// private, link-local or metadata one.
func (d *dialer) oauthClient(cfg config.Server) (*http.Client, error) {
	var base http.RoundTripper = http.DefaultTransport
	if hc := d.set.opts.HTTPClient; hc != nil && hc.Transport != nil {
		base = hc.Transport
	}
	if d.set.opts.Egress != nil {
		u, err := url.Parse(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
		if base, err = guarded(base, &netpolicy.DialerOptions{AllowLoopback: netpolicy.IsLoopbackHost(u.Hostname())}); err != nil {
			return nil, err
		}
	}
	return netpolicy.NewClient(&netpolicy.ClientOptions{Transport: base}), nil
}

// needsLogin reports whether err means the server waits for a person to
// log in, which no retry will change.
func needsLogin(err error) bool {
	var pending *oauth.PendingError
	return errors.Is(err, oauth.ErrLoginRequired) || errors.As(err, &pending)
}

// OAuthClientKey is the private key a server's oauth settings name for
// private_key_jwt, or nil when they name none.
func OAuthClientKey(o *config.OAuth) *oauth.ClientKey {
	if o == nil || (o.PrivateKeyFile == "" && o.PrivateKeyEnv == "") {
		return nil
	}
	return &oauth.ClientKey{File: o.PrivateKeyFile, Env: o.PrivateKeyEnv}
}

// OAuthIdP is the identity provider of a server's grant enterprise, or nil.
func OAuthIdP(o *config.OAuth) *oauth.IdPConfig {
	if o == nil || o.IdP == nil {
		return nil
	}
	c := o.IdP
	return &oauth.IdPConfig{Issuer: c.Issuer, TokenEndpoint: c.TokenEndpoint, ClientID: c.ClientID, SecretEnv: c.ClientSecretEnv, IDTokenEnv: c.IDTokenEnv, IDTokenFile: c.IDTokenFile}
}
