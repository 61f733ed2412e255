package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// JWTOptions configures [JWTVerifier].
type JWTOptions struct {
	// JWKSURL is where the issuer publishes its JWK set: https, or http to
	// a loopback host. Required.
	JWKSURL string
	// Issuer is the "iss" a token must carry, compared exactly. Required.
	Issuer string
	// Audience must be among a token's "aud" values. Required.
	Audience string
	// RoleClaim names the claim (a string) holding the caller's role.
	// Default "role".
	RoleClaim string
	// Algorithms are the JWS algorithms accepted in a token's header.
	// Default RS256, ES256 and EdDSA. Only asymmetric algorithms (RS*,
	// PS*, ES*, EdDSA) may be listed: "none" and HMAC are refused.
	Algorithms []string
	// HTTPClient fetches the JWK set. Nil means a client with a 10 s
	// timeout that does not follow redirects to a URL JWKSURL could not be.
	HTTPClient *http.Client
	// Refresh is how long a fetched key set is trusted before it is
	// fetched again. Default 10 minutes; at least a minute.
	Refresh time.Duration
	// Leeway is the clock skew tolerated on "exp", "nbf" and "iat".
	// Default 30 s.
	Leeway time.Duration
	// Now tells the time, for tests. Nil means time.Now.
	Now func() time.Time
}

const (
	defaultRoleClaim   = "role"
	defaultJWKSRefresh = 10 * time.Minute
	defaultJWTLeeway   = 30 * time.Second
	jwksFetchTimeout   = 10 * time.Second
	// jwksMinInterval is the least time between two fetches of the JWK
	// set, so that tokens with made-up key ids cannot make the gateway
	// hammer the issuer.
	jwksMinInterval = time.Minute
	// jwksMaxBytes bounds the size of a JWK set document.
	jwksMaxBytes = 1 << 20
)

var defaultJWTAlgorithms = []string{string(jose.RS256), string(jose.ES256), string(jose.EdDSA)}

// asymmetricAlgorithms are the algorithms a JWTOptions may allow.
var asymmetricAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// JWTVerifier returns a token verifier for JWTs signed by an issuer whose
// keys are published as a JWK set at opts.JWKSURL. The set is fetched now
// (an unreachable URL, or a document that holds no usable signing key, is
// an error naming the URL) and again once it is older than opts.Refresh.
//
// A token is accepted when its header's "alg" is allowed, its "kid" names
// a key of the set (a token without "kid" matches keys without one) whose
// signature verifies, it has an "exp" that has not passed, its "nbf" and
// "iat" (if present) are not in the future, its "iss" is opts.Issuer, its
// "aud" includes opts.Audience, and it has a "sub". Times are compared with
// opts.Leeway of tolerance.
//
// A "kid" the set does not have causes one fetch of the set, to pick up a
// rotated key, but fetches happen at most once a minute, however many
// tokens ask: a second unknown "kid" within the minute is refused without
// asking the issuer. When a fetch fails the last good set stays in use.
//
// The caller's subject is "sub"; its role is the string claim
// opts.RoleClaim. A token without that claim is accepted with the role "",
// which no [Roles] lists, so its caller sees no tool; a role claim that is
// not a string is refused. A "scope" claim (space-separated string), if
// present, becomes the scopes.
//
// Every refusal is an error wrapping auth.ErrInvalidToken, with a short
// reason ("expired", "wrong audience", "bad signature", ...) and never the
// token itself.
func JWTVerifier(ctx context.Context, options *JWTOptions) (auth.TokenVerifier, error) {
	var opts JWTOptions
	if options != nil {
		opts = *options
	}
	v, err := newJWTVerifier(opts)
	if err != nil {
		return nil, err
	}
	v.lastFetch = v.now()
	set, err := v.fetch(ctx)
	if err != nil {
		return nil, err
	}
	v.keys, v.fetchedAt = set, v.lastFetch
	return v.verify, nil
}

// jwtVerifier holds the options and the current key set.
type jwtVerifier struct {
	jwksURL   string
	issuer    string
	audience  string
	roleClaim string
	algs      []jose.SignatureAlgorithm
	client    *http.Client
	refresh   time.Duration
	leeway    time.Duration
	now       func() time.Time

	// fetching is held by the one goroutine fetching the set; the others
	// wait for it rather than fetch too.
	fetching chan struct{}

	mu        sync.RWMutex
	keys      *jose.JSONWebKeySet // never nil once built
	fetchedAt time.Time           // of the current keys
	lastFetch time.Time           // of the last attempt, good or not (written holding fetching too)
}

func newJWTVerifier(opts JWTOptions) (*jwtVerifier, error) {
	if err := checkJWKSURL(opts.JWKSURL); err != nil {
		return nil, err
	}
	if opts.Issuer == "" {
		return nil, errors.New("jwt: an issuer is required")
	}
	if opts.Audience == "" {
		return nil, errors.New("jwt: an audience is required")
	}
	v := &jwtVerifier{
		jwksURL: opts.JWKSURL, issuer: opts.Issuer, audience: opts.Audience,
		roleClaim: opts.RoleClaim, client: opts.HTTPClient,
		refresh: opts.Refresh, leeway: opts.Leeway, now: opts.Now,
		fetching: make(chan struct{}, 1),
	}
	if v.roleClaim == "" {
		v.roleClaim = defaultRoleClaim
	}
	names := opts.Algorithms
	if len(names) == 0 {
		names = defaultJWTAlgorithms
	}
	for _, name := range names {
		alg := jose.SignatureAlgorithm(name)
		if !slices.Contains(asymmetricAlgorithms, alg) {
			return nil, fmt.Errorf("jwt: algorithm %q is not allowed (only RS*, PS*, ES* and EdDSA)", name)
		}
		if !slices.Contains(v.algs, alg) {
			v.algs = append(v.algs, alg)
		}
	}
	switch {
	case v.refresh == 0:
		v.refresh = defaultJWKSRefresh
	case v.refresh < jwksMinInterval:
		return nil, fmt.Errorf("jwt: refresh %v is below the minimum of %v", v.refresh, jwksMinInterval)
	}
	switch {
	case v.leeway == 0:
		v.leeway = defaultJWTLeeway
	case v.leeway < 0:
		return nil, fmt.Errorf("jwt: leeway %v is negative", v.leeway)
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.client == nil {
		v.client = &http.Client{
			Timeout: jwksFetchTimeout,
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 5 {
					return errors.New("too many redirects")
				}
				return checkJWKSURL(req.URL.String())
			},
		}
	}
	return v, nil
}

// checkJWKSURL accepts https URLs, and http ones to a loopback host.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("jwt: JWK set URL %q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("jwt: JWK set URL %s: http is only allowed to a loopback host; use https", raw)
	default:
		return fmt.Errorf("jwt: JWK set URL %s: scheme must be https", raw)
	}
}

// fetch gets and parses the JWK set, keeping the keys that can verify a
// signature. Keys of a type it does not know are skipped, not an error.
func (v *jwtVerifier) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("jwt: JWK set %s: %s", v.jwksURL, fmt.Sprintf(format, args...))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.jwksURL, nil)
	if err != nil {
		return nil, fail("%v", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is named already
		}
		return nil, fail("unreachable: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fail("status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return nil, fail("reading: %v", err)
	}
	if len(body) > jwksMaxBytes {
		return nil, fail("larger than %d bytes", jwksMaxBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Keys == nil {
		return nil, fail("not a JWK set")
	}
	set := &jose.JSONWebKeySet{}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		// Only public keys: not symmetric ones (HMAC is never allowed),
		// nor private ones, which anyone who read the set could sign with.
		if !k.IsPublic() || !k.Valid() {
			continue
		}
		set.Keys = append(set.Keys, k)
	}
	if len(set.Keys) == 0 {
		return nil, fail("no usable signing key among %d", len(doc.Keys))
	}
	return set, nil
}

// keysFor returns the keys of the set with the id kid, fetching the set
// again if it is stale or lacks kid and no fetch happened within
// jwksMinInterval.
func (v *jwtVerifier) keysFor(ctx context.Context, kid string) []jose.JSONWebKey {
	v.mu.RLock()
	keys, fetchedAt := v.keys.Key(kid), v.fetchedAt
	v.mu.RUnlock()
	if len(keys) > 0 && v.now().Sub(fetchedAt) < v.refresh {
		return keys
	}
	if !v.refetch(ctx) {
		return keys // still the old set: a failed or refused fetch keeps it
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.keys.Key(kid)
}

// refetch fetches the set unless another fetch was attempted within
// jwksMinInterval, and reports whether the set may have changed. Only one
// goroutine fetches at a time; the others wait for it and then find the
// attempt too recent to make another.
func (v *jwtVerifier) refetch(ctx context.Context) bool {
	select {
	case v.fetching <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-v.fetching }()

	now := v.now()
	v.mu.RLock()
	last := v.lastFetch
	v.mu.RUnlock()
	if now.Sub(last) < jwksMinInterval {
		return true // someone just fetched; the set may be newer than the caller's look
	}
	v.mu.Lock()
	v.lastFetch = now
	v.mu.Unlock()

	// The fetch serves every later caller too, so a caller going away
	// must not cut it short; the timeout still bounds it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksFetchTimeout)
	defer cancel()
	set, err := v.fetch(fctx)
	if err != nil {
		return false
	}
	v.mu.Lock()
	v.keys, v.fetchedAt = set, now
	v.mu.Unlock()
	return true
}

// refuse is the error of every refused token.
func refuse(reason string) error {
	return fmt.Errorf("%w: jwt: %s", auth.ErrInvalidToken, reason)
}

// verify is the auth.TokenVerifier.
func (v *jwtVerifier) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	jws, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		if alg, ok := headerAlg(token); ok && !slices.Contains(v.algs, jose.SignatureAlgorithm(alg)) {
			return nil, refuse("alg not allowed")
		}
		return nil, refuse("malformed token")
	}
	if len(jws.Signatures) != 1 {
		return nil, refuse("malformed token")
	}
	hdr := jws.Signatures[0].Header
	keys := v.keysFor(ctx, hdr.KeyID)
	if len(keys) == 0 {
		return nil, refuse("unknown key")
	}
	var payload []byte
	for _, k := range keys {
		if k.Algorithm != "" && k.Algorithm != hdr.Algorithm {
			continue // the key is for another algorithm
		}
		if p, err := jws.Verify(k.Key); err == nil {
			payload = p
			break
		}
	}
	if payload == nil {
		return nil, refuse("bad signature")
	}

	var claims jwt.Claims
	var extra map[string]any
	if json.Unmarshal(payload, &claims) != nil || json.Unmarshal(payload, &extra) != nil {
		return nil, refuse("malformed claims")
	}
	if claims.Expiry == nil {
		return nil, refuse("no expiry")
	}
	err = claims.ValidateWithLeeway(jwt.Expected{
		Issuer:      v.issuer,
		AnyAudience: jwt.Audience{v.audience},
		Time:        v.now(),
	}, v.leeway)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, refuse("expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, refuse("not valid yet")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, refuse("issued in the future")
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, refuse("wrong issuer")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, refuse("wrong audience")
	default:
		return nil, refuse("invalid claims")
	}
	if claims.Subject == "" {
		return nil, refuse("no subject")
	}

	var role string
	if r, ok := extra[v.roleClaim]; ok && r != nil {
		if role, ok = r.(string); !ok {
			return nil, refuse("role claim is not a string")
		}
	}
	var scopes []string
	if s, ok := extra["scope"]; ok && s != nil {
		str, ok := s.(string)
		if !ok {
			return nil, refuse("scope claim is not a string")
		}
		scopes = strings.Fields(str)
	}
	info := &auth.TokenInfo{
		UserID:     claims.Subject,
		Expiration: claims.Expiry.Time(),
		Scopes:     scopes,
		Extra:      map[string]any{roleKey: role, IssuerKey: v.issuer, claimsKey: extra},
	}
	// A JWT that names the client it was issued to (RFC 9068's client_id,
	// or OIDC's azp) is, with its issuer and subject, the credential a
	// session is bound to, so that the same client's refreshed token goes
	// on with the session and another client's token of the same subject
	// (or another issuer's of the same subject and client) does not.
	// Without a client claim, the session is bound to the token itself.
	for _, name := range []string{"client_id", "azp"} {
		if c, ok := extra[name].(string); ok && c != "" {
			info.Extra[credentialKey] = "jwt\x00" + v.issuer + "\x00" + claims.Subject + "\x00" + c
			break
		}
	}
	return info, nil
}

// claimsKey is where the JWT verifier puts, in TokenInfo.Extra, the
// token's verified claims, for the policy rules that read them
// (tool.Principal.Claims).
const claimsKey = "toolwire.claims"

// headerAlg reads the "alg" of a compact JWS's header without verifying
// anything, to say why a token did not parse.
func headerAlg(token string) (string, bool) {
	head, _, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return "", false
	}
	return h.Alg, true
}
