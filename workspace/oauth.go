package workspace

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"

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
//
// For a server reached with each gateway caller's own identity
// (oauth.identity: caller) it is the handler of the server's shared
// connection, which lists the server's tools, resources and prompts and
// hears its notifications, and which mcpclient never lets make a call
// (see [CallerCredentials] for the calls): with grant token_exchange, the
// client_credentials grant of the same gateway client at the same issuer;
// with a login per caller, the operator's own login ("toolwire login
// SERVER"), held to the configured issuer with a configured client.
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
		issuer := ""
		if c.PerCaller() {
			// The listing's credential is the operator's, at the issuer
			// the callers' own go to.
			issuer = c.Issuer
		}
		if c.Grant == "client_credentials" || c.Grant == "enterprise" || c.PerCaller() && c.Grant == "token_exchange" {
			return oauth.NewClientCredentialsHandler(&oauth.ClientCredentialsConfig{
				Server: cfg.Name, ClientID: c.ClientID, SecretEnv: c.ClientSecretEnv, Key: mcpclient.OAuthClientKey(c), AuthMethod: c.AuthMethod, Scopes: c.Scopes, IdP: mcpclient.OAuthIdP(c), HTTPClient: client,
				Issuer: issuer, LookupEnv: o.LookupEnv,
			})
		}
		// Resource binds the stored tokens to this URL and is what the
		// refreshes name (RFC 8707) before any discovery in this process.
		hc := &oauth.HandlerConfig{
			Server: cfg.Name, Resource: cfg.URL, Store: store, HTTPClient: client, Scopes: c.Scopes, ClientMetadataURL: c.ClientMetadataURL,
			ClientName: o.ClientName, Fetcher: o.Fetcher,
		}
		if c.ClientID != "" {
			secret, err := clientSecret(cfg.Name, c, o.LookupEnv)
			if err != nil {
				return nil, err
			}
			hc.Client = &oauth.ClientConfig{ID: c.ClientID, Secret: secret, Key: mcpclient.OAuthClientKey(c), Issuer: issuer}
		}
		return oauth.NewHandler(hc)
	}
}

// clientSecret reads the secret of a server's configured client, if it
// names one: a confidential client without its secret must not quietly
// become a public one.
func clientSecret(server string, c *config.OAuth, lookup func(string) (string, bool)) (string, error) {
	if c.ClientSecretEnv == "" {
		return "", nil
	}
	secret, _ := lookup(c.ClientSecretEnv)
	if secret == "" {
		return "", fmt.Errorf("server %q: oauth.clientSecretEnv: the variable %s is not set", server, c.ClientSecretEnv)
	}
	return secret, nil
}

// CallerCredentials returns the [mcpclient.CallersFunc] that makes the
// per-caller upstream credentials of each server reached with each gateway
// caller's own identity (oauth.identity: caller), from its oauth
// settings: token exchange (grant token_exchange) at the configured
// issuer with the gateway's client, or a login per caller through the
// gateway's redirect URL with the callers' tokens in store, which must
// then have its key (the tokens are sealed). mcpclient sends every call
// of such a server through the session of the call's caller, whose
// requests carry these credentials alone.
func CallerCredentials(store *oauth.Store, opts *OAuthOptions) mcpclient.CallersFunc {
	var o OAuthOptions
	if opts != nil {
		o = *opts
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	return func(cfg config.Server, client *http.Client) (*oauth.Callers, error) {
		c := cfg.OAuth
		if !c.PerCaller() {
			return nil, fmt.Errorf("server %q is not reached with each caller's identity (oauth.identity: caller)", cfg.Name)
		}
		cc := &oauth.CallersConfig{
			Server: cfg.Name, Resource: cfg.URL, HTTPClient: client, Issuer: c.Issuer, AuthMethod: c.AuthMethod, Scopes: c.Scopes,
		}
		if c.ClientID != "" {
			secret, err := clientSecret(cfg.Name, c, o.LookupEnv)
			if err != nil {
				return nil, err
			}
			cc.Client = &oauth.ClientConfig{ID: c.ClientID, Secret: secret, Key: mcpclient.OAuthClientKey(c)}
		}
		if c.Grant == "token_exchange" {
			cc.Mode, cc.Audience = oauth.CallerExchange, c.Audience
			switch c.SubjectTokenType {
			case "jwt":
				cc.SubjectTokenType = oauth.TokenTypeJWT
			case "access_token":
				cc.SubjectTokenType = oauth.TokenTypeAccessToken
			}
			return oauth.NewCallers(cc)
		}
		if store == nil {
			return nil, fmt.Errorf("server %q: a login per caller keeps the callers' tokens in the token store, and there is none", cfg.Name)
		}
		if err := store.CheckKey(); err != nil {
			return nil, fmt.Errorf("server %q: a login per caller keeps the callers' tokens sealed in the token store: %w", cfg.Name, err)
		}
		cc.Mode, cc.Store, cc.RedirectURL = oauth.CallerLogin, store, c.RedirectURL
		cc.ClientMetadataURL, cc.ClientName = c.ClientMetadataURL, o.ClientName
		return oauth.NewCallers(cc)
	}
}

// CallerCallbackPaths returns the paths of the redirect URLs of the
// configured servers with a login per caller (oauth.identity: caller),
// each once, sorted: where a gateway mounts [Workspace.CallerCallback].
func (w *Workspace) CallerCallbackPaths() []string {
	w.mu.Lock()
	file := w.file
	w.mu.Unlock()
	var paths []string
	for _, p := range loginCallbackPaths(file) {
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// CallerCallback returns the handler of the redirects of callers' logins
// that come back at path ([oauth.Callback]), for every started server
// whose redirect URL has that path, as the manager holds them at each
// request. A gateway mounts it outside its bearer authentication (a
// browser brings no token) and its Origin check (the browser arrives by
// a navigation from the authorization server).
func (w *Workspace) CallerCallback(path string, opts *oauth.CallbackOptions) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		cb, err := oauth.NewCallback(opts, w.loginCallers(path)...)
		if err != nil {
			http.Error(rw, "toolwire: the authorization callback is misconfigured", http.StatusInternalServerError)
			return
		}
		cb.ServeHTTP(rw, r)
	})
}

// loginCallers returns the per-caller credentials of the started servers
// with a login per caller, those whose redirect URL has path if path is
// not "".
func (w *Workspace) loginCallers(path string) []*oauth.Callers {
	var out []*oauth.Callers
	for _, s := range w.manager.Servers() {
		c := s.Callers()
		if c == nil || c.Mode() != oauth.CallerLogin || path != "" && redirectPath(c.RedirectURL()) != path {
			continue
		}
		out = append(out, c)
	}
	return out
}

// loginCallbackPaths returns the paths of the redirect URLs of file's
// servers with a login per caller.
func loginCallbackPaths(file *config.File) []string {
	var paths []string
	for _, s := range file.Servers {
		if o := s.OAuth; o.PerCaller() && o.Grant != "token_exchange" && !s.Disabled {
			paths = append(paths, redirectPath(o.RedirectURL))
		}
	}
	return paths
}

// redirectPath is the path of a redirect URL, "/" for none.
func redirectPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Path == "" {
		return "/"
	}
	return u.Path
}

// LogoutCaller ends caller's own authorization at the server named
// server, one reached with each caller's identity: their session there
// is closed, and their upstream tokens are forgotten and revoked where
// the authorization server offers revocation
// ([mcpclient.Server.LogoutCaller]).
func (w *Workspace) LogoutCaller(ctx context.Context, server string, caller oauth.Caller) error {
	s, ok := w.manager.Server(server)
	if !ok {
		return fmt.Errorf("no server %q is started", server)
	}
	return s.LogoutCaller(ctx, caller)
}
