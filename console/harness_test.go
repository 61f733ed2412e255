package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/console"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/workspace"
)

// TestMain lets the test binary double as the MCP servers the consoles
// show: the demo server, and a hostile one whose words are markup and
// terminal escapes.
func TestMain(m *testing.M) {
	switch os.Getenv("TOOLWIRE_TEST_SERVER") {
	case "demo":
		if err := demo.ServeStdio(context.Background(), nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "hostile":
		serveHostile()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "toolwire-console-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	os.Setenv("HOME", dir)
	code := pgtest.Main(m) // the fleet test's PostgreSQL, stopped after the tests
	os.RemoveAll(dir)
	os.Exit(code)
}

// hostileText is what the hostile server writes where a person reads:
// markup that would run a script, and escapes a terminal would act on.
const hostileText = "<script>window.__pwned = 1</script><img src=x id=pwned-img>\x1b]0;owned\x07\x1b[2J\u202eevil"

// serveHostile serves, on stdio, one tool whose description is
// hostileText.
func serveHostile() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{
		Name:        "grab",
		Description: hostileText,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"}}}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	// A name that is markup: toolwire registers it under a name of its
	// own, and the upstream name is shown beside it.
	srv.AddTool(&mcp.Tool{
		Name:        "<script>window.__pwned=3</script>",
		Description: "a tool whose name is markup",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	_ = srv.Run(context.Background(), &mcp.StdioTransport{})
}

// operatorToken is the consoles' operator token in the tests.
const operatorToken = "operator-token-of-the-console-tests-0123456789"

// fixture is a real gateway in-process over a workspace of real servers
// (this binary, as the demo server), with its console: both on 127.0.0.1.
type fixture struct {
	t       *testing.T
	dir     string
	w       *workspace.Workspace
	con     *console.Console
	url     string // the console's, no slash
	mcpURL  string // the gateway's /mcp
	handler *gateway.Handler
	caller  string // the clients' bearer token; "" for none
}

type fixtureOptions struct {
	servers string // the servers section's entries; default: the demo server
	extra   string // more of the configuration
	secure  bool   // console.Options.Secure: the browser speaks HTTPS to a proxy in front
	store   string // a PostgreSQL URL (one replica of a fleet); "" for files
	// caller is the bearer token the fixture's clients present; the
	// configuration (extra) names it in gateway.tokens.
	caller string
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func serverEntry(name, mode string) string {
	return "  " + name + ":\n    command: " + quote(os.Args[0]) + "\n    env: {TOOLWIRE_TEST_SERVER: " + mode + "}\n"
}

func newFixture(t *testing.T, o *fixtureOptions) *fixture {
	t.Helper()
	if o == nil {
		o = &fixtureOptions{}
	}
	dir := t.TempDir()
	servers := o.servers
	if servers == "" {
		servers = serverEntry("demo", "demo")
	}
	cfg := "servers:\n" + servers + o.extra
	if o.store == "" {
		cfg += "audit:\n  file: " + quote(filepath.Join(dir, "audit.jsonl")) + "\n" +
			"security:\n  pins: warn\n  pinsFile: " + quote(filepath.Join(dir, "pins.json")) + "\n"
	}
	file, err := config.Parse(filepath.Join(dir, "toolwire.yaml"), []byte(cfg), dir)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := workspace.ApprovalPolicy(file.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(&console.Options{Token: operatorToken, Poll: 200 * time.Millisecond, Secure: o.secure})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{
		Confirmer: gateway.NewApprover(policy),
		Telemetry: workspace.Telemetry{AuditSink: con.AuditSink},
		Logger:    slog.New(slog.DiscardHandler),
		StoreURL:  o.store,
		LookupEnv: fleetEnv,
		Relay:     mcpclient.RelayCapabilities{Sampling: true, Elicitation: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	gw := w.Gateway(&gateway.Options{})
	httpOpts, err := workspace.Authentication(ctx, file.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	httpOpts.Observe = con.Observe
	httpOpts.Limits = workspace.ServingOf(file.Gateway).Limits
	h := w.Handler(gw, &httpOpts)
	gts := httptest.NewServer(h)
	t.Cleanup(gts.Close)
	src := &console.Sources{Workspace: w, Limits: h.Limits}
	ch, err := con.Handler(src)
	if err != nil {
		t.Fatal(err)
	}
	cts := httptest.NewServer(ch)
	// The console closes first: it ends its event streams, which the
	// test server's Close would wait for.
	t.Cleanup(func() {
		con.Close()
		cts.Close()
	})
	return &fixture{t: t, dir: dir, w: w, con: con, url: cts.URL, mcpURL: gts.URL + "/mcp", handler: h, caller: o.caller}
}

// client returns an HTTP client that keeps cookies and follows no
// redirect, as a test that looks at each answer wants.
func (f *fixture) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signIn signs c in over HTTP as a browser on the sign-in page would.
func (f *fixture) signIn(c *http.Client) {
	f.t.Helper()
	resp := f.post(c, "/login", url.Values{"token": {operatorToken}}, f.url)
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("sign-in: %s", resp.Status)
	}
}

// post posts form to path with the Origin header origin ("" for none).
func (f *fixture) post(c *http.Client, path string, form url.Values, origin string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// get fetches path with c and returns the answer and its body.
func (f *fixture) get(c *http.Client, path string) (*http.Response, string) {
	f.t.Helper()
	resp, err := c.Get(f.url + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

// csrfOf returns the CSRF token of the page at path, as its forms carry it.
func (f *fixture) csrfOf(c *http.Client, path string) string {
	f.t.Helper()
	_, body := f.get(c, path)
	const mark = `name="csrf" value="`
	i := strings.Index(body, mark)
	if i < 0 {
		f.t.Fatalf("%s carries no CSRF token:\n%s", path, body)
	}
	rest := body[i+len(mark):]
	return rest[:strings.IndexByte(rest, '"')]
}

// rev2025 is the revision of a client that opens a session; a client of
// 2026-07-28 (go-sdk's default) opens none.
const rev2025 = "2025-11-25"

// connect connects to the gateway as a headless client (one that declares
// no elicitation) speaking rev ("" for go-sdk's latest).
func (f *fixture) connect(ctx context.Context, rev string) (*mcp.ClientSession, error) {
	var so *mcp.ClientSessionOptions
	if rev != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: f.mcpURL, MaxRetries: -1}
	if f.caller != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{f.caller}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "headless-agent", Version: "1"}, nil).Connect(ctx, tr, so)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return cs, nil
}

// callTool calls name with args through the gateway as a headless client
// (one that declares no elicitation), and returns its result.
func (f *fixture) callTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	cs, err := f.connect(ctx, "")
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// fleetEnv is the environment of the fixtures: the passphrase a fleet's
// keys are sealed under, the same for every replica.
func fleetEnv(name string) (string, bool) {
	if name == oauth.PassphraseEnv {
		return "the fleet's passphrase in the console tests", true
	}
	return "", false
}
