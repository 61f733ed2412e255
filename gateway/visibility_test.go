package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// fileUpstream is a go-sdk server, connected in memory, that serves files
// as a filesystem server would: file:///secret and file:///public are
// listed resources, file:///{+path} reads any path (normalized, and
// case-insensitively, as some filesystems do) and file:///private/{name}
// reads private files.
type fileUpstream struct {
	cs *mcp.ClientSession

	mu   sync.Mutex
	subs []string
}

const secretText = "TOP SECRET"

func newFileUpstream(t *testing.T) *fileUpstream {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		u, err := url.Parse(req.Params.URI)
		if err != nil {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		p := strings.ToLower(path.Clean(u.Path))
		text := "contents of " + p
		if p == "/secret" {
			text = secretText
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file://" + p, MIMEType: "text/plain", Text: text}}}, nil
	}
	srv.AddResource(&mcp.Resource{Name: "secret", URI: "file:///secret", MIMEType: "text/plain"}, read)
	srv.AddResource(&mcp.Resource{Name: "public", URI: "file:///public", MIMEType: "text/plain"}, read)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "files", URITemplate: "file:///{+path}", MIMEType: "text/plain"}, read)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "private", URITemplate: "file:///private/{name}", MIMEType: "text/plain"}, read)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctxT(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "toolwire", Version: "1"}, nil).Connect(ctxT(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &fileUpstream{cs: cs}
}

func (u *fileUpstream) Name() string   { return "up" }
func (u *fileUpstream) Prefix() string { return "up" }
func (u *fileUpstream) List(ctx context.Context) (resources []*mcp.Resource, templates []*mcp.ResourceTemplate, _ []*mcp.Prompt, _ error) {
	for r, err := range u.cs.Resources(ctx, nil) {
		if err != nil {
			return nil, nil, nil, err
		}
		resources = append(resources, r)
	}
	for t, err := range u.cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			return nil, nil, nil, err
		}
		templates = append(templates, t)
	}
	return resources, templates, nil, nil
}
func (u *fileUpstream) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	return u.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
}
func (u *fileUpstream) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	return u.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
}
func (u *fileUpstream) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return u.cs.Complete(ctx, params)
}
func (u *fileUpstream) SetLogLevel(context.Context, mcp.LoggingLevel) error { return nil }
func (u *fileUpstream) Watch(func(), func(string)) func()                   { return func() {} }
func (u *fileUpstream) Subscribe(_ context.Context, uri string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.subs = append(u.subs, uri)
	return nil
}
func (u *fileUpstream) Unsubscribe(context.Context, string) error { return nil }

// A role that sees the file:///{+path} template and not the secret
// resource cannot read the secret through the template, however the URI is
// spelt, nor subscribe to it; nor can it read what a hidden template
// covers. Everything else the template covers it reads.
func TestHiddenResourceIsNotReachableThroughAVisibleTemplate(t *testing.T) {
	t.Parallel()
	up := newFileUpstream(t)
	reg := tool.NewRegistry(nil)
	gw := New(tool.NewExecutor(reg, nil), &Options{Upstreams: []Upstream{up}})
	verify, err := StaticVerifier([]StaticToken{{SHA256: HashToken("reader-token"), Subject: "rita", Role: "reader"}})
	if err != nil {
		t.Fatal(err)
	}
	h := gw.Handler(&HTTPOptions{Verifier: verify, Roles: Roles{"reader": {"up__files", "up__public"}}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	cs := connectAs(t, ts.URL, "reader-token")
	ctx := ctxT(t)

	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "toolwire://up/file:///{+path}" {
		t.Fatalf("templates = %+v, %v; want the files template only", templates, err)
	}
	served := func(uri string) string { return "toolwire://up/" + uri }
	for _, uri := range []string{
		"file:///secret", "file:///./secret", "file:////secret", "file:///%73ecret", "file:///notes/../secret",
		"FILE:///secret", "file:///SECRET", // the upstream folds case: caught by what it answers
		"file:///private/plans", "file:///private/../private/plans",
	} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: served(uri)})
		if err == nil {
			t.Errorf("read %s: %q, want it refused", uri, res.Contents[0].Text)
		}
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: served("file:///./secret")}); err == nil {
		t.Error("subscribing to the secret through the template succeeded")
	}
	for uri, want := range map[string]string{"file:///public": "contents of /public", "file:///notes/a.txt": "contents of /notes/a.txt"} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: served(uri)})
		if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != want {
			t.Errorf("read %s: %+v, %v; want %q", uri, res, err, want)
		}
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: served("file:///notes/a.txt")}); err != nil {
		t.Errorf("subscribing to a visible file: %v", err)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if !slices.Equal(up.subs, []string{"file:///notes/a.txt"}) {
		t.Errorf("upstream subscriptions %v, want only the visible file's", up.subs)
	}
}

// mutableVerifier accepts the tokens in its map, each with a subject and a
// role that the test may change or remove while sessions are open.
type mutableVerifier struct {
	mu     sync.Mutex
	tokens map[string][2]string // token → subject, role
}

func (v *mutableVerifier) set(token, subject, role string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if subject == "" {
		delete(v.tokens, token)
		return
	}
	v.tokens[token] = [2]string{subject, role}
}

func (v *mutableVerifier) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.tokens[token]
	if !ok {
		return nil, errInvalidToken
	}
	return &auth.TokenInfo{UserID: e[0], Expiration: time.Now().Add(time.Hour), Extra: map[string]any{roleKey: e[1]}}, nil
}

func bindingServer(t *testing.T, policy ApprovalPolicy) (*fixture, string, *mutableVerifier, *audit.Memory) {
	t.Helper()
	f := newFixture(t, policy)
	mem := &audit.Memory{}
	f.ex = tool.NewExecutor(f.reg, &tool.ExecutorOptions{Audit: audit.NewLog(mem, nil)})
	f.gw = New(f.ex, nil)
	v := &mutableVerifier{tokens: map[string][2]string{}}
	h := f.gw.Handler(&HTTPOptions{Verifier: v.verify, Roles: Roles{"reader": {"read_*"}, "admin": {"*"}}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	return f, ts.URL, v, mem
}

// A session opened with one token cannot be used with another, not even
// another token of the same subject: alice's reader token cannot call
// through the session her admin token opened, nor the other way round.
func TestASessionIsBoundToTheTokenThatOpenedIt(t *testing.T) {
	t.Parallel()
	f, url, v, _ := bindingServer(t, ApprovalPolicy{Write: Allow, Destructive: Allow})
	v.set("alice-admin", "alice", "admin")
	v.set("alice-reader", "alice", "reader")
	ctx := ctxT(t)

	adminSession := rawSession(t, url, "alice-admin")
	r, err := post(ctx, url, "alice-reader", adminSession, callBody(2, "delete_file", `{"path":"/x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusForbidden || f.runs["delete_file"].Load() != 0 {
		t.Errorf("the reader token in the admin's session: status %d (%s), delete_file ran %d times; want 403 and no run",
			r.status, strings.TrimSpace(r.body), f.runs["delete_file"].Load())
	}
	readerSession := rawSession(t, url, "alice-reader")
	if r, err = post(ctx, url, "alice-admin", readerSession, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); err != nil || r.status != http.StatusForbidden {
		t.Errorf("the admin token in the reader's session: %+v, %v; want 403", r, err)
	}
	// Each session still serves its own credential.
	if r, err = post(ctx, url, "alice-admin", adminSession, callBody(4, "delete_file", `{"path":"/x"}`)); err != nil || r.msg == nil || r.msg.Result == nil || r.msg.Result.IsError {
		t.Errorf("the admin token in its own session: %+v, %v", r, err)
	}
	if r, err = post(ctx, url, "alice-reader", readerSession, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); err != nil || r.msg == nil || r.msg.Result == nil || len(r.msg.Result.Tools) != 1 {
		t.Errorf("the reader token in its own session: %+v, %v; want its one tool", r, err)
	}
}

// A changed role and a revoked token take effect on the next request: the
// session that the old credential opened ends, and a new session gets the
// new role.
func TestARevokedTokenOrChangedRoleTakesEffectOnTheNextRequest(t *testing.T) {
	t.Parallel()
	f, url, v, _ := bindingServer(t, ApprovalPolicy{Write: Allow, Destructive: Allow})
	v.set("t", "tom", "admin")
	ctx := ctxT(t)
	cs := connectAs(t, url, "t")
	if res := callTool(t, cs, "delete_file", map[string]any{"path": "/a"}); res.IsError {
		t.Fatalf("delete_file as admin: %s", text(res))
	}

	v.set("t", "tom", "reader")
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/b"}}); err == nil {
		t.Errorf("delete_file after the role became reader: %+v, want the session refused", res)
	}
	if n := f.runs["delete_file"].Load(); n != 1 {
		t.Errorf("delete_file ran %d times, want once (before the role changed)", n)
	}
	if got := listNames(t, connectAs(t, url, "t")); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("a new session of the reader sees %v, want [read_file]", got)
	}

	sid := rawSession(t, url, "t")
	v.set("t", "", "")
	if r, err := post(ctx, url, "t", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); err != nil || r.status != http.StatusUnauthorized {
		t.Errorf("a revoked token: %+v, %v; want 401", r, err)
	}
	// Given back, the token does not revive the session it lost.
	v.set("t", "tom", "reader")
	if r, err := post(ctx, url, "t", sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); err != nil || r.status != http.StatusNotFound {
		t.Errorf("the session of a token revoked and restored: %+v, %v; want 404, the session gone", r, err)
	}
}

// A JWT session is bound to the token's subject and client: the same
// client's next token (a refresh) goes on with it, another client's token
// of the same subject does not, and a token naming no client is bound as
// itself.
func TestAJWTSessionGoesOnWithTheSameClientsNextToken(t *testing.T) {
	t.Parallel()
	url, _, _ := jwtServer(t)
	k := testKeys()
	n := 0
	mint := func(client string) string {
		n++ // each token differs, as a refreshed one does
		c := map[string]any{"iss": testIssuer, "aud": testAudience, "sub": "alice", "role": "reader",
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Add(-time.Duration(n) * time.Second).Unix()}
		if client != "" {
			c["client_id"] = client
		}
		return sign(t, k.ec, "ec-1", "ES256", c)
	}
	ctx := ctxT(t)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	sid := rawSession(t, url, mint("desktop"))
	if r, err := post(ctx, url, mint("desktop"), sid, list); err != nil || r.status != http.StatusOK || r.msg == nil || r.msg.Result == nil {
		t.Errorf("the same client's refreshed token: %+v, %v; want the session served", r, err)
	}
	if r, err := post(ctx, url, mint("other-app"), sid, list); err != nil || r.status != http.StatusForbidden {
		t.Errorf("another client's token of the same subject: %+v, %v; want 403", r, err)
	}
	bare := mint("")
	sid = rawSession(t, url, bare)
	if r, err := post(ctx, url, mint(""), sid, list); err != nil || r.status != http.StatusForbidden {
		t.Errorf("another token naming no client: %+v, %v; want 403", r, err)
	}
	if r, err := post(ctx, url, bare, sid, list); err != nil || r.status != http.StatusOK {
		t.Errorf("the token that opened the session: %+v, %v; want it served", r, err)
	}
}

// The session a revoked token ended is gone for the very next request,
// even while the session is still closing (its closing waits for a call
// that has not returned yet): the token given back does not reach it.
func TestASessionEndedByARevokedTokenIsGoneBeforeItHasClosed(t *testing.T) {
	t.Parallel()
	f, url, v, _ := bindingServer(t, ApprovalPolicy{})
	entered, release := make(chan struct{}), make(chan struct{})
	if err := f.reg.Register(&tool.Tool{
		Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`), Tier: tool.Read,
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			close(entered)
			<-release // returns only when the test says, cancelled or not
			return tool.TextResult("released"), nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	v.set("t", "tom", "admin")
	ctx := ctxT(t)
	sid := rawSession(t, url, "t")
	called := make(chan error, 1)
	go func() {
		_, err := post(ctx, url, "t", sid, callBody(2, "hold", `{}`))
		called <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the held call did not start")
	}

	v.set("t", "", "")
	if r, err := post(ctx, url, "t", sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); err != nil || r.status != http.StatusUnauthorized {
		t.Fatalf("a revoked token: %+v, %v; want 401", r, err)
	}
	// The session's close waits for the held call; the session is gone
	// all the same.
	v.set("t", "tom", "admin")
	if r, err := post(ctx, url, "t", sid, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); err != nil || r.status != http.StatusNotFound {
		t.Errorf("the session while it closes, with the token given back: %+v, %v; want 404", r, err)
	}
	close(release)
	<-called
}
