package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// testOP is an OpenID provider built from zitadel/oidc's op package, its
// example in-memory storage and its example login UI, on a real socket.
// zitadel's op has no RFC 7591 endpoint, so the test adds one (/register)
// that creates clients in a registry the storage consults; everything
// else (authorization, PKCE, login, codes, tokens, refresh with rotation,
// revocation, userinfo, introspection) is zitadel's.
type testOP struct {
	issuer string
	st     *opStorage

	clientAuth    atomic.Value // "basic" or "post": how the last token request authenticated
	registrations atomic.Int32 // successful RFC 7591 registrations
	refreshes     atomic.Int32 // refresh_token grants received
	exchanges     atomic.Int32 // authorization_code grants received

	mu sync.Mutex
	// mutate, if set, edits the discovery document before it is served.
	mutate func(map[string]any)
	// tokenFault, if set, answers token requests instead of zitadel.
	tokenFault func(w http.ResponseWriter, r *http.Request)
}

// opStorage is zitadel's example storage with the client registry
// replaced by one that registration can add to.
type opStorage struct {
	*storage.Storage
	mu      sync.Mutex
	clients map[string]*regClient
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

// SetIntrospectionFromToken lets the service user introspect its own
// client_credentials tokens: the example storage adds user info to every
// active answer and fails ("user not found") for a subject that is not a
// user, after it has checked the token, its expiry and its audience.
func (s *opStorage) SetIntrospectionFromToken(ctx context.Context, r *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	err := s.Storage.SetIntrospectionFromToken(ctx, r, tokenID, subject, clientID)
	if err != nil && err.Error() == "user not found" && subject == clientID {
		r.Subject, r.ClientID = subject, clientID
		return nil
	}
	return err
}

func (s *opStorage) add(c *regClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[c.id] = c
}

func (s *opStorage) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, id)
}

// regClient is a registered client, as zitadel's op.Client.
type regClient struct {
	id, secret string
	redirects  []string
	method     oidc.AuthMethod
	grants     []oidc.GrantType
	appType    op.ApplicationType
}

func (c *regClient) GetID() string                       { return c.id }
func (c *regClient) RedirectURIs() []string              { return c.redirects }
func (c *regClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *regClient) ApplicationType() op.ApplicationType { return c.appType }
func (c *regClient) AuthMethod() oidc.AuthMethod         { return c.method }
func (c *regClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *regClient) GrantTypes() []oidc.GrantType         { return c.grants }
func (c *regClient) LoginURL(id string) string            { return "/login/username?authRequestID=" + id }
func (c *regClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *regClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *regClient) DevMode() bool                        { return false }
func (c *regClient) IsScopeAllowed(string) bool           { return false }
func (c *regClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *regClient) ClockSkew() time.Duration             { return 0 }
func (c *regClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *regClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func newTestOP(t *testing.T) *testOP {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	o := &testOP{issuer: "http://" + srv.Listener.Addr().String()}
	st := storage.NewStorageWithClients(storage.NewUserStore(o.issuer), map[string]*storage.Client{})
	o.st = &opStorage{Storage: st, clients: map[string]*regClient{}}
	// The service user of zitadel's example storage, for client_credentials
	// and as the resource server's introspection client.
	o.st.add(&regClient{id: "sid1", secret: "verysecret", method: oidc.AuthMethodBasic,
		grants: []oidc.GrantType{oidc.GrantTypeClientCredentials}, appType: op.ApplicationTypeWeb})
	router := exampleop.SetupServer(o.issuer, o.st, nil, false)
	srv.Config.Handler = o.wrap(router)
	srv.Start()
	t.Cleanup(srv.Close)
	return o
}

// wrap adds registration, the discovery edits and the token probes.
func (o *testOP) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/register" && r.Method == http.MethodPost && r.URL.Query().Has("refuse"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_redirect_uri","error_description":"loopback redirects are not allowed here"}`)
			return
		case r.URL.Path == "/register" && r.Method == http.MethodPost:
			o.register(w, r)
			return
		case r.URL.Path == "/.well-known/openid-configuration":
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var doc map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				http.Error(w, "bad discovery", 500)
				return
			}
			doc["registration_endpoint"] = o.issuer + "/register"
			o.mu.Lock()
			if o.mutate != nil {
				o.mutate(doc)
			}
			o.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(doc)
			return
		case r.URL.Path == "/oauth/token":
			r.ParseForm()
			if _, _, ok := r.BasicAuth(); ok {
				o.clientAuth.Store("basic")
			} else if r.PostForm.Has("client_secret") {
				o.clientAuth.Store("post")
			}
			switch r.PostForm.Get("grant_type") {
			case "refresh_token":
				o.refreshes.Add(1)
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

func (o *testOP) setMutate(f func(map[string]any)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mutate = f
}

func (o *testOP) setTokenFault(f func(http.ResponseWriter, *http.Request)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tokenFault = f
}

// register is the test's RFC 7591 endpoint over the storage's registry.
func (o *testOP) register(w http.ResponseWriter, r *http.Request) {
	var meta oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"invalid_client_metadata","error_description":"redirect_uris required"}`)
		return
	}
	c := &regClient{id: "dyn-" + rand.Text()[:12], redirects: meta.RedirectURIs, method: oidc.AuthMethodNone,
		grants: []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}, appType: op.ApplicationTypeNative}
	if meta.TokenEndpointAuthMethod == "client_secret_basic" || meta.TokenEndpointAuthMethod == "client_secret_post" {
		c.secret = rand.Text()
		c.method = oidc.AuthMethod(meta.TokenEndpointAuthMethod)
	}
	if meta.ApplicationType == "web" {
		c.appType = op.ApplicationTypeWeb
	}
	o.st.add(c)
	o.registrations.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{
		"client_id":                  c.id,
		"client_secret":              c.secret,
		"redirect_uris":              c.redirects,
		"token_endpoint_auth_method": string(c.method),
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"client_id_issued_at":        time.Now().Unix(),
	})
}

// userinfo checks a token at the OP's userinfo endpoint: the resource
// server's token verifier.
func (o *testOP) userinfo(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.issuer+"/userinfo", nil)
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

// introspect checks a token with RFC 7662 as the service user: the
// verifier for client_credentials tokens (whose audience is that user).
func (o *testOP) introspect(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	form := url.Values{"token": {token}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, o.issuer+"/oauth/introspect", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("sid1", "verysecret")
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

// browser plays the user: it follows an authorization URL, logs in
// through zitadel's example login form, and lets the OP redirect it back.
type browser struct {
	t      *testing.T
	client *http.Client
	opened atomic.Int32
	// stopAt, if set, stops before following a redirect to a URL with this
	// prefix; the redirect URL is then recorded in stopped.
	stopAt  string
	stopped string
	// tamper, if set, rewrites the redirect back to the client.
	tamper func(*url.URL)
	// lastStatus is the status of the final response.
	lastStatus int
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t}
	b.client = &http.Client{Jar: jar, Timeout: 30 * time.Second}
	b.client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if b.stopAt != "" && strings.HasPrefix(req.URL.String(), b.stopAt) {
			b.stopped = req.URL.String()
			return http.ErrUseLastResponse
		}
		if b.tamper != nil && req.URL.Query().Get("code") != "" {
			b.tamper(req.URL)
		}
		return nil
	}
	return b
}

// open is a Loopback.Open: it runs the whole user side synchronously.
func (b *browser) open(ctx context.Context, authURL string) error {
	b.opened.Add(1)
	return b.authorize(ctx, authURL)
}

func (b *browser) authorize(ctx context.Context, authURL string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" || !bytes.Contains(page, []byte(`name="password"`)) {
		return fmt.Errorf("no login form at %s (HTTP %d): %.300s", resp.Request.URL, resp.StatusCode, page)
	}
	login := resp.Request.URL.ResolveReference(&url.URL{Path: "/login/username"})
	form := url.Values{"id": {id}, "username": {"test-user@127.0.0.1"}, "password": {"verysecure"}}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, login.String(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = b.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	b.lastStatus = resp.StatusCode
	return nil
}

// resourceServer is an MCP server behind bearer auth (go-sdk's
// RequireBearerToken) that publishes RFC 9728 metadata naming the OP.
type resourceServer struct {
	url   string
	calls atomic.Int32 // tool calls served
}

type rsOptions struct {
	verify auth.TokenVerifier
	// prm edits the metadata before it is served.
	prm func(*oauthex.ProtectedResourceMetadata)
	// resourceMetadataURL overrides the URL in WWW-Authenticate.
	resourceMetadataURL string
}

func newResourceServer(t *testing.T, o *testOP, opts *rsOptions) *resourceServer {
	t.Helper()
	if opts == nil {
		opts = &rsOptions{}
	}
	if opts.verify == nil {
		opts.verify = o.userinfo
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	rs := &resourceServer{url: base + "/mcp"}
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	type whoami struct {
		User string `json:"user"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "says who the token belongs to"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			rs.calls.Add(1)
			return nil, whoami{User: req.Extra.TokenInfo.UserID}, nil
		})
	prm := &oauthex.ProtectedResourceMetadata{Resource: rs.url, AuthorizationServers: []string{o.issuer}, ScopesSupported: []string{"openid"}}
	if opts.prm != nil {
		opts.prm(prm)
	}
	prmURL := base + "/.well-known/oauth-protected-resource/mcp"
	if opts.resourceMetadataURL != "" {
		prmURL = opts.resourceMetadataURL
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.RequireBearerToken(opts.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: prmURL, AllowMissingExpiration: true,
	})(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(prm))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return rs
}
