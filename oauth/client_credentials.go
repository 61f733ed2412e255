package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ClientCredentialsConfig configures [NewClientCredentialsHandler].
type ClientCredentialsConfig struct {
	// Server is the configured server name, for errors. Required.
	Server string
	// ClientID is the client_id. Required.
	ClientID string
	// SecretEnv names the environment variable holding the client secret.
	// It is read each time a token is requested, never stored. Exactly one
	// of SecretEnv and Key is set.
	SecretEnv string
	// Key, if set, authenticates the client with private_key_jwt (RFC
	// 7523, section 2.2): each token request carries a fresh assertion
	// signed with the key, and no secret.
	Key *ClientKey
	// AuthMethod is "client_secret_basic" or "client_secret_post" with
	// SecretEnv, "private_key_jwt" (or empty) with Key; empty with
	// SecretEnv chooses from the authorization server's metadata (post
	// first, as OAuth 2.1 prefers).
	AuthMethod string
	// Scopes, if set, are requested instead of those the server
	// advertises.
	Scopes []string
	// IdP, if set, makes the grant enterprise-managed authorization
	// (cross-app access, SEP-990) instead of client_credentials: an
	// identity assertion (ID-JAG) obtained from the IdP by token exchange
	// (RFC 8693) is presented with the JWT bearer grant (RFC 7523, section
	// 2.1), the client authenticating as above.
	IdP *IdPConfig
	// HTTPClient sends every request. Required: pass the netpolicy client.
	HTTPClient *http.Client
	// Timeout bounds one token request; zero means DefaultRefreshTimeout.
	Timeout time.Duration
	// Issuer, if set, pins the authorization server: one the server's
	// metadata names that is not this issuer is refused before anything
	// is sent to it (ErrIssuerMismatch). A gateway's listing with the
	// client that also exchanges its callers' tokens is held to the
	// issuer those go to.
	Issuer string
	// LookupEnv reads SecretEnv; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// ClientCredentialsHandler is an [auth.OAuthHandler] for machine-to-machine
// access with the client_credentials grant (RFC 6749, section 4.4; MCP's
// SEP-1046). On the server's first 401 it discovers the authorization
// server as [Handler] does (PKCE is not involved) and requests a token;
// when the token expires it requests another, reading the secret again.
// Tokens are kept in memory only: a new one costs one request and no user.
//
// The client authenticates with its secret or, with a Key, with a signed
// assertion (private_key_jwt, which go-sdk v1.8.0's extauth lacks).
type ClientCredentialsHandler struct {
	cfg ClientCredentialsConfig

	mu  sync.Mutex
	src *ccSource // nil until Authorize succeeds
}

var _ auth.OAuthHandler = (*ClientCredentialsHandler)(nil)

// NewClientCredentialsHandler validates cfg and returns a handler.
func NewClientCredentialsHandler(cfg *ClientCredentialsConfig) (*ClientCredentialsHandler, error) {
	if cfg == nil {
		return nil, errors.New("oauth: nil client credentials config")
	}
	c := *cfg
	switch {
	case c.Server == "":
		return nil, errors.New("oauth: client credentials: empty server name")
	case c.ClientID == "":
		return nil, fmt.Errorf("oauth: server %q: client credentials without a client ID", c.Server)
	case c.SecretEnv == "" && c.Key == nil:
		return nil, fmt.Errorf("oauth: server %q: client credentials without a secret variable or a private key", c.Server)
	case c.SecretEnv != "" && c.Key != nil:
		return nil, fmt.Errorf("oauth: server %q: client credentials with both a secret variable and a private key", c.Server)
	case c.HTTPClient == nil:
		return nil, fmt.Errorf("oauth: server %q: no HTTP client", c.Server)
	}
	if c.Key != nil {
		if err := c.Key.check(); err != nil {
			return nil, fmt.Errorf("oauth: server %q: %w", c.Server, err)
		}
		if c.AuthMethod != "" && c.AuthMethod != "private_key_jwt" {
			return nil, fmt.Errorf("oauth: server %q: client authentication %q with a private key (want private_key_jwt)", c.Server, c.AuthMethod)
		}
		c.AuthMethod = "private_key_jwt"
	} else {
		switch c.AuthMethod {
		case "", "client_secret_basic", "client_secret_post":
		default:
			return nil, fmt.Errorf("oauth: server %q: client authentication %q is not supported with a secret (want client_secret_basic or client_secret_post)", c.Server, c.AuthMethod)
		}
	}
	if c.IdP != nil {
		idp := *c.IdP
		if err := idp.check(); err != nil {
			return nil, fmt.Errorf("oauth: server %q: %w", c.Server, err)
		}
		c.IdP = &idp
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultRefreshTimeout
	}
	if c.Issuer != "" && canonicalResource(c.Issuer) == "" {
		return nil, fmt.Errorf("oauth: server %q: issuer %q is not an absolute URL", c.Server, c.Issuer)
	}
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	return &ClientCredentialsHandler{cfg: c}, nil
}

// TokenSource returns the token source once Authorize has succeeded, nil
// before.
func (h *ClientCredentialsHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.src == nil {
		return nil, nil
	}
	return h.src, nil
}

// Authorize discovers the token endpoint and requests a token. A 403 other
// than insufficient_scope returns nil, as with [Handler.Authorize].
func (h *ClientCredentialsHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) (err error) {
	defer func() {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if resp.StatusCode == http.StatusForbidden && challengeError(challenges) != "insufficient_scope" {
		return nil
	}
	defer wrapf(&err, "oauth: server %q: client credentials", h.cfg.Server)
	d, err := discover(ctx, h.cfg.HTTPClient, challenges, req.URL.String(), false)
	if err != nil {
		return err
	}
	if h.cfg.Issuer != "" && !sameIssuer(d.asm.Issuer, h.cfg.Issuer) {
		return fmt.Errorf("discovery: %w: the server's authorization server is %q, the configuration names %q", ErrIssuerMismatch, d.asm.Issuer, h.cfg.Issuer)
	}
	grant := "client_credentials"
	if h.cfg.IdP != nil {
		grant = GrantJWTBearer
	}
	if g := d.asm.GrantTypesSupported; len(g) > 0 && !slices.Contains(g, grant) {
		return fmt.Errorf("authorization server %s does not support the %s grant", d.asm.Issuer, grant)
	}
	method := h.cfg.AuthMethod
	if method == "" {
		method = pickAuthMethod(d.asm.TokenEndpointAuthMethodsSupported, true)
	}
	if m := d.asm.TokenEndpointAuthMethodsSupported; method == "private_key_jwt" && len(m) > 0 && !slices.Contains(m, method) {
		return fmt.Errorf("authorization server %s does not accept private_key_jwt client authentication (it lists %v)", d.asm.Issuer, m)
	}
	scopes := h.cfg.Scopes
	if len(scopes) == 0 {
		scopes = d.scopes
	}
	src := &ccSource{
		server:   h.cfg.Server,
		clientID: h.cfg.ClientID,
		env:      h.cfg.SecretEnv,
		lookup:   h.cfg.LookupEnv,
		key:      h.cfg.Key,
		issuer:   d.asm.Issuer,
		algs:     slices.Clone(d.asm.TokenEndpointAuthSigningAlgValuesSupported),
		tokenURL: d.asm.TokenEndpoint,
		style:    authStyle(method),
		scopes:   slices.Clone(scopes),
		resource: d.resource,
		client:   h.cfg.HTTPClient,
		timeout:  h.cfg.Timeout,
		now:      time.Now,
	}
	if h.cfg.IdP != nil {
		src.grant = h.cfg.IdP.grant(h.cfg.HTTPClient, d.asm.Issuer, d.resource, src.scopes)
	}
	if _, err := src.fetch(ctx); err != nil {
		return err
	}
	h.mu.Lock()
	h.src = src
	h.mu.Unlock()
	return nil
}

// ccSource requests client_credentials tokens, one at a time.
type ccSource struct {
	server, clientID, env, tokenURL, resource string
	key                                       *ClientKey // private_key_jwt, else the secret in env
	lookup                                    func(string) (string, bool)
	issuer                                    string   // the assertion's audience
	algs                                      []string // the signing algorithms the server accepts
	// grant, if set, returns the grant's parameters (grant_type and its
	// own), replacing client_credentials, and the values in them to keep
	// out of errors.
	grant   func(ctx context.Context) (url.Values, []string, error)
	style   oauth2.AuthStyle
	scopes  []string
	client  *http.Client
	timeout time.Duration
	now     func() time.Time

	mu  sync.Mutex
	tok *oauth2.Token
}

// Token returns the current token or requests a new one, bounded by the
// timeout. Requests are serialized, so concurrent callers share one.
func (s *ccSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	t := s.tok
	s.mu.Unlock()
	if t != nil && (t.Expiry.IsZero() || s.now().Add(10*time.Second).Before(t.Expiry)) {
		return t, nil
	}
	t, err := s.fetch(context.Background())
	if err != nil {
		return nil, fmt.Errorf("oauth: server %q: client credentials: %w", s.server, err)
	}
	return t, nil
}

func (s *ccSource) fetch(ctx context.Context) (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	params := url.Values{"resource": {s.resource}}
	var scrub []string
	if s.grant != nil {
		gp, sec, err := s.grant(ctx)
		if err != nil {
			return nil, err
		}
		for k, v := range gp {
			params[k] = v
		}
		scrub = sec
	}
	secret := ""
	if s.key != nil {
		a, err := clientAssertion(s.key, s.clientID, s.issuer, s.algs, s.now())
		if err != nil {
			return nil, err
		}
		for k, v := range assertionParams(a) {
			params[k] = v
		}
		secret = a // scrubbed from errors like a secret
	} else {
		v, ok := s.lookup(s.env)
		if !ok || v == "" {
			return nil, fmt.Errorf("environment variable %s (the client secret) is not set", s.env)
		}
		secret = v
	}
	cfg := clientcredentials.Config{
		ClientID:       s.clientID,
		TokenURL:       s.tokenURL,
		Scopes:         s.scopes,
		AuthStyle:      s.style,
		EndpointParams: params,
	}
	if s.key == nil {
		cfg.ClientSecret = secret
	}
	t, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, s.client))
	if err != nil {
		return nil, endpointError("token", err, append(scrub, secret)...)
	}
	s.tok = &oauth2.Token{AccessToken: t.AccessToken, TokenType: t.TokenType, Expiry: t.Expiry}
	return s.tok, nil
}
