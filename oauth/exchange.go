package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ErrNoSubjectToken means that a CallerExchange handler has no token of its
// caller to exchange: none was presented ([CallerHandler.Present]), or the
// one presented has expired. The caller's next call presents one.
var ErrNoSubjectToken = errors.New("no current token of the caller to exchange")

// exchanged returns the caller's upstream token under discovery d: the one
// kept in memory while it is fresh, covers asked, is not rejected and
// outlives neither the caller's token nor the issuer that issued it;
// otherwise a new one, exchanged once however many requests ask at the
// same time.
func (h *CallerHandler) exchanged(ctx context.Context, d *discovery, asked []string, rejected string) (*Token, error) {
	c := h.c
	id := h.caller.id()
	usable := func(x *exchanged) bool {
		return x != nil && sameIssuer(x.issuer, d.asm.Issuer) && c.freshExchanged(x) &&
			covers(x.tok.Scopes, asked) && (rejected == "" || x.tok.AccessToken != rejected)
	}
	c.mu.Lock()
	x := c.cache[id]
	c.mu.Unlock()
	if usable(x) {
		return x.tok, nil
	}
	h.mu.Lock()
	subject := h.subject
	h.mu.Unlock()
	if subject == nil {
		return nil, fmt.Errorf("oauth: server %q: caller %s: %w", c.cfg.Server, h.caller, ErrNoSubjectToken)
	}
	if !subject.Expiry.IsZero() && !c.now().Before(subject.Expiry) {
		return nil, fmt.Errorf("oauth: server %q: caller %s: %w (the caller's token expired)", c.cfg.Server, h.caller, ErrNoSubjectToken)
	}
	f := c.flights.join(id, c.timeout, func(ctx context.Context) (*Token, error) {
		// Another flight may have finished between the look above and
		// this one starting.
		c.mu.Lock()
		x := c.cache[id]
		c.mu.Unlock()
		if usable(x) {
			return x.tok, nil
		}
		scopes := c.scopesFor(d, asked)
		if x != nil && x.tok != nil {
			scopes = union(scopes, x.tok.Scopes)
		}
		t, err := c.exchange(ctx, d, *subject, scopes)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("oauth: server %q: caller %s: token exchange: no answer within %v: %w", c.cfg.Server, h.caller, c.timeout, err)
			}
			return nil, fmt.Errorf("oauth: server %q: caller %s: token exchange: %w", c.cfg.Server, h.caller, err)
		}
		c.mu.Lock()
		c.cache[id] = &exchanged{tok: t, issuer: d.asm.Issuer, until: subject.Expiry}
		c.mu.Unlock()
		return t, nil
	})
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("oauth: server %q: caller %s: waiting for the token exchange: %w", c.cfg.Server, h.caller, ctx.Err())
	}
	return f.tok, f.err
}

// freshExchanged reports whether x can be used: its token is fresh (as a
// stored token is, see SourceOptions.RefreshWindow) and the caller's token
// it was exchanged for has not expired.
func (c *Callers) freshExchanged(x *exchanged) bool {
	now := c.now()
	if !x.until.IsZero() && !now.Before(x.until) {
		return false
	}
	t := x.tok
	if t == nil || t.AccessToken == "" {
		return false
	}
	if t.Expiry.IsZero() {
		// Lifetime unknown: a derived token is not trusted for long.
		return now.Before(t.Obtained.Add(maxUnknownLifetime))
	}
	w := c.window
	if life := t.Expiry.Sub(t.Obtained); life > 0 && w > life/2 {
		w = life / 2
	}
	return now.Add(w).Before(t.Expiry)
}

// maxUnknownLifetime is how long an exchanged token whose response named
// no lifetime is used before it is exchanged again.
const maxUnknownLifetime = 5 * time.Minute

// exchange runs one token exchange (RFC 8693, section 2.1) at the token
// endpoint of d's authorization server, which rediscover has held to the
// configured issuer: the caller's token as the subject, an access token
// for the upstream (RFC 8707 resource) requested, the gateway's client
// authenticated with its secret or with private_key_jwt. No error carries
// the caller's token, the issued one, the secret or the assertion.
func (c *Callers) exchange(ctx context.Context, d *discovery, subject SubjectToken, scopes []string) (*Token, error) {
	asm := d.asm
	if g := asm.GrantTypesSupported; len(g) > 0 && !slices.Contains(g, GrantTokenExchange) {
		return nil, fmt.Errorf("authorization server %s does not support token exchange (it lists the grants %v)", asm.Issuer, g)
	}
	cc := c.cfg.Client
	method := c.cfg.AuthMethod
	switch {
	case cc.Key != nil:
		method = "private_key_jwt"
		if m := asm.TokenEndpointAuthMethodsSupported; len(m) > 0 && !slices.Contains(m, method) {
			return nil, fmt.Errorf("authorization server %s does not accept private_key_jwt client authentication (it lists %v)", asm.Issuer, m)
		}
	case method == "":
		method = pickAuthMethod(asm.TokenEndpointAuthMethodsSupported, true)
	}
	params := url.Values{
		"grant_type":           {GrantTokenExchange},
		"subject_token":        {subject.Token},
		"subject_token_type":   {c.cfg.SubjectTokenType},
		"requested_token_type": {TokenTypeAccessToken},
		"resource":             {d.resource},
	}
	if c.cfg.Audience != "" {
		params.Set("audience", c.cfg.Audience)
	}
	scrub := []string{subject.Token, cc.Secret}
	cfg := clientcredentials.Config{
		ClientID:       cc.ID,
		TokenURL:       asm.TokenEndpoint,
		Scopes:         scopes,
		AuthStyle:      authStyle(method),
		EndpointParams: params,
	}
	if cc.Key != nil {
		a, err := clientAssertion(cc.Key, cc.ID, asm.Issuer, asm.TokenEndpointAuthSigningAlgValuesSupported, c.now())
		if err != nil {
			return nil, err
		}
		for k, v := range assertionParams(a) {
			params[k] = v
		}
		scrub = append(scrub, a)
	} else {
		cfg.ClientSecret = cc.Secret
	}
	t, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.cfg.HTTPClient))
	if err != nil {
		return nil, endpointError("token", err, scrub...)
	}
	scrub = append(scrub, t.AccessToken, t.RefreshToken)
	switch typ, _ := t.Extra("issued_token_type").(string); {
	case typ != "" && typ != TokenTypeAccessToken && typ != TokenTypeJWT:
		return nil, fmt.Errorf("token exchange issued a token of type %q, want an access token", shorten(scrub1(typ, scrub)))
	case !strings.EqualFold(t.TokenType, "bearer"):
		// RFC 8693, section 2.2.1: "N_A" says the token is not an access
		// token; anything but Bearer is not what the upstream takes.
		return nil, fmt.Errorf("token exchange issued a token of token_type %q, want Bearer", shorten(scrub1(t.TokenType, scrub)))
	case t.AccessToken == subject.Token:
		// An authorization server that hands the caller's own token back
		// would have the gateway forward it upstream.
		return nil, errors.New("token exchange returned the caller's own token: refused, it is never sent upstream")
	}
	tok := tokenFrom(t, scopes, c.now())
	tok.RefreshToken = "" // derived: exchanged again rather than refreshed
	return tok, nil
}

// scrub1 is describe for a value that should be a short word.
func scrub1(s string, secrets []string) string {
	return credentialLike.ReplaceAllString(scrub(s, secrets...), "[redacted]")
}
