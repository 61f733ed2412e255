package workspace

import (
	"fmt"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/oauth"
)

// OAuthOptions tunes [OAuthHandlers]. A nil *OAuthOptions means the
// defaults.
type OAuthOptions struct {
	// Fetcher obtains a person's authorization, as [oauth.Loopback] does
	// for toolwire login. Nil means nobody can be asked: a server that
	// needs a person fails with an error naming "toolwire login SERVER".
	Fetcher oauth.Fetcher
	// LookupEnv reads the client secret a server's oauth.clientSecretEnv
	// names. Nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ClientName is the client_name of a dynamic registration; empty
	// means the oauth package's ("toolwire").
	ClientName string
}

// OAuthHandlers returns the [mcpclient.OAuthFunc] that makes each remote
// server's OAuth handler from its oauth settings: the client credentials
// or enterprise-managed grant when the server's grant says so, else the
// authorization code flow with its tokens in store (the configured client,
// if any, a registered one otherwise). A configured confidential client
// whose secret variable is unset is an error for that server rather than
// a public client in its place.
func OAuthHandlers(store *oauth.Store, opts *OAuthOptions) mcpclient.OAuthFunc {
	var o OAuthOptions
	if opts != nil {
		o = *opts
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	return func(cfg config.Server, client *http.Client) (auth.OAuthHandler, error) {
		c := cfg.OAuth
		if c == nil {
			c = &config.OAuth{}
		}
		if c.PerCaller() {
			// Fail closed: no shared credential may stand in for the
			// callers' own (oauth.Callers serves them, per caller).
			return nil, fmt.Errorf("server %q: oauth.identity is caller: it is reached only with a gateway caller's own identity, and this connection has no caller", cfg.Name)
		}
		if c.Grant == "client_credentials" || c.Grant == "enterprise" {
			return oauth.NewClientCredentialsHandler(&oauth.ClientCredentialsConfig{
				Server: cfg.Name, ClientID: c.ClientID, SecretEnv: c.ClientSecretEnv, Key: mcpclient.OAuthClientKey(c), AuthMethod: c.AuthMethod, Scopes: c.Scopes, IdP: mcpclient.OAuthIdP(c), HTTPClient: client,
			})
		}
		// Resource binds the stored tokens to this URL and is what the
		// refreshes name (RFC 8707) before any discovery in this process.
		hc := &oauth.HandlerConfig{
			Server: cfg.Name, Resource: cfg.URL, Store: store, HTTPClient: client, Scopes: c.Scopes, ClientMetadataURL: c.ClientMetadataURL,
			ClientName: o.ClientName, Fetcher: o.Fetcher,
		}
		if c.ClientID != "" {
			secret := ""
			if c.ClientSecretEnv != "" {
				// A confidential client without its secret must not quietly
				// become a public one.
				if secret, _ = o.LookupEnv(c.ClientSecretEnv); secret == "" {
					return nil, fmt.Errorf("server %q: oauth.clientSecretEnv: the variable %s is not set", cfg.Name, c.ClientSecretEnv)
				}
			}
			hc.Client = &oauth.ClientConfig{ID: c.ClientID, Secret: secret, Key: mcpclient.OAuthClientKey(c)}
		}
		return oauth.NewHandler(hc)
	}
}
