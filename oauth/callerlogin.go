package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
)

// A caller's login (CallerLogin), as the deferred flow of pending.go but
// with the gateway's callback in place of the application:
//
//  1. A request of the caller's session meets the upstream's 401 (or the
//     gateway calls Begin). The authorization server is discovered and
//     checked, the client chosen (the configured one, a client metadata
//     URL, or one registration shared by every caller of the server), and
//     an authorization request built: PKCE S256 with a fresh verifier, the
//     RFC 8707 resource, and a state SERVER~ID~RANDOM naming the caller's
//     entry. The request, verifier included, is kept in the caller's entry
//     of the encrypted store, bound to the caller, the resource and the
//     issuer, and the request fails with a *CallerLoginError carrying the
//     URL (the same URL while it is unexpired, so that parallel calls do
//     not invalidate one another's).
//  2. The caller authorizes in a browser; the authorization server
//     redirects to the gateway's RedirectURL, where the Callback finds
//     the caller's entry from the state, compares the whole state with
//     the stored one, checks iss (RFC 9207) and the expiry, asks the
//     gateway's Verify hook (if any) whether this browser is the caller's,
//     takes the pending request out of the store (a state is redeemed
//     once), redeems the code with the verifier, and holds the tokens in
//     the caller's entry as linked, not yet the caller's, showing the
//     browser a confirmation code.
//  3. The caller's own client gives that code back ([Callers.Confirm],
//     through [CallerLoginError.Confirm] on the caller's request): the
//     tokens become the caller's. Whoever completes a caller's URL links
//     their own account, so a caller who passed their URL to someone else
//     gets nothing unless that person also hands over the code that their
//     browser was shown, with a warning not to.
//  4. The caller's next call finds the token; refreshes go as for a
//     server's own entry (single-flight per caller, across processes and
//     replicas through the store's lock, with the RFC 8707 resource).

// DefaultCallbackPath is the path the gateway mounts its [Callback] at,
// unless the configured redirect URL says otherwise.
const DefaultCallbackPath = "/oauth/callback"

// Begin starts caller's authorization at the upstream's authorization
// server, or returns the one in progress while it is unexpired: the URL to
// send the caller to. It is for a gateway that asks before the first call
// (a login command, say); a request of a caller without a token fails with
// the same, in a *[CallerLoginError]. CallerLogin only.
func (c *Callers) Begin(ctx context.Context, caller Caller) (_ *CallerAuthorization, err error) {
	if c.cfg.Mode != CallerLogin {
		return nil, fmt.Errorf("oauth: server %q: callers authorize by %s, not by login", c.cfg.Server, c.cfg.Mode)
	}
	if caller.Subject == "" {
		return nil, fmt.Errorf("oauth: server %q: begin: no caller", c.cfg.Server)
	}
	defer wrapf(&err, "oauth: server %q: caller %s", c.cfg.Server, caller)
	d := c.discovered()
	if d == nil {
		if d, err = c.rediscover(ctx, nil, c.cfg.Resource); err != nil {
			return nil, err
		}
	}
	return c.beginWith(ctx, caller, d, nil)
}

// beginWith builds or reuses caller's pending authorization under
// discovery d, with the scopes asked by a step-up added.
func (c *Callers) beginWith(ctx context.Context, caller Caller, d *discovery, asked []string) (*CallerAuthorization, error) {
	c.begin.Lock()
	defer c.begin.Unlock()
	key := callerKey(c.cfg.Server, caller)
	b := c.bindingFor(caller, d)
	cur, err := c.cfg.Store.GetContext(ctx, key)
	if err != nil {
		return nil, err
	}
	if !b.holds(cur) {
		cur = nil // replaced below: nothing of another binding survives
	}
	redirect, now := c.cfg.RedirectURL, c.now()
	if cur != nil && cur.Pending != nil && cur.Client != nil {
		p := cur.Pending
		if now.Before(p.Expires) && sameIssuer(p.Issuer, d.asm.Issuer) && p.RedirectURL == redirect && p.Resource == d.resource && covers(p.Scopes, asked) {
			return c.login(caller, p), nil
		}
	}
	shared, err := c.cfg.Store.GetContext(ctx, sharedKey(c.cfg.Server))
	if err != nil {
		return nil, err
	}
	if !c.reg.src.bind.holds(shared) {
		shared = nil
	}
	cl, err := c.reg.candidate(shared, d)
	if err != nil {
		return nil, err
	}
	if cl, err = c.reg.fitRedirect(cl, redirect); err != nil {
		return nil, err
	}
	if cl == nil {
		if cl, err = c.reg.register(ctx, d, redirect); err != nil {
			return nil, err
		}
	}
	scopes := c.scopesFor(d, asked)
	if cur != nil && cur.Token != nil {
		// A new grant would otherwise narrow the one the caller has.
		scopes = union(cur.Token.Scopes, scopes)
	}
	p, stored := newPending(cl, d, redirect, scopes, callerState(c.cfg.Server, caller), now, c.cfg.LoginTTL)
	err = c.cfg.Store.Update(ctx, key, func(e *Entry) error {
		b.rebind(e)
		e.Client, e.Pending = stored, p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.login(caller, p), nil
}

func (c *Callers) login(caller Caller, p *Pending) *CallerAuthorization {
	return &CallerAuthorization{Server: c.cfg.Server, Caller: caller, URL: p.URL, Expires: p.Expires, ID: authorizationID(p.State)}
}

// authorizationID is the ID of the authorization with state: a digest, so
// that the state itself stays between the browser, the authorization
// server and the store.
func authorizationID(state string) string {
	sum := sha256.Sum256([]byte("toolwire caller authorization\x00" + state))
	return hex.EncodeToString(sum[:12])
}

// errNotTheCaller wraps what the Callback's Verify hook said.
var errNotTheCaller = errors.New("the browser is not the caller's")

// finish completes the authorization of the caller whose id the state
// names, with the response res: see the overview above. verify, if not
// nil, is asked before anything changes. It returns the caller.
func (c *Callers) finish(ctx context.Context, id string, res *auth.AuthorizationResult, verify func(Caller) error) (who Caller, authID, code string, err error) {
	key := callerKeyPrefix + c.cfg.Server + ":" + id
	resource := canonicalResource(c.cfg.Resource)
	e, err := c.cfg.Store.GetContext(ctx, key)
	if err != nil {
		return who, "", "", err
	}
	if e == nil || e.Caller == nil || e.Caller.id() != id || e.Pending == nil || e.Client == nil || e.Resource != resource {
		return who, "", "", ErrNoPendingAuth
	}
	who, p := *e.Caller, e.Pending
	if !c.now().Before(p.Expires) {
		return who, "", "", fmt.Errorf("%w: the caller's authorization expired at %s", ErrNoPendingAuth, p.Expires.Format("15:04:05 MST"))
	}
	if subtle.ConstantTimeCompare([]byte(res.State), []byte(p.State)) != 1 {
		return who, "", "", ErrStateMismatch
	}
	// RFC 9207, section 2.4.
	switch {
	case res.Iss != "" && !sameIssuer(res.Iss, p.Issuer):
		return who, "", "", fmt.Errorf("%w: the response comes from %q, want %q", ErrIssuerMismatch, res.Iss, p.Issuer)
	case res.Iss == "" && p.IssRequired:
		return who, "", "", fmt.Errorf("%w: the server advertises RFC 9207 but the response has no iss", ErrIssuerMismatch)
	}
	if verify != nil {
		if err := verify(who); err != nil {
			return who, "", "", fmt.Errorf("%w: %w", errNotTheCaller, err)
		}
	}
	// From here on the browser may go away: what is begun is finished.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	var cl *Client
	err = c.cfg.Store.Update(ctx, key, func(e *Entry) error {
		if e.Caller == nil || *e.Caller != who || e.Pending == nil || e.Client == nil || e.Resource != resource ||
			subtle.ConstantTimeCompare([]byte(e.Pending.State), []byte(p.State)) != 1 {
			return fmt.Errorf("%w: it was completed or replaced meanwhile", ErrNoPendingAuth)
		}
		c := *e.Client
		cl, e.Pending = &c, nil // a state is redeemed once
		return nil
	})
	if err != nil {
		return who, "", "", err
	}
	cfg := cl.config(p.RedirectURL)
	cfg.ClientSecret = c.reg.secretOf(cl)
	cfg.Scopes = p.Scopes
	hc := c.cfg.HTTPClient
	if k := c.reg.keyOf(cl); k != nil {
		hc = withClientAssertion(hc, cl.TokenURL, k, cl.ID, p.Issuer, nil)
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), res.Code,
		oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource))
	if err != nil {
		return who, "", "", fmt.Errorf("token exchange: %w", endpointError("token", err, res.Code, p.Verifier, cfg.ClientSecret))
	}
	t := tokenFrom(tok, p.Scopes, c.now())
	authID, code = authorizationID(p.State), newLinkCode()
	err = c.cfg.Store.Update(ctx, key, func(e *Entry) error {
		if e.Caller == nil || *e.Caller != who || e.Client == nil || e.Client.ID != cl.ID || e.Resource != resource {
			return fmt.Errorf("%w: the caller's authorization changed meanwhile", ErrNoPendingAuth)
		}
		e.Linked = &Linked{Token: t, CodeHash: linkCodeHash(code), ID: authID, Expires: c.now().Add(c.cfg.LoginTTL)}
		return nil
	})
	if err != nil {
		return who, "", "", err
	}
	return who, authID, code, nil
}

// maxLinkTries is how many wrong codes drop a linked account: with a code
// of 50 random bits, guessing it is hopeless anyway.
const maxLinkTries = 5

// ErrLinkCode is returned by [Callers.Confirm] for a code that does not
// confirm the caller's linked account (wrong, or none is waiting).
var ErrLinkCode = errors.New("the code does not confirm a login of the caller's")

// newLinkCode returns a confirmation code: ten base32 characters (50
// random bits), as XXXXX-XXXXX.
func newLinkCode() string {
	t := rand.Text()
	return t[:5] + "-" + t[5:10]
}

// linkCodeHash is how a code is kept: a digest of it as normalized (upper
// case, without spaces or dashes), so that "abcde fghij" is ABCDE-FGHIJ.
func linkCodeHash(code string) string {
	n := strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == ' ' || r == '\t':
			return -1
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, code)
	sum := sha256.Sum256([]byte("toolwire link code\x00" + n))
	return hex.EncodeToString(sum[:])
}

// Confirm makes the upstream account caller's login linked the caller's:
// code must be the one the callback showed in the browser that completed
// the login. It is for the caller's own request (see
// [CallerLoginError.Confirm]), never for a code from anywhere else. A
// wrong code counts against the link, which is dropped after a few, or
// once it expires; an error wrapping [ErrLinkCode] says the code did not
// confirm anything.
func (c *Callers) Confirm(ctx context.Context, caller Caller, code string) (err error) {
	if c.cfg.Mode != CallerLogin {
		return fmt.Errorf("oauth: server %q: callers authorize by %s, not by login", c.cfg.Server, c.cfg.Mode)
	}
	defer wrapf(&err, "oauth: server %q: caller %s: confirm", c.cfg.Server, caller)
	key := callerKey(c.cfg.Server, caller)
	resource := canonicalResource(c.cfg.Resource)
	var outcome error
	err = c.cfg.Store.Update(ctx, key, func(e *Entry) error {
		l := e.Linked
		switch {
		case l == nil || e.Caller == nil || *e.Caller != caller || e.Resource != resource:
			outcome = fmt.Errorf("%w: no login of the caller's awaits a code", ErrLinkCode)
			return nil
		case !c.now().Before(l.Expires):
			e.Linked = nil
			outcome = fmt.Errorf("%w: the login expired at %s; authorize again", ErrLinkCode, l.Expires.Format("15:04:05 MST"))
			return nil
		case subtle.ConstantTimeCompare([]byte(linkCodeHash(code)), []byte(l.CodeHash)) != 1:
			if l.Tries++; l.Tries >= maxLinkTries {
				e.Linked = nil
				outcome = fmt.Errorf("%w: too many wrong codes; authorize again", ErrLinkCode)
			} else {
				outcome = fmt.Errorf("%w: wrong code (%d tries left)", ErrLinkCode, maxLinkTries-l.Tries)
			}
			return nil
		}
		e.Token, e.Linked = l.Token, nil
		return nil
	})
	if err != nil {
		return err
	}
	if outcome != nil {
		return outcome
	}
	c.mu.Lock()
	if s := c.sources[caller.id()]; s != nil {
		s.forget()
	}
	c.mu.Unlock()
	return nil
}

// linkAwaiting returns the linked account of e awaiting caller's code,
// unexpired, or nil.
func (c *Callers) linkAwaiting(e *Entry) *Linked {
	if e == nil || e.Linked == nil || !c.now().Before(e.Linked.Expires) {
		return nil
	}
	return e.Linked
}

// CallbackOptions configures [NewCallback]. A nil *CallbackOptions means
// defaults.
type CallbackOptions struct {
	// Verify, if set, is asked before a code is redeemed whether the
	// request (the browser that came back) is the caller's, e.g. by a
	// session cookie of the gateway's own. An error refuses it (HTTP 403),
	// and the caller's authorization stays pending. Without it, whoever
	// completes a caller's authorization URL links their account at the
	// upstream to that caller: the URL must reach the caller only.
	Verify func(r *http.Request, server string, caller Caller) error
	// Log, if set, gets one line per response: the server, the caller and
	// the outcome, never a code, a state or a token.
	Log *slog.Logger
	// Done, if set, is called after a caller's authorization completed and
	// the account it linked is held for the caller's confirmation code
	// (see [Callers.Confirm]), with the authorization's ID (see
	// [CallerAuthorization]): where a gateway asks the caller's client for
	// the code. It must not block long: the browser waits.
	Done func(server string, caller Caller, id string)
}

// Callback is the gateway's http.Handler for the redirects of callers'
// authorizations (CallerLogin), for every upstream server at once: the
// state names the server and the caller. Mount it at the path of the
// servers' RedirectURL (DefaultCallbackPath, say), outside the gateway's
// own bearer authentication (a browser brings no token). It answers a
// short HTML page; the caller then calls again.
type Callback struct {
	opts     CallbackOptions
	byServer map[string]*Callers
}

// NewCallback returns the callback of callers, each of one server with
// CallerLogin.
func NewCallback(opts *CallbackOptions, callers ...*Callers) (*Callback, error) {
	cb := &Callback{byServer: map[string]*Callers{}}
	if opts != nil {
		cb.opts = *opts
	}
	for _, c := range callers {
		switch {
		case c == nil:
			return nil, errors.New("oauth: callback: nil callers")
		case c.cfg.Mode != CallerLogin:
			return nil, fmt.Errorf("oauth: callback: server %q: callers authorize by %s, which has no callback", c.cfg.Server, c.cfg.Mode)
		case cb.byServer[c.cfg.Server] != nil:
			return nil, fmt.Errorf("oauth: callback: server %q given twice", c.cfg.Server)
		}
		cb.byServer[c.cfg.Server] = c
	}
	return cb, nil
}

func (cb *Callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		cb.page(w, http.StatusMethodNotAllowed, "Not an authorization response", "Authorization responses come back with GET.")
		return
	}
	q := r.URL.Query()
	server, id, ok := parseCallerState(q.Get("state"))
	c := cb.byServer[server]
	if !ok || c == nil {
		cb.log(r, slog.LevelWarn, "", nil, "not an authorization response toolwire waits for")
		cb.page(w, http.StatusBadRequest, "Not an authorization response toolwire waits for",
			"This page receives the answers of authorization servers to toolwire. Start again from your client.")
		return
	}
	res, err := resultFrom(q)
	if err != nil {
		cb.log(r, slog.LevelWarn, server, nil, err.Error())
		cb.page(w, http.StatusBadRequest, "Authorization not completed", err.Error()+". Call again from your client to get a new authorization link.")
		return
	}
	who, authID, code, err := c.finish(r.Context(), id, res, func(who Caller) error {
		if cb.opts.Verify == nil {
			return nil
		}
		return cb.opts.Verify(r, server, who)
	})
	var caller *Caller
	if who.Subject != "" {
		caller = &who
	}
	if err == nil {
		cb.log(r, slog.LevelInfo, server, caller, "authorized")
		if cb.opts.Done != nil {
			cb.opts.Done(server, who, authID)
		}
		cb.page(w, http.StatusOK, "One more step: your code is "+code,
			fmt.Sprintf("You signed in for %s. Enter the code %s where toolwire asks for it in your own client; until then toolwire does not use this sign-in. Enter it only in your own client, and give it to nobody: whoever enters it reaches %s as you.", server, code, server))
		return
	}
	status := http.StatusInternalServerError
	var ee *EndpointError
	switch {
	case errors.Is(err, errNotTheCaller):
		status = http.StatusForbidden
	case errors.Is(err, ErrNoPendingAuth), errors.Is(err, ErrStateMismatch), errors.Is(err, ErrIssuerMismatch):
		status = http.StatusBadRequest
	case errors.As(err, &ee):
		status = http.StatusBadGateway
	}
	cb.log(r, slog.LevelWarn, server, caller, err.Error())
	cb.page(w, status, "Authorization not completed", fmt.Sprintf("%s: %v. Call again from your client to get a new authorization link.", server, err))
}

// log writes one line about a response, if a logger is set. msg never
// holds a code, a state or a token: errors of this package carry none.
func (cb *Callback) log(r *http.Request, level slog.Level, server string, caller *Caller, msg string) {
	if cb.opts.Log == nil {
		return
	}
	attrs := []slog.Attr{slog.String("server", server)}
	if caller != nil {
		attrs = append(attrs, slog.String("caller", caller.String()))
	}
	cb.opts.Log.LogAttrs(r.Context(), level, "oauth callback: "+msg, attrs...)
}

// page answers a small HTML page that neither caches nor leaks the URL
// (which holds the code) to anything it links to; it links to nothing.
func (cb *Callback) page(w http.ResponseWriter, status int, title, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>toolwire: %s</title><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}

// Logout forgets caller's upstream tokens for the server and revokes them
// (RFC 7009) where the authorization server offers revocation: with
// CallerLogin the stored entry (refresh token first, ending the grant),
// with CallerExchange the exchanged token kept in memory. The tokens are
// forgotten whatever revocation answers; an error wrapping
// [ErrNoRevocation], or the revocation's error, says they may stay valid
// until they expire. Another replica's in-memory copy of the caller's
// access token is used until it expires or the upstream refuses it.
func (c *Callers) Logout(ctx context.Context, caller Caller) (err error) {
	defer wrapf(&err, "oauth: server %q: caller %s: logout", c.cfg.Server, caller)
	id := caller.id()
	c.mu.Lock()
	x := c.cache[id]
	delete(c.cache, id)
	s := c.sources[id]
	delete(c.sources, id)
	c.mu.Unlock()
	if s != nil {
		s.forget()
	}
	cc := c.cfg.Client
	if c.cfg.Mode == CallerExchange {
		if x == nil || x.tok == nil {
			return nil
		}
		e := &Entry{Server: c.cfg.Server, Client: &Client{ID: cc.ID, Issuer: x.issuer, AuthMethod: c.cfg.AuthMethod}, Token: x.tok}
		return revokeEntry(ctx, c.cfg.HTTPClient, e, cc.Secret, cc.Key)
	}
	key := callerKey(c.cfg.Server, caller)
	e, err := c.cfg.Store.GetContext(ctx, key)
	if err != nil {
		return err
	}
	var revoked error
	if e != nil && e.Caller != nil && *e.Caller == caller && e.BoundTo(c.cfg.Resource) && e.Client != nil {
		secret, k := "", (*ClientKey)(nil)
		if cc != nil && !e.Client.Dynamic && e.Client.ID == cc.ID {
			secret, k = cc.Secret, cc.Key
		}
		re := *e
		re.Server = c.cfg.Server
		revoked = revokeEntry(ctx, c.cfg.HTTPClient, &re, secret, k)
	}
	if err := c.cfg.Store.Delete(ctx, key); err != nil {
		return err
	}
	return revoked
}
