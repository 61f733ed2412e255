package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/netpolicy"
)

// gatewayAudience is the audience of the tokens the test callers present
// to "the gateway".
const gatewayAudience = "https://gateway.test/mcp"

// callersFixture is one authorization server, one protected MCP server that
// records the Authorization headers it gets, the identity provider whose
// JWTs the gateway's callers present, and a store file.
type callersFixture struct {
	t    *testing.T
	op   *oauthtest.OP
	rs   *oauthtest.ResourceServer
	idp  *oauthtest.IdP
	hc   *http.Client
	path string
	// A and B are the two callers, users id1 and id2 at the OP.
	A, B Caller
}

func newCallersFixture(t *testing.T) *callersFixture {
	t.Helper()
	o := oauthtest.NewOP(t, nil)
	idp := oauthtest.NewIdP(t, "unused")
	return &callersFixture{
		t: t, op: o, idp: idp,
		rs:   oauthtest.NewResourceServer(t, o, nil),
		hc:   netpolicy.NewClient(nil),
		path: filepath.Join(t.TempDir(), "oauth.json"),
		A:    Caller{Issuer: idp.Issuer, Subject: oauthtest.Subject},
		B:    Caller{Issuer: idp.Issuer, Subject: oauthtest.Subject2},
	}
}

// callAs connects to the resource server through h and calls whoami.
func (f *callersFixture) callAs(ctx context.Context, h auth.OAuthHandler) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.rs.URL, HTTPClient: f.hc, OAuthHandler: h, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return "", err
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: oauthtest.WhoamiTool})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", errors.New("tool failed")
	}
	m, _ := res.StructuredContent.(map[string]any)
	user, _ := m["user"].(string)
	return user, nil
}

// bearers returns the distinct bearer tokens the resource server got.
func (f *callersFixture) bearers() map[string]bool {
	out := map[string]bool{}
	for _, a := range f.rs.Authorizations() {
		if tok, ok := strings.CutPrefix(a, "Bearer "); ok {
			out[tok] = true
		}
	}
	return out
}

// exchangeCallers returns the per-caller credentials of the resource
// server by token exchange, as the gateway's client "gw".
func (f *callersFixture) exchangeCallers(mut func(*CallersConfig)) *Callers {
	f.t.Helper()
	cfg := &CallersConfig{Server: "upstream", Resource: f.rs.URL, Mode: CallerExchange, HTTPClient: f.hc,
		Issuer: f.op.Issuer, Client: &ClientConfig{ID: "gw", Secret: "gw-secret"}}
	if mut != nil {
		mut(cfg)
	}
	c, err := NewCallers(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// subject returns caller's token at the gateway.
func (f *callersFixture) subject(c Caller) SubjectToken {
	return SubjectToken{Token: f.idp.AccessToken(f.t, c.Subject, gatewayAudience, time.Hour), Expiry: time.Now().Add(time.Hour)}
}

// TestCallersExchangeTwoCallers: two callers of one gateway reach the
// upstream each with a token exchanged for their own (RFC 8693), one
// exchange per caller whatever the number of sessions and concurrent
// requests; the callers' own tokens never reach the upstream; a caller's
// token is not accepted by another caller's handler; a caller without a
// token gets none.
func TestCallersExchangeTwoCallers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCallersFixture(t)
	f.op.AddExchangeClient("gw", "gw-secret")
	f.op.TrustSubjectTokens(f.idp, gatewayAudience)
	callers := f.exchangeCallers(nil)
	subA, subB := f.subject(f.A), f.subject(f.B)

	hA, hB := callers.Handler(f.A), callers.Handler(f.B)
	if err := hA.Present(f.A, subA); err != nil {
		t.Fatal(err)
	}
	if err := hB.Present(f.A, subA); err == nil {
		t.Fatal("B's handler accepted A's token")
	}
	// Before B presents a token, B's session gets nothing, and nothing of
	// A's reaches the upstream for B.
	if _, err := f.callAs(ctx, hB); !errors.Is(err, ErrNoSubjectToken) {
		t.Fatalf("B without a token: %v, want ErrNoSubjectToken", err)
	}
	if n := f.op.TokenExchanges(); n != 0 {
		t.Fatalf("%d exchanges for a caller without a token", n)
	}
	if err := hB.Present(f.B, subB); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		h    *CallerHandler
		want string
	}{{hA, oauthtest.Subject}, {hB, oauthtest.Subject2}, {hA, oauthtest.Subject}} {
		got, err := f.callAs(ctx, tc.h)
		if err != nil {
			t.Fatalf("%s: %v", tc.h.Caller(), err)
		}
		if got != tc.want {
			t.Errorf("%s reached the upstream as %q, want %q", tc.h.Caller(), got, tc.want)
		}
	}
	if n := f.op.TokenExchanges(); n != 2 {
		t.Errorf("token exchanges = %d, want 2 (one per caller; sessions share it)", n)
	}
	last := f.op.LastTokenExchange()
	if last.Get("resource") != f.rs.URL || last.Get("subject_token_type") != TokenTypeAccessToken ||
		last.Get("requested_token_type") != TokenTypeAccessToken || last.Get("scope") != "openid" {
		t.Errorf("exchange request = %v, want resource %s, access token types, scope openid", withoutToken(last), f.rs.URL)
	}
	if f.op.ClientAuth() != "post" {
		t.Errorf("client authentication = %q, want post (the OP lists it first)", f.op.ClientAuth())
	}
	got := f.bearers()
	if len(got) != 2 {
		t.Errorf("the upstream got %d distinct tokens, want 2 (one per caller)", len(got))
	}
	for _, sub := range []SubjectToken{subA, subB} {
		if got[sub.Token] {
			t.Error("a caller's own token reached the upstream")
		}
		for _, a := range f.rs.Authorizations() {
			if strings.Contains(a, sub.Token) {
				t.Error("a caller's own token reached the upstream in an Authorization header")
			}
		}
	}
	if id := hA.Identity(); !strings.Contains(id, oauthtest.Subject) || !strings.Contains(id, string(CallerExchange)) || strings.Contains(id, subA.Token) {
		t.Errorf("Identity = %q, want the caller and the mode, no token", id)
	}
}

// withoutToken is a form without its subject token, for messages.
func withoutToken(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		if k != "subject_token" {
			c[k] = vs
		}
	}
	return c
}

// TestCallersExchangeSingleFlight: 16 goroutines of two callers needing a
// token at once make one exchange per caller, and each caller's goroutines
// get that caller's token only.
func TestCallersExchangeSingleFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCallersFixture(t)
	f.op.AddExchangeClient("gw", "gw-secret")
	f.op.TrustSubjectTokens(f.idp, gatewayAudience)
	callers := f.exchangeCallers(nil)
	if _, err := callers.rediscover(ctx, nil, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	who := []Caller{f.A, f.B}
	const n = 16
	tokens := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		h := callers.Handler(who[i%2])
		if err := h.Present(who[i%2], f.subject(who[i%2])); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			<-start
			ts, err := h.TokenSource(ctx)
			if err != nil || ts == nil {
				errs[i] = fmt.Errorf("token source: %v", err)
				return
			}
			tok, err := ts.Token()
			errs[i] = err
			if err == nil {
				tokens[i] = tok.AccessToken
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
		if tokens[i] != tokens[i%2] {
			t.Errorf("goroutine %d of %s got another token than its caller's first", i, who[i%2])
		}
	}
	if tokens[0] == tokens[1] {
		t.Error("the two callers got the same token")
	}
	if got := f.op.TokenExchanges(); got != 2 {
		t.Errorf("token exchanges = %d, want 2", got)
	}
	// The tokens are the callers' at the OP.
	for i, want := range []string{oauthtest.Subject, oauthtest.Subject2} {
		ti, err := f.op.Userinfo(ctx, tokens[i], nil)
		if err != nil || ti.UserID != want {
			t.Errorf("token of %s is for %v (%v), want %s", who[i], ti, err, want)
		}
	}
}

// TestCallersExchangeRefusesAnotherIssuer: the upstream names an
// authorization server other than the configured issuer; the caller's
// token is sent to neither.
func TestCallersExchangeRefusesAnotherIssuer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCallersFixture(t)
	f.op.AddExchangeClient("gw", "gw-secret")
	f.op.TrustSubjectTokens(f.idp, gatewayAudience)
	callers := f.exchangeCallers(func(c *CallersConfig) { c.Issuer = f.idp.Issuer })
	h := callers.Handler(f.A)
	sub := f.subject(f.A)
	if err := h.Present(f.A, sub); err != nil {
		t.Fatal(err)
	}
	_, err := f.callAs(ctx, h)
	if !errors.Is(err, ErrIssuerMismatch) {
		t.Fatalf("err = %v, want ErrIssuerMismatch", err)
	}
	noSecrets(t, err.Error(), sub.Token)
	if f.op.TokenExchanges() != 0 || f.idp.LastExchange() != nil {
		t.Error("the caller's token was sent to an authorization server")
	}
	if len(f.bearers()) != 0 {
		t.Error("a token reached the upstream")
	}
}

// TestCallersExchangeErrorsCarryNoToken: the authorization server refuses
// the exchange echoing the subject token in its description, or answers
// the caller's own token back; neither token appears in the error, and the
// echoed one is never sent upstream.
func TestCallersExchangeErrorsCarryNoToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCallersFixture(t)
	f.op.AddExchangeClient("gw", "gw-secret")
	callers := f.exchangeCallers(nil)
	sub := f.subject(f.A)
	h := callers.Handler(f.A)
	if err := h.Present(f.A, sub); err != nil {
		t.Fatal(err)
	}
	// Not trusted yet: the OP refuses the subject token.
	_, err := f.callAs(ctx, h)
	if err == nil || !strings.Contains(err.Error(), "token exchange") {
		t.Fatalf("untrusted subject token: %v, want a token exchange error", err)
	}
	noSecrets(t, err.Error(), sub.Token, "gw-secret")
	f.op.SetTokenFault(func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "bad subject " + r.PostForm.Get("subject_token")})
	})
	_, err = f.callAs(ctx, h)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("echoing refusal: %v, want invalid_grant", err)
	}
	noSecrets(t, err.Error(), sub.Token, "gw-secret")
	f.op.SetTokenFault(func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, http.StatusOK, map[string]any{"access_token": r.PostForm.Get("subject_token"), "token_type": "Bearer",
			"issued_token_type": TokenTypeAccessToken, "expires_in": 300})
	})
	_, err = f.callAs(ctx, h)
	if err == nil || !strings.Contains(err.Error(), "caller's own token") {
		t.Fatalf("echoed subject token: %v, want a refusal", err)
	}
	noSecrets(t, err.Error(), sub.Token)
	f.op.SetTokenFault(func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, http.StatusOK, map[string]any{"access_token": "an-id-token-not-an-access-token", "token_type": "N_A",
			"issued_token_type": "urn:ietf:params:oauth:token-type:id_token"})
	})
	if _, err = f.callAs(ctx, h); err == nil || !strings.Contains(err.Error(), "want an access token") {
		t.Fatalf("an ID token issued: %v, want a refusal", err)
	}
	if got := f.bearers(); len(got) != 0 {
		t.Errorf("tokens reached the upstream: %d", len(got))
	}
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// TestCallersExchangePrivateKeyJWT: the gateway's client authenticates the
// exchange with private_key_jwt.
func TestCallersExchangePrivateKeyJWT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newCallersFixture(t)
	key, keyPEM := newECKey(t)
	keyFile := filepath.Join(t.TempDir(), "gw.pem")
	if err := os.WriteFile(keyFile, []byte(keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	f.op.AddKeyClient("gw-key", &key.PublicKey)
	f.op.TrustSubjectTokens(f.idp, gatewayAudience)
	callers := f.exchangeCallers(func(c *CallersConfig) {
		c.Client = &ClientConfig{ID: "gw-key", Key: &ClientKey{File: keyFile}}
		c.SubjectTokenType = TokenTypeJWT
	})
	h := callers.Handler(f.B)
	if err := h.Present(f.B, f.subject(f.B)); err != nil {
		t.Fatal(err)
	}
	got, err := f.callAs(ctx, h)
	if err != nil || got != oauthtest.Subject2 {
		t.Fatalf("whoami = %q, %v; want %s", got, err, oauthtest.Subject2)
	}
	if f.op.ClientAuth() != "private_key_jwt" || f.op.LastTokenExchange().Get("subject_token_type") != TokenTypeJWT {
		t.Errorf("client auth %q, subject type %q; want private_key_jwt and jwt", f.op.ClientAuth(), f.op.LastTokenExchange().Get("subject_token_type"))
	}
	// Logout revokes the exchanged token, authenticating with the key.
	tok := onlyKey(f.bearers())
	if err := callers.Logout(ctx, f.B); err != nil {
		t.Fatalf("logout: %v", err)
	}
	if _, err := f.op.Userinfo(ctx, tok, nil); err == nil {
		t.Error("the exchanged token still works after logout")
	}
}

func onlyKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// loginFixture adds to callersFixture the gateway's callback on a real
// socket and a store.
type loginFixture struct {
	*callersFixture
	cbURL   string
	logs    *bytes.Buffer
	logMu   *sync.Mutex
	verify  func(*http.Request, string, Caller) error
	handler http.Handler
	mu      sync.Mutex
	done    []string            // "server caller id" of each completion the callback reported
	logins  []*CallerLoginError // every login error needLogin saw
}

func newLoginFixture(t *testing.T) *loginFixture {
	t.Helper()
	f := &loginFixture{callersFixture: newCallersFixture(t), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		h := f.handler
		f.mu.Unlock()
		if h == nil || r.URL.Path != DefaultCallbackPath {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	f.cbURL = srv.URL + DefaultCallbackPath
	return f
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// callers returns per-caller login credentials over a new Store on the
// fixture's file (as a new process, or replica, would make them) and
// mounts them at the callback.
func (f *loginFixture) callers(mut func(*CallersConfig)) *Callers {
	f.t.Helper()
	cfg := &CallersConfig{Server: "upstream", Resource: f.rs.URL, Mode: CallerLogin, HTTPClient: f.hc,
		Store: newTestStore(f.t, f.path), RedirectURL: f.cbURL}
	if mut != nil {
		mut(cfg)
	}
	c, err := NewCallers(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	cb, err := NewCallback(&CallbackOptions{
		Verify: func(r *http.Request, server string, who Caller) error {
			f.mu.Lock()
			v := f.verify
			f.mu.Unlock()
			if v == nil {
				return nil
			}
			return v(r, server, who)
		},
		Log: slog.New(slog.NewTextHandler(lockedWriter{f.logMu, f.logs}, nil)),
		Done: func(server string, who Caller, id string) {
			f.mu.Lock()
			f.done = append(f.done, server+" "+who.Subject+" "+id)
			f.mu.Unlock()
		},
	}, c)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.handler = cb
	f.mu.Unlock()
	return c
}

// needLogin connects as h and returns the URL the caller must authorize
// at; anything but a *CallerLoginError for h's caller fails the test.
func (f *loginFixture) needLogin(ctx context.Context, h *CallerHandler) string {
	f.t.Helper()
	_, err := f.callAs(ctx, h)
	var le *CallerLoginError
	if !errors.As(err, &le) || !errors.Is(err, ErrLoginRequired) {
		f.t.Fatalf("%s: err = %v, want a *CallerLoginError", h.Caller(), err)
	}
	if le.Caller != h.Caller() || le.Server != "upstream" || le.URL == "" || !le.Expires.After(time.Now()) {
		f.t.Fatalf("login error %+v, want one for %s with a URL", le.CallerAuthorization, h.Caller())
	}
	if strings.Contains(err.Error(), le.URL) || strings.Contains(err.Error(), "state=") {
		f.t.Errorf("the error's message carries the authorization URL: %v", err)
	}
	if u, _ := url.Parse(le.URL); le.ID == "" || strings.Contains(le.URL, le.ID) || u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("resource") != f.rs.URL {
		f.t.Errorf("authorization %s at %s: want an ID not in the URL, PKCE S256 and the resource", le.ID, le.URL)
	}
	f.mu.Lock()
	f.logins = append(f.logins, le)
	f.mu.Unlock()
	return le.URL
}

// authorize plays the caller's browser at url, logged in at the OP as user,
// and then, when the callback shows a code, the caller's client giving it
// back through the error of the caller's request that gave url (as a
// gateway does).
func (f *loginFixture) authorize(ctx context.Context, user, authURL string) int {
	f.t.Helper()
	b := oauthtest.NewBrowserAs(user)
	if err := b.Authorize(ctx, authURL); err != nil {
		f.t.Fatal(err)
	}
	if code := b.LinkCode(); code != "" {
		if err := f.loginOf(authURL).Confirm(ctx, code); err != nil {
			f.t.Fatalf("confirming with the callback's code: %v", err)
		}
	}
	return b.LastStatus()
}

// loginOf returns the last login error needLogin saw with authURL.
func (f *loginFixture) loginOf(authURL string) *CallerLoginError {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.logins) - 1; i >= 0; i-- {
		if f.logins[i].URL == authURL {
			return f.logins[i]
		}
	}
	f.t.Fatal("no request failed with that authorization URL")
	return nil
}

// TestCallersLoginTwoCallers: two callers each authorize once through the
// URL their first call fails with, and then reach the upstream each with
// their own token; B, before authorizing, gets a login URL of its own and
// never A's token; one registration serves both; a new process (another
// Store and Callers on the file) needs no new login; Logout revokes.
func TestCallersLoginTwoCallers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLoginFixture(t)
	callers := f.callers(nil)
	hA, hB := callers.Handler(f.A), callers.Handler(f.B)

	urlA := f.needLogin(ctx, hA)
	if again := f.needLogin(ctx, hA); again != urlA {
		t.Error("a second call while A's authorization is pending gave another URL")
	}
	if status := f.authorize(ctx, oauthtest.Username, urlA); status != http.StatusOK {
		t.Fatalf("callback answered %d", status)
	}
	if got, err := f.callAs(ctx, hA); err != nil || got != oauthtest.Subject {
		t.Fatalf("A: whoami = %q, %v; want %s", got, err, oauthtest.Subject)
	}
	f.mu.Lock()
	if want := "upstream " + f.A.Subject + " " + f.logins[0].ID; len(f.done) != 1 || f.done[0] != want {
		t.Errorf("callback reported %q, want [%s]", f.done, want)
	}
	f.mu.Unlock()
	tokensA := f.bearers()

	urlB := f.needLogin(ctx, hB)
	if urlB == urlA {
		t.Fatal("B got A's authorization URL")
	}
	if got := f.bearers(); len(got) != len(tokensA) {
		t.Fatal("B's session sent a token before B authorized")
	}
	if status := f.authorize(ctx, oauthtest.Username2, urlB); status != http.StatusOK {
		t.Fatalf("callback answered %d", status)
	}
	if got, err := f.callAs(ctx, hB); err != nil || got != oauthtest.Subject2 {
		t.Fatalf("B: whoami = %q, %v; want %s", got, err, oauthtest.Subject2)
	}
	if got := f.bearers(); len(got) != 2 {
		t.Errorf("the upstream got %d distinct tokens, want 2", len(got))
	}
	if f.op.Registrations() != 1 {
		t.Errorf("registrations = %d, want 1 (shared by the callers)", f.op.Registrations())
	}
	// Per-caller entries are not servers' entries.
	store := newTestStore(t, f.path)
	if list, err := store.List(); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v; want no server entries", list, err)
	}
	eA, err := store.Get(callerKey("upstream", f.A))
	if err != nil || eA == nil || eA.Caller == nil || *eA.Caller != f.A || eA.Token == nil || eA.Pending != nil {
		t.Fatalf("A's entry = %v, %v", eA, err)
	}
	// A new process over the same file: no login.
	again := f.callers(nil)
	if got, err := f.callAs(ctx, again.Handler(f.A)); err != nil || got != oauthtest.Subject {
		t.Fatalf("A after a restart: %q, %v", got, err)
	}
	// Logout revokes A's grant and forgets it; B keeps his.
	if err := again.Logout(ctx, f.A); err != nil {
		t.Fatalf("logout: %v", err)
	}
	if _, err := f.op.Userinfo(ctx, eA.Token.AccessToken, nil); err == nil {
		t.Error("A's token still works after logout")
	}
	if e, _ := store.Get(callerKey("upstream", f.A)); e != nil {
		t.Error("A's entry is still stored after logout")
	}
	f.needLogin(ctx, again.Handler(f.A))
	if got, err := f.callAs(ctx, again.Handler(f.B)); err != nil || got != oauthtest.Subject2 {
		t.Errorf("B after A's logout: %q, %v", got, err)
	}
	// No error and no log line carries a token.
	eB, _ := store.Get(callerKey("upstream", f.B))
	secrets := []string{eA.Token.AccessToken, eA.Token.RefreshToken, eB.Token.AccessToken, eB.Token.RefreshToken}
	f.mu.Lock()
	for _, le := range f.logins {
		noSecrets(t, le.Error(), secrets...)
	}
	f.mu.Unlock()
	f.logMu.Lock()
	noSecrets(t, f.logs.String(), secrets...)
	f.logMu.Unlock()
}

// TestCallersLoginBindings: an entry is used only for its caller, its
// resource and its issuer. Each mismatch is refused (the caller must
// authorize), and the entry's token never reaches the upstream.
func TestCallersLoginBindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLoginFixture(t)
	callers := f.callers(nil)
	f.authorize(ctx, oauthtest.Username, f.needLogin(ctx, callers.Handler(f.A)))
	store := newTestStore(t, f.path)
	eA, err := store.Get(callerKey("upstream", f.A))
	if err != nil || eA == nil || eA.Token == nil {
		t.Fatalf("A's entry: %v, %v", eA, err)
	}
	tokA := eA.Token.AccessToken
	for _, tc := range []struct {
		name   string
		caller Caller
		edit   func(e *Entry)
	}{
		{"A's entry under B's key", f.B, func(e *Entry) { *e = *eA }},
		{"another caller of the same subject at another issuer", Caller{Issuer: "https://other.example", Subject: f.A.Subject}, func(e *Entry) { *e = *eA }},
		{"another resource", f.A, func(e *Entry) { e.Resource = canonicalResource(f.rs.URL + "/other") }},
		{"another issuer", f.A, func(e *Entry) { e.Client.Issuer = "http://127.0.0.1:9/" }},
		{"no caller", f.A, func(e *Entry) { e.Caller = nil }},
	} {
		key := callerKey("upstream", tc.caller)
		if err := store.Update(ctx, key, func(e *Entry) error { tc.edit(e); return nil }); err != nil {
			t.Fatal(err)
		}
		before := f.rs.Authorizations()
		c := f.callers(nil) // a new process: nothing in memory
		f.needLogin(ctx, c.Handler(tc.caller))
		for _, a := range f.rs.Authorizations()[len(before):] {
			if strings.Contains(a, tokA) {
				t.Errorf("%s: A's token reached the upstream", tc.name)
			}
		}
		// The new authorization replaced what was there.
		e, err := store.Get(key)
		if err != nil || e == nil || e.Token != nil || e.Caller == nil || *e.Caller != tc.caller || e.Pending == nil {
			t.Errorf("%s: entry after the refusal = %v, %v; want the caller's pending authorization only", tc.name, e, err)
		}
		// Restore A's entry for the next case.
		if err := store.Update(ctx, callerKey("upstream", f.A), func(e *Entry) error { *e = *eA; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := f.callAs(ctx, f.callers(nil).Handler(f.A)); err != nil || got != oauthtest.Subject {
		t.Errorf("A with the restored entry: %q, %v", got, err)
	}
}

// TestCallersLoginRefreshSingleFlight: both callers' tokens expired, 16
// goroutines over two "processes" (two Stores on one file) ask at once:
// one refresh per caller reaches the OP, with the RFC 8707 resource, and
// each goroutine gets its caller's token.
func TestCallersLoginRefreshSingleFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLoginFixture(t)
	callers := f.callers(nil)
	f.authorize(ctx, oauthtest.Username, f.needLogin(ctx, callers.Handler(f.A)))
	f.authorize(ctx, oauthtest.Username2, f.needLogin(ctx, callers.Handler(f.B)))
	store := newTestStore(t, f.path)
	old := map[Caller]string{}
	for _, c := range []Caller{f.A, f.B} {
		err := store.Update(ctx, callerKey("upstream", c), func(e *Entry) error {
			old[c] = e.Token.AccessToken
			e.Token.Obtained, e.Token.Expiry = time.Now().Add(-time.Hour), time.Now().Add(-time.Second)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	procs := []*Callers{f.callers(nil), f.callers(nil)}
	for _, p := range procs {
		if _, err := p.rediscover(ctx, nil, f.rs.URL); err != nil {
			t.Fatal(err)
		}
	}
	who := []Caller{f.A, f.B}
	const n = 16
	tokens := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		h := procs[(i/2)%2].Handler(who[i%2])
		wg.Go(func() {
			<-start
			ts, err := h.TokenSource(ctx)
			if err != nil || ts == nil {
				errs[i] = fmt.Errorf("token source: %v, %v", ts, err)
				return
			}
			tok, err := ts.Token()
			errs[i] = err
			if err == nil {
				tokens[i] = tok.AccessToken
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
		if tokens[i] != tokens[i%2] {
			t.Errorf("goroutine %d of %s got another token than its caller's first", i, who[i%2])
		}
	}
	for i, c := range who {
		if tokens[i] == old[c] {
			t.Errorf("%s: not refreshed", c)
		}
		ti, err := f.op.Userinfo(ctx, tokens[i], nil)
		if err != nil || ti.UserID != c.Subject {
			t.Errorf("%s's refreshed token is for %v (%v)", c, ti, err)
		}
	}
	if got := f.op.Refreshes(); got != 2 {
		t.Errorf("refreshes at the OP = %d, want 2 (one per caller)", got)
	}
	if got := f.op.RefreshResource(); got != f.rs.URL {
		t.Errorf("refresh resource = %q, want %s", got, f.rs.URL)
	}
}

// TestCallersCallbackRefusals: a forged state, a state of another caller's
// entry, a browser the gateway's Verify hook refuses, and a replay are
// refused without redeeming anything; then the real response completes the
// authorization. Nothing the callback logs or answers carries a code, a
// state or a token.
func TestCallersCallbackRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLoginFixture(t)
	callers := f.callers(nil)
	authURL := f.needLogin(ctx, callers.Handler(f.A))
	f.needLogin(ctx, callers.Handler(f.B))

	// The browser stops at the redirect, as if the user copied it.
	b := oauthtest.NewBrowserAs(oauthtest.Username)
	b.StopAt(f.cbURL)
	if err := b.Authorize(ctx, authURL); err != nil {
		t.Fatal(err)
	}
	redirect, err := url.Parse(b.Stopped())
	if err != nil || redirect.Query().Get("code") == "" {
		t.Fatalf("no redirect with a code: %q", b.Stopped())
	}
	code, state := redirect.Query().Get("code"), redirect.Query().Get("state")
	get := func(q url.Values) (int, string) {
		t.Helper()
		resp, err := http.Get(f.cbURL + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("callback headers %v, want no-store and no-referrer", resp.Header)
		}
		return resp.StatusCode, string(body)
	}
	_, id, _ := parseCallerState(state)
	_, idB, _ := parseCallerState(callerState("upstream", f.B))
	server := "upstream"
	withState := func(s string) url.Values {
		q := redirect.Query()
		q.Set("state", s)
		return q
	}
	var bodies []string
	for _, tc := range []struct {
		name   string
		q      url.Values
		status int
	}{
		{"no state", url.Values{"code": {code}}, http.StatusBadRequest},
		{"unknown server", withState("other" + stateSep + id + stateSep + "X"), http.StatusBadRequest},
		{"forged random part", withState(server + stateSep + id + stateSep + "FORGED"), http.StatusBadRequest},
		{"B's entry", withState(server + stateSep + idB + stateSep + strings.Split(state, stateSep)[2]), http.StatusBadRequest},
		{"an error response", url.Values{"state": {state}, "error": {"access_denied"}}, http.StatusBadRequest},
		{"another issuer", func() url.Values { q := redirect.Query(); q.Set("iss", "http://127.0.0.1:9"); return q }(), http.StatusBadRequest},
	} {
		status, body := get(tc.q)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, status, tc.status, body)
		}
		bodies = append(bodies, body)
	}
	f.mu.Lock()
	f.verify = func(r *http.Request, server string, who Caller) error {
		if server != "upstream" || who != f.A {
			t.Errorf("Verify asked about %s of %q, want A of upstream", who, server)
		}
		return errors.New("no gateway session cookie")
	}
	f.mu.Unlock()
	if status, body := get(redirect.Query()); status != http.StatusForbidden {
		t.Errorf("refused browser: status %d, want 403 (%s)", status, body)
	}
	f.mu.Lock()
	f.verify = nil
	f.mu.Unlock()
	if f.op.Exchanges() != 0 {
		t.Fatalf("%d codes redeemed by refused responses", f.op.Exchanges())
	}
	status, body := get(redirect.Query())
	linkCode := regexp.MustCompile(`[A-Z2-7]{5}-[A-Z2-7]{5}`).FindString(body)
	if status != http.StatusOK || linkCode == "" {
		t.Fatalf("the real response: %d %s", status, body)
	}
	bodies = append(bodies, body)
	if status, _ := get(redirect.Query()); status != http.StatusBadRequest {
		t.Errorf("replay: status %d, want 400", status)
	}
	if f.op.Exchanges() != 1 {
		t.Errorf("codes redeemed = %d, want 1", f.op.Exchanges())
	}
	if err := f.loginOf(authURL).Confirm(ctx, linkCode); err != nil {
		t.Fatalf("A's client confirming: %v", err)
	}
	if got, err := f.callAs(ctx, callers.Handler(f.A)); err != nil || got != oauthtest.Subject {
		t.Fatalf("A: %q, %v", got, err)
	}
	e, _ := newTestStore(t, f.path).Get(callerKey("upstream", f.A))
	f.logMu.Lock()
	logs := f.logs.String()
	f.logMu.Unlock()
	if !strings.Contains(logs, "authorized") || !strings.Contains(logs, oauthtest.Subject) {
		t.Errorf("logs lack the outcome: %s", logs)
	}
	for _, text := range append(bodies, logs) {
		noSecrets(t, text, code, strings.Split(state, stateSep)[2], e.Token.AccessToken, e.Token.RefreshToken)
	}
}

// TestCallersLoginConfiguredClient: a configured confidential client at
// the authorization server serves every caller's login and refresh; a
// step-up (insufficient_scope) asks the caller to authorize again for
// more.
func TestCallersLoginConfiguredClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLoginFixture(t)
	f.op.AddLoginClient("gw-login", "gw-login-secret", f.cbURL)
	callers := f.callers(func(c *CallersConfig) {
		c.Client = &ClientConfig{ID: "gw-login", Secret: "gw-login-secret"}
		c.Issuer = f.op.Issuer
	})
	f.authorize(ctx, oauthtest.Username2, f.needLogin(ctx, callers.Handler(f.B)))
	if got, err := f.callAs(ctx, callers.Handler(f.B)); err != nil || got != oauthtest.Subject2 {
		t.Fatalf("B: %q, %v", got, err)
	}
	if f.op.Registrations() != 0 {
		t.Errorf("registrations = %d with a configured client", f.op.Registrations())
	}
	e, err := newTestStore(t, f.path).Get(callerKey("upstream", f.B))
	if err != nil || e == nil || e.Client == nil || e.Client.ID != "gw-login" || e.Client.Secret != "" {
		t.Fatalf("B's entry %v, %v: want the configured client, its secret not stored", e, err)
	}
	raw, err := os.ReadFile(f.path)
	if err != nil || bytes.Contains(raw, []byte("gw-login-secret")) || bytes.Contains(raw, []byte(e.Token.AccessToken)) {
		t.Error("the store file holds a secret or token in plain text")
	}
	// The upstream asks for more scopes: B must authorize again, for the
	// union.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.rs.URL, nil)
	req.Header.Set("Authorization", "Bearer "+e.Token.AccessToken)
	resp := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Www-Authenticate": {`Bearer error="insufficient_scope", scope="openid profile"`}}, Body: io.NopCloser(strings.NewReader(""))}
	err = callers.Handler(f.B).Authorize(ctx, req, resp)
	var le *CallerLoginError
	if !errors.As(err, &le) {
		t.Fatalf("step-up: %v, want a *CallerLoginError", err)
	}
	u, _ := url.Parse(le.URL)
	if got := strings.Fields(u.Query().Get("scope")); !covers(got, []string{"openid", "profile"}) || u.Query().Get("client_id") != "gw-login" {
		t.Errorf("step-up URL asks scope %q as %q, want openid and profile as gw-login", got, u.Query().Get("client_id"))
	}
}

// TestCallersConfigErrors: invalid configurations name what is wrong.
func TestCallersConfigErrors(t *testing.T) {
	t.Parallel()
	hc := netpolicy.NewClient(nil)
	store := newTestStore(t, filepath.Join(t.TempDir(), "oauth.json"))
	ok := CallersConfig{Server: "up", Resource: "https://mcp.example.com/mcp", HTTPClient: hc}
	for _, tc := range []struct {
		name string
		mut  func(*CallersConfig)
		want string
	}{
		{"no mode", func(c *CallersConfig) {}, "mode"},
		{"bad server name", func(c *CallersConfig) { c.Mode, c.Server = CallerExchange, "a:b" }, "not a configured server's"},
		{"exchange without issuer", func(c *CallersConfig) {
			c.Mode, c.Client = CallerExchange, &ClientConfig{ID: "gw", Secret: "s"}
		}, "needs the issuer"},
		{"exchange without a secret", func(c *CallersConfig) {
			c.Mode, c.Issuer, c.Client = CallerExchange, "https://as.example.com", &ClientConfig{ID: "gw"}
		}, "with a secret or a private key"},
		{"exchange with a bad token type", func(c *CallersConfig) {
			c.Mode, c.Issuer, c.Client, c.SubjectTokenType = CallerExchange, "https://as.example.com", &ClientConfig{ID: "gw", Secret: "s"}, "id_token"
		}, "subject token type"},
		{"login without store", func(c *CallersConfig) { c.Mode, c.RedirectURL = CallerLogin, "https://gw.example.com/oauth/callback" }, "needs a store"},
		{"login without redirect", func(c *CallersConfig) { c.Mode, c.Store = CallerLogin, store }, "redirect URL"},
		{"login with a plain http redirect", func(c *CallersConfig) {
			c.Mode, c.Store, c.RedirectURL = CallerLogin, store, "http://gw.example.com/oauth/callback"
		}, "loopback"},
		{"login with an audience", func(c *CallersConfig) {
			c.Mode, c.Store, c.RedirectURL, c.Audience = CallerLogin, store, "https://gw.example.com/cb", "x"
		}, "for token exchange"},
	} {
		cfg := ok
		tc.mut(&cfg)
		_, err := NewCallers(&cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// The callback takes login servers only, once each.
	ex, err := NewCallers(&CallersConfig{Server: "up", Resource: "https://mcp.example.com/mcp", HTTPClient: hc, Mode: CallerExchange,
		Issuer: "https://as.example.com", Client: &ClientConfig{ID: "gw", Secret: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCallback(nil, ex); err == nil {
		t.Error("a callback for token exchange")
	}
}

// TestCallerStateRoundTrip: a state names its server and caller.
func TestCallerStateRoundTrip(t *testing.T) {
	t.Parallel()
	c := Caller{Issuer: "https://idp.example.com", Subject: "alice@example.com"}
	st := callerState("my.server-1", c)
	server, id, ok := parseCallerState(st)
	if !ok || server != "my.server-1" || id != c.id() {
		t.Fatalf("parse(%q) = %q, %q, %v", st, server, id, ok)
	}
	if strings.Contains(st, "alice") {
		t.Error("the state names the caller in the clear")
	}
	for _, bad := range []string{"", "x", "a~b~c", "a~" + c.id() + "~", "~" + c.id() + "~x", "a~" + strings.Repeat("g", 32) + "~x", "a~b~c~d"} {
		if _, _, ok := parseCallerState(bad); ok {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
	if (Caller{Subject: "a"}).id() == (Caller{Issuer: "x", Subject: "a"}).id() {
		t.Error("callers of two issuers share an id")
	}
}

// TestCallersLoginConfidentialClientOnlyAtItsIssuer: an upstream whose
// metadata names an authorization server of its own choosing, which
// records what it receives. A login per caller with a client secret and
// no issuer is a configuration error: otherwise a caller's completed login
// redeems its code there, with the secret. With the issuer configured, the
// upstream's server is refused before anything is sent to it.
func TestCallersLoginConfidentialClientOnlyAtItsIssuer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLoginFixture(t)
	var mu sync.Mutex
	var received []string // the token requests the hostile server got
	hostileAS := httptest.NewServer(nil)
	defer hostileAS.Close()
	hostileAS.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{
				"issuer": hostileAS.URL, "authorization_endpoint": hostileAS.URL + "/authorize", "token_endpoint": hostileAS.URL + "/token",
				"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			})
		case "/authorize": // signs in whoever comes, and sends them back with a code
			q := r.URL.Query()
			http.Redirect(w, r, q.Get("redirect_uri")+"?code=c0de&state="+url.QueryEscape(q.Get("state"))+"&iss="+url.QueryEscape(hostileAS.URL), http.StatusFound)
		case "/token":
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			received = append(received, r.Header.Get("Authorization")+" "+string(body))
			mu.Unlock()
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
		default:
			http.NotFound(w, r)
		}
	})
	upstream := httptest.NewServer(nil)
	defer upstream.Close()
	upstream.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"resource": upstream.URL + "/mcp", "authorization_servers": []string{hostileAS.URL}})
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+upstream.URL+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	login := func(issuer string) error {
		cfg := &CallersConfig{Server: "upstream", Resource: upstream.URL + "/mcp", Mode: CallerLogin, HTTPClient: f.hc,
			Store: newTestStore(t, f.path), RedirectURL: f.cbURL, Issuer: issuer, Client: &ClientConfig{ID: "gw", Secret: "gw-secret"}}
		c, err := NewCallers(cfg)
		if err != nil {
			return err
		}
		cb, err := NewCallback(nil, c)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.handler = cb
		f.mu.Unlock()
		a, err := c.Begin(ctx, f.A)
		if err != nil {
			return err
		}
		// A caller's browser completes the login the upstream's server
		// offers.
		resp, err := f.hc.Get(a.URL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}

	err := login("")
	if err == nil || !strings.Contains(err.Error(), "needs the issuer") {
		t.Errorf("a login per caller with a secret and no issuer: %v, want a configuration error", err)
	}
	if err := login(f.op.Issuer); !errors.Is(err, ErrIssuerMismatch) {
		t.Errorf("the upstream naming another issuer than the configured one: %v, want ErrIssuerMismatch", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range received {
		if strings.Contains(r, "gw-secret") || strings.Contains(r, "Basic ") {
			t.Errorf("the upstream's authorization server received the client's secret: %q", r)
		}
	}
	if len(received) != 0 {
		t.Errorf("the upstream's authorization server received %d token requests", len(received))
	}
}

// TestCallersLoginCompletedBySomeoneElseGivesTheCallerNothing: caller A
// passes A's authorization URL to B, who signs in at the upstream's
// authorization server as B. The callback redeems the code, but the
// account linked is held for the code B's browser was shown: A's calls
// still send nothing and A is asked for the code; guessing it fails and,
// after a few tries, drops the link; B's caller cannot claim it either.
// A's own sign-in, confirmed with A's own code, reaches the upstream as A.
func TestCallersLoginCompletedBySomeoneElseGivesTheCallerNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLoginFixture(t)
	callers := f.callers(nil)
	hA := callers.Handler(f.A)
	urlA := f.needLogin(ctx, hA)

	b := oauthtest.NewBrowserAs(oauthtest.Username2) // B's browser, at A's URL
	if err := b.Authorize(ctx, urlA); err != nil || b.LastStatus() != http.StatusOK || b.LinkCode() == "" {
		t.Fatalf("B completing A's URL: %v, status %d, page %q", err, b.LastStatus(), b.LastBody())
	}
	awaiting := func() *CallerLoginError {
		t.Helper()
		_, err := f.callAs(ctx, hA)
		var le *CallerLoginError
		if !errors.As(err, &le) {
			t.Fatalf("A's call after B signed in: %v, want a *CallerLoginError", err)
		}
		return le
	}
	le := awaiting()
	if !le.AwaitsCode || le.URL != "" || le.Caller != f.A {
		t.Errorf("A's call: %+v, want A asked for the code", le.CallerAuthorization)
	}
	if len(f.bearers()) != 0 {
		t.Fatal("A's call sent a token before A confirmed anything")
	}
	if err := callers.Confirm(ctx, f.B, b.LinkCode()); !errors.Is(err, ErrLinkCode) {
		t.Errorf("B's caller confirming A's link: %v, want ErrLinkCode", err)
	}
	for i := range maxLinkTries {
		err := le.Confirm(ctx, fmt.Sprintf("AAAAA-AAAA%d", i+2))
		if !errors.Is(err, ErrLinkCode) {
			t.Fatalf("A guessing the code: %v, want ErrLinkCode", err)
		}
	}
	if le := awaiting(); le.AwaitsCode || le.URL == "" {
		t.Errorf("after %d wrong codes: %+v, want a new authorization", maxLinkTries, le.CallerAuthorization)
	}
	if err := le.Confirm(ctx, b.LinkCode()); !errors.Is(err, ErrLinkCode) {
		t.Errorf("the right code after the link was dropped: %v, want ErrLinkCode", err)
	}
	if e, err := newTestStore(t, f.path).Get(callerKey("upstream", f.A)); err != nil || e == nil || e.Token != nil || e.Linked != nil {
		t.Fatalf("A's entry: %v, %v; want no token and no link", e, err)
	}
	if len(f.bearers()) != 0 {
		t.Fatal("a token reached the upstream for A")
	}

	// A signs in and gives A's own code: A reaches the upstream as A.
	if status := f.authorize(ctx, oauthtest.Username, f.needLogin(ctx, hA)); status != http.StatusOK {
		t.Fatalf("A's own sign-in: callback answered %d", status)
	}
	if got, err := f.callAs(ctx, hA); err != nil || got != oauthtest.Subject {
		t.Errorf("A after confirming: %q, %v; want %s", got, err, oauthtest.Subject)
	}
}
