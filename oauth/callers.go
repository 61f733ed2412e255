package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Per-caller upstream credentials, for a gateway: an upstream MCP server
// is reached with the identity of the gateway's caller rather than the
// operator's, and never with the caller's own token (the confused deputy
// the MCP security guidance warns about). One [Callers] per upstream
// server, in one of two modes:
//
//   - [CallerExchange]: the caller's own token, as the gateway verified it,
//     is exchanged (RFC 8693) at the upstream's authorization server, the
//     issuer the operator configured and no other, for a token for the
//     upstream alone (RFC 8707 resource). The result is derived, so it is
//     kept in memory only, per caller, until shortly before it (or the
//     caller's token) expires.
//   - [CallerLogin]: each caller authorizes once, in a browser, through a
//     URL the gateway gives ([Callers.Begin], or the *[CallerLoginError] a
//     request fails with); the redirect comes back to the gateway's
//     [Callback], and the tokens are kept in the [Store], encrypted, per
//     caller, refreshed once at a time across goroutines, processes and,
//     on a shared store, replicas.
//
// [Callers.Handler] makes the auth.OAuthHandler of one caller: the
// upstream requests of that caller's session carry that caller's upstream
// token, and nothing of another caller's. Every entry is bound to its
// caller, the upstream's URL and the authorization server's issuer; an
// entry that another caller, URL or issuer would use is refused, and the
// caller is asked to authorize again.

// CallerMode says how a caller's upstream token is obtained.
type CallerMode string

const (
	// CallerExchange exchanges the caller's own token (RFC 8693).
	CallerExchange CallerMode = "token_exchange"
	// CallerLogin has each caller authorize once (the authorization code
	// flow with PKCE, per caller).
	CallerLogin CallerMode = "authorization_code"
)

// CallersConfig configures [NewCallers].
type CallersConfig struct {
	// Server is the configured server name. Required.
	Server string
	// Resource is the upstream MCP server's URL, as configured. Required:
	// every caller's entry is bound to it.
	Resource string
	// Mode is CallerExchange or CallerLogin. Required.
	Mode CallerMode
	// HTTPClient sends every request to the authorization server.
	// Required: pass the netpolicy client.
	HTTPClient *http.Client
	// Issuer is the upstream's authorization server. With CallerExchange
	// it is required: callers' tokens are sent to this issuer's token
	// endpoint and nowhere else, whatever the upstream's metadata says,
	// so that an upstream cannot name a server that collects them. With
	// CallerLogin it is optional and, if set, pins the issuer likewise;
	// it is required with a Client that has a Secret or a Key, which is
	// sent to (or signs for) this issuer's token endpoint alone.
	Issuer string
	// Client is the gateway's client at that authorization server. With
	// CallerExchange it is required, with a Secret or a Key. With
	// CallerLogin it is optional, as for [HandlerConfig.Client]; its
	// RedirectURL, if set, must be RedirectURL.
	Client *ClientConfig
	// AuthMethod is how a client with a secret authenticates at the
	// token endpoint for an exchange: "client_secret_basic" or
	// "client_secret_post"; empty means what the authorization server
	// lists, post first. A client with a Key uses private_key_jwt.
	AuthMethod string
	// Scopes, if set, are requested instead of those the upstream
	// advertises.
	Scopes []string
	// Audience, if set, is the exchange's RFC 8693 audience parameter,
	// for authorization servers that name their resources so; the
	// resource parameter is always sent.
	Audience string
	// SubjectTokenType is what a caller's token is presented as in an
	// exchange: TokenTypeAccessToken (the default) or TokenTypeJWT.
	SubjectTokenType string
	// Store keeps the callers' tokens and pending authorizations with
	// CallerLogin. Required then; unused with CallerExchange.
	Store *Store
	// RedirectURL is the gateway's URL that callers' browsers return to
	// with CallerLogin, where its [Callback] is mounted: https, or http to
	// loopback. Required then.
	RedirectURL string
	// ClientMetadataURL and ClientName are as in [HandlerConfig], for
	// CallerLogin without a configured Client.
	ClientMetadataURL string
	ClientName        string
	// LoginTTL is how long an authorization URL stays redeemable; zero
	// means DefaultPendingTTL.
	LoginTTL time.Duration
	// Source configures the refreshes (CallerLogin) and the exchanges:
	// RefreshWindow says how long before its expiry a token is replaced,
	// RefreshTimeout bounds one refresh or exchange.
	Source *SourceOptions
}

// Callers obtains and keeps the upstream tokens of every caller of one
// gateway for one upstream server. It is safe for concurrent use.
type Callers struct {
	cfg     CallersConfig
	reg     *Handler // CallerLogin: registration bookkeeping at sharedKey
	window  time.Duration
	timeout time.Duration
	now     func() time.Time

	begin sync.Mutex // serializes Begin: one registration, one pending request per caller
	// discovering serializes discoveries, so that the 401s of many
	// callers' first requests at once make one.
	discovering sync.Mutex

	mu      sync.Mutex
	disc    *discovery              // the last discovery; nil before the first
	discAt  time.Time               // when disc was made
	sources map[string]*TokenSource // CallerLogin: by caller id, for disc's issuer
	cache   map[string]*exchanged   // CallerExchange: by caller id
	flights flights                 // CallerExchange: one exchange per caller at a time
}

// exchanged is a token obtained by exchange, kept in memory only.
type exchanged struct {
	tok    *Token
	issuer string    // the authorization server that issued it
	until  time.Time // the caller's token's expiry; zero if unknown
}

// NewCallers validates cfg and returns the per-caller credentials of one
// upstream server. It does no I/O.
func NewCallers(cfg *CallersConfig) (*Callers, error) {
	if cfg == nil {
		return nil, errors.New("oauth: nil callers config")
	}
	c := *cfg
	fail := func(format string, args ...any) (*Callers, error) {
		return nil, fmt.Errorf("oauth: server %q: per-caller credentials: %s", c.Server, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Server == "":
		return nil, errors.New("oauth: per-caller credentials: empty server name")
	case !serverNameOK(c.Server):
		return fail("server name %q is not a configured server's (letters, digits, '_', '.', '-')", c.Server)
	case canonicalResource(c.Resource) == "":
		return fail("resource %q is not an absolute URL", c.Resource)
	case c.HTTPClient == nil:
		return fail("no HTTP client")
	case c.Mode != CallerExchange && c.Mode != CallerLogin:
		return fail("mode %q (want %s or %s)", c.Mode, CallerExchange, CallerLogin)
	case c.Client != nil && c.Client.ID == "":
		return fail("configured client without an ID")
	case c.Client != nil && c.Client.Key != nil && c.Client.Secret != "":
		return fail("configured client with both a secret and a private key")
	case c.Client != nil && c.Client.Issuer != "" && c.Issuer != "" && !sameIssuer(c.Client.Issuer, c.Issuer):
		return fail("the client's issuer %q is not the issuer %q", c.Client.Issuer, c.Issuer)
	}
	if c.Issuer == "" && c.Client != nil {
		c.Issuer = c.Client.Issuer
	}
	if c.Issuer != "" {
		if canonicalResource(c.Issuer) == "" {
			return fail("issuer %q is not an absolute URL", c.Issuer)
		}
	}
	if c.Client != nil && c.Client.Key != nil {
		if err := c.Client.Key.check(); err != nil {
			return fail("%v", err)
		}
	}
	switch c.AuthMethod {
	case "", "client_secret_basic", "client_secret_post":
	case "private_key_jwt":
		if c.Client == nil || c.Client.Key == nil {
			return fail("authMethod private_key_jwt needs a client with a private key")
		}
	default:
		return fail("authMethod %q (want client_secret_basic, client_secret_post or private_key_jwt)", c.AuthMethod)
	}
	opts := c.Source
	if opts == nil {
		opts = &SourceOptions{}
	}
	cs := &Callers{
		window:  cmpOr(opts.RefreshWindow, DefaultRefreshWindow),
		timeout: cmpOr(opts.RefreshTimeout, DefaultRefreshTimeout),
		now:     time.Now,
		sources: map[string]*TokenSource{},
		cache:   map[string]*exchanged{},
	}
	switch c.Mode {
	case CallerExchange:
		switch {
		case c.Issuer == "":
			return fail("token exchange needs the issuer of the upstream's authorization server: callers' tokens are sent there and nowhere else")
		case c.Client == nil || c.Client.Secret == "" && c.Client.Key == nil:
			return fail("token exchange needs the gateway's client at the authorization server, with a secret or a private key")
		case c.ClientMetadataURL != "" || c.RedirectURL != "":
			return fail("a client metadata URL or a redirect URL is for per-caller login, not token exchange")
		}
		switch c.SubjectTokenType {
		case "":
			c.SubjectTokenType = TokenTypeAccessToken
		case TokenTypeAccessToken, TokenTypeJWT:
		default:
			return fail("subject token type %q (want %s or %s)", c.SubjectTokenType, TokenTypeAccessToken, TokenTypeJWT)
		}
	case CallerLogin:
		switch {
		case c.Store == nil:
			return fail("per-caller login needs a store")
		case c.RedirectURL == "":
			return fail("per-caller login needs the gateway's redirect URL, where callers' browsers come back")
		case c.Audience != "" || c.SubjectTokenType != "":
			return fail("an audience or a subject token type is for token exchange, not per-caller login")
		case c.Client != nil && (c.Client.Secret != "" || c.Client.Key != nil) && c.Issuer == "":
			// Without it, the authorization server would be whichever one
			// the upstream's metadata names, and the code's redemption
			// would carry the secret (or an assertion signed for it) there.
			return fail("per-caller login with a client secret or private key needs the issuer of the authorization server the client is registered at: the secret is sent there and nowhere else")
		case c.Client != nil && c.Client.RedirectURL != "" && c.Client.RedirectURL != c.RedirectURL:
			return fail("the client's redirect URL %s is not the redirect URL %s", c.Client.RedirectURL, c.RedirectURL)
		}
		if err := checkCallbackURL(c.RedirectURL); err != nil {
			return fail("redirect URL: %v", err)
		}
		hc := &HandlerConfig{
			Server: sharedKey(c.Server), Resource: c.Resource, Store: c.Store, HTTPClient: c.HTTPClient,
			Scopes: c.Scopes, ClientName: c.ClientName, ClientMetadataURL: c.ClientMetadataURL,
			PendingRedirectURL: c.RedirectURL, PendingTTL: c.LoginTTL, Source: c.Source,
		}
		if c.Client != nil {
			cc := *c.Client
			cc.RedirectURL, cc.Issuer = c.RedirectURL, c.Issuer
			hc.Client = &cc
		}
		reg, err := NewHandler(hc)
		if err != nil {
			return nil, err
		}
		cs.reg = reg
		c.LoginTTL = reg.cfg.PendingTTL
	}
	cs.cfg = c
	return cs, nil
}

// serverNameOK reports whether name can be a configured server's name:
// the per-caller store keys and states are built on it.
func serverNameOK(name string) bool {
	if len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// checkCallbackURL accepts the gateway's redirect URL: https, or http to
// loopback, absolute, without a fragment or user info.
func checkCallbackURL(raw string) error {
	if err := checkRedirect(raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%q: want an https URL (or http to loopback) that browsers reach the gateway at", raw)
	case u.Host == "" || u.User != nil:
		return fmt.Errorf("%q: want a host and no user info", raw)
	}
	return nil
}

// Server returns the configured server name.
func (c *Callers) Server() string { return c.cfg.Server }

// Mode returns how callers' tokens are obtained.
func (c *Callers) Mode() CallerMode { return c.cfg.Mode }

// RedirectURL returns the URL the gateway's [Callback] receives this
// server's authorization responses at ("" with CallerExchange).
func (c *Callers) RedirectURL() string { return c.cfg.RedirectURL }

// Discover finds and checks the upstream's authorization server now
// (RFC 9728 metadata at its well-known URL, RFC 8414 metadata, the
// configured issuer) rather than at the first request's 401, so that the
// first requests of a process already carry callers' tokens. It is
// optional: a 401 discovers too, and again, should the upstream move to
// another authorization server.
func (c *Callers) Discover(ctx context.Context) error {
	if _, err := c.rediscover(ctx, nil, c.cfg.Resource); err != nil {
		return fmt.Errorf("oauth: server %q: %w", c.cfg.Server, err)
	}
	return nil
}

// discovered returns the last discovery, or nil before the first.
func (c *Callers) discovered() *discovery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.disc
}

// rediscover runs discovery for endpoint (with the challenges of its 401,
// if any) and keeps the result; a discovery younger than rediscoverAfter
// is used as it is. An authorization server other than the configured
// issuer is refused before anything is sent to it.
func (c *Callers) rediscover(ctx context.Context, challenges []oauthex.Challenge, endpoint string) (*discovery, error) {
	c.discovering.Lock()
	defer c.discovering.Unlock()
	c.mu.Lock()
	if d := c.disc; d != nil && c.now().Sub(c.discAt) < rediscoverAfter {
		c.mu.Unlock()
		return d, nil
	}
	c.mu.Unlock()
	d, err := discover(ctx, c.cfg.HTTPClient, challenges, endpoint, c.cfg.Mode == CallerLogin)
	if err != nil {
		return nil, err
	}
	if c.cfg.Issuer != "" && !sameIssuer(d.asm.Issuer, c.cfg.Issuer) {
		return nil, fmt.Errorf("discovery: %w: the server's authorization server is %q, the configuration names %q", ErrIssuerMismatch, d.asm.Issuer, c.cfg.Issuer)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disc != nil && !sameIssuer(c.disc.asm.Issuer, d.asm.Issuer) {
		// Sources bound to the old issuer go: their entries are not
		// used for the new one.
		clear(c.sources)
	}
	c.disc, c.discAt = d, c.now()
	return d, nil
}

// rediscoverAfter is how old a discovery must be before a 401 runs
// another: many callers' 401s at once share one, and an upstream that
// moves to another authorization server is followed within this time.
const rediscoverAfter = 30 * time.Second

// bindingFor is what caller's entry must be bound to under discovery d.
func (c *Callers) bindingFor(caller Caller, d *discovery) binding {
	b := binding{resource: canonicalResource(c.cfg.Resource), issuer: d.asm.Issuer, caller: &caller}
	if c.cfg.Client != nil {
		b.clientID = c.cfg.Client.ID
	}
	return b
}

// source returns caller's token source (CallerLogin), bound to the caller,
// the resource and d's issuer, shared by every handler of the caller so
// that a Logout reaches them all.
func (c *Callers) source(caller Caller, d *discovery) *TokenSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := caller.id()
	if s := c.sources[id]; s != nil && *s.bind.caller == caller && sameIssuer(s.bind.issuer, d.asm.Issuer) {
		return s
	}
	s := NewTokenSource(c.cfg.Store, c.cfg.Server, c.cfg.Resource, c.cfg.HTTPClient, c.cfg.Source)
	s.entryKey = callerKey(c.cfg.Server, caller)
	s.bind = c.bindingFor(caller, d)
	s.resource = d.resource
	if cc := c.cfg.Client; cc != nil {
		s.secret, s.key = cc.Secret, cc.Key
	}
	c.sources[id] = s
	return s
}

// Handler returns caller's auth.OAuthHandler for go-sdk's Streamable HTTP
// transport: the transport of that caller's session with the upstream, and
// of no other caller's. Its requests carry the caller's upstream token
// (exchanged, or from the caller's login), never the caller's own token
// and never another caller's. Without one yet, a request fails with a
// *[CallerLoginError] (CallerLogin) carrying the URL the caller must
// authorize at, or with the exchange's error (CallerExchange).
//
// With CallerExchange, the caller's token must be given to the handler
// ([CallerHandler.Present]) before the first request, and again when the
// caller presents a new one.
func (c *Callers) Handler(caller Caller) *CallerHandler {
	return &CallerHandler{c: c, caller: caller}
}

// CallerHandler is one caller's auth.OAuthHandler for one upstream server
// (see [Callers.Handler]). It is safe for concurrent use.
type CallerHandler struct {
	c      *Callers
	caller Caller

	mu      sync.Mutex
	subject *SubjectToken // CallerExchange: the caller's latest token
}

var _ auth.OAuthHandler = (*CallerHandler)(nil)

// Caller returns the caller the handler authorizes for.
func (h *CallerHandler) Caller() Caller { return h.caller }

// Identity describes, for the audit log, with whose identity and how the
// handler's requests reach the upstream: the caller and the mode. It holds
// no token.
func (h *CallerHandler) Identity() string {
	return fmt.Sprintf("caller %s by %s", h.caller, h.c.cfg.Mode)
}

// Present gives the handler the caller's current token, as the gateway
// verified it for caller, to exchange (CallerExchange; with CallerLogin it
// is not needed and not kept). A token verified for another caller than
// the handler's is refused: the handler never exchanges another caller's
// token.
func (h *CallerHandler) Present(caller Caller, tok SubjectToken) error {
	if caller != h.caller {
		return fmt.Errorf("oauth: server %q: the token of caller %s presented to the handler of caller %s", h.c.cfg.Server, caller, h.caller)
	}
	if tok.Token == "" {
		return fmt.Errorf("oauth: server %q: caller %s: empty token", h.c.cfg.Server, h.caller)
	}
	if h.c.cfg.Mode != CallerExchange {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subject = &tok
	return nil
}

// check refuses a handler without a caller.
func (h *CallerHandler) check() error {
	if h.caller.Subject == "" {
		return fmt.Errorf("oauth: server %q: a per-caller handler without a caller", h.c.cfg.Server)
	}
	return nil
}

// TokenSource returns the caller's token source. Before the first
// discovery, or while the caller has no usable token, it returns nil, so
// that the request goes without one and the upstream's 401 leads to
// Authorize; nothing of the caller's own is ever sent.
func (h *CallerHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	d := h.c.discovered()
	if d == nil {
		return nil, nil
	}
	if h.c.cfg.Mode == CallerExchange {
		return exchangeSource{h}, nil
	}
	src := h.c.source(h.caller, d)
	ok, err := src.stored(ctx)
	var le *LoginRequiredError
	if errors.As(err, &le) && le.unbound {
		// Another caller's, URL's or issuer's entry: nothing of it is
		// sent; the 401 leads to a new authorization, which replaces it.
		return nil, nil
	}
	if err != nil || !ok {
		return nil, err
	}
	return src, nil
}

// Authorize is called by the transport after a 401, or a 403. A 403
// other than insufficient_scope is not an authorization problem (nil, and
// the retry reports it). Otherwise it discovers the authorization server
// again (an issuer other than the configured one is refused), and then:
//
//   - CallerExchange: exchanges the caller's token for a new upstream
//     token (with the scopes a step-up asks for), unless one obtained
//     meanwhile is not the refused one;
//   - CallerLogin: returns nil when the store holds another usable token
//     of the caller, or one the refresh token renews; otherwise it starts
//     (or reuses) the caller's authorization and fails with a
//     *[CallerLoginError] carrying its URL.
func (h *CallerHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) (err error) {
	defer func() {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
	if err := h.check(); err != nil {
		return err
	}
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	stepUp := challengeError(challenges) == "insufficient_scope"
	if resp.StatusCode == http.StatusForbidden && !stepUp {
		return nil
	}
	var asked []string
	if stepUp {
		asked = strings.Fields(challengeParam(challenges, "scope"))
	}
	defer wrapf(&err, "oauth: server %q: caller %s", h.c.cfg.Server, h.caller)
	d, err := h.c.rediscover(ctx, challenges, req.URL.String())
	if err != nil {
		return err
	}
	sent, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if h.c.cfg.Mode == CallerExchange {
		_, err := h.exchanged(ctx, d, asked, sent)
		return err
	}
	src := h.c.source(h.caller, d)
	src.forget()
	e, err := src.entry(ctx)
	var le *LoginRequiredError
	switch {
	case errors.As(err, &le) && le.unbound:
		e = nil // replaced by the new authorization
	case err != nil:
		return err
	}
	if e != nil && e.Token != nil && covers(e.Token.Scopes, asked) {
		if src.fresh(e.Token) && e.Token.AccessToken != sent {
			// Another session or replica got a token since this request
			// was sent.
			return nil
		}
		if !stepUp && e.Token.RefreshToken != "" {
			// The upstream refused a token that looked valid, or it
			// expired: the refresh token may still be good.
			_, err := src.renew(ctx, sent)
			if err == nil {
				return nil
			}
			if !errors.Is(err, ErrLoginRequired) {
				return err
			}
			if e, err = src.entry(ctx); err != nil {
				return err
			}
		}
	}
	if l := h.c.linkAwaiting(e); l != nil {
		// The caller authorized; the account linked is not theirs until
		// their client gives the code its browser was shown.
		return &CallerLoginError{
			CallerAuthorization: CallerAuthorization{Server: h.c.cfg.Server, Caller: h.caller, Expires: l.Expires, ID: l.ID},
			Reason:              "the caller's sign-in awaits its confirmation code",
			AwaitsCode:          true,
			confirm:             h.confirm,
		}
	}
	reason := "not authorized yet"
	switch {
	case stepUp:
		reason = "the server asks for more scopes (insufficient_scope)"
	case e != nil && e.Token != nil:
		reason = "the server refused the caller's token"
	}
	login, err := h.c.beginWith(ctx, h.caller, d, asked)
	if err != nil {
		return err
	}
	return &CallerLoginError{CallerAuthorization: *login, Reason: reason, confirm: h.confirm}
}

// confirm is [Callers.Confirm] for the handler's caller alone.
func (h *CallerHandler) confirm(ctx context.Context, code string) error {
	return h.c.Confirm(ctx, h.caller, code)
}

// exchangeSource is the oauth2.TokenSource of a CallerExchange handler.
type exchangeSource struct{ h *CallerHandler }

func (s exchangeSource) Token() (*oauth2.Token, error) {
	d := s.h.c.discovered()
	if d == nil {
		return nil, fmt.Errorf("oauth: server %q: no authorization server discovered yet", s.h.c.cfg.Server)
	}
	t, err := s.h.exchanged(context.Background(), d, nil, "")
	if err != nil {
		return nil, err
	}
	return t.oauth2Token(), nil
}

// CallerAuthorization is a caller's authorization in progress: the URL to send the
// caller to, valid until Expires. Its URL holds no secret (the PKCE
// verifier stays in the store), but it is the caller's: whoever completes
// it links their account at the upstream to the caller.
type CallerAuthorization struct {
	// Server is the configured server name.
	Server string
	// Caller is the caller who must authorize.
	Caller Caller
	// URL is the authorization URL.
	URL string
	// Expires is when the authorization stops being redeemable.
	Expires time.Time
	// ID names this authorization without revealing its state: the same
	// while the URL is the same, and what [CallbackOptions.Done] reports
	// when it completes. A gateway can use it as the elicitation ID of a
	// URL-mode elicitation, and send the completion notification then.
	ID string
}

// CallerLoginError is the error of a caller's request to an upstream
// server (CallerLogin) while the caller has not authorized, or must
// authorize again. It carries the authorization URL, for a URL-mode
// elicitation where the client supports it, else for an error result that
// names it. It wraps [ErrLoginRequired]. Its message leaves the URL out,
// so that logs never carry a caller's authorization request.
type CallerLoginError struct {
	CallerAuthorization
	// Reason says why, without any token.
	Reason string
	// AwaitsCode is set when the caller has authorized and the account
	// linked awaits the code the caller's browser was shown (URL is then
	// empty): see [CallerLoginError.Confirm].
	AwaitsCode bool

	confirm func(context.Context, string) error // bound to the caller whose request failed
}

// Confirm gives the code the callback showed the browser that completed
// the caller's authorization, for the caller whose request failed with e
// ([Callers.Confirm] for that caller): a gateway asks the caller's own
// client for it on that request, never anyone else.
func (e *CallerLoginError) Confirm(ctx context.Context, code string) error {
	if e.confirm == nil {
		return fmt.Errorf("server %q: caller %s: nothing to confirm", e.Server, e.Caller)
	}
	return e.confirm(ctx, code)
}

func (e *CallerLoginError) Error() string {
	if e.AwaitsCode {
		return fmt.Sprintf("server %q: caller %s signed in at the server's authorization server; the sign-in is used once the caller gives the code its browser was shown", e.Server, e.Caller)
	}
	return fmt.Sprintf("server %q: caller %s must authorize at the server's authorization server (%s): send the caller to the authorization URL", e.Server, e.Caller, e.Reason)
}

func (e *CallerLoginError) Unwrap() error { return ErrLoginRequired }

// scopesFor returns the scopes to request: the configured ones, else those
// discovery found, with asked added.
func (c *Callers) scopesFor(d *discovery, asked []string) []string {
	s := d.scopes
	if len(c.cfg.Scopes) > 0 {
		s = c.cfg.Scopes
	}
	return union(slices.Clone(s), asked)
}
