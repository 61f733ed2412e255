// Package oauthtest runs a real OAuth 2.1 / OpenID Connect authorization
// server and an MCP server behind bearer auth on 127.0.0.1, for tests of
// toolwire's OAuth client (package oauth) and of the CLI commands on top of
// it.
//
//   - [OP] is zitadel/oidc's op package with its example in-memory storage
//     and login form (authorization, PKCE, codes, tokens, refresh with
//     rotation, revocation, userinfo, introspection, and RFC 8693 token
//     exchange under the policy of exchange.go), with two users, plus an
//     RFC 7591 registration endpoint, which zitadel's op lacks. Probes
//     count what it served; faults change its metadata or its token
//     endpoint.
//   - [ResourceServer] is a go-sdk MCP server with one tool, whoami,
//     behind go-sdk's RequireBearerToken, publishing RFC 9728 metadata that
//     names the OP, and recording the Authorization header of every
//     request.
//   - [Browser] plays a user: it follows an authorization URL, logs in
//     through the OP's form, and follows the redirect back to the client.
//   - [IdP] signs ID tokens and callers' JWT access tokens, and issues
//     ID-JAGs, for enterprise-managed authorization and token exchange.
//
// A sketch:
//
//	op := oauthtest.NewOP(t, nil)
//	rs := oauthtest.NewResourceServer(t, op, nil)
//	b := oauthtest.NewBrowser()
//	fetcher := &oauth.Loopback{Open: b.Open}
//	// ... connect to rs.URL; op.Refreshes() counts refresh grants
package oauthtest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// The users of the OP's login form, and the subjects their tokens carry;
// both have the one Password.
const (
	Username  = "test-user@127.0.0.1"
	Password  = "verysecure"
	Subject   = "id1"
	Username2 = "test-user2"
	Subject2  = "id2"
)

// The service client, registered at start: a confidential client for the
// client_credentials grant, and the client ResourceServer introspects
// with. Its tokens' subject is its client ID.
const (
	ServiceClientID     = "sid1"
	ServiceClientSecret = "verysecret"
)

// OPOptions configures [NewOP]. A nil *OPOptions means defaults.
type OPOptions struct {
	// AccessTokenLifetime, if set, is the lifetime of the access tokens
	// the OP issues: their expires_in says so, and userinfo refuses them
	// once it is over. Zero means the example storage's 5 minutes.
	AccessTokenLifetime time.Duration
}

// OP is an OpenID provider on a real socket on 127.0.0.1. Its methods are
// safe for concurrent use.
type OP struct {
	// Issuer is the OP's issuer URL, http://127.0.0.1:PORT.
	Issuer string

	st *opStorage

	clientAuth    atomic.Value // "basic", "post" or "none": how the last token request authenticated
	registrations atomic.Int32
	refreshes     atomic.Int32
	exchanges     atomic.Int32
	jwtBearer     atomic.Int32
	// tokenExchanges counts token exchange requests; lastExchange is the
	// form of the last one, client authentication left out.
	tokenExchanges atomic.Int32
	lastExchange   atomic.Value
	// refreshResource is the resource parameter of the last refresh.
	refreshResource atomic.Value

	mu         sync.Mutex
	mutate     func(map[string]any)
	tokenFault func(http.ResponseWriter, *http.Request)
	cimd       bool                 // client_id_metadata_document_supported
	keys       map[string]keyClient // private_key_jwt clients, by client ID
	jtis       map[string]bool      // the client assertions' jti seen
	idp        *IdP                 // trusted for ID-JAGs (TrustIdP)
}

// NewOP starts an OP, stopped when the test ends.
//
// zitadel's example OP logs every request through slog's default logger:
// NewOP sets that logger to one that discards (the example's own way), so
// that tests' output stays readable. It also takes the log package's
// output, which slog.SetDefault redirects.
func NewOP(t testing.TB, opts *OPOptions) *OP {
	t.Helper()
	if opts == nil {
		opts = &OPOptions{}
	}
	srv := httptest.NewUnstartedServer(nil)
	o := &OP{Issuer: "http://" + srv.Listener.Addr().String()}
	st := storage.NewStorageWithClients(storage.NewUserStore(o.Issuer), map[string]*storage.Client{})
	o.st = &opStorage{Storage: st, clients: map[string]*client{}, lifetime: opts.AccessTokenLifetime, expiry: map[string]time.Time{}, subjects: map[string]string{}}
	o.st.add(&client{id: ServiceClientID, secret: ServiceClientSecret, method: oidc.AuthMethodBasic,
		grants: []oidc.GrantType{oidc.GrantTypeClientCredentials}, appType: op.ApplicationTypeWeb})
	router := exampleop.SetupServer(o.Issuer, o.st, slog.New(slog.DiscardHandler), false)
	srv.Config.Handler = o.wrap(router)
	srv.Start()
	t.Cleanup(srv.Close)
	return o
}

// Registrations returns how many clients registered (RFC 7591).
func (o *OP) Registrations() int { return int(o.registrations.Load()) }

// Refreshes returns how many refresh_token grants the token endpoint got.
func (o *OP) Refreshes() int { return int(o.refreshes.Load()) }

// RefreshResource returns the resource parameter (RFC 8707) of the last
// refresh_token grant, "" if it had none.
func (o *OP) RefreshResource() string {
	s, _ := o.refreshResource.Load().(string)
	return s
}

// Exchanges returns how many authorization_code grants the token endpoint
// got.
func (o *OP) Exchanges() int { return int(o.exchanges.Load()) }

// ClientAuth returns how the last token request authenticated its client:
// "basic" (an Authorization header), "post" (client_secret in the body),
// "none" (neither: a public client), or "" before the first.
func (o *OP) ClientAuth() string {
	s, _ := o.clientAuth.Load().(string)
	return s
}

// SetMutate makes f edit the OpenID discovery document before it is
// served; nil serves it as zitadel makes it (plus the registration
// endpoint).
func (o *OP) SetMutate(f func(doc map[string]any)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mutate = f
}

// SetTokenFault makes f answer token requests instead of zitadel (the
// probes still count them); nil restores zitadel. The request's form is
// parsed.
func (o *OP) SetTokenFault(f func(http.ResponseWriter, *http.Request)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tokenFault = f
}

// wrap adds registration, the discovery edits and the token probes to
// zitadel's router.
func (o *OP) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/register" && r.Method == http.MethodPost && r.URL.Query().Has("refuse"):
			writeJSON(w, http.StatusBadRequest, map[string]string{
				"error": "invalid_redirect_uri", "error_description": "loopback redirects are not allowed here"})
			return
		case r.URL.Path == "/register" && r.Method == http.MethodPost:
			o.register(w, r)
			return
		case r.URL.Path == "/.well-known/openid-configuration":
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var doc map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				http.Error(w, "bad discovery document", http.StatusInternalServerError)
				return
			}
			doc["registration_endpoint"] = o.Issuer + "/register"
			o.mu.Lock()
			if o.idp != nil {
				g, _ := doc["grant_types_supported"].([]any)
				doc["grant_types_supported"] = append(g, grantJWTBearer)
			}
			if o.cimd {
				doc["client_id_metadata_document_supported"] = true
			}
			if o.keys != nil {
				// What keyAuth verifies, rather than what zitadel's own
				// JWT profile would.
				doc["token_endpoint_auth_signing_alg_values_supported"] = keyAlgs
			}
			if o.mutate != nil {
				o.mutate(doc)
			}
			o.mu.Unlock()
			writeJSON(w, http.StatusOK, doc)
			return
		case r.URL.Path == "/revoke" && r.Method == http.MethodPost:
			r.ParseForm()
			if r.PostForm.Has("client_assertion") && !o.keyAuth(w, r) {
				return
			}
		case r.URL.Path == "/oauth/token":
			r.ParseForm()
			grant := r.PostForm.Get("grant_type") // before keyAuth or jagAuth rewrite the form
			if grant == grantTokenExchange {
				o.tokenExchanges.Add(1)
				f := url.Values{}
				for k, v := range r.PostForm {
					if k != "client_secret" && k != "client_assertion" {
						f[k] = v
					}
				}
				o.lastExchange.Store(f)
			}
			switch _, _, basic := r.BasicAuth(); {
			case grant == grantJWTBearer:
				o.clientAuth.Store(map[bool]string{true: "basic", false: "post"}[basic])
				if !o.jagAuth(w, r) {
					return
				}
			case r.PostForm.Has("client_assertion"):
				o.clientAuth.Store("private_key_jwt")
				if !o.keyAuth(w, r) {
					return
				}
			case basic:
				o.clientAuth.Store("basic")
			case r.PostForm.Has("client_secret"):
				o.clientAuth.Store("post")
				if grant == grantTokenExchange {
					// zitadel's token exchange takes the client from a
					// Basic header only; RFC 6749 allows the body too.
					form := r.PostForm
					r.SetBasicAuth(form.Get("client_id"), form.Get("client_secret"))
					form.Del("client_id")
					form.Del("client_secret")
					rewrite(r, form)
				}
			default:
				o.clientAuth.Store("none")
			}
			if r.PostForm == nil {
				r.ParseForm() // rewritten above: parsed again, for a fault
			}
			switch grant {
			case "refresh_token":
				o.refreshes.Add(1)
				o.refreshResource.Store(r.PostForm.Get("resource"))
			case "authorization_code":
				o.exchanges.Add(1)
			}
			o.mu.Lock()
			fault := o.tokenFault
			o.mu.Unlock()
			if fault != nil {
				fault(w, r)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// register is the RFC 7591 endpoint over the storage's client registry.
// A client asking for client_secret_basic or _post gets a secret; any
// other is public.
func (o *OP) register(w http.ResponseWriter, r *http.Request) {
	var meta oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{
			"error": "invalid_client_metadata", "error_description": "redirect_uris required"})
		return
	}
	c := &client{id: "dyn-" + rand.Text()[:12], redirects: meta.RedirectURIs, method: oidc.AuthMethodNone,
		grants: []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}, appType: op.ApplicationTypeNative}
	if m := meta.TokenEndpointAuthMethod; m == "client_secret_basic" || m == "client_secret_post" {
		c.secret = rand.Text()
		c.method = oidc.AuthMethod(m)
	}
	if meta.ApplicationType == "web" {
		c.appType = op.ApplicationTypeWeb
	}
	o.st.add(c)
	o.registrations.Add(1)
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  c.id,
		"client_secret":              c.secret,
		"redirect_uris":              c.redirects,
		"token_endpoint_auth_method": string(c.method),
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"client_id_issued_at":        time.Now().Unix(),
	})
}

// Userinfo checks a token at the OP's userinfo endpoint: an
// auth.TokenVerifier for tokens issued to users.
func (o *OP) Userinfo(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.Issuer+"/userinfo", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: userinfo says %d", auth.ErrInvalidToken, resp.StatusCode)
	}
	var ui struct {
		Sub string `json:"sub"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ui); err != nil || ui.Sub == "" {
		return nil, fmt.Errorf("%w: userinfo without sub", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: ui.Sub}, nil
}

// Introspect checks a token with RFC 7662 as the service client: the
// verifier for client_credentials tokens, whose audience is that client.
func (o *OP) Introspect(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	form := url.Values{"token": {token}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Issuer+"/oauth/introspect", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(ServiceClientID, ServiceClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ir struct {
		Active   bool   `json:"active"`
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ir); err != nil || !ir.Active {
		return nil, fmt.Errorf("%w: not active", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: ir.ClientID}, nil
}

// Revoke revokes a token at the OP's RFC 7009 endpoint as the public
// client it was issued to, as a user would in the OP's UI. hint is
// "access_token" or "refresh_token".
func (o *OP) Revoke(ctx context.Context, clientID, token, hint string) error {
	form := strings.NewReader(url.Values{"token": {token}, "token_type_hint": {hint}, "client_id": {clientID}}.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Issuer+"/revoke", form)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("revoke: %s: %s", resp.Status, b)
	}
	return nil
}

// opStorage is zitadel's example storage with the client registry
// replaced by one that registration can add to, and access tokens
// optionally shorter-lived.
type opStorage struct {
	*storage.Storage

	mu      sync.Mutex
	clients map[string]*client
	// lifetime, if set, shortens access tokens; expiry holds each shortened
	// token's end, by token ID.
	lifetime time.Duration
	expiry   map[string]time.Time
	// subjects holds, by client, the subject of the ID-JAG whose grant
	// jagAuth handed to zitadel as client_credentials.
	subjects map[string]string
	// subjectIssuer signs the subject tokens of token exchanges that the
	// OP trusts, for subjectAudience (TrustSubjectTokens).
	subjectIssuer   *IdP
	subjectAudience string
}

func (s *opStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("client not found")
	}
	return c, nil
}

func (s *opStorage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok || c.secret == "" || c.secret != secret {
		return errors.New("invalid client")
	}
	return nil
}

// SetIntrospectionFromToken lets the service client introspect its own
// client_credentials tokens: the example storage adds user info to every
// active answer and fails ("user not found") for a subject that is not a
// user, after it has checked the token, its expiry and its audience.
func (s *opStorage) SetIntrospectionFromToken(ctx context.Context, r *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	if err := s.expired(tokenID); err != nil {
		return err
	}
	err := s.Storage.SetIntrospectionFromToken(ctx, r, tokenID, subject, clientID)
	if err != nil && err.Error() == "user not found" && (subject == clientID || s.keyClient(subject)) {
		// A key client's token (AddKeyClient) names the key client.
		r.Subject, r.ClientID = subject, subject
		return nil
	}
	return err
}

// SetUserinfoFromToken refuses a shortened token past its end; the
// example storage checks only its own 5 minutes.
func (s *opStorage) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.expired(tokenID); err != nil {
		return err
	}
	return s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin)
}

func (s *opStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	return id, s.shorten(id, exp), err
}

func (s *opStorage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	id, refresh, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
	return id, refresh, s.shorten(id, exp), err
}

// shorten returns the expiry of the new access token id: exp, or the
// configured lifetime from now, which it records.
func (s *opStorage) shorten(id string, exp time.Time) time.Time {
	if s.lifetime <= 0 || id == "" {
		return exp
	}
	end := time.Now().Add(s.lifetime)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiry[id] = end
	return end
}

func (s *opStorage) expired(tokenID string) error {
	s.mu.Lock()
	end, ok := s.expiry[tokenID]
	s.mu.Unlock()
	if ok && !time.Now().Before(end) {
		return errors.New("token is expired")
	}
	return nil
}

func (s *opStorage) add(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[c.id] = c
}

// client is a registered client, as zitadel's op.Client.
type client struct {
	id, secret string
	redirects  []string
	method     oidc.AuthMethod
	grants     []oidc.GrantType
	appType    op.ApplicationType
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return c.appType }
func (c *client) AuthMethod() oidc.AuthMethod         { return c.method }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType         { return c.grants }
func (c *client) LoginURL(id string) string            { return "/login/username?authRequestID=" + id }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *client) DevMode() bool                        { return false }
func (c *client) IsScopeAllowed(string) bool           { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
