package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/tool"
)

// Tests of a server reached with each caller's own identity (identity:
// caller): a real authorization server (oauthtest.OP), a go-sdk MCP server
// behind RequireBearerToken recording the token's subject of every request
// (oauthtest.ResourceServer), callers' JWTs from a real identity provider.

// gatewayAudience is the audience of the JWTs callers present to "the
// gateway".
const gatewayAudience = "https://gateway.test/mcp"

// The gateway's client at the OP, which exchanges callers' tokens and
// lists with client_credentials (its tokens' subject is its ID).
const (
	gatewayClient = "gw"
	gatewaySecret = "gw-secret-value"
)

// The methods that list, which go with the operator's identity alone, and
// those that act, which go with a caller's.
var (
	listingMethod = map[string]bool{"tools/list": true, "resources/list": true, "resources/templates/list": true, "prompts/list": true}
	actingMethod  = map[string]bool{"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true, "resources/subscribe": true}
)

type exchangeFixture struct {
	op  *oauthtest.OP
	idp *oauthtest.IdP
	rs  *oauthtest.ResourceServer
	cfg config.Server
}

// newExchangeFixture starts the OP, the IdP whose JWTs it exchanges and a
// resource server (of sessions: each session's initialize and DELETE
// are seen there).
func newExchangeFixture(t *testing.T) *exchangeFixture {
	t.Helper()
	o := oauthtest.NewOP(t, nil)
	o.AddGatewayClient(gatewayClient, gatewaySecret)
	idp := oauthtest.NewIdP(t, "unused")
	o.TrustSubjectTokens(idp, gatewayAudience)
	rs := oauthtest.NewResourceServer(t, o, &oauthtest.ResourceOptions{Verify: o.UserOrClient, Extras: true})
	cfg := httpConfig("wiki", rs.URL)
	cfg.OAuth = &config.OAuth{Identity: config.IdentityCaller, Grant: "token_exchange", Issuer: o.Issuer, ClientID: gatewayClient, ClientSecretEnv: "GW_SECRET"}
	return &exchangeFixture{op: o, idp: idp, rs: rs, cfg: cfg}
}

// options are the workspace's, as far as the test needs them: listings
// with the gateway's client_credentials at the configured issuer, calls
// with each caller's exchanged token.
func (f *exchangeFixture) options(policy CallerSessionPolicy, log *audit.Log) *Options {
	lookup := func(name string) (string, bool) {
		if name == "GW_SECRET" {
			return gatewaySecret, true
		}
		return "", false
	}
	return &Options{
		Audit:          log,
		CallerSessions: policy,
		Relay:          RelayCapabilities{Elicitation: true},
		OAuth: func(cfg config.Server, client *http.Client) (auth.OAuthHandler, error) {
			return oauth.NewClientCredentialsHandler(&oauth.ClientCredentialsConfig{
				Server: cfg.Name, ClientID: cfg.OAuth.ClientID, SecretEnv: cfg.OAuth.ClientSecretEnv, Issuer: cfg.OAuth.Issuer, LookupEnv: lookup, HTTPClient: client,
			})
		},
		Callers: func(cfg config.Server, client *http.Client) (*oauth.Callers, error) {
			return oauth.NewCallers(&oauth.CallersConfig{
				Server: cfg.Name, Resource: cfg.URL, Mode: oauth.CallerExchange, HTTPClient: client,
				Issuer: cfg.OAuth.Issuer, Client: &oauth.ClientConfig{ID: cfg.OAuth.ClientID, Secret: gatewaySecret},
			})
		},
	}
}

// principal is caller sub as the gateway verified their JWT.
func (f *exchangeFixture) principal(t *testing.T, sub string) (tool.Principal, string) {
	t.Helper()
	jwt := f.idp.AccessToken(t, sub, gatewayAudience, time.Hour)
	return tool.Principal{Issuer: f.idp.Issuer, Subject: sub, Token: tool.NewBearerToken(jwt), Expiry: time.Now().Add(time.Hour)}, jwt
}

// as returns a bounded context carrying p.
func as(t *testing.T, p tool.Principal) context.Context {
	return tool.WithPrincipal(boundedCtx(t, waitTime), p)
}

// userOf returns the "user" a whoami-like result names.
func userOf(t *testing.T, res *tool.Result) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("call failed (%s): %s", res.Reason, res.Message)
	}
	m, _ := res.Structured.(map[string]any)
	u, _ := m["user"].(string)
	return u
}

// sessionsOf counts the upstream's sessions of subject: initialized
// (an initialize that carried their token) and closed (a DELETE).
func sessionsOf(reqs []oauthtest.Request, subject string) (opened, closed int) {
	for _, r := range reqs {
		switch {
		case r.Subject != subject:
		case r.Method == "initialize":
			opened++
		case r.HTTPMethod == http.MethodDelete:
			closed++
		}
	}
	return opened, closed
}

// eventually waits, polling, until cond holds, failing the test after
// waitTime.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after %v: %s", waitTime, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// askCaller is a tool.Caller that answers elicitations and keeps the
// progress and log lines it is shown.
type askCaller struct {
	recorder
	mu   sync.Mutex
	logs []string
}

func (c *askCaller) Log(_ context.Context, m tool.LogMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs = append(c.logs, string(m.Data))
}

func (c *askCaller) Ask(_ context.Context, kind tool.RequestKind, _ json.RawMessage) (json.RawMessage, error) {
	if kind != tool.Elicitation {
		return nil, tool.ErrNotSupported
	}
	return json.RawMessage(`{"action":"accept","content":{"name":"zed"}}`), nil
}

// Two callers of one server reach it each with their own exchanged token:
// the upstream sees each call with its caller's subject and the listings
// with the gateway's client alone; it never sees a caller's own token;
// the audit names the identity each call used; progress, log lines and a
// question of the upstream reach the caller of the call; reads and prompt
// gets go with the caller's identity too; a call without a caller, or with
// a caller a token exchange cannot serve, fails and sends nothing.
func TestPerCallerTokenExchange(t *testing.T) {
	t.Parallel()
	f := newExchangeFixture(t)
	mem := &audit.Memory{}
	log := audit.NewLog(mem, nil)
	reg := confirmingRegistry()
	s := connect(t, f.cfg, reg, f.options(CallerSessionPolicy{}, log))
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log})
	a, aJWT := f.principal(t, oauthtest.Subject)
	b, bJWT := f.principal(t, oauthtest.Subject2)

	if got := userOf(t, ex.Call(as(t, a), "wiki__whoami", nil)); got != oauthtest.Subject {
		t.Errorf("caller A reached the server as %q, want %q", got, oauthtest.Subject)
	}
	if got := userOf(t, ex.Call(as(t, b), "wiki__whoami", nil)); got != oauthtest.Subject2 {
		t.Errorf("caller B reached the server as %q, want %q", got, oauthtest.Subject2)
	}
	if got := userOf(t, ex.Call(as(t, a), "wiki__whoami", nil)); got != oauthtest.Subject {
		t.Errorf("caller A's second call reached the server as %q", got)
	}

	// Progress, log lines and a question reach the call's caller, over
	// the caller's own session, which hears the log level asked for.
	cat := s.Catalog()
	if err := cat.SetLogLevel(boundedCtx(t, waitTime), "debug"); err != nil {
		t.Fatal(err)
	}
	c := &askCaller{}
	res := ex.Call(tool.WithCaller(as(t, b), c), "wiki__progress", nil)
	if got := userOf(t, res); got != oauthtest.Subject2 {
		t.Errorf("progress ran as %q", got)
	}
	if p := c.got(); len(p) != 3 || p[2].Message != "step for "+oauthtest.Subject2 {
		t.Errorf("caller B was shown progress %+v, want three steps for %s", p, oauthtest.Subject2)
	}
	c.mu.Lock()
	logs := strings.Join(c.logs, "|")
	c.mu.Unlock()
	if !strings.Contains(logs, "working for "+oauthtest.Subject2) {
		t.Errorf("caller B was shown log lines %q, want the upstream's line", logs)
	}
	res = ex.Call(tool.WithCaller(as(t, a), &askCaller{}), "wiki__ask", nil)
	if m, _ := res.Structured.(map[string]any); res.IsError || m["answer"] != "accept:zed" || m["user"] != oauthtest.Subject {
		t.Errorf("ask as A = %+v (%s), want A's answer accept:zed", res.Structured, res.Message)
	}

	// Reads and prompt gets go as the caller; listing as the gateway.
	rr, err := cat.ReadResource(as(t, b), oauthtest.WhoamiURI)
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != oauthtest.Subject2 {
		t.Errorf("read as B = %+v, %v; want B's subject", rr, err)
	}
	gp, err := cat.GetPrompt(as(t, a), oauthtest.WhoamiPrompt, nil)
	if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "you are "+oauthtest.Subject {
		t.Errorf("prompt as A = %+v, %v; want A's subject", gp, err)
	}
	resources, _, prompts, err := cat.List(boundedCtx(t, waitTime))
	if err != nil || len(resources) != 1 || len(prompts) != 1 {
		t.Errorf("List = %d resources, %d prompts, %v; want the upstream's one of each", len(resources), len(prompts), err)
	}

	// Fail closed: no caller, or a caller known by a gateway token.
	exchanges := f.op.TokenExchanges()
	before := len(f.rs.Requests())
	res = ex.Call(boundedCtx(t, waitTime), "wiki__whoami", nil)
	if !res.IsError || !strings.Contains(res.Message, "has no caller") {
		t.Errorf("a call without a caller = %+v, want it refused", res)
	}
	if _, err := cat.ReadResource(boundedCtx(t, waitTime), oauthtest.WhoamiURI); !errors.Is(err, ErrNoCaller) {
		t.Errorf("a read without a caller: %v, want ErrNoCaller", err)
	}
	static := tool.Principal{Subject: "carol", Token: tool.NewBearerToken("static-gateway-token-of-carol")}
	res = ex.Call(as(t, static), "wiki__whoami", nil)
	if !res.IsError || !strings.Contains(res.Message, "token exchange needs a caller's JWT") {
		t.Errorf("a static-token caller's call = %+v, want it refused", res)
	}
	if n := len(f.rs.Requests()); n != before {
		t.Errorf("refused calls still sent %d requests upstream", n-before)
	}
	if n := f.op.TokenExchanges(); n != exchanges {
		t.Errorf("refused calls still made %d token exchanges", n-exchanges)
	}

	// What the upstream saw.
	calls := map[string]int{}
	for _, r := range f.rs.Requests() {
		switch {
		case listingMethod[r.Method] && r.Subject != gatewayClient:
			t.Errorf("%s went as %q: listings go as the gateway's client alone", r.Method, r.Subject)
		case actingMethod[r.Method] && r.Subject != oauthtest.Subject && r.Subject != oauthtest.Subject2:
			t.Errorf("%s went as %q: calls go as their caller alone", r.Method, r.Subject)
		case actingMethod[r.Method]:
			calls[r.Subject]++
		}
	}
	if calls[oauthtest.Subject] != 4 || calls[oauthtest.Subject2] != 3 {
		t.Errorf("calls by subject at the upstream = %v, want A's 4 (3 tools, 1 prompt) and B's 3 (2 tools, 1 read)", calls)
	}
	for _, h := range f.rs.Authorizations() {
		if strings.Contains(h, aJWT) || strings.Contains(h, bJWT) || strings.Contains(h, "static-gateway-token") {
			t.Fatalf("a caller's own token reached the upstream: %.40s...", h)
		}
	}
	if n := f.op.TokenExchanges(); n != 2 {
		t.Errorf("%d token exchanges, want 2 (one per caller, kept while fresh)", n)
	}

	// The audit names the identity of each call, and no token.
	want := map[string]bool{
		fmt.Sprintf("caller %q (%s) by token_exchange", oauthtest.Subject, f.idp.Issuer):  true,
		fmt.Sprintf("caller %q (%s) by token_exchange", oauthtest.Subject2, f.idp.Issuer): true,
	}
	seen := map[string]int{}
	for _, ev := range mem.Events() {
		if ev.Kind == audit.CallExecuted {
			seen[ev.UpstreamIdentity]++
			if !want[ev.UpstreamIdentity] {
				t.Errorf("call.executed names upstream identity %q", ev.UpstreamIdentity)
			}
		}
	}
	if len(seen) != 2 {
		t.Errorf("the audit names identities %v, want both callers'", seen)
	}
	logged, _ := json.Marshal(mem.Events())
	if strings.Contains(string(logged), aJWT) || strings.Contains(string(logged), bJWT) {
		t.Error("the audit log holds a caller's token")
	}
	if st := s.Status(); st.CallerSessions != 2 {
		t.Errorf("Status().CallerSessions = %d, want 2", st.CallerSessions)
	}
}

// A caller's concurrent first calls wait for one session and one token
// exchange; the callers' sessions hear the log level.
func TestPerCallerOneCreationPerCaller(t *testing.T) {
	t.Parallel()
	f := newExchangeFixture(t)
	reg := confirmingRegistry()
	s := connect(t, f.cfg, reg, f.options(CallerSessionPolicy{}, nil))
	ex := tool.NewExecutor(reg, nil)
	a, _ := f.principal(t, oauthtest.Subject)
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := ex.Call(as(t, a), "wiki__whoami", nil)
			if m, _ := res.Structured.(map[string]any); res.IsError || m["user"] != oauthtest.Subject {
				wrong.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d of 8 concurrent calls failed or went as someone else", n)
	}
	if opened, _ := sessionsOf(f.rs.Requests(), oauthtest.Subject); opened != 1 {
		t.Errorf("%d sessions of the caller opened upstream, want 1", opened)
	}
	if n := f.op.TokenExchanges(); n != 1 {
		t.Errorf("%d token exchanges, want 1", n)
	}

	// On a server of sessions (2025-11-25: logging/setLevel), the log
	// level is set on the callers' sessions there are, and on those made
	// later.
	if err := s.Catalog().SetLogLevel(boundedCtx(t, waitTime), "debug"); err != nil {
		t.Fatal(err)
	}
	b, _ := f.principal(t, oauthtest.Subject2)
	for _, p := range []tool.Principal{a, b} {
		c := &askCaller{}
		userOf(t, ex.Call(tool.WithCaller(as(t, p), c), "wiki__progress", nil))
		c.mu.Lock()
		logs := strings.Join(c.logs, "|")
		c.mu.Unlock()
		if !strings.Contains(logs, "working for "+p.Subject) || len(c.got()) != 3 {
			t.Errorf("caller %s was shown log lines %q and %d progress reports, want the upstream's line and 3", p.Subject, logs, len(c.got()))
		}
	}
}

// The pool keeps at most Max sessions, closing the least recently used,
// and closes a session idle for Idle; both are counted at the upstream.
func TestPerCallerSessionPoolBounds(t *testing.T) {
	t.Parallel()
	t.Run("lru", func(t *testing.T) {
		t.Parallel()
		f := newExchangeFixture(t)
		reg := confirmingRegistry()
		s := connect(t, f.cfg, reg, f.options(CallerSessionPolicy{Idle: time.Hour, Max: 1}, nil))
		ex := tool.NewExecutor(reg, nil)
		a, _ := f.principal(t, oauthtest.Subject)
		b, _ := f.principal(t, oauthtest.Subject2)
		userOf(t, ex.Call(as(t, a), "wiki__whoami", nil))
		userOf(t, ex.Call(as(t, a), "wiki__whoami", nil))
		userOf(t, ex.Call(as(t, b), "wiki__whoami", nil)) // evicts A's
		eventually(t, "A's session closed upstream", func() bool {
			_, closed := sessionsOf(f.rs.Requests(), oauthtest.Subject)
			return closed == 1
		})
		if st := s.Status(); st.CallerSessions != 1 {
			t.Errorf("Status().CallerSessions = %d, want 1 (the bound)", st.CallerSessions)
		}
		userOf(t, ex.Call(as(t, a), "wiki__whoami", nil)) // evicts B's, opens A's again
		eventually(t, "B's session closed upstream", func() bool {
			_, closed := sessionsOf(f.rs.Requests(), oauthtest.Subject2)
			return closed == 1
		})
		reqs := f.rs.Requests()
		if opened, closed := sessionsOf(reqs, oauthtest.Subject); opened != 2 || closed != 1 {
			t.Errorf("A's sessions upstream: %d opened, %d closed; want 2 and 1", opened, closed)
		}
		if opened, _ := sessionsOf(reqs, oauthtest.Subject2); opened != 1 {
			t.Errorf("B's sessions upstream: %d opened, want 1", opened)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, closed := sessionsOf(f.rs.Requests(), oauthtest.Subject); closed != 2 {
			t.Errorf("after Close, %d of A's sessions closed upstream, want 2", closed)
		}
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		f := newExchangeFixture(t)
		reg := confirmingRegistry()
		s := connect(t, f.cfg, reg, f.options(CallerSessionPolicy{Idle: 50 * time.Millisecond}, nil))
		ex := tool.NewExecutor(reg, nil)
		a, _ := f.principal(t, oauthtest.Subject)
		userOf(t, ex.Call(as(t, a), "wiki__whoami", nil))
		eventually(t, "the idle session closed upstream", func() bool {
			_, closed := sessionsOf(f.rs.Requests(), oauthtest.Subject)
			return closed == 1
		})
		eventually(t, "the pool empty", func() bool { return s.Status().CallerSessions == 0 })
		userOf(t, ex.Call(as(t, a), "wiki__whoami", nil))
		if opened, _ := sessionsOf(f.rs.Requests(), oauthtest.Subject); opened != 2 {
			t.Errorf("A's sessions opened upstream: %d, want 2 (one after expiry)", opened)
		}
		if opened, closed := sessionsOf(f.rs.Requests(), gatewayClient); opened != 1 || closed != 0 {
			t.Errorf("the shared session: %d opened, %d closed; want it open throughout", opened, closed)
		}
	})
}

// The shared connection of a per-caller server lists and refuses
// everything else, in the SDK's session and on the raw path: no call
// path can reach the upstream with the operator's credential.
func TestPerCallerSharedConnectionOnlyLists(t *testing.T) {
	t.Parallel()
	f := newExchangeFixture(t)
	s := connect(t, f.cfg, confirmingRegistry(), f.options(CallerSessionPolicy{}, nil))
	c := s.sup.current()
	if c == nil || !c.listOnly {
		t.Fatalf("the shared connection = %+v, want a listing-only one", c)
	}
	ctx := boundedCtx(t, waitTime)
	if _, err := c.session.ListTools(ctx, nil); err != nil {
		t.Errorf("listing on the shared connection: %v", err)
	}
	_, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: oauthtest.WhoamiTool})
	if !errors.Is(err, ErrListingOnly) {
		t.Errorf("tools/call on the shared connection: %v, want ErrListingOnly", err)
	}
	if _, err := c.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: oauthtest.WhoamiURI}); !errors.Is(err, ErrListingOnly) {
		t.Errorf("resources/read on the shared connection: %v, want ErrListingOnly", err)
	}
	if _, err := c.rawCall(ctx, "tools/call", oauthtest.WhoamiTool, map[string]any{"name": oauthtest.WhoamiTool}, nil); !errors.Is(err, ErrListingOnly) {
		t.Errorf("a raw tools/call on the shared connection: %v, want ErrListingOnly", err)
	}
	for _, r := range f.rs.Requests() {
		if actingMethod[r.Method] {
			t.Errorf("%s reached the upstream as %q", r.Method, r.Subject)
		}
	}
}

// A caller logs out: their session closes, their token is forgotten, and
// their next call exchanges anew; the other caller is untouched.
func TestPerCallerLogout(t *testing.T) {
	t.Parallel()
	f := newExchangeFixture(t)
	reg := confirmingRegistry()
	s := connect(t, f.cfg, reg, f.options(CallerSessionPolicy{}, nil))
	ex := tool.NewExecutor(reg, nil)
	a, _ := f.principal(t, oauthtest.Subject)
	b, _ := f.principal(t, oauthtest.Subject2)
	userOf(t, ex.Call(as(t, a), "wiki__whoami", nil))
	userOf(t, ex.Call(as(t, b), "wiki__whoami", nil))
	if err := s.LogoutCaller(boundedCtx(t, waitTime), oauth.Caller{Issuer: a.Issuer, Subject: a.Subject}); err != nil {
		t.Fatalf("LogoutCaller: %v", err)
	}
	if _, closed := sessionsOf(f.rs.Requests(), oauthtest.Subject); closed != 1 {
		t.Errorf("A's session closed upstream %d times, want 1", closed)
	}
	if st := s.Status(); st.CallerSessions != 1 {
		t.Errorf("Status().CallerSessions = %d, want B's alone", st.CallerSessions)
	}
	userOf(t, ex.Call(as(t, a), "wiki__whoami", nil))
	userOf(t, ex.Call(as(t, b), "wiki__whoami", nil))
	if n := f.op.TokenExchanges(); n != 3 {
		t.Errorf("%d token exchanges, want 3 (A again after logging out, B's kept)", n)
	}
}

// With a login per caller, a caller without a token of their own gets the
// authorization URL (beside the result, never in its message or the
// audit), completes it in a browser through the gateway's callback, and
// then reaches the server as the user they logged in as; another caller
// never gets their session or token, and is given a URL of their own; the
// server lists with the operator's own login; a caller's logout sends them
// back to authorizing.
func TestPerCallerLoginThroughCallback(t *testing.T) {
	t.Parallel()
	o := oauthtest.NewOP(t, nil)
	rs := oauthtest.NewResourceServer(t, o, nil)
	var callback atomic.Pointer[oauth.Callback]
	cbServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cb := callback.Load(); cb != nil && r.URL.Path == oauth.DefaultCallbackPath {
			cb.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(cbServer.Close)
	redirect := cbServer.URL + oauth.DefaultCallbackPath
	o.AddLoginClient("gw-login", "gw-login-secret", redirect)
	store, err := oauth.NewStore(filepath.Join(t.TempDir(), "oauth.json"), &oauth.StoreOptions{
		Passphrase: "test passphrase", Argon2: &oauth.Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	operator := oauthtest.NewBrowser() // the operator's own login, as user id1
	cfg := httpConfig("tracker", rs.URL)
	cfg.OAuth = &config.OAuth{Identity: config.IdentityCaller, RedirectURL: redirect, Issuer: o.Issuer, ClientID: "gw-login", ClientSecretEnv: "LOGIN_SECRET"}
	mem := &audit.Memory{}
	log := audit.NewLog(mem, nil)
	opts := &Options{
		Audit: log,
		OAuth: func(cfg config.Server, client *http.Client) (auth.OAuthHandler, error) {
			return oauth.NewHandler(&oauth.HandlerConfig{Server: cfg.Name, Resource: cfg.URL, Store: store, HTTPClient: client, Fetcher: &oauth.Loopback{Open: operator.Open, Out: io.Discard}})
		},
		Callers: func(cfg config.Server, client *http.Client) (*oauth.Callers, error) {
			return oauth.NewCallers(&oauth.CallersConfig{Server: cfg.Name, Resource: cfg.URL, Mode: oauth.CallerLogin, HTTPClient: client,
				Store: store, RedirectURL: cfg.OAuth.RedirectURL, Issuer: cfg.OAuth.Issuer, Client: &oauth.ClientConfig{ID: cfg.OAuth.ClientID, Secret: "gw-login-secret"}})
		},
	}
	reg := confirmingRegistry()
	s := connect(t, cfg, reg, opts)
	cb, err := oauth.NewCallback(nil, s.Callers())
	if err != nil {
		t.Fatal(err)
	}
	callback.Store(cb)
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log})
	alice := tool.Principal{Subject: "alice", Token: tool.NewBearerToken("alice-static-gateway-token")}
	bob := tool.Principal{Subject: "bob", Token: tool.NewBearerToken("bob-static-gateway-token")}

	res := ex.Call(as(t, alice), "tracker__whoami", nil)
	if res.Reason != tool.ReasonAuthorization || res.Authorization == nil || !strings.HasPrefix(res.Authorization.URL, o.Issuer) {
		t.Fatalf("alice's first call = %s %q %+v, want authorization_required with a URL at the OP", res.Reason, res.Message, res.Authorization)
	}
	aliceURL, confirm := res.Authorization.URL, res.Authorization.Confirm
	if strings.Contains(res.Message, aliceURL) || strings.Contains(res.Message, "state=") {
		t.Errorf("the result's message holds the URL: %s", res.Message)
	}
	if st := s.State(); st != Ready {
		t.Errorf("after a caller's missing authorization the server is %s, want ready for everyone else", st)
	}
	// Alice authorizes as user id2, through the gateway's callback.
	browser := oauthtest.NewBrowserAs(oauthtest.Username2)
	if err := browser.Authorize(boundedCtx(t, waitTime), aliceURL); err != nil || browser.LastStatus() != http.StatusOK {
		t.Fatalf("alice's browser: %v, callback status %d", err, browser.LastStatus())
	}
	// The sign-in is alice's once her client gives the code her browser
	// was shown.
	if res := ex.Call(as(t, alice), "tracker__whoami", nil); res.Reason != tool.ReasonAuthorization || res.Authorization == nil || !res.Authorization.AwaitsCode {
		t.Fatalf("alice's call before the code = %s %q, want authorization_required awaiting the code", res.Reason, res.Message)
	}
	if confirm == nil {
		t.Fatal("the authorization carries no Confirm")
	}
	if err := confirm(boundedCtx(t, waitTime), browser.LinkCode()); err != nil {
		t.Fatalf("confirming with the code the browser was shown: %v", err)
	}
	if got := userOf(t, ex.Call(as(t, alice), "tracker__whoami", nil)); got != oauthtest.Subject2 {
		t.Errorf("alice reached the server as %q, want %q (whom she logged in as)", got, oauthtest.Subject2)
	}
	// Bob has not authorized: he gets a URL of his own, not alice's
	// session.
	res = ex.Call(as(t, bob), "tracker__whoami", nil)
	if res.Reason != tool.ReasonAuthorization || res.Authorization == nil || res.Authorization.URL == aliceURL {
		t.Fatalf("bob's call = %s %q, want authorization_required with his own URL", res.Reason, res.Message)
	}
	for _, r := range rs.Requests() {
		switch {
		case listingMethod[r.Method] && r.Subject != oauthtest.Subject:
			t.Errorf("%s went as %q: listings go with the operator's login (%s) alone", r.Method, r.Subject, oauthtest.Subject)
		case actingMethod[r.Method] && r.Subject != oauthtest.Subject2:
			t.Errorf("%s went as %q: only alice (%s) has authorized", r.Method, r.Subject, oauthtest.Subject2)
		}
	}
	for _, h := range rs.Authorizations() {
		if strings.Contains(h, "static-gateway-token") {
			t.Fatal("a caller's gateway token reached the upstream")
		}
	}
	// The audit names each call's identity and never the URL.
	logged, _ := json.Marshal(mem.Events())
	if strings.Contains(string(logged), "state=") || strings.Contains(string(logged), aliceURL) {
		t.Error("the audit log holds an authorization URL")
	}
	ids := map[string]bool{}
	for _, ev := range mem.Events() {
		if ev.Kind == audit.CallExecuted || ev.Kind == audit.CallErrored {
			ids[ev.UpstreamIdentity] = true
		}
	}
	if !ids[`caller "alice" by authorization_code`] || !ids[`caller "bob" by authorization_code`] || len(ids) != 2 {
		t.Errorf("upstream identities in the audit = %v, want alice's and bob's", ids)
	}
	// Alice logs out: she must authorize again.
	if err := s.LogoutCaller(boundedCtx(t, waitTime), oauth.Caller{Subject: "alice"}); err != nil {
		t.Fatalf("LogoutCaller: %v", err)
	}
	if res := ex.Call(as(t, alice), "tracker__whoami", nil); res.Reason != tool.ReasonAuthorization {
		t.Errorf("alice's call after logging out = %s %q, want authorization_required", res.Reason, res.Message)
	}
}

// Subscriptions of a per-caller server are the caller's, on their own
// session; one is withdrawn on that session, and a caller without a
// session makes none to withdraw one; none is made without a caller.
func TestPerCallerSubscriptions(t *testing.T) {
	t.Parallel()
	f := newExchangeFixture(t)
	s := connect(t, f.cfg, confirmingRegistry(), f.options(CallerSessionPolicy{}, nil))
	cat := s.Catalog()
	if !cat.PerCaller() {
		t.Fatal("the catalog of an identity: caller server says it is not per caller")
	}
	a, _ := f.principal(t, oauthtest.Subject)
	b, _ := f.principal(t, oauthtest.Subject2)
	if err := cat.Subscribe(as(t, a), oauthtest.WhoamiURI); err != nil {
		t.Fatalf("Subscribe as A: %v", err)
	}
	if err := cat.Subscribe(boundedCtx(t, waitTime), oauthtest.WhoamiURI); !errors.Is(err, ErrNoCaller) {
		t.Errorf("Subscribe without a caller: %v, want ErrNoCaller", err)
	}
	if err := cat.Unsubscribe(as(t, b), oauthtest.WhoamiURI); err != nil {
		t.Errorf("Unsubscribe as B, who has no session: %v", err)
	}
	if err := cat.Unsubscribe(as(t, a), oauthtest.WhoamiURI); err != nil {
		t.Errorf("Unsubscribe as A: %v", err)
	}
	by := map[string][]string{}
	for _, r := range f.rs.Requests() {
		if r.Method == "resources/subscribe" || r.Method == "resources/unsubscribe" {
			by[r.Method] = append(by[r.Method], r.Subject)
		}
	}
	if got := by["resources/subscribe"]; len(got) != 1 || got[0] != oauthtest.Subject {
		t.Errorf("subscriptions upstream by %v, want A's alone", got)
	}
	if got := by["resources/unsubscribe"]; len(got) != 1 || got[0] != oauthtest.Subject {
		t.Errorf("withdrawals upstream by %v, want A's alone", got)
	}
	if opened, _ := sessionsOf(f.rs.Requests(), oauthtest.Subject2); opened != 0 {
		t.Errorf("B's withdrawal opened %d sessions, want none", opened)
	}
}

// A caller's call cancelled on their own session is announced upstream
// (notifications/cancelled), which ends the upstream's call.
func TestPerCallerCancellation(t *testing.T) {
	t.Parallel()
	f := newExchangeFixture(t)
	reg := confirmingRegistry()
	connect(t, f.cfg, reg, f.options(CallerSessionPolicy{}, nil))
	ex := tool.NewExecutor(reg, nil)
	a, _ := f.principal(t, oauthtest.Subject)
	ctx, cancel := context.WithCancel(as(t, a))
	rec := &recorder{first: make(chan struct{})}
	done := make(chan *tool.Result, 1)
	go func() { done <- ex.Call(tool.WithCaller(ctx, rec), "wiki__slow", nil) }()
	select {
	case <-rec.first:
	case <-time.After(waitTime):
		t.Fatal("the slow call never reported progress")
	}
	cancel()
	if res := <-done; res.Reason != tool.ReasonCancelled {
		t.Errorf("the cancelled call = %s %q, want cancelled", res.Reason, res.Message)
	}
	// The caller's session is still open: only notifications/cancelled
	// can end the upstream's call.
	eventually(t, "the upstream's call cancelled", func() bool { return f.rs.Cancelled() == 1 })
	if opened, closed := sessionsOf(f.rs.Requests(), oauthtest.Subject); opened != 1 || closed != 0 {
		t.Errorf("A's sessions: %d opened, %d closed; want 1 open", opened, closed)
	}
}

// Against a server of MCP 2026-07-28 (stateless), the callers' sessions
// speak 2026-07-28 too, and the log level travels in each of their
// requests.
func TestPerCaller2026(t *testing.T) {
	t.Parallel()
	o := oauthtest.NewOP(t, nil)
	o.AddGatewayClient(gatewayClient, gatewaySecret)
	idp := oauthtest.NewIdP(t, "unused")
	o.TrustSubjectTokens(idp, gatewayAudience)
	rs := oauthtest.NewResourceServer(t, o, &oauthtest.ResourceOptions{Verify: o.UserOrClient, Extras: true, Stateless: true})
	f := &exchangeFixture{op: o, idp: idp, rs: rs, cfg: httpConfig("wiki", rs.URL)}
	f.cfg.OAuth = &config.OAuth{Identity: config.IdentityCaller, Grant: "token_exchange", Issuer: o.Issuer, ClientID: gatewayClient, ClientSecretEnv: "GW_SECRET"}
	reg := confirmingRegistry()
	s := connect(t, f.cfg, reg, f.options(CallerSessionPolicy{}, nil))
	if st := s.Status(); st.Protocol != protocol2026 {
		t.Fatalf("the shared connection speaks %q, want %s", st.Protocol, protocol2026)
	}
	if err := s.Catalog().SetLogLevel(boundedCtx(t, waitTime), "debug"); err != nil {
		t.Fatal(err)
	}
	ex := tool.NewExecutor(reg, nil)
	for _, sub := range []string{oauthtest.Subject, oauthtest.Subject2} {
		p, _ := f.principal(t, sub)
		c := &askCaller{}
		if got := userOf(t, ex.Call(tool.WithCaller(as(t, p), c), "wiki__progress", nil)); got != sub {
			t.Errorf("the call reached the server as %q, want %q", got, sub)
		}
		c.mu.Lock()
		logs := strings.Join(c.logs, "|")
		c.mu.Unlock()
		if !strings.Contains(logs, "working for "+sub) || len(c.got()) != 3 {
			t.Errorf("caller %s was shown log lines %q and %d progress reports", sub, logs, len(c.got()))
		}
	}
	for _, r := range rs.Requests() {
		if r.Method == "tools/call" && r.Protocol != protocol2026 {
			t.Errorf("a caller's tools/call went as %q, want %s", r.Protocol, protocol2026)
		}
		if actingMethod[r.Method] && r.Subject != oauthtest.Subject && r.Subject != oauthtest.Subject2 {
			t.Errorf("%s went as %q", r.Method, r.Subject)
		}
	}
}
