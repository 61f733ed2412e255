package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Defaults for [SourceOptions].
const (
	DefaultRefreshWindow  = 60 * time.Second
	DefaultRefreshTimeout = 30 * time.Second
)

// SourceOptions configures a [TokenSource]. A nil *SourceOptions means
// defaults.
type SourceOptions struct {
	// RefreshWindow is how long before its expiry an access token is
	// renewed; zero means DefaultRefreshWindow. For short-lived tokens it
	// is capped at half the token's lifetime.
	RefreshWindow time.Duration
	// RefreshTimeout bounds one refresh, waiting for the store lock
	// included; zero means DefaultRefreshTimeout. It does not depend on
	// any caller's context, so a caller that gives up does not cancel a
	// refresh that other callers wait for, and a hung authorization server
	// holds nobody longer than this.
	RefreshTimeout time.Duration
}

// TokenSource is the token source of one server, backed by a [Store]. It
// returns the stored access token while it is valid (see
// SourceOptions.RefreshWindow) and otherwise refreshes it:
//
//   - once per server in a process: concurrent callers share one refresh
//     (also across TokenSources of one Store);
//   - once across processes: the refresh runs under the store lock, after
//     re-reading the entry. If another process has already replaced the
//     token, its token is used; else the stored refresh token is redeemed
//     and the result (with the rotated refresh token) stored before the
//     lock is released.
//
// It uses only an entry bound to its server's URL (see [Entry.Resource]):
// any other entry is a *[LoginRequiredError], and neither its token nor
// its refresh token leaves the store.
//
// When the authorization server refuses the refresh token (invalid_grant)
// the token is removed from the store and Token fails with an error
// wrapping [ErrLoginRequired] that names the login command. Transient
// failures change nothing. No error carries a token.
//
// A TokenSource is safe for concurrent use.
type TokenSource struct {
	store  *Store
	server string // the server's name, for messages
	// entryKey is the entry's store key: the server's name, or for a
	// gateway caller's entry its own key (see callerKey).
	entryKey string
	bind     binding
	client   *http.Client
	window   time.Duration
	timeout  time.Duration
	now      func() time.Time
	// secret is a configured client's secret, which the store does not
	// keep; a client toolwire registered has its secret in the store.
	secret string
	// key is a configured client's private key (private_key_jwt), if it
	// authenticates with one.
	key *ClientKey

	mu       sync.Mutex
	last     *Token // last token seen, to answer without reading the store
	resource string // RFC 8707 resource of the refreshes
}

var _ oauth2.TokenSource = (*TokenSource)(nil)

// NewTokenSource returns the token source of server in store, for the MCP
// server at the URL resource. client sends the refresh requests (pass a
// netpolicy client).
func NewTokenSource(store *Store, server, resource string, client *http.Client, opts *SourceOptions) *TokenSource {
	if opts == nil {
		opts = &SourceOptions{}
	}
	s := &TokenSource{
		store:    store,
		server:   server,
		entryKey: server,
		bind:     binding{resource: canonicalResource(resource)},
		client:   client,
		window:   cmpOr(opts.RefreshWindow, DefaultRefreshWindow),
		timeout:  cmpOr(opts.RefreshTimeout, DefaultRefreshTimeout),
		now:      time.Now,
	}
	// Refreshes name the server they are bound to (RFC 8707), so a new
	// process's first refresh carries it too; a login replaces it with the
	// resource its discovery found (setResource).
	s.resource = resource
	return s
}

// setResource sets the resource indicator the refreshes carry.
func (s *TokenSource) setResource(r string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resource = r
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Token returns a valid access token, refreshing it if needed. It waits at
// most about RefreshTimeout.
func (s *TokenSource) Token() (*oauth2.Token, error) {
	return s.TokenContext(context.Background())
}

// TokenContext is Token with a context that bounds only this caller's
// wait, not the refresh it may be waiting for.
func (s *TokenSource) TokenContext(ctx context.Context) (*oauth2.Token, error) {
	t, err := s.current(ctx)
	if err != nil {
		var le *LoginRequiredError
		if errors.As(err, &le) && !le.unbound {
			return nil, expiredGrant{le}
		}
		return nil, err
	}
	return t.oauth2Token(), nil
}

// current returns a fresh token, refreshing through the server's flight.
func (s *TokenSource) current(ctx context.Context) (*Token, error) {
	s.mu.Lock()
	t := s.last
	s.mu.Unlock()
	if s.fresh(t) {
		return t, nil
	}
	f := s.store.flights.join(s.entryKey, s.timeout, func(ctx context.Context) (*Token, error) { return s.refresh(ctx, "") })
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("server %q: waiting for token refresh: %w", s.server, ctx.Err())
	}
	if f.err != nil {
		return nil, f.err
	}
	s.remember(f.tok)
	return f.tok, nil
}

// remember keeps t as the last token seen.
func (s *TokenSource) remember(t *Token) {
	s.mu.Lock()
	s.last = t
	s.mu.Unlock()
}

// forget drops the cached token, so that the next call reads the store.
func (s *TokenSource) forget() { s.remember(nil) }

// stored reports whether the store holds a token for the server (usable or
// not), without refreshing. An entry bound elsewhere is a
// *LoginRequiredError.
func (s *TokenSource) stored(ctx context.Context) (bool, error) {
	s.mu.Lock()
	t := s.last
	s.mu.Unlock()
	if t != nil {
		return true, nil
	}
	e, err := s.entry(ctx)
	if err != nil {
		return false, err
	}
	return e != nil && e.Token != nil, nil
}

// entry returns the server's entry if it is bound to this source's
// server; an entry bound elsewhere is a *LoginRequiredError.
func (s *TokenSource) entry(ctx context.Context) (*Entry, error) {
	e, err := s.store.GetContext(ctx, s.entryKey)
	if err != nil {
		return nil, err
	}
	if !s.bind.holds(e) {
		return nil, s.unbound(e)
	}
	return e, nil
}

// fresh reports whether t can be used without refreshing.
func (s *TokenSource) fresh(t *Token) bool {
	if t == nil || t.AccessToken == "" {
		return false
	}
	if t.Expiry.IsZero() {
		return true
	}
	w := s.window
	if !t.Obtained.IsZero() {
		if life := t.Expiry.Sub(t.Obtained); life > 0 && w > life/2 {
			w = life / 2
		}
	}
	return s.now().Add(w).Before(t.Expiry)
}

func (s *TokenSource) loginRequired(reason string) *LoginRequiredError {
	return &LoginRequiredError{Server: s.server, Reason: reason, Caller: s.bind.caller}
}

// unbound is the error for e, an entry bound to another server.
func (s *TokenSource) unbound(e *Entry) *LoginRequiredError {
	return &LoginRequiredError{Server: s.server, Reason: s.bind.mismatch(e), Caller: s.bind.caller, unbound: true}
}

// renew refreshes the token although it looks valid, because the server
// refused it (revoked, or the clocks disagree), unless the stored token is
// already another one than rejected. The caller's wait is bounded by ctx,
// the refresh by RefreshTimeout.
func (s *TokenSource) renew(ctx context.Context, rejected string) (*Token, error) {
	s.forget()
	f := s.store.flights.join(s.entryKey, s.timeout, func(ctx context.Context) (*Token, error) { return s.refresh(ctx, rejected) })
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("server %q: waiting for token refresh: %w", s.server, ctx.Err())
	}
	if f.err != nil {
		return nil, f.err
	}
	s.remember(f.tok)
	return f.tok, nil
}

// refresh runs in the server's flight, bounded by ctx (RefreshTimeout). A
// stored token that is fresh and not the rejected access token is used as
// it is.
func (s *TokenSource) refresh(ctx context.Context, rejected string) (*Token, error) {
	usable := func(t *Token) bool { return s.fresh(t) && (rejected == "" || t.AccessToken != rejected) }
	// A look without the lock first: usually another process or source
	// has not refreshed, but reading is cheap and locking is not free.
	e, err := s.entry(ctx)
	if err != nil {
		return nil, err
	}
	if e != nil && usable(e.Token) {
		return e.Token, nil
	}
	var out *Token
	var denied *LoginRequiredError
	err = s.store.Update(ctx, s.entryKey, func(e *Entry) error {
		if !s.bind.holds(e) {
			// Rebound by another process meanwhile.
			return s.unbound(e)
		}
		if usable(e.Token) {
			// Another process refreshed while we waited for the lock.
			out = e.Token
			return nil
		}
		switch {
		case e.Token == nil:
			return s.loginRequired("not logged in")
		case e.Token.RefreshToken == "":
			return s.loginRequired("the access token expired and no refresh token was issued")
		case e.Client == nil || e.Client.TokenURL == "":
			return s.loginRequired("no client registration is stored")
		}
		old := e.Token
		cfg := e.Client.config("")
		if !e.Client.Dynamic && s.secret != "" {
			cfg.ClientSecret = s.secret
		}
		s.mu.Lock()
		resource := s.resource
		s.mu.Unlock()
		client := s.client
		if resource != "" {
			// RFC 8707, section 2.2: the refresh names the resource, so
			// that the new access token is for it alone.
			client = withGrantParams(client, cfg.Endpoint.TokenURL, "refresh_token", url.Values{"resource": {resource}})
		}
		if s.key != nil && !e.Client.Dynamic {
			client = withClientAssertion(client, cfg.Endpoint.TokenURL, s.key, e.Client.ID, e.Client.Issuer, nil)
		}
		rctx := context.WithValue(ctx, oauth2.HTTPClient, client)
		// An expired token makes the source redeem the refresh token.
		t, err := cfg.TokenSource(rctx, &oauth2.Token{RefreshToken: old.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
		if err != nil {
			switch oauthCode(err) {
			case "invalid_grant":
				// The grant is gone (revoked, expired, or rotated by a
				// client that does not share this store): forget the token
				// so that status shows it, keep the registration.
				e.Token = nil
				denied = s.loginRequired("the authorization server refused the refresh token (invalid_grant)")
				return nil
			case "invalid_client":
				e.Token = nil
				if e.Client.Dynamic {
					e.Client = nil // register again at the next login
				}
				denied = s.loginRequired("the authorization server no longer accepts the client (invalid_client)")
				return nil
			}
			err = endpointError("token", err, old.AccessToken, old.RefreshToken, cfg.ClientSecret)
			if ctx.Err() != nil {
				return fmt.Errorf("server %q: refresh: no answer within %v: %w", s.server, s.timeout, err)
			}
			return fmt.Errorf("server %q: refresh: %w", s.server, err)
		}
		out = tokenFrom(t, old.Scopes, s.now())
		e.Token = out
		return nil
	})
	if err != nil {
		return nil, err
	}
	if denied != nil {
		return nil, denied
	}
	return out, nil
}

// config returns the golang.org/x/oauth2 configuration of c.
func (c *Client) config(redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     c.ID,
		ClientSecret: c.Secret,
		Endpoint:     oauth2.Endpoint{AuthURL: c.AuthURL, TokenURL: c.TokenURL, AuthStyle: authStyle(c.AuthMethod)},
		RedirectURL:  redirect,
		Scopes:       c.Scopes,
	}
}

// authStyle maps a token endpoint auth method (RFC 7591) to x/oauth2's.
// "none" sends client_id in the body, like client_secret_post without a
// secret.
func authStyle(method string) oauth2.AuthStyle {
	switch method {
	case "client_secret_post", "none", "private_key_jwt":
		// private_key_jwt: client_id with the assertion, in the body.
		return oauth2.AuthStyleInParams
	case "client_secret_basic":
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleAutoDetect
}

// authMethod is the inverse of authStyle for a configuration go-sdk built.
func authMethod(style oauth2.AuthStyle, secret string) string {
	switch {
	case style == oauth2.AuthStyleInParams && secret == "":
		return "none"
	case style == oauth2.AuthStyleInParams:
		return "client_secret_post"
	case style == oauth2.AuthStyleInHeader:
		return "client_secret_basic"
	}
	return ""
}

// flights runs at most one refresh per server at a time.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	done chan struct{} // closed when tok and err are set
	tok  *Token
	err  error
}

// join returns the server's refresh in progress, or starts one. A started
// refresh runs in its own goroutine with a context of its own, bounded by
// timeout, so that no caller's cancellation cuts it short for the others;
// it ends by itself when run returns, at the latest when timeout expires.
func (fs *flights) join(server string, timeout time.Duration, run func(context.Context) (*Token, error)) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[server]; f != nil {
		return f
	}
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	fs.m[server] = f
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		tok, err := run(ctx)
		fs.mu.Lock()
		delete(fs.m, server)
		fs.mu.Unlock()
		f.tok, f.err = tok, err
		close(f.done)
	}()
	return f
}
