package oauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/netpolicy"
	"golang.org/x/oauth2"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	// zitadel's example OP logs every request through the default logger.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

// cheap keeps the tests fast; the parameters are still authenticated.
var cheap = &Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}

const testPassphrase = "correct horse battery staple"

func newTestStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := NewStore(path, &StoreOptions{Passphrase: testPassphrase, Argon2: cheap})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixture is one OP, one protected MCP server and one store file.
type fixture struct {
	t       *testing.T
	op      *oauthtest.OP
	rs      *oauthtest.ResourceServer
	path    string
	hc      *http.Client
	browser *oauthtest.Browser
}

func newFixture(t *testing.T) *fixture {
	o := oauthtest.NewOP(t, nil)
	return &fixture{
		t:       t,
		op:      o,
		rs:      oauthtest.NewResourceServer(t, o, nil),
		path:    filepath.Join(t.TempDir(), "conf", "oauth.json"),
		hc:      netpolicy.NewClient(nil),
		browser: oauthtest.NewBrowser(),
	}
}

// handler returns a handler over a new Store on the fixture's file, as a
// new process would make it. mode: "login" (loopback with the browser),
// "none" (may not prompt).
func (f *fixture) handler(mode string) *Handler {
	f.t.Helper()
	cfg := &HandlerConfig{Server: "demo", Resource: f.rs.URL, Store: newTestStore(f.t, f.path), HTTPClient: f.hc}
	if mode == "login" {
		cfg.Fetcher = &Loopback{Open: f.browser.Open, Out: io.Discard}
	}
	h, err := NewHandler(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// connect connects a go-sdk client through h and calls the tool.
func (f *fixture) call(ctx context.Context, h *Handler) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.rs.URL, HTTPClient: f.hc, OAuthHandler: h}, nil)
	if err != nil {
		return "", err
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
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

// expire makes the stored access token expired, as time passing would.
func (f *fixture) expire() {
	f.t.Helper()
	err := newTestStore(f.t, f.path).Update(context.Background(), "demo", func(e *Entry) error {
		e.Token.Obtained = time.Now().Add(-time.Hour)
		e.Token.Expiry = time.Now().Add(-time.Second)
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) entry() *Entry {
	f.t.Helper()
	e, err := newTestStore(f.t, f.path).Get("demo")
	if err != nil {
		f.t.Fatal(err)
	}
	if e == nil {
		f.t.Fatal("no entry stored")
	}
	return e
}

// noSecrets fails if msg contains any of the secrets, or any 12-byte
// piece of one: a truncated secret is still a leak.
func noSecrets(t *testing.T, msg string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s == "" {
			continue
		}
		n := min(12, len(s))
		for i := 0; i+n <= len(s); i++ {
			if strings.Contains(msg, s[i:i+n]) {
				t.Errorf("message reveals (part of) a secret: %q", msg)
				break
			}
		}
	}
}

func TestBrowserLoginRefreshRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)

	// First connect: 401, discovery, registration, browser login, token.
	user, err := f.call(ctx, f.handler("login"))
	if err != nil {
		t.Fatalf("first connect: %v", err)
	}
	if user != "id1" {
		t.Errorf("tool saw user %q, want id1", user)
	}
	if n := f.op.Registrations(); n != 1 {
		t.Errorf("registrations = %d, want 1", n)
	}
	if n := f.browser.Opened(); n != 1 {
		t.Errorf("browser opened %d times, want 1", n)
	}
	e := f.entry()
	if e.Client == nil || !e.Client.Dynamic || e.Token == nil || e.Token.RefreshToken == "" {
		t.Fatalf("stored %v, want a registered client and a token with a refresh token", e)
	}
	if e.Client.RedirectURL == "" || !strings.HasPrefix(e.Client.RedirectURL, "http://127.0.0.1:") {
		t.Errorf("redirect URL %q, want loopback", e.Client.RedirectURL)
	}
	// Nothing secret is readable on disk.
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{e.Token.AccessToken, e.Token.RefreshToken, e.Client.ID} {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("store file contains %q in plain text", s)
		}
	}
	// Nor in how an entry prints.
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		noSecrets(t, sprintf(format, e), e.Token.AccessToken, e.Token.RefreshToken)
	}

	// A restart: new store value, new handler that may not prompt.
	user, err = f.call(ctx, f.handler("none"))
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	if user != "id1" || f.op.Registrations() != 1 || f.browser.Opened() != 1 {
		t.Errorf("after restart: user %q, %d registrations, %d prompts; want id1, 1, 1", user, f.op.Registrations(), f.browser.Opened())
	}

	// The access token expires: the next connect refreshes without a prompt.
	f.expire()
	h := f.handler("none")
	if _, err := f.call(ctx, h); err != nil {
		t.Fatalf("connect after expiry: %v", err)
	}
	if n := f.op.Refreshes(); n != 1 {
		t.Errorf("refreshes = %d, want 1", n)
	}
	e2 := f.entry()
	if e2.Token.AccessToken == e.Token.AccessToken || e2.Token.RefreshToken == e.Token.RefreshToken {
		t.Error("refresh did not store a new access and refresh token")
	}
	// Rotation: the OP refuses the old refresh token now.
	old := &oauth2.Config{ClientID: e.Client.ID, Endpoint: oauth2.Endpoint{TokenURL: e.Client.TokenURL, AuthStyle: oauth2.AuthStyleInParams}}
	_, err = old.TokenSource(ctx, &oauth2.Token{RefreshToken: e.Token.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if oauthCode(err) != "invalid_grant" {
		t.Errorf("old refresh token after rotation: got %v, want invalid_grant", err)
	}

	// `toolwire login` again reuses the registration and its port.
	h = f.handler("login")
	if err := h.Login(ctx, f.rs.URL); err != nil {
		t.Fatalf("second login: %v", err)
	}
	if n := f.op.Registrations(); n != 1 {
		t.Errorf("registrations after second login = %d, want 1", n)
	}
	if got := f.entry().Client.RedirectURL; got != e.Client.RedirectURL {
		t.Errorf("second login redirect %s, want the registered %s", got, e.Client.RedirectURL)
	}
}

func sprintf(format string, v any) string {
	var b strings.Builder
	fprintf(&b, format, v)
	return b.String()
}

func TestNoPromptMeansLoginRequired(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, err := f.call(ctx, f.handler("none"))
	if !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("connect without login: %v, want ErrLoginRequired", err)
	}
	if !strings.Contains(err.Error(), "toolwire login demo") {
		t.Errorf("error %q does not name the login command", err)
	}
	if n := f.op.Registrations(); n != 0 || f.browser.Opened() != 0 {
		t.Errorf("a handler that may not prompt registered %d clients / opened %d browsers", n, f.browser.Opened())
	}
	if _, err := os.Stat(f.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store file written: %v", err)
	}
}

func TestRevokedRefreshTokenMeansLoginRequired(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	e := f.entry()
	// Revoke at the OP (RFC 7009), as the user would in its UI.
	if err := f.op.Revoke(ctx, e.Client.ID, e.Token.RefreshToken, "refresh_token"); err != nil {
		t.Fatal(err)
	}
	f.expire()
	h := f.handler("none")
	_, err := h.src.Token()
	if !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("refresh after revocation: %v, want ErrLoginRequired", err)
	}
	if !strings.Contains(err.Error(), "toolwire login demo") {
		t.Errorf("error %q does not name the login command", err)
	}
	noSecrets(t, err.Error(), e.Token.AccessToken, e.Token.RefreshToken)
	after := f.entry()
	if after.Token != nil || after.Client == nil {
		t.Errorf("after invalid_grant stored %v, want the client kept and the token gone", after)
	}
	if st := after.State(time.Now()); st != StateLoginRequired {
		t.Errorf("state %q, want %q", st, StateLoginRequired)
	}
	// Through the transport: the connect fails the same way, without prompting.
	if _, err := f.call(ctx, h); !errors.Is(err, ErrLoginRequired) {
		t.Errorf("connect after revocation: %v, want ErrLoginRequired", err)
	}
}

// TestConcurrentRefreshSharesOneRotation runs two "processes" (two Store
// values on one file, so two flock holders) and many goroutines that all
// find the token expired at once. Exactly one refresh must reach the OP,
// everyone must get its token, and the stored refresh token must be the
// live one (the next refresh works).
func TestConcurrentRefreshSharesOneRotation(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	e := f.entry()
	f.expire()
	var sources []*TokenSource
	for range 2 {
		sources = append(sources, NewTokenSource(newTestStore(t, f.path), "demo", f.rs.URL, f.hc, nil))
	}
	const n = 16
	tokens := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			t, err := sources[i%2].Token()
			errs[i] = err
			if err == nil {
				tokens[i] = t.AccessToken
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if tokens[i] != tokens[0] {
			t.Errorf("caller %d got another token than caller 0", i)
		}
	}
	if tokens[0] == e.Token.AccessToken {
		t.Error("token was not refreshed")
	}
	if got := f.op.Refreshes(); got != 1 {
		t.Errorf("refreshes at the OP = %d, want 1", got)
	}
	// The stored refresh token is the rotated, live one.
	f.expire()
	s := NewTokenSource(newTestStore(t, f.path), "demo", f.rs.URL, f.hc, nil)
	if _, err := s.Token(); err != nil {
		t.Fatalf("refresh with the stored refresh token: %v", err)
	}
	if got := f.op.Refreshes(); got != 2 {
		t.Errorf("refreshes = %d, want 2", got)
	}
}

func fprintf(w io.Writer, format string, v any) { fmt.Fprintf(w, format, v) }

// TestStepUpKeepsGrantedScopes answers a request with 403
// insufficient_scope for a new scope, as a resource server would: the
// interactive handler logs in again asking for the union of the granted
// and the new scopes; a handler that may not prompt says login required.
func TestStepUpKeepsGrantedScopes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	granted := f.entry().Token.Scopes
	if !slices.Contains(granted, "openid") || !slices.Contains(granted, "offline_access") {
		t.Fatalf("granted %q, want openid and offline_access", granted)
	}
	forbidden := func() (*http.Request, *http.Response) {
		req, _ := http.NewRequest(http.MethodPost, f.rs.URL, nil)
		req.Header.Set("Authorization", "Bearer "+f.entry().Token.AccessToken)
		resp := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}
		resp.Header.Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="profile", resource_metadata="`+
			strings.Replace(f.rs.URL, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)+`"`)
		return req, resp
	}
	req, resp := forbidden()
	if err := f.handler("none").Authorize(ctx, req, resp); !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Errorf("step-up without prompting: %v, want login required naming insufficient_scope", err)
	}
	req, resp = forbidden()
	if err := f.handler("login").Authorize(ctx, req, resp); err != nil {
		t.Fatalf("step-up: %v", err)
	}
	got := f.entry().Token.Scopes
	for _, s := range append(granted, "profile") {
		if !slices.Contains(got, s) {
			t.Errorf("after step-up the token has %q, missing %q", got, s)
		}
	}
	// A 403 that is not about scopes is not an authorization matter.
	req, resp = forbidden()
	resp.Header.Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	if err := f.handler("none").Authorize(ctx, req, resp); err != nil {
		t.Errorf("plain 403: %v, want nil (the transport reports the 403)", err)
	}
}

// TestTakenPortRegistersAgain: the registered loopback port is in use at
// the next login, so the loopback takes another port and the handler
// registers a client for it, replacing the old registration.
func TestTakenPortRegistersAgain(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	first := f.entry().Client
	u, _ := url.Parse(first.RedirectURL)
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Skipf("could not take the port back: %v", err)
	}
	defer ln.Close()
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	second := f.entry().Client
	if f.op.Registrations() != 2 || second.ID == first.ID || second.RedirectURL == first.RedirectURL {
		t.Errorf("after a taken port: %d registrations, client %s at %s (was %s at %s)",
			f.op.Registrations(), second.ID, second.RedirectURL, first.ID, first.RedirectURL)
	}
	if _, err := f.call(ctx, f.handler("none")); err != nil {
		t.Errorf("connect with the new registration: %v", err)
	}
}

// TestRefusedTokenIsRenewedWithoutPrompt: the OP revokes the access token
// before it expires. The server's 401 makes the handler redeem the refresh
// token instead of prompting.
func TestRefusedTokenIsRenewedWithoutPrompt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	e := f.entry()
	if err := f.op.Revoke(ctx, e.Client.ID, e.Token.AccessToken, "access_token"); err != nil {
		t.Fatalf("revoke the access token: %v", err)
	}
	if _, err := f.op.Userinfo(ctx, e.Token.AccessToken, nil); err == nil {
		t.Fatal("the revoked access token still works at the OP")
	}
	user, err := f.call(ctx, f.handler("none"))
	if err != nil || user != "id1" {
		t.Fatalf("connect with a revoked access token: %q, %v", user, err)
	}
	if n := f.op.Refreshes(); n != 1 || f.browser.Opened() != 1 {
		t.Errorf("%d refreshes, %d prompts; want 1 refresh and only the first login", n, f.browser.Opened())
	}
}

// TestPublicClientKeepsItsAuthMethod: an authorization server that lists
// only "none" for its token endpoint makes go-sdk leave the client
// authentication to x/oauth2's auto-detection. The public client toolwire
// registered must still be stored as "none", so that its refreshes send
// the client_id in the body and no Authorization header.
func TestPublicClientKeepsItsAuthMethod(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.op.SetMutate(func(d map[string]any) { d["token_endpoint_auth_methods_supported"] = []string{"none"} })
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	if m := f.entry().Client.AuthMethod; m != "none" {
		t.Errorf("stored token endpoint auth method %q, want none", m)
	}
	f.expire()
	if _, err := f.handler("none").src.Token(); err != nil {
		t.Fatal(err)
	}
	if got := f.op.ClientAuth(); got != "none" {
		t.Errorf("the refresh authenticated with %q, want none (client_id in the body only)", got)
	}
}
