package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
)

// servingRE finds the URL "toolwire serve --http" prints once it listens.
var servingRE = regexp.MustCompile(`toolwire: serving MCP at (http://\S+/mcp)\n`)

// urlStderr is serve's stderr: a synchronised buffer that hands over the
// served URL, once, as soon as it is printed.
type urlStderr struct {
	syncBuffer
	once sync.Once
	url  chan string
}

func (w *urlStderr) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if m := servingRE.FindStringSubmatch(w.String()); m != nil {
		w.once.Do(func() { w.url <- m[1] })
	}
	return n, err
}

// httpServe is one "toolwire serve --http" running in-process.
type httpServe struct {
	url    string // http://127.0.0.1:PORT/mcp
	stderr *urlStderr
	cancel context.CancelFunc
	done   chan int

	stopOnce sync.Once
	code     int
}

// serveHTTPInProcess starts "toolwire serve" with args in a goroutine and
// waits, for a bounded time, until it prints the URL it serves. It is
// stopped by cancelling its context, at the latest when the test ends.
func (f *fixture) serveHTTPInProcess(t *testing.T, args ...string) *httpServe {
	t.Helper()
	stderr := &urlStderr{url: make(chan string, 1)}
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, isTerminal: func() bool { return false }, lookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	s := &httpServe{stderr: stderr, cancel: cancel, done: make(chan int, 1)}
	go func() {
		root := newRootCommand(e)
		root.SetArgs(append([]string{"--config", f.config, "serve"}, args...))
		s.done <- exitCode(root.ExecuteContext(ctx), stderr)
	}()
	t.Cleanup(func() {
		if code := s.stop(t); code != exitOK {
			t.Errorf("serve exited %d\n%s", code, stderr.String())
		}
	})
	select {
	case s.url = <-stderr.url:
	case code := <-s.done:
		s.done <- code // for stop
		t.Fatalf("serve exited %d before listening:\n%s", code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not print its URL within 30s:\n%s", stderr.String())
	}
	return s
}

// stop cancels serve and returns its exit status (-1 if it does not end).
func (s *httpServe) stop(t *testing.T) int {
	s.stopOnce.Do(func() {
		s.cancel()
		select {
		case s.code = <-s.done:
		case <-time.After(20 * time.Second):
			t.Errorf("serve did not stop within 20s\n%s", s.stderr.String())
			s.code = -1
		}
	})
	return s.code
}

// base is the served origin, http://127.0.0.1:PORT.
func (s *httpServe) base() string { return strings.TrimSuffix(s.url, "/mcp") }

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP connects a go-sdk Streamable HTTP client to url, with token
// as its bearer token ("" for none).
func connectHTTP(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectHTTPWith(t, url, token, opts, nil)
}

// connectHTTPSession connects as connectHTTP does, opening a 2025-11-25
// session rather than speaking 2026-07-28 (which has no
// logging/setLevel, say).
func connectHTTPSession(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectHTTPWith(t, url, token, opts, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

func connectHTTPWith(t *testing.T, url, token string, opts *mcp.ClientOptions, so *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	client := http.DefaultClient
	if token != "" {
		client = &http.Client{Transport: bearerTransport{token}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test-client", Version: "1"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client, MaxRetries: -1}, so)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// appendConfig adds text (a top-level section) to the fixture's config.
func (f *fixture) appendConfig(t *testing.T, text string) {
	t.Helper()
	file, err := os.OpenFile(f.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// newToken runs "toolwire token new" and returns the token it printed on
// stdout and the hash it printed on stderr.
func newToken(t *testing.T) (token, hash string) {
	t.Helper()
	o := (&fixture{config: filepath.Join(t.TempDir(), "unused.yaml")}).run(t, "", false, "token", "new")
	o.expect(t, exitOK)
	token = strings.TrimSuffix(o.stdout, "\n")
	hash, ok := strings.CutPrefix(strings.TrimSuffix(o.stderr, "\n"), "sha256: ")
	if !ok || strings.Contains(token, "\n") {
		t.Fatalf("token new printed stdout %q, stderr %q", o.stdout, o.stderr)
	}
	return token, hash
}

func TestServeHTTPWithTokensAuthenticatesAndFiltersByRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	aliceToken, aliceHash := newToken(t)
	f.appendConfig(t, `gateway:
  tokens:
    - sha256: `+aliceHash+`
      subject: alice
      role: reader
    - sha256: `+gateway.HashToken("bob-secret")+`
      subject: bob
      role: admin
  roles:
    reader: ["demo__echo", "demo__list_*"]
    admin: ["*"]
  authorizationServers: [https://auth.example.com]
`)
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// alice (reader) sees and calls only her role's tools.
	alice := connectHTTP(t, s.url, aliceToken, nil)
	if got := toolNames(t, alice); !slices.Equal(got, []string{"demo__echo", "demo__list_notes"}) {
		t.Errorf("alice sees %v, want [demo__echo demo__list_notes]", got)
	}
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "hi from alice"}})
	if err != nil || res.IsError || resultText(res) != "hi from alice" {
		t.Fatalf("alice echo = %v, %v", res, err)
	}
	if res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": "x", "body": "y"}}); err == nil && !res.IsError {
		t.Errorf("alice could call demo__write_note, which her role does not list")
	}
	if titles := f.noteTitles(t); len(titles) != 0 {
		t.Errorf("notes written through a tool alice may not use: %v", titles)
	}

	// bob (admin) sees everything.
	if got := toolNames(t, connectHTTP(t, s.url, "bob-secret", nil)); len(got) != 13 {
		t.Errorf("bob sees %d tools, want the demo's 13: %v", len(got), got)
	}

	// No token, or an unknown one: 401 with a challenge pointing at the
	// metadata, whose resource defaults to the served URL.
	metadataURL := s.base() + gateway.MetadataPath
	for _, token := range []string{"", "not-a-token", aliceHash} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		challenge := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer") || !strings.Contains(challenge, `resource_metadata="`+metadataURL+`"`) {
			t.Errorf("token %q: status %d, WWW-Authenticate %q; want 401 pointing at %s", token, resp.StatusCode, challenge, metadataURL)
		}
	}
	resp, err := http.Get(metadataURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(body, &meta); err != nil || resp.StatusCode != http.StatusOK || meta.Resource != s.url ||
		!slices.Equal(meta.AuthorizationServers, []string{"https://auth.example.com"}) {
		t.Errorf("metadata: status %d, %s (err %v); want resource %s", resp.StatusCode, body, err, s.url)
	}

	// The audit log names alice as the caller of her call.
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, `"kind":"call.executed"`) && strings.Contains(line, `"tool":"demo__echo"`) {
			found = true
			if !strings.Contains(line, `"caller":"alice"`) {
				t.Errorf("audit line of alice's call lacks her as caller: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no call.executed line for demo__echo in the audit log:\n%s", raw)
	}
}

func TestServeHTTPRefusesNonLoopbackWithoutAuthentication(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		o := f.run(t, "", false, "serve", "--http", addr)
		o.expect(t, exitUsage)
		if !strings.Contains(o.stderr, "only loopback addresses") || !strings.Contains(o.stderr, "--insecure-no-auth") || !strings.Contains(o.stderr, "gateway.tokens") {
			t.Errorf("%s: refusal does not say why and what to do:\n%s", addr, o.stderr)
		}
	}
	o := f.run(t, "", false, "serve", "--stdio", "--insecure-no-auth")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, "--insecure-no-auth goes with --http") {
		t.Errorf("--stdio --insecure-no-auth: %s", o.stderr)
	}

	// With --insecure-no-auth it starts, says so loudly, and serves
	// everything to anyone.
	// Plain HTTP on a wildcard address needs --insecure-plain-http with
	// tokens (TestExposureProblemRefusesBearerOverPlainHTTPOffLoopback).
	s := f.serveHTTPInProcess(t, "--http", "0.0.0.0:0", "--insecure-no-auth", "--insecure-plain-http")
	if !strings.Contains(s.stderr.String(), "toolwire: warning: --insecure-no-auth: serving") || !strings.Contains(s.stderr.String(), "WITHOUT CALLER AUTHENTICATION") {
		t.Errorf("no loud warning:\n%s", s.stderr.String())
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.base(), "http://"))
	cs := connectHTTP(t, "http://127.0.0.1:"+port+"/mcp", "", nil)
	if got := toolNames(t, cs); len(got) != 13 {
		t.Errorf("unauthenticated client sees %d tools, want 13", len(got))
	}
	_ = cs.Close() // else shutdown waits out its open event stream
	if code := s.stop(t); code != exitOK {
		t.Errorf("serve exited %d after cancel\n%s", code, s.stderr.String())
	}
}

func TestServeHTTPWithTokensAcceptsAnyAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.appendConfig(t, "gateway:\n  tokens:\n    - {sha256: "+gateway.HashToken("t")+", subject: s, role: r}\n  roles: {r: ['*']}\n")
	// Plain HTTP on a wildcard address needs --insecure-plain-http with
	// tokens (TestExposureProblemRefusesBearerOverPlainHTTPOffLoopback).
	s := f.serveHTTPInProcess(t, "--http", "0.0.0.0:0", "--insecure-no-auth", "--insecure-plain-http")
	out := s.stderr.String()
	if strings.Contains(out, "WITHOUT CALLER AUTHENTICATION") || !strings.Contains(out, "--insecure-no-auth has no effect") || !strings.Contains(out, "gateway.resourceURL is not set") {
		t.Errorf("stderr:\n%s", out)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.base(), "http://"))
	resp, err := http.Post("http://127.0.0.1:"+port+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("request without a token: status %d, want 401", resp.StatusCode)
	}
}

func TestServeHTTPOptionsFromConfig(t *testing.T) {
	t.Parallel()
	gwc := &config.Gateway{
		Tokens:               []config.GatewayToken{{SHA256: gateway.HashToken("t"), Subject: "s", Role: "r"}},
		Roles:                map[string][]string{"r": {"demo__*"}},
		ResourceURL:          "https://mcp.example.com/mcp",
		AuthorizationServers: []string{"https://auth.example.com"},
	}
	opts, err := httpOptions(context.Background(), gwc, true)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Verifier == nil || !opts.Stateless || opts.ResourceURL != gwc.ResourceURL || opts.AuthorizationServers[0] != "https://auth.example.com" || opts.Roles["r"][0] != "demo__*" {
		t.Errorf("options = %+v", opts)
	}
	info, err := opts.Verifier(context.Background(), "t", nil)
	if err != nil || info.UserID != "s" {
		t.Errorf("verifier(t) = %+v, %v", info, err)
	}
	if _, err := opts.Verifier(context.Background(), "u", nil); err == nil {
		t.Errorf("verifier accepted an unknown token")
	}
	for _, g := range []*config.Gateway{nil, {}, {Tokens: []config.GatewayToken{}}} {
		if opts, err := httpOptions(context.Background(), g, false); err != nil || opts.Verifier != nil {
			t.Errorf("httpOptions(%+v) = %+v, %v; want no authentication", g, opts, err)
		}
	}

	// A configured resource URL is kept; without one it is the address
	// as given, with the port bound.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stderr syncBuffer
	announceAuth(newLogger(&stderr, &globalFlags{}, nil), gwc, "127.0.0.1:0", ln, &opts, false, false)
	if opts.ResourceURL != "https://mcp.example.com/mcp" {
		t.Errorf("configured resource URL replaced by %q", opts.ResourceURL)
	}
	opts.ResourceURL = ""
	announceAuth(newLogger(&stderr, &globalFlags{}, nil), gwc, "localhost:0", ln, &opts, false, false)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if want := "http://localhost:" + port + "/mcp"; opts.ResourceURL != want {
		t.Errorf("default resource URL = %q, want %q", opts.ResourceURL, want)
	}
}

func TestServeApprovalsFromConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.appendConfig(t, `gateway:
  approvals:
    write: allow
    destructive: elicit
    tools: {demo__delete_note: deny}
`)
	var mu sync.Mutex
	var asked []string
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Params.Message)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}

	cs := f.serveStdio(t, opts)
	if res := call(cs, "demo__write_note", map[string]any{"title": "kept", "body": "b"}); res.IsError {
		t.Errorf("write allowed by the config = %q", resultText(res))
	}
	// deny refuses without asking, although this client could be asked.
	res := call(cs, "demo__delete_note", map[string]any{"title": "kept"})
	if !res.IsError || !strings.Contains(resultText(res), "approval required") || !strings.Contains(resultText(res), "policy refuses") {
		t.Errorf("denied delete = %q", resultText(res))
	}
	if titles := f.noteTitles(t); len(titles) != 1 || titles[0] != "kept" {
		t.Errorf("notes = %v, want [kept]: the denied delete must not run", titles)
	}
	mu.Lock()
	if len(asked) != 0 {
		t.Errorf("the client was asked %q; allow and deny ask nobody", asked)
	}
	mu.Unlock()

	// A flag given explicitly replaces the config's tier value; the
	// per-tool entry still names its tool.
	cs = f.serveStdio(t, opts, "--approve-write", "deny", "--approve-destructive", "allow")
	if res := call(cs, "demo__write_note", map[string]any{"title": "other", "body": "b"}); !res.IsError || !strings.Contains(resultText(res), "policy refuses") {
		t.Errorf("write with --approve-write deny = %q", resultText(res))
	}
	if res := call(cs, "demo__delete_note", map[string]any{"title": "kept"}); !res.IsError || !strings.Contains(resultText(res), "policy refuses") {
		t.Errorf("delete denied per tool, with --approve-destructive allow = %q", resultText(res))
	}
	if titles := f.noteTitles(t); len(titles) != 1 || titles[0] != "kept" {
		t.Errorf("notes = %v, want [kept]", titles)
	}
}

func TestServeGatewaySectionInTwoFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write("first.yaml", "servers:\n  b: {command: x}\ngateway:\n  approvals: {write: deny}\n")
	second := write("second.yaml", "servers:\n  c: {command: x}\n\ngateway:\n  approvals: {write: allow}\n")

	// Two are an error naming both files and lines (config.LoadAll's own
	// test checks the merge; this one, that serve reports it).
	want := second + ":4: gateway: also configured at " + first + ":3; only one configuration file may have a gateway section"
	o := (&fixture{dir: dir, config: first}).run(t, "", false, "--config", second, "serve", "--stdio")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, o.stderr)
	}

	// A broken file is reported as loading it always is.
	bad := write("bad.yaml", "servers:\n  a: {command: x}\ngateway:\n  approvals: {write: ask}\n")
	o = (&fixture{dir: dir, config: bad}).run(t, "", false, "serve", "--stdio")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, bad+`:4: gateway.approvals.write: unknown approval "ask" (want elicit, deny or allow)`) {
		t.Errorf("stderr:\n%s", o.stderr)
	}
}

func TestTokenNewAndHashAgree(t *testing.T) {
	t.Parallel()
	token, hash := newToken(t)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 32 {
		t.Errorf("token %q is not 32 bytes of base64url (err %v)", token, err)
	}
	if len(hash) != 64 || gateway.HashToken(token) != hash {
		t.Errorf("printed hash %q, want SHA-256 of the token %q", hash, gateway.HashToken(token))
	}
	f := &fixture{config: filepath.Join(t.TempDir(), "unused.yaml")}
	for _, in := range []string{token + "\n", token, token + "\r\n", token + "\n\n"} {
		o := f.run(t, in, false, "token", "hash")
		o.expect(t, exitOK)
		if o.stdout != hash+"\n" {
			t.Errorf("token hash of %q printed %q, want %q", in, o.stdout, hash)
		}
	}
	if other, _ := newToken(t); other == token {
		t.Errorf("two new tokens are the same: %q", token)
	}
	// The hash is what the configuration takes.
	if _, err := config.Parse("t.yaml", []byte("servers:\n  a: {command: x}\ngateway:\n  tokens: [{sha256: "+hash+", subject: s, role: r}]\n  roles: {r: []}\n"), ""); err != nil {
		t.Errorf("the printed hash does not configure: %v", err)
	}

	for _, c := range []struct{ in, want string }{
		{"", "no token on stdin"},
		{"\n", "no token on stdin"},
		{"one\ntwo\n", "more than one line"},
		{"has space\n", "spaces or control characters"},
		{"tab\there\n", "spaces or control characters"},
		{strings.Repeat("x", 70<<10), "more than 65536 bytes"},
	} {
		o := f.run(t, c.in, false, "token", "hash")
		o.expect(t, exitUsage)
		if !strings.Contains(o.stderr, c.want) || o.stdout != "" {
			t.Errorf("token hash of %.20q: stdout %q, stderr %q; want %q", c.in, o.stdout, o.stderr, c.want)
		}
	}
}

// testIssuer is an issuer of JWTs for tests: an ECDSA P-256 key whose
// public half an httptest server publishes as a JWK set.
type testIssuer struct {
	key     *ecdsa.PrivateKey
	jwksURL string
}

const (
	jwtIssuer   = "https://auth.example.com"
	jwtAudience = "https://mcp.example.com/mcp"
)

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "ec-1", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return &testIssuer{key: key, jwksURL: srv.URL + "/jwks.json"}
}

// token signs a JWT for subject with role in the claim roleClaim, expiring
// at exp.
func (i *testIssuer) token(t *testing.T, subject, roleClaim, role string, exp time.Time) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: i.key, KeyID: "ec-1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": jwtIssuer, "aud": jwtAudience, "sub": subject, roleClaim: role,
		"iat": exp.Add(-time.Hour).Unix(), "exp": exp.Unix(),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// postStatus posts a ping to url with token and returns the status.
func postStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestServeHTTPWithJWTAuthenticatesAndFiltersByRole(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	f := newFixture(t, "")
	f.appendConfig(t, `gateway:
  tokens:
    - sha256: `+gateway.HashToken("bob-secret")+`
      subject: bob
      role: admin
  roles:
    reader: ["demo__echo", "demo__list_*"]
    admin: ["*"]
  jwt:
    jwksURL: `+iss.jwksURL+`
    issuer: `+jwtIssuer+`
    audience: `+jwtAudience+`
    roleClaim: toolwire_role
`)
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// carol's JWT grants the reader role: she sees and calls only its tools.
	carol := connectHTTP(t, s.url, iss.token(t, "carol", "toolwire_role", "reader", time.Now().Add(time.Hour)), nil)
	if got := toolNames(t, carol); !slices.Equal(got, []string{"demo__echo", "demo__list_notes"}) {
		t.Errorf("carol sees %v, want [demo__echo demo__list_notes]", got)
	}
	res, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "hi from carol"}})
	if err != nil || res.IsError || resultText(res) != "hi from carol" {
		t.Fatalf("carol echo = %v, %v", res, err)
	}
	if res, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": "x", "body": "y"}}); err == nil && !res.IsError {
		t.Errorf("carol could call demo__write_note, which her role does not list")
	}

	// A static token of the same configuration still works.
	if got := toolNames(t, connectHTTP(t, s.url, "bob-secret", nil)); len(got) != 13 {
		t.Errorf("bob sees %d tools, want the demo's 13: %v", len(got), got)
	}

	// An expired JWT, one in the wrong claim's role (so no role), and an
	// unknown static token.
	expired := iss.token(t, "carol", "toolwire_role", "admin", time.Now().Add(-time.Hour))
	if code := postStatus(t, s.url, expired); code != http.StatusUnauthorized {
		t.Errorf("expired JWT: status %d, want 401", code)
	}
	if code := postStatus(t, s.url, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("unknown token: status %d, want 401", code)
	}
	noRole := connectHTTP(t, s.url, iss.token(t, "dave", "role", "admin", time.Now().Add(time.Hour)), nil)
	if got := toolNames(t, noRole); len(got) != 0 {
		t.Errorf("a JWT without the configured role claim sees %v, want nothing", got)
	}

	// Without authorizationServers, the metadata announces the issuer.
	resp, err := http.Get(s.base() + gateway.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var meta struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(body, &meta); err != nil || !slices.Equal(meta.AuthorizationServers, []string{jwtIssuer}) {
		t.Errorf("metadata %s (err %v); want authorization_servers [%s]", body, err, jwtIssuer)
	}

	// The audit log names carol as the caller of her call.
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"caller":"carol"`) {
		t.Errorf("audit log lacks carol as a caller:\n%s", raw)
	}
}

func TestServeHTTPWithJWTAcceptsAnyAddress(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	f := newFixture(t, "")
	f.appendConfig(t, "gateway:\n  roles: {r: ['*']}\n  jwt: {jwksURL: "+iss.jwksURL+", issuer: "+jwtIssuer+", audience: "+jwtAudience+"}\n")
	s := f.serveHTTPInProcess(t, "--http", "0.0.0.0:0", "--insecure-plain-http")
	if out := s.stderr.String(); strings.Contains(out, "WITHOUT CALLER AUTHENTICATION") {
		t.Errorf("stderr:\n%s", out)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.base(), "http://"))
	if code := postStatus(t, "http://127.0.0.1:"+port+"/mcp", ""); code != http.StatusUnauthorized {
		t.Errorf("request without a token: status %d, want 401", code)
	}
}

func TestServeHTTPJWKSUnreachableFailsStart(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	jwksURL := srv.URL + "/jwks.json"
	srv.Close()
	f := newFixture(t, "")
	f.appendConfig(t, "gateway:\n  roles: {r: ['*']}\n  jwt: {jwksURL: "+jwksURL+", issuer: "+jwtIssuer+", audience: "+jwtAudience+"}\n")
	o := f.run(t, "", false, "serve", "--http", "127.0.0.1:0")
	o.expect(t, exitToolErr)
	if !strings.Contains(o.stderr, "gateway.jwt") || !strings.Contains(o.stderr, jwksURL) || strings.Contains(o.stderr, "serving MCP") {
		t.Errorf("stderr does not name the JWK set URL %s:\n%s", jwksURL, o.stderr)
	}
}

func TestAnyVerifier(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t)
	gwc := &config.Gateway{
		Tokens: []config.GatewayToken{{SHA256: gateway.HashToken("t"), Subject: "s", Role: "r"}},
		Roles:  map[string][]string{"r": {"*"}},
		JWT:    &config.GatewayJWT{JWKSURL: iss.jwksURL, Issuer: jwtIssuer, Audience: jwtAudience},
	}
	opts, err := httpOptions(context.Background(), gwc, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if info, err := opts.Verifier(ctx, "t", nil); err != nil || info.UserID != "s" {
		t.Errorf("static token: %+v, %v", info, err)
	}
	if info, err := opts.Verifier(ctx, iss.token(t, "j", "role", "r", time.Now().Add(time.Hour)), nil); err != nil || info.UserID != "j" {
		t.Errorf("JWT: %+v, %v", info, err)
	}
	for _, tok := range []string{"u", iss.token(t, "j", "role", "r", time.Now().Add(-time.Hour))} {
		if _, err := opts.Verifier(ctx, tok, nil); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("refused token: err %v, want auth.ErrInvalidToken", err)
		}
	}
	if !slices.Equal(opts.AuthorizationServers, []string{jwtIssuer}) {
		t.Errorf("AuthorizationServers = %v, want the issuer", opts.AuthorizationServers)
	}
	gwc.AuthorizationServers = []string{"https://other.example.com"}
	if opts, err = httpOptions(ctx, gwc, false); err != nil || !slices.Equal(opts.AuthorizationServers, gwc.AuthorizationServers) {
		t.Errorf("configured AuthorizationServers replaced: %v, %v", opts.AuthorizationServers, err)
	}
}
