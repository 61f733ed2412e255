package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/oauthtest"
)

// bearerLog records the bearer tokens a resource server was shown.
type bearerLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *bearerLog) verify(o *oauthtest.OP) auth.TokenVerifier {
	return func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		l.mu.Lock()
		l.seen = append(l.seen, token)
		l.mu.Unlock()
		return o.Userinfo(ctx, token, r)
	}
}

func (l *bearerLog) saw(token string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.seen {
		if s == token {
			return true
		}
	}
	return false
}

// connectTo connects through h to endpoint and calls whoami.
func (f *fixture) connectTo(ctx context.Context, endpoint string, h auth.OAuthHandler) error {
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: f.hc, OAuthHandler: h}, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: oauthtest.WhoamiTool})
	return err
}

func (f *fixture) handlerFor(resource, mode string) *Handler {
	f.t.Helper()
	cfg := &HandlerConfig{Server: "demo", Resource: resource, Store: newTestStore(f.t, f.path), HTTPClient: f.hc}
	if mode == "login" {
		cfg.Fetcher = &Loopback{Open: f.browser.Open, Out: io.Discard}
	}
	h, err := NewHandler(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// TestTokenStaysWithItsServer: a login's token is bound to the server URL
// it was obtained for. When the configured URL of the server name changes,
// the stored token is not sent to the new host, nor its refresh token
// redeemed: no request reaches the new host, the connect fails with
// ErrLoginRequired naming the login command, and a login there replaces
// the entry, after which the old URL needs a login in turn.
func TestTokenStaysWithItsServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	old := f.entry()
	if old.Resource != canonicalResource(f.rs.URL) {
		t.Fatalf("entry bound to %q, want %q", old.Resource, f.rs.URL)
	}

	// The new host: anything that reaches it is counted.
	var mu sync.Mutex
	var requests int
	newHost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(newHost.Close)

	err := f.connectTo(ctx, newHost.URL+"/mcp", f.handlerFor(newHost.URL+"/mcp", "none"))
	if !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), "toolwire login demo") {
		t.Fatalf("connect to the new URL: %v, want login required naming `toolwire login demo`", err)
	}
	// The token source alone, with the token expired: no refresh either.
	f.expire()
	src := NewTokenSource(newTestStore(t, f.path), "demo", newHost.URL+"/mcp", f.hc, nil)
	if _, err := src.Token(); !errors.Is(err, ErrLoginRequired) {
		t.Errorf("token source for the new URL: %v, want login required", err)
	}
	mu.Lock()
	n := requests
	mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests reached the new host", n)
	}
	if r := f.op.Refreshes(); r != 0 {
		t.Errorf("%d refreshes at the OP for a token bound elsewhere", r)
	}

	// A login at a second protected server (same OP) under the same name
	// never shows it the old token and rebinds the entry.
	var log bearerLog
	rs2 := oauthtest.NewResourceServer(t, f.op, &oauthtest.ResourceOptions{Verify: log.verify(f.op)})
	if err := f.connectTo(ctx, rs2.URL, f.handlerFor(rs2.URL, "login")); err != nil {
		t.Fatalf("login at the new server: %v", err)
	}
	if log.saw(old.Token.AccessToken) {
		t.Error("the old server's token reached the new server")
	}
	e := f.entry()
	if e.Resource != canonicalResource(rs2.URL) || e.Token == nil || e.Token.AccessToken == old.Token.AccessToken {
		t.Errorf("after the login at the new server: %v bound to %q", e, e.Resource)
	}
	// And now the old URL is the other one.
	if err := f.connectTo(ctx, f.rs.URL, f.handler("none")); !errors.Is(err, ErrLoginRequired) {
		t.Errorf("connect to the old URL after the move: %v, want login required", err)
	}
}

// TestUnboundEntryNeedsLogin: an entry written before entries were bound
// (no resource) is not used: its token is not sent, and the state shows
// that a login is needed. The file itself still reads.
func TestUnboundEntryNeedsLogin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var log bearerLog
	o := oauthtest.NewOP(t, nil)
	f := newFixture(t)
	f.op, f.rs = o, oauthtest.NewResourceServer(t, o, &oauthtest.ResourceOptions{Verify: log.verify(o)})
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	err := newTestStore(t, f.path).Update(ctx, "demo", func(e *Entry) error {
		e.Resource = "" // as an older toolwire wrote it
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := f.entry()
	if st := e.State(e.Token.Obtained); st != StateLoginRequired {
		t.Errorf("state of an unbound entry: %s, want %s", st, StateLoginRequired)
	}
	err = f.connectTo(ctx, f.rs.URL, f.handler("none"))
	if !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), "predates") {
		t.Fatalf("connect with an unbound entry: %v, want login required saying why", err)
	}
	if log.saw(e.Token.AccessToken) {
		t.Error("the token of an unbound entry was sent")
	}
	// A login binds it again.
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	if user, err := f.call(ctx, f.handler("none")); err != nil || user == "" {
		t.Errorf("after a new login: %q, %v", user, err)
	}
}

func TestBindingHolds(t *testing.T) {
	t.Parallel()
	const r = "https://mcp.example.com/mcp"
	client := &Client{ID: "c1", Issuer: "https://as.example.com", Dynamic: true}
	tok := &Token{AccessToken: "a"}
	tests := []struct {
		name string
		b    binding
		e    *Entry
		want bool
	}{
		{"nothing stored", binding{resource: r}, nil, true},
		{"same resource", binding{resource: r}, &Entry{Resource: r, Client: client, Token: tok}, true},
		{"other resource", binding{resource: "https://evil.example.com/mcp"}, &Entry{Resource: r, Client: client, Token: tok}, false},
		{"no resource stored", binding{resource: r}, &Entry{Client: client, Token: tok}, false},
		{"no resource configured", binding{}, &Entry{Resource: "", Client: client, Token: tok}, false},
		{"token without registration", binding{resource: r}, &Entry{Resource: r, Token: tok}, false},
		{"configured issuer matches", binding{resource: r, issuer: "https://as.example.com/"}, &Entry{Resource: r, Client: client, Token: tok}, true},
		{"configured issuer differs", binding{resource: r, issuer: "https://other.example.com"}, &Entry{Resource: r, Client: client, Token: tok}, false},
		{"configured client differs", binding{resource: r, clientID: "c2"}, &Entry{Resource: r, Client: &Client{ID: "c1", Issuer: client.Issuer}, Token: tok}, false},
	}
	for _, tt := range tests {
		if got := tt.b.holds(tt.e); got != tt.want {
			t.Errorf("%s: holds = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestCanonicalResource(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://MCP.Example.com:443/mcp", "https://mcp.example.com/mcp"},
		{"HTTP://127.0.0.1:80", "http://127.0.0.1/"},
		{"http://127.0.0.1:8080/mcp#x", "http://127.0.0.1:8080/mcp"},
		{"https://[::1]:443/a", "https://[::1]/a"},
		{"https://h/mcp?tenant=a", "https://h/mcp?tenant=a"},
		{"/relative", ""},
		{"::", ""},
	}
	for _, tt := range tests {
		if got := canonicalResource(tt.in); got != tt.want {
			t.Errorf("canonicalResource(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
