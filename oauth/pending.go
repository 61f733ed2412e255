package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// The deferred flow, for applications that own the user's browser (seed
// 000's "pending" state):
//
//  1. A connect hits the server's 401; Authorize discovers and checks the
//     authorization server, registers a client if needed, builds an
//     authorization request (PKCE S256 with a fresh verifier, a fresh
//     state, the RFC 8707 resource) and stores it, verifier included, in
//     the encrypted store as the entry's Pending. The connect fails with a
//     *PendingError carrying the URL. The transport that failed is spent;
//     the application keeps no reference to it.
//  2. The application sends the user to the URL. The authorization server
//     redirects to PendingRedirectURL with code and state (and maybe iss).
//  3. The application calls FinishAuth with them (ParseRedirect reads them
//     from the redirect URL), on this handler or on a new one over the
//     same store after a restart. FinishAuth checks state and iss,
//     redeems the code with the stored verifier, stores the token and
//     drops the pending request.
//  4. The application connects again, on a fresh transport; the token
//     source now has a token and the connect succeeds.
//
// While a pending request is unexpired and still fits (same authorization
// server and redirect), further connects return the same URL rather than
// starting over, so that a user halfway through the first is not
// invalidated by a retry.

// startPending builds or reuses the pending authorization request.
func (h *Handler) startPending(ctx context.Context, req *http.Request, challenges []oauthex.Challenge, e *Entry) (err error) {
	defer wrapf(&err, "oauth: server %q: authorize", h.cfg.Server)
	d, err := discover(ctx, h.cfg.HTTPClient, challenges, req.URL.String(), true)
	if err != nil {
		return err
	}
	redirect := h.cfg.PendingRedirectURL
	now := h.now()
	if e != nil && e.Pending != nil && e.Client != nil {
		p := e.Pending
		if now.Before(p.Expires) && sameIssuer(p.Issuer, d.asm.Issuer) && p.RedirectURL == redirect && p.Resource == d.resource {
			return h.pendingError(p)
		}
	}
	c, err := h.candidate(e, d)
	if err != nil {
		return err
	}
	if c, err = h.fitRedirect(c, redirect); err != nil {
		return err
	}
	if c == nil {
		if c, err = h.register(ctx, d, redirect); err != nil {
			return err
		}
	}
	p, stored := newPending(c, d, redirect, h.scopes(d.scopes, e, d), randomState(), now, h.cfg.PendingTTL)
	err = h.cfg.Store.Update(ctx, h.cfg.Server, func(e *Entry) error {
		h.src.bind.rebind(e)
		e.Client, e.Pending = stored, p
		return nil
	})
	if err != nil {
		return err
	}
	return h.pendingError(p)
}

// newPending builds the authorization request of client c at the
// authorization server d found, with its redirect, the scopes (plus
// offline_access where the server offers it, as go-sdk does with
// RequestRefreshToken, SEP-2207) and state, valid for ttl from now: a
// fresh PKCE verifier, the RFC 8707 resource, the issuer the response
// must name (RFC 9207). It returns the request and the client as it is
// kept beside it: with those scopes, and without a configured secret,
// which never reaches the store.
func newPending(c *Client, d *discovery, redirect string, scopes []string, state string, now time.Time, ttl time.Duration) (*Pending, *Client) {
	if slices.Contains(d.asm.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	cfg := c.config(redirect)
	cfg.Scopes = scopes
	verifier := oauth2.GenerateVerifier()
	p := &Pending{
		State:       state,
		Verifier:    verifier,
		URL:         cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.resource)),
		RedirectURL: redirect,
		Resource:    d.resource,
		Issuer:      d.asm.Issuer,
		IssRequired: d.asm.AuthorizationResponseIssParameterSupported,
		Scopes:      scopes,
		Created:     now.UTC(),
		Expires:     now.Add(ttl).UTC(),
	}
	stored := *c
	if !stored.Dynamic {
		stored.Secret = ""
	}
	stored.Scopes = scopes
	return p, &stored
}

func (h *Handler) pendingError(p *Pending) *PendingError {
	return &PendingError{Server: h.cfg.Server, URL: p.URL, State: p.State, Expires: p.Expires}
}

// FinishAuth completes a deferred authorization with the authorization
// response the application received at its redirect URL (see
// [ParseRedirect]): it checks the state against the pending request (an
// error wrapping [ErrStateMismatch] otherwise, and the request stays
// pending), checks iss per RFC 9207, redeems the code with the PKCE
// verifier kept in the store, and stores the token. It works on a handler
// made after a restart, over the same store. Without a pending request,
// or after it expired, it returns an error wrapping [ErrNoPendingAuth].
//
// Connect again afterwards, with a new transport.
func (h *Handler) FinishAuth(ctx context.Context, res *auth.AuthorizationResult) (err error) {
	defer wrapf(&err, "oauth: server %q: finish authorization", h.cfg.Server)
	if res == nil || res.Code == "" {
		return errors.New("no authorization code")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, err := h.cfg.Store.GetContext(ctx, h.cfg.Server)
	if err != nil {
		return err
	}
	if e == nil || e.Pending == nil || e.Client == nil || !h.src.bind.holds(e) {
		// A pending authorization bound to another server is not this
		// server's to finish.
		return ErrNoPendingAuth
	}
	p := e.Pending
	if !h.now().Before(p.Expires) {
		return fmt.Errorf("%w: the pending authorization expired at %s", ErrNoPendingAuth, p.Expires.Format("15:04:05 MST"))
	}
	if subtle.ConstantTimeCompare([]byte(res.State), []byte(p.State)) != 1 {
		return ErrStateMismatch
	}
	// RFC 9207, section 2.4, as go-sdk applies it.
	switch {
	case res.Iss != "" && !sameIssuer(res.Iss, p.Issuer):
		return fmt.Errorf("%w: the response comes from %q, want %q", ErrIssuerMismatch, res.Iss, p.Issuer)
	case res.Iss == "" && p.IssRequired:
		return fmt.Errorf("%w: the server advertises RFC 9207 but the response has no iss", ErrIssuerMismatch)
	}
	c := e.Client
	cfg := c.config(p.RedirectURL)
	cfg.ClientSecret = h.secretOf(c)
	cfg.Scopes = p.Scopes
	xctx, cancel := context.WithTimeout(ctx, h.src.timeout)
	defer cancel()
	hc := h.cfg.HTTPClient
	if k := h.keyOf(c); k != nil {
		hc = withClientAssertion(hc, c.TokenURL, k, c.ID, p.Issuer, nil)
	}
	xctx = context.WithValue(xctx, oauth2.HTTPClient, hc)
	tok, err := cfg.Exchange(xctx, res.Code, oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource))
	if err != nil {
		return fmt.Errorf("token exchange: %w", endpointError("token", err, res.Code, p.Verifier, cfg.ClientSecret))
	}
	t := tokenFrom(tok, p.Scopes, h.now())
	err = h.cfg.Store.Update(ctx, h.cfg.Server, func(e *Entry) error {
		if !h.src.bind.holds(e) || e.Client == nil || e.Client.ID != c.ID {
			// Replaced meanwhile: the token belongs to a registration that
			// is no longer stored.
			return fmt.Errorf("%w: the stored authorization changed meanwhile", ErrNoPendingAuth)
		}
		e.Token = t
		if e.Pending != nil && e.Pending.State == p.State {
			e.Pending = nil
		}
		return nil
	})
	if err != nil {
		return err
	}
	h.src.remember(t)
	h.src.setResource(p.Resource)
	return nil
}

// ParseRedirect reads an authorization response from the URL the
// authorization server redirected to. An error response (error=...) is an
// error wrapping [ErrAccessDenied]. The state is returned, not checked:
// [Handler.FinishAuth] checks it.
func ParseRedirect(raw string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("oauth: redirect is not a URL")
	}
	return resultFrom(u.Query())
}

// resultFrom reads an authorization response's parameters.
func resultFrom(q url.Values) (*auth.AuthorizationResult, error) {
	if code := q.Get("error"); code != "" {
		msg := fmt.Sprintf("%s", shorten(code))
		if d := q.Get("error_description"); d != "" {
			msg += fmt.Sprintf(": %q", shorten(d))
		}
		return nil, fmt.Errorf("%w by the authorization server: %s", ErrAccessDenied, msg)
	}
	code := q.Get("code")
	if code == "" {
		return nil, errors.New("oauth: the redirect has no code")
	}
	return &auth.AuthorizationResult{Code: code, State: q.Get("state"), Iss: q.Get("iss")}, nil
}
