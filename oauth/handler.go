package oauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolwire/toolwire/netpolicy"
	"golang.org/x/oauth2"
)

// DefaultPendingTTL is how long a deferred authorization waits for
// [Handler.FinishAuth] unless configured otherwise.
const DefaultPendingTTL = 15 * time.Minute

// HandlerConfig configures [NewHandler].
//
// How the handler gets the user's authorization when it needs it is
// decided by Fetcher and PendingRedirectURL, of which at most one may be
// set:
//
//   - Fetcher: interactive. Authorize runs the whole authorization code
//     flow at once (go-sdk's AuthorizationCodeHandler) and the fetcher
//     brings back the code, e.g. [Loopback] for `toolwire login`.
//   - PendingRedirectURL: deferred, for applications that own the
//     browser. Authorize fails with a *[PendingError] carrying the
//     authorization URL; the application sends the user there and hands
//     the redirect's code to [Handler.FinishAuth]. The next connect then
//     succeeds.
//   - neither: the handler may not prompt. Without a usable token,
//     Authorize fails with a *[LoginRequiredError] naming `toolwire login
//     SERVER`; nothing is opened or registered.
type HandlerConfig struct {
	// Server is the configured server name: the store key, and the name
	// errors give. Required.
	Server string
	// Resource is the URL of the MCP server, as configured. Required. The
	// store entry is bound to it (and to the authorization server of its
	// registration): an entry obtained for another URL is never used, the
	// server needs a login instead, which replaces the entry.
	Resource string
	// Store keeps the registration and tokens. Required.
	Store *Store
	// HTTPClient sends every request: discovery, registration, token
	// exchange, refresh. Required: pass the netpolicy client, so that
	// every URL an authorization server names passes the remote-URL rule.
	HTTPClient *http.Client
	// Client is a client registered with the authorization server out of
	// band. Nil: use the client toolwire registered earlier (kept in the
	// store), else register one (RFC 7591).
	Client *ClientConfig
	// Scopes, if set, are requested instead of those the server
	// advertises. offline_access is added when the authorization server
	// supports it, so that a refresh token is issued.
	Scopes []string
	// ClientName is the client_name sent when registering; empty means
	// "toolwire".
	ClientName string
	// ClientMetadataURL, if set, is the https URL where toolwire's client
	// metadata is published (a Client ID Metadata Document, see
	// [ClientMetadataDocument]). With no configured Client, it is the
	// client_id at authorization servers that advertise
	// client_id_metadata_document_supported; others get a registration as
	// without it.
	ClientMetadataURL string
	// Fetcher makes the handler interactive; see the type's doc.
	Fetcher Fetcher
	// PendingRedirectURL makes the handler defer authorization to the
	// application, which receives the redirect at this URL.
	PendingRedirectURL string
	// PendingTTL is how long a deferred authorization stays redeemable;
	// zero means DefaultPendingTTL.
	PendingTTL time.Duration
	// Source configures the token source.
	Source *SourceOptions
}

// ClientConfig is a client registered out of band.
type ClientConfig struct {
	// ID is the client_id.
	ID string
	// Secret is the client_secret, resolved by the caller; empty for a
	// public client. It is kept in memory only, never in the store.
	Secret string
	// Key, if set instead of Secret, authenticates the client with
	// private_key_jwt (RFC 7523) at the code exchange and each refresh.
	Key *ClientKey
	// RedirectURL is the redirect URI the client was registered with. For
	// the loopback login it fixes the port; empty lets the loopback pick
	// one (for servers that allow any loopback port, RFC 8252).
	RedirectURL string
	// Issuer, if set, binds the client to that authorization server: any
	// other is refused.
	Issuer string
}

// A Fetcher obtains the authorization code for an interactive login.
type Fetcher interface {
	// Prepare readies the fetcher to receive the authorization response
	// and returns the redirect URL it receives it at, the fetch function
	// for go-sdk, and a release function that the handler calls when the
	// attempt is over. registered is the redirect URI of the client
	// registration about to be used, or "" if a new client will be
	// registered. A fetcher that cannot use registered returns another
	// URL: the handler then registers a new client (replacing one it
	// registered itself) or fails (for a configured client).
	Prepare(ctx context.Context, registered string) (redirectURL string, fetch auth.AuthorizationCodeFetcher, release func(), err error)
}

// FixedRedirect is a [Fetcher] for a fetcher that always receives the
// response at one URL.
type FixedRedirect struct {
	URL   string
	Fetch auth.AuthorizationCodeFetcher
}

func (f FixedRedirect) Prepare(context.Context, string) (string, auth.AuthorizationCodeFetcher, func(), error) {
	return f.URL, f.Fetch, func() {}, nil
}

// Handler is an [auth.OAuthHandler] for one server that keeps its state in
// a [Store]: go-sdk's authorization code flow (RFC 9728 and RFC 8414
// discovery, PKCE S256, RFC 8707 resource, step-up, RFC 9207 iss check),
// plus persistence of the client registration and of every token, so that
// neither a restart nor a second process registers or prompts again.
//
// Before any flow it runs its own discovery to hold the authorization
// server to toolwire's rules: every URL it names must pass
// netpolicy.CheckURL, its metadata must exist, match its issuer, and list
// PKCE S256.
//
// A Handler is safe for concurrent use; Authorize calls are serialized.
type Handler struct {
	cfg HandlerConfig
	src *TokenSource
	now func() time.Time

	mu sync.Mutex // serializes Authorize, Login and FinishAuth
}

var _ auth.OAuthHandler = (*Handler)(nil)

// NewHandler validates cfg and returns a handler.
func NewHandler(cfg *HandlerConfig) (*Handler, error) {
	if cfg == nil {
		return nil, errors.New("oauth: nil handler config")
	}
	c := *cfg
	switch {
	case c.Server == "":
		return nil, errors.New("oauth: handler: empty server name")
	case canonicalResource(c.Resource) == "":
		return nil, fmt.Errorf("oauth: server %q: resource %q is not an absolute URL", c.Server, c.Resource)
	case c.Store == nil:
		return nil, fmt.Errorf("oauth: server %q: no store", c.Server)
	case c.HTTPClient == nil:
		return nil, fmt.Errorf("oauth: server %q: no HTTP client", c.Server)
	case c.Fetcher != nil && c.PendingRedirectURL != "":
		return nil, fmt.Errorf("oauth: server %q: Fetcher and PendingRedirectURL exclude each other", c.Server)
	case c.Client != nil && c.Client.ID == "":
		return nil, fmt.Errorf("oauth: server %q: configured client without an ID", c.Server)
	case c.Client != nil && c.Client.Key != nil && c.Client.Secret != "":
		return nil, fmt.Errorf("oauth: server %q: configured client with both a secret and a private key", c.Server)
	}
	if c.Client != nil && c.Client.Key != nil {
		if err := c.Client.Key.check(); err != nil {
			return nil, fmt.Errorf("oauth: server %q: %w", c.Server, err)
		}
	}
	if c.PendingRedirectURL != "" {
		if err := checkRedirect(c.PendingRedirectURL); err != nil {
			return nil, fmt.Errorf("oauth: server %q: pending redirect URL: %w", c.Server, err)
		}
	}
	if c.Client != nil && c.Client.RedirectURL != "" {
		if err := checkRedirect(c.Client.RedirectURL); err != nil {
			return nil, fmt.Errorf("oauth: server %q: client redirect URL: %w", c.Server, err)
		}
	}
	if c.ClientMetadataURL != "" {
		if err := CheckClientMetadataURL(c.ClientMetadataURL); err != nil {
			return nil, fmt.Errorf("oauth: server %q: %w", c.Server, err)
		}
	}
	if c.PendingTTL <= 0 {
		c.PendingTTL = DefaultPendingTTL
	}
	if c.ClientName == "" {
		c.ClientName = "toolwire"
	}
	h := &Handler{cfg: c, now: time.Now}
	h.src = NewTokenSource(c.Store, c.Server, c.Resource, c.HTTPClient, c.Source)
	if c.Client != nil {
		h.src.secret, h.src.key = c.Client.Secret, c.Client.Key
		h.src.bind.issuer, h.src.bind.clientID = c.Client.Issuer, c.Client.ID
	}
	return h, nil
}

// checkRedirect accepts an absolute redirect URI without a fragment (RFC
// 6749, section 3.1.2): https, http to loopback, or a private-use scheme
// of a native app (RFC 8252, section 7.1).
func checkRedirect(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch {
	case u.Scheme == "" || u.Fragment != "":
		return fmt.Errorf("%q is not an absolute URI without a fragment", raw)
	case u.Scheme == "http" && !netpolicy.IsLoopbackHost(u.Hostname()):
		return fmt.Errorf("%q: plain http is for loopback redirects only", raw)
	}
	return nil
}

// TokenSource returns the server's persisted token source, or nil when no
// token is stored, so that go-sdk's transport sends the request without
// one and the server's 401 leads to Authorize. When the stored entry is
// bound to another server (see [HandlerConfig.Resource]), a handler that
// may not prompt fails with a *[LoginRequiredError], so that no request is
// sent; one that may prompt returns nil, and the login replaces the entry.
func (h *Handler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	ok, err := h.src.stored(ctx)
	var le *LoginRequiredError
	if errors.As(err, &le) && le.unbound && h.mayPrompt() {
		return nil, nil
	}
	if err != nil || !ok {
		return nil, err
	}
	return h.src, nil
}

// mayPrompt reports whether the handler gets a new authorization itself,
// interactively or deferred.
func (h *Handler) mayPrompt() bool { return h.cfg.Fetcher != nil || h.cfg.PendingRedirectURL != "" }

// Authorize is called by go-sdk's transport after a 401, or a 403. A 403
// other than insufficient_scope is not an authorization problem: it
// returns nil, and the transport's retry reports the 403. Otherwise, if
// another connection or process has stored a usable token meanwhile, it
// returns nil so that the request is retried with it; else it gets a new
// authorization as HandlerConfig says (interactively, deferred, or not at
// all). The errors it returns wrap [ErrLoginRequired], or are a
// *[PendingError], or report what failed without any token or secret.
func (h *Handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	return h.authorize(ctx, req, resp, false)
}

// Login runs the interactive flow for the server at endpoint whatever is
// stored: it sends an unauthenticated request to provoke the server's 401
// and authorizes from it. It is `toolwire login`. The handler needs a
// Fetcher.
func (h *Handler) Login(ctx context.Context, endpoint string) error {
	if h.cfg.Fetcher == nil {
		return fmt.Errorf("oauth: server %q: login needs an interactive fetcher", h.cfg.Server)
	}
	if _, err := netpolicy.CheckURL(endpoint); err != nil {
		return fmt.Errorf("oauth: server %q: %w", h.cfg.Server, err)
	}
	// A ping: any MCP server behind bearer auth answers it with 401 before
	// looking at it.
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("oauth: server %q: %w", h.cfg.Server, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := h.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("oauth: server %q: %w", h.cfg.Server, err)
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		resp.Body.Close()
		return fmt.Errorf("oauth: server %q did not ask for authorization (HTTP %d)", h.cfg.Server, resp.StatusCode)
	}
	return h.authorize(ctx, req, resp, true)
}

func (h *Handler) authorize(ctx context.Context, req *http.Request, resp *http.Response, force bool) error {
	defer func() {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	stepUp := challengeError(challenges) == "insufficient_scope"
	if resp.StatusCode == http.StatusForbidden && !stepUp {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.src.forget()
	e, err := h.cfg.Store.GetContext(ctx, h.cfg.Server)
	if err != nil {
		return err
	}
	unbound := ""
	if !h.src.bind.holds(e) {
		// Nothing of an entry bound to another server is used, and the
		// next login replaces it.
		unbound, e = h.src.bind.mismatch(e), nil
	}
	if !force && e != nil && h.src.fresh(e.Token) && req.Header.Get("Authorization") != "Bearer "+e.Token.AccessToken &&
		(!stepUp || covers(e.Token.Scopes, strings.Fields(challengeParam(challenges, "scope")))) {
		// Another connection or process got a token since this request
		// was sent (for a step-up: one with the scopes asked for).
		return nil
	}
	if sent, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok && !force && !stepUp &&
		e != nil && e.Token != nil && e.Token.RefreshToken != "" {
		// The server refused a token that looked valid (revoked, or
		// clocks apart): the refresh token may still be good.
		_, err := h.src.renew(ctx, sent)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrLoginRequired) {
			return err
		}
		if e, err = h.src.entry(ctx); err != nil {
			return err
		}
	}
	switch {
	case h.cfg.Fetcher != nil:
		return h.authorizeNow(ctx, req, resp, challenges, e)
	case h.cfg.PendingRedirectURL != "":
		return h.startPending(ctx, req, challenges, e)
	}
	reason := "not logged in"
	switch {
	case unbound != "":
		return &LoginRequiredError{Server: h.cfg.Server, Reason: unbound, unbound: true}
	case stepUp:
		reason = "the server asks for more scopes (insufficient_scope)"
	case e != nil && e.Token != nil:
		reason = "the server refused the stored token"
	case e != nil && e.Client != nil:
		reason = "the authorization ended (expired or revoked)"
	}
	return &LoginRequiredError{Server: h.cfg.Server, Reason: reason}
}

// authorizeNow runs go-sdk's authorization code flow with the fetcher.
func (h *Handler) authorizeNow(ctx context.Context, req *http.Request, resp *http.Response, challenges []oauthex.Challenge, e *Entry) (err error) {
	defer wrapf(&err, "oauth: server %q: authorize", h.cfg.Server)
	d, err := discover(ctx, h.cfg.HTTPClient, challenges, req.URL.String(), true)
	if err != nil {
		return err
	}
	c, err := h.candidate(e, d)
	if err != nil {
		return err
	}
	registered := ""
	if c != nil {
		registered = c.RedirectURL
	}
	redirect, fetch, release, err := h.cfg.Fetcher.Prepare(ctx, registered)
	if err != nil {
		return fmt.Errorf("prepare for the redirect: %w", err)
	}
	defer release()
	if c, err = h.fitRedirect(c, redirect); err != nil {
		return err
	}
	if c == nil {
		if c, err = h.register(ctx, d, redirect); err != nil {
			return err
		}
	}
	var creds *oauthex.ClientSecretAuth
	httpClient := h.cfg.HTTPClient
	if secret := h.secretOf(c); secret != "" {
		creds = &oauthex.ClientSecretAuth{ClientSecret: secret}
	} else {
		httpClient = publicClientHTTP(httpClient, d.asm.TokenEndpoint)
	}
	if k := h.keyOf(c); k != nil {
		httpClient = withClientAssertion(httpClient, d.asm.TokenEndpoint, k, c.ID, d.asm.Issuer, d.asm.TokenEndpointAuthSigningAlgValuesSupported)
	}
	var code string // scrubbed from errors, with the secret
	flow, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: c.ID, ClientSecretAuth: creds, Issuer: d.asm.Issuer},
		RedirectURL:         redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			res, err := fetch(ctx, args)
			if res != nil {
				code = res.Code
			}
			return res, err
		},
		ScopeFilter:         func(found []string) []string { return h.scopes(found, e, d) },
		RequestRefreshToken: true,
		Client:              httpClient,
		NewTokenSource:      h.persist(c, d),
	})
	if err != nil {
		return err
	}
	err = flow.Authorize(ctx, req, resp)
	if err == nil {
		return nil
	}
	secrets := []string{h.secretOf(c), code}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		err = fmt.Errorf("token exchange: %w", endpointError("token", err, secrets...))
		if oauthCode(err) == "invalid_client" && c.Dynamic {
			h.dropClient(ctx, c.ID)
		}
		return err
	}
	return redacted(err, secrets...)
}

// candidate returns the client to use with the authorization server d
// found: the configured one, else the client metadata URL where the server
// supports it, else the one toolwire registered with that server before,
// else nil (register).
func (h *Handler) candidate(e *Entry, d *discovery) (*Client, error) {
	if cc := h.cfg.Client; cc != nil {
		if cc.Issuer != "" && !sameIssuer(cc.Issuer, d.asm.Issuer) {
			return nil, fmt.Errorf("%w: the configured client belongs to %q, the server uses %q", ErrIssuerMismatch, cc.Issuer, d.asm.Issuer)
		}
		method := pickAuthMethod(d.asm.TokenEndpointAuthMethodsSupported, cc.Secret != "")
		if cc.Key != nil {
			method = "private_key_jwt"
			if m := d.asm.TokenEndpointAuthMethodsSupported; len(m) > 0 && !slices.Contains(m, method) {
				return nil, fmt.Errorf("authorization server %s does not accept private_key_jwt client authentication (it lists %v)", d.asm.Issuer, m)
			}
		}
		return &Client{
			ID:          cc.ID,
			Issuer:      d.asm.Issuer,
			AuthURL:     d.asm.AuthorizationEndpoint,
			TokenURL:    d.asm.TokenEndpoint,
			AuthMethod:  method,
			RedirectURL: cc.RedirectURL,
			Registered:  h.now().UTC(),
		}, nil
	}
	if u := h.cfg.ClientMetadataURL; u != "" && d.asm.ClientIDMetadataDocumentSupported {
		// A Client ID Metadata Document: the URL is the client ID, the
		// authorization server fetches the metadata from it, and nothing
		// is registered. A public client, like a registered one.
		return &Client{
			ID:         u,
			Issuer:     d.asm.Issuer,
			AuthURL:    d.asm.AuthorizationEndpoint,
			TokenURL:   d.asm.TokenEndpoint,
			AuthMethod: "none",
			Registered: h.now().UTC(),
		}, nil
	}
	if e != nil && e.Client != nil && e.Client.Dynamic && sameIssuer(e.Client.Issuer, d.asm.Issuer) {
		c := *e.Client
		// Endpoints as published now; the registration stays.
		c.AuthURL, c.TokenURL = d.asm.AuthorizationEndpoint, d.asm.TokenEndpoint
		return &c, nil
	}
	return nil, nil
}

// fitRedirect checks the client against the redirect URL the fetcher
// could use. A client toolwire registered for another redirect is dropped
// (to be registered again); a configured one is an error.
func (h *Handler) fitRedirect(c *Client, redirect string) (*Client, error) {
	if c == nil || c.RedirectURL == "" || c.RedirectURL == redirect {
		if c != nil {
			c.RedirectURL = redirect
		}
		return c, nil
	}
	if c.Dynamic {
		return nil, nil
	}
	return nil, fmt.Errorf("the configured client's redirect URL %s cannot be used (the receiver got %s; is the port taken?)", c.RedirectURL, redirect)
}

// secretOf returns c's secret: the configured one for a configured client.
func (h *Handler) secretOf(c *Client) string {
	if !c.Dynamic && h.cfg.Client != nil {
		return h.cfg.Client.Secret
	}
	return c.Secret
}

// keyOf returns c's private key: the configured one for the configured
// client, else nil.
func (h *Handler) keyOf(c *Client) *ClientKey {
	if !c.Dynamic && h.cfg.Client != nil && h.cfg.Client.ID == c.ID {
		return h.cfg.Client.Key
	}
	return nil
}

// pickAuthMethod chooses a token endpoint auth method among those the
// server supports, as go-sdk does: client_secret_post first (OAuth 2.1).
func pickAuthMethod(supported []string, secret bool) string {
	if !secret {
		return "none"
	}
	for _, m := range []string{"client_secret_post", "client_secret_basic"} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return ""
}

// register registers a client for redirect (RFC 7591) and stores it,
// replacing any earlier registration and its token, which belonged to the
// old client.
func (h *Handler) register(ctx context.Context, d *discovery, redirect string) (*Client, error) {
	if d.asm.RegistrationEndpoint == "" {
		return nil, fmt.Errorf("authorization server %s does not offer dynamic client registration: configure a client ID for the server", d.asm.Issuer)
	}
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              h.cfg.ClientName,
		ApplicationType:         applicationType(redirect),
	}
	r, err := oauthex.RegisterClient(ctx, d.asm.RegistrationEndpoint, meta, h.cfg.HTTPClient)
	if err != nil {
		return nil, registrationError(err)
	}
	method := r.TokenEndpointAuthMethod
	if method == "" {
		method = "client_secret_basic" // RFC 7591, section 2
		if r.ClientSecret == "" {
			method = "none"
		}
	}
	c := &Client{
		ID:          r.ClientID,
		Secret:      r.ClientSecret,
		Issuer:      d.asm.Issuer,
		AuthURL:     d.asm.AuthorizationEndpoint,
		TokenURL:    d.asm.TokenEndpoint,
		AuthMethod:  method,
		RedirectURL: redirect,
		Dynamic:     true,
		Registered:  h.now().UTC(),
	}
	err = h.cfg.Store.Update(ctx, h.cfg.Server, func(e *Entry) error {
		h.src.bind.rebind(e)
		e.Client, e.Token, e.Pending = c, nil, nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// registrationError keeps what a registration failure means and drops
// what may quote the response body (which may hold a client secret).
func registrationError(err error) error {
	var re *oauthex.ClientRegistrationError
	if errors.As(err, &re) {
		return &EndpointError{Endpoint: "registration", Status: http.StatusBadRequest, Code: errorCode(re.ErrorCode), Description: describe(re.ErrorDescription)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("registration: %w", err)
	}
	// oauthex quotes the body after the status; keep only the status.
	if m := registrationStatus.FindStringSubmatch(err.Error()); m != nil {
		status, _ := strconv.Atoi(m[1])
		return &EndpointError{Endpoint: "registration", Status: status}
	}
	return &EndpointError{Endpoint: "registration", Description: "the answer is not a registration"}
}

// registrationStatus finds the status in oauthex.RegisterClient's error
// for a status other than 200, 201 and 400.
var registrationStatus = regexp.MustCompile(`^registration failed with status (\d{3})\b`)

// applicationType is "native" for loopback and private-use-scheme
// redirects, "web" otherwise (OpenID Connect Dynamic Registration).
func applicationType(redirect string) string {
	u, err := url.Parse(redirect)
	if err == nil && (u.Scheme != "http" && u.Scheme != "https" || netpolicy.IsLoopbackHost(u.Hostname())) {
		return "native"
	}
	return "web"
}

// scopes decides the scopes to request: the configured ones, else those
// found in discovery; plus, at a step-up, those granted before (the
// authorization server would otherwise narrow the grant). go-sdk adds
// offline_access after this.
func (h *Handler) scopes(found []string, e *Entry, d *discovery) []string {
	s := found
	if len(h.cfg.Scopes) > 0 {
		s = h.cfg.Scopes
	}
	if e != nil && e.Token != nil && e.Client != nil && sameIssuer(e.Client.Issuer, d.asm.Issuer) {
		s = union(e.Token.Scopes, s)
	}
	return slices.Clone(s)
}

// covers reports whether have includes every scope in want.
func covers(have, want []string) bool {
	for _, s := range want {
		if !slices.Contains(have, s) {
			return false
		}
	}
	return true
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// persist is go-sdk's NewTokenSource hook: it stores the client as the
// flow used it and the token the code was exchanged for, and returns the
// persisted token source.
func (h *Handler) persist(c *Client, d *discovery) func(context.Context, *oauth2.Config, *oauth2.Token) (oauth2.TokenSource, error) {
	return func(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
		nc := *c
		nc.ID = cfg.ClientID
		nc.Issuer = d.asm.Issuer
		nc.AuthURL, nc.TokenURL = cfg.Endpoint.AuthURL, cfg.Endpoint.TokenURL
		// go-sdk leaves the style to auto-detection when the server lists
		// no secret method (only "none", say): keep the client's own method
		// then, or refreshes of a public client would send a Basic header.
		if m := authMethod(cfg.Endpoint.AuthStyle, cfg.ClientSecret); m != "" && h.keyOf(c) == nil {
			nc.AuthMethod = m
		}
		nc.RedirectURL = cfg.RedirectURL
		nc.Scopes = slices.Clone(cfg.Scopes)
		if !nc.Dynamic {
			nc.Secret = "" // configuration secrets never reach the disk
		}
		t := tokenFrom(tok, cfg.Scopes, h.now())
		uctx, cancel := context.WithTimeout(ctx, h.src.timeout)
		defer cancel()
		err := h.cfg.Store.Update(uctx, h.cfg.Server, func(e *Entry) error {
			h.src.bind.rebind(e)
			e.Client, e.Token, e.Pending = &nc, t, nil
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store the token: %w", err)
		}
		h.src.remember(t)
		h.src.setResource(d.resource)
		return h.src, nil
	}
}

// dropClient forgets a registration the authorization server no longer
// knows, so that the next login registers again.
func (h *Handler) dropClient(ctx context.Context, id string) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.src.timeout)
	defer cancel()
	h.cfg.Store.Update(uctx, h.cfg.Server, func(e *Entry) error {
		if h.src.bind.holds(e) && e.Client != nil && e.Client.ID == id {
			e.Client, e.Token = nil, nil
		}
		return nil
	})
}

// randomState returns a fresh state parameter.
func randomState() string { return rand.Text() }
