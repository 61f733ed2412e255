package gateway

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

const (
	testIssuer   = "https://issuer.example.com"
	testAudience = "https://gateway.example.com/mcp"
)

// jwtTestKeys are the issuer's keys: rsa (kid rsa-1), rsaOther (an
// impostor's), rsaRotated (rotated in later, kid rsa-2) and ec (kid ec-1).
type jwtTestKeys struct {
	rsa, rsaOther, rsaRotated *rsa.PrivateKey
	ec                        *ecdsa.PrivateKey
}

// testKeys are made once: RSA key generation is slow under -race.
var testKeys = sync.OnceValue(func() (k jwtTestKeys) {
	var err error
	for _, p := range []**rsa.PrivateKey{&k.rsa, &k.rsaOther, &k.rsaRotated} {
		if *p, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	return k
})

// jwks serves a JWK set that a test may replace, counting the fetches.
type jwks struct {
	srv     *httptest.Server
	body    atomic.Pointer[[]byte]
	status  atomic.Int32
	fetches atomic.Int32
}

func newJWKS(t *testing.T, keys ...jose.JSONWebKey) *jwks {
	t.Helper()
	j := &jwks{}
	j.set(t, keys...)
	j.status.Store(http.StatusOK)
	j.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.fetches.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(int(j.status.Load()))
		_, _ = w.Write(*j.body.Load())
	}))
	t.Cleanup(j.srv.Close)
	return j
}

func (j *jwks) set(t *testing.T, keys ...jose.JSONWebKey) {
	t.Helper()
	body, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	j.body.Store(&body)
}

func (j *jwks) url() string { return j.srv.URL + "/jwks.json" }

func publicJWK(key crypto.Signer, kid, alg string) jose.JSONWebKey {
	return jose.JSONWebKey{Key: key.Public(), KeyID: kid, Algorithm: alg, Use: "sig"}
}

// sign makes a compact JWT of claims signed with key under kid.
func sign(t *testing.T, key any, kid string, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// clock is a settable Now.
type clock struct{ t atomic.Pointer[time.Time] }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }
func (c *clock) set(t time.Time)  { c.t.Store(&t) }
func (c *clock) add(d time.Duration) {
	c.set(c.now().Add(d))
}
func (c *clock) now() time.Time { return *c.t.Load() }

var t0 = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// claimsAt are valid claims for a token issued at now.
func claimsAt(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": testAudience, "sub": "alice",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"role": "reader", "scope": "tools:read  tools:call",
	}
}

// jwtSetup serves the RSA ("rsa-1", alg RS256) and ECDSA ("ec-1", no alg)
// public keys and builds a verifier on them with a clock at t0.
func jwtSetup(t *testing.T, opts JWTOptions) (auth.TokenVerifier, *jwks, *clock) {
	t.Helper()
	k := testKeys()
	j := newJWKS(t, publicJWK(k.rsa, "rsa-1", "RS256"), publicJWK(k.ec, "ec-1", ""))
	c := newClock(t0)
	opts.JWKSURL, opts.Now = j.url(), c.now
	if opts.Issuer == "" {
		opts.Issuer = testIssuer
	}
	if opts.Audience == "" {
		opts.Audience = testAudience
	}
	v, err := JWTVerifier(ctxT(t), &opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := j.fetches.Load(); n != 1 {
		t.Fatalf("construction fetched the JWK set %d times, want 1", n)
	}
	return v, j, c
}

// wantRefused checks that err is a refusal wrapping auth.ErrInvalidToken
// with reason, and that it does not repeat the token.
func wantRefused(t *testing.T, what string, info *auth.TokenInfo, err error, token, reason string) {
	t.Helper()
	switch {
	case err == nil:
		subject := ""
		if info != nil {
			subject = info.UserID
		}
		t.Errorf("%s: accepted (subject %q), want refused with %q", what, subject, reason)
	case !errors.Is(err, auth.ErrInvalidToken):
		t.Errorf("%s: error %v does not wrap auth.ErrInvalidToken", what, err)
	case !strings.Contains(err.Error(), reason):
		t.Errorf("%s: error %q, want the reason %q", what, err, reason)
	case token != "" && strings.Contains(err.Error(), token):
		t.Errorf("%s: the error repeats the token", what)
	}
}

func TestJWTVerifierAcceptsAValidToken(t *testing.T) {
	v, _, _ := jwtSetup(t, JWTOptions{})
	k := testKeys()
	for _, tc := range []struct {
		name string
		key  any
		kid  string
		alg  jose.SignatureAlgorithm
	}{{"RS256", k.rsa, "rsa-1", jose.RS256}, {"ES256", k.ec, "ec-1", jose.ES256}} {
		info, err := v(ctxT(t), sign(t, tc.key, tc.kid, tc.alg, claimsAt(t0)), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if info.UserID != "alice" || info.Extra[roleKey] != "reader" || !info.Expiration.Equal(t0.Add(time.Hour)) ||
			!slices.Equal(info.Scopes, []string{"tools:read", "tools:call"}) {
			t.Errorf("%s: info = %+v, want alice, reader, exp t0+1h, scopes [tools:read tools:call]", tc.name, info)
		}
	}

	// aud as an array holding ours among others.
	c := claimsAt(t0)
	c["aud"] = []string{"https://other.example.com", testAudience}
	if _, err := v(ctxT(t), sign(t, k.rsa, "rsa-1", jose.RS256, c), nil); err != nil {
		t.Errorf("aud array containing ours: %v", err)
	}

	// No role claim: accepted with the role "", which sees no tool; no scope: no scopes.
	c = claimsAt(t0)
	delete(c, "role")
	delete(c, "scope")
	info, err := v(ctxT(t), sign(t, k.rsa, "rsa-1", jose.RS256, c), nil)
	if err != nil {
		t.Fatalf("no role: %v", err)
	}
	if role, ok := info.Extra[roleKey].(string); !ok || role != "" || info.Scopes != nil {
		t.Errorf("no role: role %#v, scopes %v; want \"\" and none", info.Extra[roleKey], info.Scopes)
	}
}

func TestJWTVerifierRoleClaimOption(t *testing.T) {
	v, _, _ := jwtSetup(t, JWTOptions{RoleClaim: "toolwire_role"})
	c := claimsAt(t0)
	c["toolwire_role"] = "admin"
	info, err := v(ctxT(t), sign(t, testKeys().rsa, "rsa-1", jose.RS256, c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Extra[roleKey] != "admin" {
		t.Errorf("role = %v, want admin from toolwire_role (not reader from role)", info.Extra[roleKey])
	}
}

func TestJWTVerifierChecksTimes(t *testing.T) {
	v, _, clk := jwtSetup(t, JWTOptions{}) // leeway 30 s
	tok := sign(t, testKeys().rsa, "rsa-1", jose.RS256, claimsAt(t0))

	clk.set(t0.Add(time.Hour + 20*time.Second)) // past exp, within leeway
	if _, err := v(ctxT(t), tok, nil); err != nil {
		t.Errorf("20 s past exp (leeway 30 s): %v", err)
	}
	clk.set(t0.Add(time.Hour + 31*time.Second))
	info, err := v(ctxT(t), tok, nil)
	wantRefused(t, "31 s past exp", info, err, tok, "expired")

	clk.set(t0.Add(-20 * time.Second)) // before nbf and iat, within leeway
	if _, err := v(ctxT(t), tok, nil); err != nil {
		t.Errorf("20 s before nbf (leeway 30 s): %v", err)
	}
	clk.set(t0.Add(-time.Minute))
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "a minute before nbf", info, err, tok, "not valid yet")

	clk.set(t0)
	c := claimsAt(t0)
	delete(c, "nbf")
	c["iat"] = t0.Add(time.Minute).Unix()
	tok = sign(t, testKeys().rsa, "rsa-1", jose.RS256, c)
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "iat a minute ahead", info, err, tok, "issued in the future")

	c = claimsAt(t0)
	delete(c, "exp")
	tok = sign(t, testKeys().rsa, "rsa-1", jose.RS256, c)
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "no exp", info, err, tok, "no expiry")
}

func TestJWTVerifierChecksClaims(t *testing.T) {
	v, _, _ := jwtSetup(t, JWTOptions{})
	for _, tc := range []struct {
		name   string
		edit   func(map[string]any)
		reason string
	}{
		{"wrong issuer", func(c map[string]any) { c["iss"] = "https://evil.example.com" }, "wrong issuer"},
		{"issuer differing by a slash", func(c map[string]any) { c["iss"] = testIssuer + "/" }, "wrong issuer"},
		{"no issuer", func(c map[string]any) { delete(c, "iss") }, "wrong issuer"},
		{"wrong audience", func(c map[string]any) { c["aud"] = "https://other.example.com" }, "wrong audience"},
		{"aud array without ours", func(c map[string]any) { c["aud"] = []string{"a", "b"} }, "wrong audience"},
		{"no audience", func(c map[string]any) { delete(c, "aud") }, "wrong audience"},
		{"no subject", func(c map[string]any) { delete(c, "sub") }, "no subject"},
		{"role not a string", func(c map[string]any) { c["role"] = []string{"admin"} }, "role claim is not a string"},
		{"scope not a string", func(c map[string]any) { c["scope"] = []string{"a"} }, "scope claim is not a string"},
		{"exp not a number", func(c map[string]any) { c["exp"] = "tomorrow" }, "malformed claims"},
	} {
		c := claimsAt(t0)
		tc.edit(c)
		tok := sign(t, testKeys().rsa, "rsa-1", jose.RS256, c)
		info, err := v(ctxT(t), tok, nil)
		wantRefused(t, tc.name, info, err, tok, tc.reason)
	}
}

func TestJWTVerifierChecksSignatureAndAlgorithm(t *testing.T) {
	v, _, _ := jwtSetup(t, JWTOptions{})
	k := testKeys()
	payload := claimsAt(t0)

	tok := sign(t, k.rsaOther, "rsa-1", jose.RS256, payload)
	info, err := v(ctxT(t), tok, nil)
	wantRefused(t, "signed by another key under the same kid", info, err, tok, "bad signature")

	tok = sign(t, k.rsa, "rsa-1", jose.PS256, payload)
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "PS256 (not allowed by default)", info, err, tok, "alg not allowed")

	// A good signature whose payload was swapped afterwards.
	good := strings.Split(sign(t, k.ec, "ec-1", jose.ES256, payload), ".")
	forged := claimsAt(t0)
	forged["role"] = "admin"
	body, _ := json.Marshal(forged)
	tok = good[0] + "." + base64.RawURLEncoding.EncodeToString(body) + "." + good[2]
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "payload swapped", info, err, tok, "bad signature")

	// alg "none", unsigned.
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"rsa-1","typ":"JWT"}`))
	tok = head + "." + base64.RawURLEncoding.EncodeToString(body) + "."
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, `alg "none"`, info, err, tok, "alg not allowed")

	// HS256 with the RSA public key's bytes as the secret: the classic
	// algorithm confusion.
	pub, _ := json.Marshal(publicJWK(k.rsa, "rsa-1", ""))
	tok = sign(t, pub, "rsa-1", jose.HS256, payload)
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "HS256", info, err, tok, "alg not allowed")

	info, err = v(ctxT(t), "not-a-jwt", nil)
	wantRefused(t, "garbage", info, err, "not-a-jwt", "malformed token")
}

func TestJWTVerifierAlgorithmsOption(t *testing.T) {
	v, _, _ := jwtSetup(t, JWTOptions{Algorithms: []string{"ES256"}})
	k := testKeys()
	if _, err := v(ctxT(t), sign(t, k.ec, "ec-1", jose.ES256, claimsAt(t0)), nil); err != nil {
		t.Errorf("ES256 allowed: %v", err)
	}
	tok := sign(t, k.rsa, "rsa-1", jose.RS256, claimsAt(t0))
	info, err := v(ctxT(t), tok, nil)
	wantRefused(t, "RS256 with only ES256 allowed", info, err, tok, "alg not allowed")

	// PS256 allowed, but the RSA key's JWK says RS256: a PS256 token under
	// its kid is not its, though the key would verify it.
	v, _, _ = jwtSetup(t, JWTOptions{Algorithms: []string{"RS256", "PS256"}})
	tok = sign(t, k.rsa, "rsa-1", jose.PS256, claimsAt(t0))
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "PS256 under an RS256 key", info, err, tok, "bad signature")
	// The ECDSA key's JWK names no alg: its type still decides.
	tok = sign(t, k.ec, "ec-1", jose.ES256, claimsAt(t0))
	if _, err := v(ctxT(t), tok, nil); err == nil {
		t.Error("ES256 token accepted with only RS256 and PS256 allowed")
	}
	tok = sign(t, k.rsa, "ec-1", jose.RS256, claimsAt(t0))
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "RS256 token under the ECDSA key's kid", info, err, tok, "bad signature")
	// No kid: matches only keys without one, and every key here has one.
	tok = sign(t, k.rsa, "", jose.RS256, claimsAt(t0))
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "no kid", info, err, tok, "unknown key")
}

func TestJWTVerifierRefetchesOnceForAnUnknownKid(t *testing.T) {
	v, j, clk := jwtSetup(t, JWTOptions{})
	k := testKeys()

	// The issuer rotates: rsa-1 is gone, rsa-2 is new.
	j.set(t, publicJWK(k.rsaRotated, "rsa-2", "RS256"), publicJWK(k.ec, "ec-1", ""))
	clk.add(2 * time.Minute) // past the once-a-minute limit since construction's fetch
	info, err := v(ctxT(t), sign(t, k.rsaRotated, "rsa-2", jose.RS256, claimsAt(clk.now())), nil)
	if err != nil {
		t.Fatalf("token under the rotated-in kid: %v", err)
	}
	if info.UserID != "alice" {
		t.Errorf("subject = %q", info.UserID)
	}
	if n := j.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d after one unknown kid, want 2 (construction and one refetch)", n)
	}

	// Known now: no further fetch.
	if _, err := v(ctxT(t), sign(t, k.rsaRotated, "rsa-2", jose.RS256, claimsAt(clk.now())), nil); err != nil {
		t.Fatal(err)
	}
	// The rotated-out key is no longer trusted; asking for it again within
	// the minute does not fetch.
	clk.add(30 * time.Second)
	tok := sign(t, k.rsa, "rsa-1", jose.RS256, claimsAt(clk.now()))
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "rotated-out kid", info, err, tok, "unknown key")
	tok = sign(t, k.rsa, "rsa-9", jose.RS256, claimsAt(clk.now()))
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "second unknown kid within the minute", info, err, tok, "unknown key")
	if n := j.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d, want still 2: unknown kids within a minute of a fetch must not fetch", n)
	}

	// A minute on, an unknown kid may fetch again (and still fail).
	clk.add(time.Minute)
	info, err = v(ctxT(t), tok, nil)
	wantRefused(t, "unknown kid a minute later", info, err, tok, "unknown key")
	if n := j.fetches.Load(); n != 3 {
		t.Errorf("fetches = %d, want 3", n)
	}
}

func TestJWTVerifierRefetchDoesNotStampede(t *testing.T) {
	v, j, clk := jwtSetup(t, JWTOptions{})
	k := testKeys()
	j.set(t, publicJWK(k.rsaRotated, "rsa-2", "RS256"))
	clk.add(2 * time.Minute)
	tok := sign(t, k.rsaRotated, "rsa-2", jose.RS256, claimsAt(clk.now()))
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 32 {
		wg.Go(func() {
			if _, err := v(context.Background(), tok, nil); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := j.fetches.Load(); n != 2 {
		t.Errorf("32 concurrent tokens with a new kid made %d fetches in all, want 2 (construction and one)", n)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of 32 concurrent verifications failed", n)
	}
}

func TestJWTVerifierRefreshesAStaleSetAndKeepsItOnFailure(t *testing.T) {
	v, j, clk := jwtSetup(t, JWTOptions{Refresh: 5 * time.Minute})
	k := testKeys()
	verify := func() error {
		t.Helper()
		_, err := v(ctxT(t), sign(t, k.rsa, "rsa-1", jose.RS256, claimsAt(clk.now())), nil)
		return err
	}

	clk.add(4 * time.Minute)
	if err := verify(); err != nil || j.fetches.Load() != 1 {
		t.Fatalf("within Refresh: err %v, fetches %d (want nil, 1)", err, j.fetches.Load())
	}
	// Stale, and the issuer is failing: one attempt, the old set still serves.
	clk.add(2 * time.Minute)
	j.status.Store(http.StatusInternalServerError)
	if err := verify(); err != nil || j.fetches.Load() != 2 {
		t.Fatalf("stale with a failing issuer: err %v, fetches %d (want nil, 2)", err, j.fetches.Load())
	}
	if err := verify(); err != nil || j.fetches.Load() != 2 {
		t.Fatalf("again within the minute: err %v, fetches %d (want nil, still 2)", err, j.fetches.Load())
	}
	// The issuer is back and has dropped rsa-1: the refresh drops it too.
	clk.add(time.Minute)
	j.status.Store(http.StatusOK)
	j.set(t, publicJWK(k.ec, "ec-1", ""))
	err := verify()
	wantRefused(t, "kid dropped by a refresh", nil, err, "", "unknown key")
	if n := j.fetches.Load(); n != 3 {
		t.Errorf("fetches = %d, want 3", n)
	}
	// The refreshed set is fresh for another Refresh: no fetch two minutes on.
	clk.add(2 * time.Minute)
	if _, err := v(ctxT(t), sign(t, k.ec, "ec-1", jose.ES256, claimsAt(clk.now())), nil); err != nil || j.fetches.Load() != 3 {
		t.Errorf("after a refresh: err %v, fetches %d (want nil, still 3)", err, j.fetches.Load())
	}
}

func TestJWTVerifierConstructionErrors(t *testing.T) {
	// Unreachable: a server that was closed.
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL + "/jwks.json"
	gone.Close()
	_, err := JWTVerifier(ctxT(t), &JWTOptions{JWKSURL: goneURL, Issuer: testIssuer, Audience: testAudience})
	if err == nil || !strings.Contains(err.Error(), goneURL) || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("unreachable JWKS: error %v, want one naming %s", err, goneURL)
	}

	// Reachable, but not a JWK set.
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html>login</html>")
	}))
	defer html.Close()
	_, err = JWTVerifier(ctxT(t), &JWTOptions{JWKSURL: html.URL, Issuer: testIssuer, Audience: testAudience})
	if err == nil || !strings.Contains(err.Error(), html.URL) || !strings.Contains(err.Error(), "not a JWK set") {
		t.Errorf("HTML at the JWKS URL: error %v, want 'not a JWK set' naming %s", err, html.URL)
	}

	// JWK sets holding no public signing key: a symmetric key, a private
	// key, an encryption key.
	for name, key := range map[string]jose.JSONWebKey{
		"HMAC":       {Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "h", Algorithm: "HS256"},
		"private":    {Key: testKeys().ec, KeyID: "p", Algorithm: "ES256"},
		"encryption": {Key: testKeys().ec.Public(), KeyID: "e", Use: "enc"},
	} {
		bad := newJWKS(t, key)
		_, err = JWTVerifier(ctxT(t), &JWTOptions{JWKSURL: bad.url(), Issuer: testIssuer, Audience: testAudience})
		if err == nil || !strings.Contains(err.Error(), "no usable signing key") {
			t.Errorf("JWK set of only a %s key: error %v, want 'no usable signing key'", name, err)
		}
	}

	ok := newJWKS(t, publicJWK(testKeys().ec, "ec-1", ""))
	for _, tc := range []struct {
		name string
		opts JWTOptions
		want string
	}{
		{"plain http to a remote host", JWTOptions{JWKSURL: "http://issuer.example.com/jwks", Issuer: testIssuer, Audience: testAudience}, "loopback"},
		{"relative URL", JWTOptions{JWKSURL: "/jwks", Issuer: testIssuer, Audience: testAudience}, "absolute"},
		{"no issuer", JWTOptions{JWKSURL: ok.url(), Audience: testAudience}, "issuer"},
		{"no audience", JWTOptions{JWKSURL: ok.url(), Issuer: testIssuer}, "audience"},
		{"alg none", JWTOptions{JWKSURL: ok.url(), Issuer: testIssuer, Audience: testAudience, Algorithms: []string{"none"}}, `"none"`},
		{"HS256", JWTOptions{JWKSURL: ok.url(), Issuer: testIssuer, Audience: testAudience, Algorithms: []string{"RS256", "HS256"}}, `"HS256"`},
		{"short refresh", JWTOptions{JWKSURL: ok.url(), Issuer: testIssuer, Audience: testAudience, Refresh: time.Second}, "refresh"},
		{"negative leeway", JWTOptions{JWKSURL: ok.url(), Issuer: testIssuer, Audience: testAudience, Leeway: -time.Second}, "leeway"},
	} {
		if _, err := JWTVerifier(ctxT(t), &tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %s", tc.name, err, tc.want)
		}
	}
	if _, err := JWTVerifier(ctxT(t), &JWTOptions{JWKSURL: ok.url(), Issuer: testIssuer, Audience: testAudience}); err != nil {
		t.Errorf("good options: %v", err)
	}
}

// jwtServer serves the fixture's gateway over HTTP behind a JWT verifier
// (real clock) with roles reader (read_*) and admin (everything), and
// returns its URL, a function minting tokens, and the audit log.
func jwtServer(t *testing.T) (string, func(sub, role string, exp time.Time) string, *audit.Memory) {
	t.Helper()
	k := testKeys()
	j := newJWKS(t, publicJWK(k.ec, "ec-1", "ES256"))
	verify, err := JWTVerifier(ctxT(t), &JWTOptions{JWKSURL: j.url(), Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, ApprovalPolicy{Write: Allow, Destructive: Allow})
	mem := &audit.Memory{}
	f.ex = tool.NewExecutor(f.reg, &tool.ExecutorOptions{Audit: audit.NewLog(mem, nil)})
	f.gw = New(f.ex, nil)
	ts := httptest.NewServer(nil)
	h := f.gw.Handler(&HTTPOptions{
		Verifier: verify, Roles: Roles{"reader": {"read_*"}, "admin": {"*"}},
		ResourceURL: ts.URL + "/mcp", AuthorizationServers: []string{testIssuer},
	})
	ts.Config.Handler = h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	mint := func(sub, role string, exp time.Time) string {
		c := map[string]any{"iss": testIssuer, "aud": testAudience, "sub": sub, "exp": exp.Unix(), "iat": time.Now().Add(-time.Minute).Unix()}
		if role != "" {
			c["role"] = role
		}
		return sign(t, k.ec, "ec-1", jose.ES256, c)
	}
	return ts.URL, mint, mem
}

func TestHTTPWithJWTEachCallerSeesOnlyItsRolesTools(t *testing.T) {
	url, mint, mem := jwtServer(t)
	later := time.Now().Add(time.Hour)

	alice := connectAs(t, url, mint("alice", "reader", later))
	if got := listNames(t, alice); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("alice (reader) sees %v, want [read_file]", got)
	}
	if _, err := alice.CallTool(ctxT(t), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/x"}}); err == nil {
		t.Error("alice could call delete_file, which her role does not list")
	}
	if res := callTool(t, alice, "read_file", map[string]any{"path": "/a"}); res.IsError {
		t.Fatalf("alice read_file = %q", text(res))
	}
	if got := listNames(t, connectAs(t, url, mint("bob", "admin", later))); len(got) != 4 {
		t.Errorf("bob (admin) sees %v, want all four tools", got)
	}
	if got := listNames(t, connectAs(t, url, mint("carol", "", later))); len(got) != 0 {
		t.Errorf("carol (no role claim) sees %v, want nothing", got)
	}
	var readBy string
	for _, ev := range mem.Events() {
		if ev.Tool == "read_file" {
			readBy = ev.Caller
		}
	}
	if readBy != "alice" {
		t.Errorf("audit caller of read_file = %q, want the token's subject alice", readBy)
	}
}

func TestHTTPWithJWTExpiredTokenIs401(t *testing.T) {
	url, mint, _ := jwtServer(t)
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"valid", mint("alice", "reader", time.Now().Add(time.Hour)), http.StatusOK},
		{"expired", mint("alice", "reader", time.Now().Add(-time.Hour)), http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s token: status %d (%s), want %d", tc.name, resp.StatusCode, body, tc.want)
		}
		if tc.want == http.StatusUnauthorized {
			if !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s token: no Bearer challenge", tc.name)
			}
			if strings.Contains(string(body), tc.token) {
				t.Errorf("%s token: the 401 body repeats the token", tc.name)
			}
		}
	}
}
