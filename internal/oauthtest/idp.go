package oauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// The token types and grants of enterprise-managed authorization (SEP-990).
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	grantJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenTypeIDToken   = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG     = "urn:ietf:params:oauth:token-type:id-jag"
	typIDJAG           = "oauth-id-jag+jwt"
)

// IdP is an enterprise identity provider on 127.0.0.1 for enterprise-managed
// authorization (cross-app access): it signs users' ID tokens and, at its
// token endpoint, exchanges one (RFC 8693) for an identity assertion JWT
// authorization grant (ID-JAG) for another authorization server, which an
// [OP] that trusts it ([OP.TrustIdP]) accepts with the JWT bearer grant.
type IdP struct {
	// Issuer is http://127.0.0.1:PORT.
	Issuer string
	// ClientID is toolwire's client at the IdP.
	ClientID string

	key       *ecdsa.PrivateKey
	asClient  string // the client at the OP that the ID-JAGs are for
	exchanges atomic.Int32
	last      atomic.Value // url.Values of the last token exchange
}

// NewIdP starts an IdP whose ID-JAGs are for asClient, toolwire's client
// at the OP, stopped when the test ends.
func NewIdP(t testing.TB, asClient string) *IdP {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	p := &IdP{Issuer: "http://" + srv.Listener.Addr().String(), ClientID: "idp-client", key: key, asClient: asClient}
	srv.Config.Handler = http.HandlerFunc(p.serve)
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

// Exchanges returns how many token exchanges the IdP granted.
func (p *IdP) Exchanges() int { return int(p.exchanges.Load()) }

// LastExchange returns the form of the last token exchange request.
func (p *IdP) LastExchange() url.Values {
	v, _ := p.last.Load().(url.Values)
	return v
}

// IDToken returns an ID token for the user sub, for toolwire's client.
func (p *IdP) IDToken(t testing.TB, sub string) string {
	t.Helper()
	s, err := p.sign("JWT", jwt.Claims{Issuer: p.Issuer, Subject: sub, Audience: jwt.Audience{p.ClientID},
		IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// AccessToken returns a JWT access token for the user sub whose audience
// is audience, valid for ttl: what a gateway's caller presents to the
// gateway (whose JWT verifier would accept it) and the gateway exchanges
// at an OP that trusts p (OP.TrustSubjectTokens).
func (p *IdP) AccessToken(t testing.TB, sub, audience string, ttl time.Duration) string {
	t.Helper()
	now := time.Now()
	s, err := p.sign("at+jwt", jwt.Claims{Issuer: p.Issuer, Subject: sub, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl)), ID: rand.Text()},
		map[string]any{"client_id": "gateway-client"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CallerToken is AccessToken with a "role" claim: the JWT a gateway's
// caller of that role presents to a gateway whose JWT verifier takes
// p's keys (JWKSURL).
func (p *IdP) CallerToken(t testing.TB, sub, audience, role string, ttl time.Duration) string {
	t.Helper()
	now := time.Now()
	s, err := p.sign("at+jwt", jwt.Claims{Issuer: p.Issuer, Subject: sub, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl)), ID: rand.Text()},
		map[string]any{"client_id": "gateway-client", "role": role})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// JWKSURL is where p publishes its public key (a JWK set), which verifies
// every JWT it signs.
func (p *IdP) JWKSURL() string { return p.Issuer + "/jwks" }

func (p *IdP) sign(typ string, claims jwt.Claims, extra map[string]any) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.key}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		return "", err
	}
	b := jwt.Signed(sig).Claims(claims)
	if extra != nil {
		b = b.Claims(extra)
	}
	return b.Serialize()
}

func (p *IdP) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && (r.URL.Path == "/.well-known/oauth-authorization-server" || r.URL.Path == "/.well-known/openid-configuration"):
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer": p.Issuer, "token_endpoint": p.Issuer + "/token", "authorization_endpoint": p.Issuer + "/authorize",
			"response_types_supported": []string{"code"}, "grant_types_supported": []string{grantTokenExchange},
			"code_challenge_methods_supported": []string{"S256"},
		})
	case r.Method == http.MethodPost && r.URL.Path == "/token":
		p.exchange(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/jwks":
		writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, Algorithm: string(jose.ES256), Use: "sig"}}})
	default:
		http.NotFound(w, r)
	}
}

// exchange is the RFC 8693 token endpoint: an ID token of its own for an
// ID-JAG with the audience and resource asked for.
func (p *IdP) exchange(w http.ResponseWriter, r *http.Request) {
	refuse := func(code, why string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": why})
	}
	r.ParseForm()
	f := r.PostForm
	p.last.Store(f)
	switch {
	case f.Get("grant_type") != grantTokenExchange:
		refuse("unsupported_grant_type", "token exchange only")
		return
	case f.Get("requested_token_type") != tokenTypeIDJAG || f.Get("subject_token_type") != tokenTypeIDToken:
		refuse("invalid_request", "want an id_token for an id-jag")
		return
	case f.Get("audience") == "" || f.Get("resource") == "":
		refuse("invalid_request", "audience and resource required")
		return
	case f.Get("client_id") != p.ClientID:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	tok, err := jwt.ParseSigned(f.Get("subject_token"), []jose.SignatureAlgorithm{jose.ES256})
	var c jwt.Claims
	if err == nil {
		err = tok.Claims(&p.key.PublicKey, &c)
	}
	if err == nil {
		err = c.Validate(jwt.Expected{Issuer: p.Issuer, AnyAudience: jwt.Audience{p.ClientID}, Time: time.Now()})
	}
	if err != nil {
		refuse("invalid_grant", "bad ID token")
		return
	}
	jag, err := p.sign(typIDJAG, jwt.Claims{Issuer: p.Issuer, Subject: c.Subject, Audience: jwt.Audience{f.Get("audience")},
		IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(time.Now().Add(5 * time.Minute)), ID: rand.Text()},
		map[string]any{"resource": f.Get("resource"), "client_id": p.asClient, "scope": f.Get("scope")})
	if err != nil {
		refuse("server_error", err.Error())
		return
	}
	p.exchanges.Add(1)
	writeJSON(w, http.StatusOK, map[string]string{"access_token": jag, "issued_token_type": tokenTypeIDJAG, "token_type": "N_A"})
}

// TrustIdP makes the OP accept p's ID-JAGs with the JWT bearer grant
// (RFC 7523, section 2.1) from asClient, a client with secret (basic or post),
// and lists that grant in its metadata. The ID-JAG must be p's, typed
// oauth-id-jag+jwt, for the OP's issuer, unexpired, its client_id the
// authenticated client, its resource the request's. The token the OP
// issues is for the ID-JAG's subject.
func (o *OP) TrustIdP(p *IdP, asClient, secret string) {
	o.st.add(&client{id: asClient, secret: secret, method: oidc.AuthMethodBasic,
		grants: []oidc.GrantType{oidc.GrantTypeClientCredentials}, appType: op.ApplicationTypeWeb})
	o.mu.Lock()
	defer o.mu.Unlock()
	o.idp = p
}

// JWTBearerGrants returns how many JWT bearer grants the OP accepted.
func (o *OP) JWTBearerGrants() int { return int(o.jwtBearer.Load()) }

// jagAuth checks a JWT bearer grant's ID-JAG and, if it is good, rewrites
// the request to zitadel's client_credentials grant for the ID-JAG's
// subject (zitadel's own JWT profile grant takes keys of its service users
// only). Otherwise it answers and returns false.
func (o *OP) jagAuth(w http.ResponseWriter, r *http.Request) bool {
	refuse := func(status int, code, why string) bool {
		writeJSON(w, status, map[string]string{"error": code, "error_description": why})
		return false
	}
	o.mu.Lock()
	p := o.idp
	o.mu.Unlock()
	id, secret, basic := r.BasicAuth()
	if !basic && r.PostForm.Has("client_secret") { // client_secret_post
		id, secret, basic = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), true
	}
	switch {
	case p == nil:
		return refuse(http.StatusBadRequest, "unsupported_grant_type", "no trusted IdP")
	case !basic:
		return refuse(http.StatusUnauthorized, "invalid_client", "client authentication required")
	}
	tok, err := jwt.ParseSigned(r.PostForm.Get("assertion"), []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(tok.Headers) != 1 || tok.Headers[0].ExtraHeaders[jose.HeaderType] != typIDJAG {
		return refuse(http.StatusBadRequest, "invalid_grant", "not an ID-JAG")
	}
	var c jwt.Claims
	var extra struct {
		Resource string `json:"resource"`
		ClientID string `json:"client_id"`
	}
	if err := tok.Claims(&p.key.PublicKey, &c, &extra); err != nil {
		return refuse(http.StatusBadRequest, "invalid_grant", "bad ID-JAG signature")
	}
	if err := c.Validate(jwt.Expected{Issuer: p.Issuer, AnyAudience: jwt.Audience{o.Issuer}, Time: time.Now()}); err != nil {
		return refuse(http.StatusBadRequest, "invalid_grant", "ID-JAG: "+err.Error())
	}
	if extra.ClientID != id {
		return refuse(http.StatusBadRequest, "invalid_grant", "ID-JAG for another client")
	}
	if res := r.PostForm.Get("resource"); res != "" && res != extra.Resource {
		return refuse(http.StatusBadRequest, "invalid_target", "ID-JAG for another resource")
	}
	o.jwtBearer.Add(1)
	o.st.mu.Lock()
	o.st.subjects[id] = c.Subject
	o.st.mu.Unlock()
	form := url.Values{"grant_type": {"client_credentials"}}
	if s := r.PostForm.Get("scope"); s != "" {
		form.Set("scope", s)
	}
	r.SetBasicAuth(id, secret) // zitadel checks the secret
	rewrite(r, form)
	return true
}
