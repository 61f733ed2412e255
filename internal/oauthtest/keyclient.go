package oauthtest

import (
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// keyAlgs are the client assertion algorithms the OP verifies.
var keyAlgs = []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.RS256, jose.EdDSA}

// keyClient is a client that authenticates with private_key_jwt (RFC
// 7523, section 2.2). zitadel's op verifies such assertions only against
// keys of its own service users: the OP checks them itself, then hands
// the request on to zitadel as the same client with a secret only the OP
// knows, so that the token issued is a real one.
type keyClient struct {
	key    crypto.PublicKey
	secret string
}

// AddKeyClient registers a client that authenticates with private_key_jwt,
// its assertions signed by the private half of key: for the
// client_credentials grant, for the code flow with the loopback
// redirect (any port) and refresh, and for token exchange.
// The OP accepts an assertion whose iss and sub are id, whose aud is the
// issuer or the token endpoint, unexpired, its jti never seen before.
func (o *OP) AddKeyClient(id string, key crypto.PublicKey) {
	secret := rand.Text()
	o.st.add(&client{id: id, secret: secret, method: oidc.AuthMethodBasic, redirects: []string{"http://127.0.0.1/callback"},
		grants:  []oidc.GrantType{oidc.GrantTypeClientCredentials, oidc.GrantTypeCode, oidc.GrantTypeRefreshToken, oidc.GrantTypeTokenExchange},
		appType: op.ApplicationTypeNative})
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys == nil {
		o.keys, o.jtis = map[string]keyClient{}, map[string]bool{}
	}
	o.keys[id] = keyClient{key: key, secret: secret}
}

// keyAuth checks the token request's client assertion and, if it is good,
// rewrites the request to zitadel's client_secret_basic. Otherwise it
// answers invalid_client and returns false.
func (o *OP) keyAuth(w http.ResponseWriter, r *http.Request) bool {
	refuse := func(why string) bool {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": why})
		return false
	}
	if r.PostForm.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return refuse("bad client_assertion_type")
	}
	tok, err := jwt.ParseSigned(r.PostForm.Get("client_assertion"), keyAlgs)
	if err != nil {
		return refuse("the client assertion is not a JWS")
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return refuse("the client assertion has no claims")
	}
	o.mu.Lock()
	kc, ok := o.keys[unverified.Issuer]
	o.mu.Unlock()
	if !ok {
		return refuse("unknown client")
	}
	var c jwt.Claims
	if err := tok.Claims(kc.key, &c); err != nil {
		return refuse("bad signature")
	}
	if c.Subject != c.Issuer || c.ID == "" || c.Expiry == nil {
		return refuse("sub must be iss, with a jti and an exp")
	}
	if !slices.ContainsFunc(c.Audience, func(a string) bool { return a == o.Issuer || a == o.Issuer+"/oauth/token" }) {
		return refuse("wrong audience")
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Time: time.Now()}, 5*time.Second); err != nil {
		return refuse("the client assertion is " + err.Error())
	}
	if id := r.PostForm.Get("client_id"); id != "" && id != c.Issuer {
		return refuse("client_id is not the assertion's")
	}
	o.mu.Lock()
	seen := o.jtis[c.ID]
	o.jtis[c.ID] = true
	o.mu.Unlock()
	if seen {
		return refuse("the client assertion was used before")
	}
	form := r.PostForm
	form.Del("client_assertion")
	form.Del("client_assertion_type")
	form.Del("client_id")
	r.SetBasicAuth(c.Issuer, kc.secret)
	rewrite(r, form)
	return true
}

// rewrite replaces the request's form body with form, for zitadel to
// parse again.
func rewrite(r *http.Request, form url.Values) {
	body := form.Encode()
	r.Body = io.NopCloser(strings.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Form, r.PostForm = nil, nil
}

// ClientCredentials accepts the key clients (with the secret keyAuth put
// in), besides the example storage's own service user.
func (s *opStorage) ClientCredentials(ctx context.Context, clientID, clientSecret string) (op.Client, error) {
	if s.keyClient(clientID) {
		s.mu.Lock()
		c := s.clients[clientID]
		s.mu.Unlock()
		if c.secret != clientSecret {
			return nil, errors.New("wrong client or secret")
		}
		return c, nil
	}
	return s.Storage.ClientCredentials(ctx, clientID, clientSecret)
}

// ClientCredentialsTokenRequest is the example storage's, for the key
// clients too: the token's subject is the client, its audience the client
// and the service client, which introspects for the ResourceServer.
func (s *opStorage) ClientCredentialsTokenRequest(ctx context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	if s.keyClient(clientID) {
		s.mu.Lock()
		sub, ok := s.subjects[clientID]
		delete(s.subjects, clientID)
		s.mu.Unlock()
		if ok { // a JWT bearer grant (jagAuth): the token is the user's
			return &oidc.JWTTokenRequest{Subject: sub, Audience: []string{clientID, ServiceClientID}, Scopes: scopes}, nil
		}
		return &oidc.JWTTokenRequest{Subject: clientID, Audience: []string{clientID, ServiceClientID}, Scopes: scopes}, nil
	}
	return s.Storage.ClientCredentialsTokenRequest(ctx, clientID, scopes)
}

// keyClient reports whether id is a client of AddKeyClient.
func (s *opStorage) keyClient(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	return ok && id != ServiceClientID && c.method == oidc.AuthMethodBasic && slices.Contains(c.grants, oidc.GrantTypeClientCredentials)
}
