package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/workspace"
)

// gatewayAudience is the audience of the callers' JWTs: the gateway's.
const gatewayAudience = "https://gateway.test/mcp"

// bearer is an http.RoundTripper that adds a caller's token to every
// request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// gatewayClient is one caller's MCP client of the gateway: its revision,
// and whether it declares URL-mode elicitation, which it answers by having
// its user (browser) authorize at the URL before accepting.
type gatewayClient struct {
	session   *mcp.ClientSession
	mu        sync.Mutex
	asked     []*mcp.ElicitParams
	completed []string // the elicitation IDs the gateway said were complete
}

func connectCaller(t *testing.T, ctx context.Context, endpoint, token, revision string, browser *oauthtest.Browser) *gatewayClient {
	t.Helper()
	gc := &gatewayClient{}
	var opts *mcp.ClientOptions
	if browser != nil {
		opts = &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				gc.mu.Lock()
				gc.asked = append(gc.asked, req.Params)
				gc.mu.Unlock()
				if req.Params.Mode != "url" {
					return &mcp.ElicitResult{Action: "decline"}, nil
				}
				if strings.Contains(req.Params.URL, "/approvals/") {
					// The gateway's page for the sign-in's code: the user
					// enters the code the browser was shown.
					if err := enterCode(ctx, req.Params.URL, browser.LinkCode()); err != nil {
						return nil, err
					}
					return &mcp.ElicitResult{Action: "accept"}, nil
				}
				if err := browser.Authorize(ctx, req.Params.URL); err != nil || browser.LastStatus() != http.StatusOK {
					return nil, fmt.Errorf("the browser: %v (callback status %d)", err, browser.LastStatus())
				}
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
			ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
				gc.mu.Lock()
				gc.completed = append(gc.completed, req.Params.ElicitationID)
				gc.mu.Unlock()
			},
		}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "caller", Version: "1"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connecting a caller (%s): %v", revision, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	gc.session = cs
	return gc
}

// enterCode posts code to the gateway's code page at pageURL, as its form
// does in a browser.
func enterCode(ctx context.Context, pageURL, code string) error {
	u, err := url.Parse(pageURL)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pageURL, strings.NewReader(url.Values{"code": {code}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", u.Scheme+"://"+u.Host)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "confirmed") {
		return fmt.Errorf("the code page answered %d: %s", resp.StatusCode, body)
	}
	return nil
}

// whoami calls a server's whoami tool through the gateway and returns the
// user it says, or the error result's text.
func (gc *gatewayClient) whoami(t *testing.T, ctx context.Context, tool string) (user, errText string) {
	t.Helper()
	res, err := gc.session.CallTool(ctx, &mcp.CallToolParams{Name: tool})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	if res.IsError {
		return "", res.Content[0].(*mcp.TextContent).Text
	}
	m, _ := res.StructuredContent.(map[string]any)
	user, _ = m["user"].(string)
	return user, ""
}

// Two callers of one gateway, each with their own JWT from the identity
// provider, reach two OAuth-protected upstreams each with their own
// upstream token: one by token exchange, one by a login per caller
// completed in a browser through the gateway's callback; the login URL
// reaches a client that declares URL-mode elicitation as an elicitation
// (on 2026-07-28 and on a 2025-11-25 session) and another in the error
// result's text; the upstreams list with the operator's identity alone and
// never see a caller's gateway token or the operator's token on a call;
// the audit log says which identity each call used and never holds a URL
// or a token.
func TestGatewayCallersReachUpstreamsWithTheirOwnIdentity(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op := oauthtest.NewOP(t, nil)
	op.AddGatewayClient("gw-e2e", "gw-e2e-secret")
	idp := oauthtest.NewIdP(t, "unused")
	op.TrustSubjectTokens(idp, gatewayAudience)
	wiki := oauthtest.NewResourceServer(t, op, &oauthtest.ResourceOptions{Verify: op.UserOrClient, Extras: true})
	tracker := oauthtest.NewResourceServer(t, op, &oauthtest.ResourceOptions{Verify: op.UserOrClient, Extras: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()

	f := newFixture(t)
	file := f.load(t, fmt.Sprintf(`oauth:
  redirectUrl: %s/oauth/callback
gateway:
  jwt: {jwksURL: %q, issuer: %q, audience: %q}
  roles: {staff: ["*"]}
servers:
  wiki-e2e:
    url: %s
    defaultTier: read
    oauth: {identity: caller, grant: token_exchange, issuer: %q, clientId: gw-e2e, clientSecretEnv: GW_E2E_SECRET}
  tracker-e2e:
    url: %s
    defaultTier: read
    oauth: {identity: caller}
audit:
  file: audit.jsonl
security:
  pins: off
`, base, idp.JWKSURL(), idp.Issuer, gatewayAudience, wiki.URL, op.Issuer, tracker.URL))
	f.audit = filepath.Join(f.dir, "audit.jsonl")
	lookup := func(name string) (string, bool) {
		if name == "GW_E2E_SECRET" {
			return "gw-e2e-secret", true
		}
		return "", false
	}
	operator := oauthtest.NewBrowser() // the operator's own login at the tracker, as id1, for its listing
	w, err := workspace.Open(ctx, file, &workspace.Options{
		Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{}), LookupEnv: lookup,
		Relay: mcpclient.RelayCapabilities{Elicitation: true}, OAuthFetcher: &oauth.Loopback{Open: operator.Open, Out: io.Discard},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if paths := w.CallerCallbackPaths(); len(paths) != 1 || paths[0] != oauth.DefaultCallbackPath {
		t.Fatalf("callback paths %v, want [%s]", paths, oauth.DefaultCallbackPath)
	}
	hopts, err := workspace.Authentication(ctx, file.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	gw := w.Gateway(nil)
	hs := &http.Server{Handler: w.Handler(gw, &hopts), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	endpoint := base + "/mcp"

	aliceJWT := idp.CallerToken(t, oauthtest.Subject, gatewayAudience, "staff", time.Hour)
	bobJWT := idp.CallerToken(t, oauthtest.Subject2, gatewayAudience, "staff", time.Hour)
	aliceBrowser := oauthtest.NewBrowserAs(oauthtest.Username)
	alice := connectCaller(t, ctx, endpoint, aliceJWT, "2026-07-28", aliceBrowser) // URL-mode elicitation
	bob := connectCaller(t, ctx, endpoint, bobJWT, "2025-11-25", nil)              // a plain client

	// Token exchange: each caller reaches the wiki as themselves.
	if u, e := alice.whoami(t, ctx, "wiki-e2e__whoami"); u != oauthtest.Subject {
		t.Errorf("alice reached the wiki as %q (%s), want %s", u, e, oauthtest.Subject)
	}
	if u, e := bob.whoami(t, ctx, "wiki-e2e__whoami"); u != oauthtest.Subject2 {
		t.Errorf("bob reached the wiki as %q (%s), want %s", u, e, oauthtest.Subject2)
	}

	// A login per caller. Bob's plain client gets the URL in the result's
	// text; his browser completes it through the gateway's callback.
	u, text := bob.whoami(t, ctx, "tracker-e2e__whoami")
	i := strings.Index(text, op.Issuer+"/")
	if u != "" || i < 0 {
		t.Fatalf("bob's first tracker call: user %q, text %q; want an error naming an authorization URL at the OP", u, text)
	}
	bobURL := strings.Fields(text[i:])[0]
	bobBrowser := oauthtest.NewBrowserAs(oauthtest.Username2)
	if err := bobBrowser.Authorize(ctx, bobURL); err != nil || bobBrowser.LastStatus() != http.StatusOK {
		t.Fatalf("bob's browser: %v, the callback answered %d", err, bobBrowser.LastStatus())
	}
	// The sign-in is bob's once he enters the code his browser was shown,
	// at the page his next call names.
	u, text = bob.whoami(t, ctx, "tracker-e2e__whoami")
	i = strings.Index(text, base+"/approvals/")
	if u != "" || i < 0 {
		t.Fatalf("bob's call after signing in: user %q, text %q; want an error naming the gateway's code page", u, text)
	}
	if err := enterCode(ctx, strings.Fields(text[i:])[0], bobBrowser.LinkCode()); err != nil {
		t.Fatalf("bob entering his code: %v", err)
	}
	if u, e := bob.whoami(t, ctx, "tracker-e2e__whoami"); u != oauthtest.Subject2 {
		t.Errorf("bob reached the tracker as %q (%s) after authorizing, want %s", u, e, oauthtest.Subject2)
	}
	// Alice's client declares URL mode: the gateway asks it during the
	// call (an input request of the parked call), her browser authorizes,
	// and the call goes on.
	if u, e := alice.whoami(t, ctx, "tracker-e2e__whoami"); u != oauthtest.Subject {
		t.Errorf("alice reached the tracker as %q (%s), want %s", u, e, oauthtest.Subject)
	}
	alice.mu.Lock()
	if len(alice.asked) != 2 || alice.asked[0].Mode != "url" || !strings.HasPrefix(alice.asked[0].URL, op.Issuer+"/") || alice.asked[0].URL == bobURL ||
		!strings.HasPrefix(alice.asked[1].URL, base+"/approvals/") {
		t.Errorf("alice was asked %+v, want a URL-mode elicitation of her own, then the code page", alice.asked)
	}
	alice.mu.Unlock()

	// Alice logs out of the tracker; on a 2025-11-25 session her read gets
	// URLElicitationRequired, and her call an elicitation during the call,
	// then the completion.
	if err := w.LogoutCaller(ctx, "tracker-e2e", oauth.Caller{Issuer: idp.Issuer, Subject: oauthtest.Subject}); err != nil {
		t.Fatalf("LogoutCaller: %v", err)
	}
	alice25 := connectCaller(t, ctx, endpoint, aliceJWT, "2025-11-25", aliceBrowser)
	_, err = alice25.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://tracker-e2e/" + oauthtest.WhoamiURI})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != mcp.CodeURLElicitationRequired || !strings.Contains(string(we.Data), op.Issuer) {
		t.Errorf("alice's read after logging out: %v, want URLElicitationRequired naming the URL", err)
	}
	if u, e := alice25.whoami(t, ctx, "tracker-e2e__whoami"); u != oauthtest.Subject {
		t.Errorf("alice reached the tracker as %q (%s) on a 2025 session, want %s", u, e, oauthtest.Subject)
	}
	alice25.mu.Lock()
	if len(alice25.asked) != 2 || len(alice25.completed) != 1 || alice25.completed[0] != alice25.asked[0].ElicitationID {
		t.Errorf("alice's 2025 session was asked %d times and told %v complete, want the sign-in's elicitation, its completion, then the code page", len(alice25.asked), alice25.completed)
	}
	alice25.mu.Unlock()
	rr, err := alice25.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://tracker-e2e/" + oauthtest.WhoamiURI})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != oauthtest.Subject {
		t.Errorf("alice's read after authorizing: %+v, %v", rr, err)
	}

	// Bob logs out; his plain client's read is refused with an error that
	// names a new URL of his.
	if err := w.LogoutCaller(ctx, "tracker-e2e", oauth.Caller{Issuer: idp.Issuer, Subject: oauthtest.Subject2}); err != nil {
		t.Fatalf("LogoutCaller: %v", err)
	}
	_, err = bob.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://tracker-e2e/" + oauthtest.WhoamiURI})
	if err == nil || !strings.Contains(err.Error(), op.Issuer+"/") || !errors.As(err, &we) || we.Code == mcp.CodeURLElicitationRequired {
		t.Errorf("bob's read after logging out: %v, want an error naming the URL (not URL elicitation: he did not declare it)", err)
	}

	// What the upstreams saw.
	for name, rs := range map[string]*oauthtest.ResourceServer{"wiki": wiki, "tracker": tracker} {
		operatorTokens := map[string]bool{}
		for _, r := range rs.Requests() {
			if r.Method == "tools/list" {
				operatorTokens[r.Authorization] = true
			}
		}
		for _, r := range rs.Requests() {
			acting := r.Method == "tools/call" || r.Method == "resources/read"
			switch {
			case r.Method == "tools/list" && name == "wiki" && r.Subject != "gw-e2e":
				t.Errorf("the wiki listed as %q, want the gateway's client alone", r.Subject)
			case r.Method == "tools/list" && name == "tracker" && r.Subject != oauthtest.Subject:
				t.Errorf("the tracker listed as %q, want the operator's login (%s)", r.Subject, oauthtest.Subject)
			case acting && operatorTokens[r.Authorization]:
				t.Errorf("%s: a %s carried the operator's token", name, r.Method)
			case acting && r.Subject != oauthtest.Subject && r.Subject != oauthtest.Subject2:
				t.Errorf("%s: a %s went as %q", name, r.Method, r.Subject)
			}
		}
		for _, h := range rs.Authorizations() {
			if strings.Contains(h, aliceJWT) || strings.Contains(h, bobJWT) {
				t.Fatalf("%s received a caller's gateway token", name)
			}
		}
	}

	// The audit log: which identity each call used, and no URL or token.
	w.Close()
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{aliceJWT, bobJWT, bobURL, "state="} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit log holds %.30s...", secret)
		}
	}
	ids := map[string]map[string]bool{} // tool -> identities of executed calls
	for _, ev := range f.auditEvents(t) {
		if ev.Kind != audit.CallExecuted {
			continue
		}
		if ids[ev.Tool] == nil {
			ids[ev.Tool] = map[string]bool{}
		}
		ids[ev.Tool][ev.UpstreamIdentity] = true
	}
	want := map[string][]string{
		"wiki-e2e__whoami": {
			fmt.Sprintf("caller %q (%s) by token_exchange", oauthtest.Subject, idp.Issuer),
			fmt.Sprintf("caller %q (%s) by token_exchange", oauthtest.Subject2, idp.Issuer)},
		"tracker-e2e__whoami": {
			fmt.Sprintf("caller %q (%s) by authorization_code", oauthtest.Subject, idp.Issuer),
			fmt.Sprintf("caller %q (%s) by authorization_code", oauthtest.Subject2, idp.Issuer)},
	}
	for tool, idents := range want {
		if len(ids[tool]) != len(idents) {
			t.Errorf("%s: executed calls name identities %v, want %v", tool, ids[tool], idents)
		}
		for _, id := range idents {
			if !ids[tool][id] {
				t.Errorf("%s: no executed call names %q (got %v)", tool, id, ids[tool])
			}
		}
	}
}

// The gateway mounts the callback of callers' logins at each configured
// redirect path; a reload that would need another is refused (its route
// is made with the handler), one that keeps the path is taken.
func TestReloadKeepsTheCallbackPaths(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port that is ours and closed: the server fails to start
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	f := newFixture(t)
	cfg := func(redirect string) string {
		return demoServer + `  tracker-reload:
    url: ` + unreachable + `
    oauth: {identity: caller, redirectUrl: "http://127.0.0.1:1` + redirect + `"}
gateway:
  tokens:
    - {sha256: ` + gateway.HashToken("a-token-of-the-callback-test") + `, subject: a, role: r}
  roles: {r: ["*"]}
audit:
  file: audit.jsonl
security:
  pins: off
`
	}
	file := f.load(t, cfg("/oauth/callback"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{}), OnFailed: func(string, string) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	hopts, err := workspace.Authentication(ctx, file.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	h := w.Handler(w.Gateway(nil), &hopts)
	// The callback is served outside authentication: a browser's GET
	// without a token reaches it (and, with no pending authorization, is
	// told so), not a 401.
	for path, want := range map[string]int{"/oauth/callback?state=x&code=y": http.StatusBadRequest, "/elsewhere": http.StatusNotFound} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
	next := f.load(t, cfg("/other/callback"))
	if _, err := w.Reload(ctx, func() (*config.File, *workspace.ReloadOptions, error) { return next, nil, nil }); !errors.Is(err, workspace.ErrNeedsRestart) || !strings.Contains(err.Error(), "/other/callback") {
		t.Errorf("a reload with another callback path: %v, want ErrNeedsRestart naming it", err)
	}
	same := f.load(t, cfg("/oauth/callback"))
	if _, err := w.Reload(ctx, func() (*config.File, *workspace.ReloadOptions, error) { return same, nil, nil }); err != nil {
		t.Errorf("a reload keeping the callback path: %v", err)
	}
}
