package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// limitRig is the fixture's gateway served over HTTP on 127.0.0.1 with
// opts, plus a "hang" tool that blocks until its call is cancelled, and an
// audit log in memory.
type limitRig struct {
	f       *fixture
	url     string
	h       *Handler
	mem     *audit.Memory
	entered chan struct{} // one value per hang call that started

	mu     sync.Mutex
	events []Event
}

func newLimitRig(t *testing.T, opts HTTPOptions, mw ...mcp.Middleware) *limitRig {
	t.Helper()
	f := newFixture(t, ApprovalPolicy{Write: Allow, Destructive: Allow})
	r := &limitRig{f: f, mem: &audit.Memory{}, entered: make(chan struct{}, 64)}
	if err := f.reg.Register(&tool.Tool{
		Name: "hang", Description: "waits for cancellation", InputSchema: json.RawMessage(`{"type":"object"}`), Tier: tool.Read,
		Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			r.entered <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}); err != nil {
		t.Fatal(err)
	}
	log := audit.NewLog(r.mem, nil)
	f.ex = tool.NewExecutor(f.reg, &tool.ExecutorOptions{Audit: log})
	f.gw = New(f.ex, &Options{Middleware: mw})
	opts.Audit = log
	opts.Observe = func(e Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }
	ts := httptest.NewServer(nil)
	r.h = f.gw.Handler(&opts)
	ts.Config.Handler = r.h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); r.h.Close() })
	r.url = ts.URL
	return r
}

func (r *limitRig) eventsOf(kind EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (r *limitRig) waitEntered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("the hang tool did not start %d calls", n)
		}
	}
}

// initialize opens a session by hand, returning the response (body read)
// and its session id.
func initialize(t *testing.T, url, token string, header map[string]string) (*http.Response, string) {
	t.Helper()
	return initializeAt(t, url, token, "2025-06-18", header)
}

// initializeAt is initialize asking for revision version.
func initializeAt(t *testing.T, url, token, version string, header map[string]string) (*http.Response, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res, res.Header.Get("Mcp-Session-Id")
}

// deleteSession ends a session as a client does, by DELETE.
func deleteSession(t *testing.T, url, sid string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodDelete, url+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// connectPlain opens a 2025-11-25 session without a token.
func connectPlain(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctxT(t),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}, legacySession)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestSessionFloodIsRefusedWhileExistingSessionsKeepWorking(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{Limits: Limits{MaxSessions: 3, RetryAfter: 2 * time.Second}})
	cs := connectPlain(t, r.url)
	for range 2 {
		if res, sid := initialize(t, r.url, "", nil); res.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("session within the limit: status %d, session %q", res.StatusCode, sid)
		}
	}
	for i := range 20 {
		res, sid := initialize(t, r.url, "", nil)
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "2" || sid != "" {
			t.Fatalf("session %d past the limit: status %d, Retry-After %q, session %q; want 503, 2 and none", i, res.StatusCode, res.Header.Get("Retry-After"), sid)
		}
		if text, isErr := callText(t, cs, "read_file", map[string]any{"path": "x"}); isErr || !strings.Contains(text, "ran with") {
			t.Fatalf("the existing session's call during the flood: %q (isError %v)", text, isErr)
		}
	}
	var refused int
	for _, ev := range r.mem.Events() {
		if ev.Kind == audit.SessionRefused && ev.Reason == LimitSessions {
			refused++
		}
	}
	if refused != 20 {
		t.Errorf("audit has %d session.refused events for %s, want 20", refused, LimitSessions)
	}
	if n := len(r.eventsOf(SessionRefused)); n != 20 {
		t.Errorf("observer told of %d refused sessions, want 20", n)
	}
}

func TestSessionsPerCallerAreRefusedWith429(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ApprovalPolicy{})
	verify, err := StaticVerifier([]StaticToken{
		{SHA256: HashToken("alice-token"), Subject: "alice", Role: "r"},
		{SHA256: HashToken("bob-token"), Subject: "bob", Role: "r"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mem := &audit.Memory{}
	ts := httptest.NewServer(nil)
	h := f.gw.Handler(&HTTPOptions{Verifier: verify, Roles: Roles{"r": {"*"}}, ResourceURL: ts.URL + "/mcp",
		Limits: Limits{MaxSessionsPerCaller: 2}, Audit: audit.NewLog(mem, nil)})
	ts.Config.Handler = h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	for range 2 {
		if res, _ := initialize(t, ts.URL, "alice-token", nil); res.StatusCode != http.StatusOK {
			t.Fatalf("alice within her limit: %d", res.StatusCode)
		}
	}
	if res, _ := initialize(t, ts.URL, "alice-token", nil); res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("alice past her limit: %d, Retry-After %q; want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if res, _ := initialize(t, ts.URL, "bob-token", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("bob, under his own limit: %d", res.StatusCode)
	}
	evs := mem.Events()
	if len(evs) != 1 || evs[0].Kind != audit.SessionRefused || evs[0].Caller != "alice" || evs[0].Reason != LimitSessionsPerCaller {
		t.Errorf("audit: %+v, want one session.refused of alice for %s", evs, LimitSessionsPerCaller)
	}
}

func TestCallsPastTheConcurrencyLimitAreRefusedAtOnce(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{Limits: Limits{MaxCallsPerSession: 2}})
	cs := connectPlain(t, r.url)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		})
	}
	r.waitEntered(t, 2)
	// A burst past the limit: each refused with the limit's name, none
	// reaching the tool, none waiting.
	var burst sync.WaitGroup
	var refused atomic.Int32
	for range 8 {
		burst.Go(func() {
			text, isErr := callText(t, cs, "hang", map[string]any{})
			if isErr && strings.Contains(text, LimitCallsPerSession) {
				refused.Add(1)
			}
		})
	}
	burst.Wait()
	if refused.Load() != 8 {
		t.Errorf("%d of 8 calls past the limit were refused naming %s", refused.Load(), LimitCallsPerSession)
	}
	select {
	case <-r.entered:
		t.Error("a call past the limit reached the tool")
	default:
	}
	var requested, limited int
	for _, ev := range r.mem.Events() {
		if ev.Kind == audit.CallRefused && ev.Reason == LimitCallsPerSession {
			limited++
		}
		if ev.Kind == audit.CallRequested {
			requested++
		}
	}
	if limited != 8 || requested != 10 {
		t.Errorf("audit: %d calls requested, %d refused by %s; want 10 and 8", requested, limited, LimitCallsPerSession)
	}
	if code := deleteSession(t, r.url, cs.ID()); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	wg.Wait() // the DELETE cancelled the two hung calls: each got an answer
}

func TestCallsPastTheRateAreRefused(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{Limits: Limits{CallRate: 0.001, CallBurst: 3}})
	cs := connectPlain(t, r.url)
	for i := range 3 {
		if text, isErr := callText(t, cs, "read_file", map[string]any{"path": "x"}); isErr {
			t.Fatalf("call %d within the burst refused: %s", i, text)
		}
	}
	text, isErr := callText(t, cs, "read_file", map[string]any{"path": "x"})
	if !isErr || !strings.Contains(text, LimitCallRate) {
		t.Fatalf("call past the burst: %q (isError %v), want a refusal naming %s", text, isErr, LimitCallRate)
	}
	if n := r.f.runs["read_file"].Load(); n != 3 {
		t.Errorf("the tool ran %d times, want 3", n)
	}
}

// The limits hold for every request that reaches an upstream, not only for
// tools/call: a caller past its rate cannot read resources instead.
func TestOtherUpstreamRequestsCountAgainstTheLimits(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{Limits: Limits{CallRate: 0.001, CallBurst: 3}})
	cs := connectPlain(t, r.url)
	for i := range 3 {
		if text, isErr := callText(t, cs, "read_file", map[string]any{"path": "x"}); isErr {
			t.Fatalf("call %d within the burst refused: %s", i, text)
		}
	}
	for _, req := range []func() error{
		func() error {
			_, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: "file:///x"})
			return err
		},
		func() error {
			_, err := cs.GetPrompt(ctxT(t), &mcp.GetPromptParams{Name: "p"})
			return err
		},
	} {
		if err := req(); err == nil || !strings.Contains(err.Error(), LimitCallRate) {
			t.Errorf("a request past the rate: %v, want a refusal naming %s", err, LimitCallRate)
		}
	}
}

// The gateway's own middleware (telemetry's server spans) is outermost:
// it sees the calls the limits refuse too.
func TestOptionsMiddlewareSeesCallsTheLimitsRefuse(t *testing.T) {
	t.Parallel()
	var seen atomic.Int32
	count := func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				seen.Add(1)
			}
			return next(ctx, method, req)
		}
	}
	r := newLimitRig(t, HTTPOptions{Limits: Limits{CallRate: 0.001, CallBurst: 1}}, count)
	cs := connectPlain(t, r.url)
	for range 2 {
		callText(t, cs, "read_file", map[string]any{"path": "x"})
	}
	if n := seen.Load(); n != 2 {
		t.Errorf("Options.Middleware saw %d of 2 calls, one refused by the rate limit", n)
	}
}

func TestIdleSessionExpires(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{Limits: Limits{SessionIdleTimeout: 100 * time.Millisecond, MaxSessions: 1}})
	res, sid := initialize(t, r.url, "", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatal(res.Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(r.eventsOf(SessionClosed)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ev := r.eventsOf(SessionClosed)[0]; ev.End != EndExpired {
		t.Errorf("session ended as %q, want %q", ev.End, EndExpired)
	}
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodDelete, r.url+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE of the expired session: %v %v, want 404", res.StatusCode, err)
	}
	// Its slot is free again.
	if res, _ := initialize(t, r.url, "", nil); res.StatusCode != http.StatusOK {
		t.Errorf("a new session after the expiry: %d", res.StatusCode)
	}
}

// demoUpstream connects the demo server (this test binary, see TestMain)
// over stdio and registers its tools.
func demoUpstream(t *testing.T) (*tool.Registry, *mcpclient.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the demo server as a child")
	}
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: NewApprover(ApprovalPolicy{})})
	up, err := mcpclient.Connect(ctxT(t), config.Server{
		Name: "demo", Transport: "stdio", Command: os.Args[0], Env: benchDemoEnv, DefaultTier: "read",
	}, reg, &mcpclient.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	return reg, up
}

// hungCall starts demo__wait_for_cancel on cs and returns once the
// upstream's handler is running, and a channel closed when the call returns.
func hungCall(t *testing.T, url string) (*mcp.ClientSession, chan struct{}) {
	t.Helper()
	started := make(chan struct{}, 1)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case started <- struct{}{}:
			default:
			}
		},
	}).Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}, legacySession)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		params := &mcp.CallToolParams{Name: "demo__wait_for_cancel", Arguments: map[string]any{}}
		params.SetProgressToken("p")
		_, _ = cs.CallTool(ctxT(t), params)
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's wait_for_cancel did not start")
	}
	return cs, returned
}

// waitUpstreamCancelled asks the demo server, on a session of its own,
// to answer once n calls were cancelled there.
func waitUpstreamCancelled(t *testing.T, url string, n int) {
	t.Helper()
	other := connectPlain(t, url)
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "demo__stats", Arguments: map[string]any{"wait_for_cancelled": n}})
	if err != nil || res.IsError {
		t.Fatalf("the upstream did not record %d cancellation(s): %v %+v", n, err, res)
	}
}

func TestDeleteDuringAHungCallAnswersAtOnceAndCancelsItUpstream(t *testing.T) {
	t.Parallel()
	reg, _ := demoUpstream(t)
	gw := New(tool.NewExecutor(reg, nil), nil)
	ts := httptest.NewServer(nil)
	h := gw.Handler(&HTTPOptions{})
	ts.Config.Handler = h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })

	cs, returned := hungCall(t, ts.URL)
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodDelete, ts.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("DELETE during a hung call did not answer within a second: %v", err)
	}
	if res.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %s, want 204", res.Status)
	}
	waitUpstreamCancelled(t, ts.URL, 1)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Error("the client's call did not return after its session ended")
	}
}

func TestDrainRefusesNewWorkAndCancelsCallsAfterTheGrace(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{})
	cs := connectPlain(t, r.url)
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang", Arguments: map[string]any{}})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- fmt.Sprint(res.IsError)
	}()
	r.waitEntered(t, 1)
	drained := make(chan int, 1)
	go func() { drained <- r.h.Drain(context.Background(), 200*time.Millisecond) }()
	// While draining: no new session, no readiness.
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, _ := initialize(t, r.url, "", nil)
		if res.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new session while draining: %d, want 503", res.StatusCode)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if res, err := http.Get(r.url + ReadinessPath); err != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readiness while draining: %v %v, want 503", res.StatusCode, err)
	}
	select {
	case n := <-drained:
		if n != 1 {
			t.Errorf("Drain cancelled %d calls, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Drain did not return")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung call did not return after the drain")
	}
	var cancelled bool
	for _, ev := range r.mem.Events() {
		if ev.Kind == audit.CallErrored && ev.Tool == "hang" && ev.Reason == string(tool.ReasonCancelled) {
			cancelled = true
		}
	}
	if !cancelled {
		t.Errorf("audit has no cancelled outcome for the hung call: %+v", r.mem.Events())
	}
}

func TestOriginIsValidated(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{AllowedOrigins: []string{"https://app.example.com"}})
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"https://app.example.com", http.StatusOK},
		{"HTTPS://APP.example.com:443", http.StatusOK},
		{"http://evil.example", http.StatusForbidden},
		{"http://app.example.com", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"http://" + strings.TrimPrefix(r.url, "http://"), http.StatusOK}, // its own origin, on loopback
		{"http://localhost:1", http.StatusForbidden},                      // another port
	} {
		header := map[string]string{}
		if c.origin != "" {
			header["Origin"] = c.origin
		}
		if res, _ := initialize(t, r.url, "", header); res.StatusCode != c.want {
			t.Errorf("Origin %q: %d, want %d", c.origin, res.StatusCode, c.want)
		}
	}
}

func TestHealthEndpoints(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	f := newFixture(t, ApprovalPolicy{})
	verify, err := StaticVerifier([]StaticToken{{SHA256: HashToken("t"), Subject: "alice", Role: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(nil)
	h := f.gw.Handler(&HTTPOptions{Verifier: verify, Roles: Roles{"r": {"*"}}, ResourceURL: ts.URL + "/mcp", Ready: ready.Load})
	ts.Config.Handler = h
	t.Cleanup(func() { ts.Close(); h.Close() })
	get := func(path string) (int, string) {
		res, err := http.Get(ts.URL + path) // no token: outside authentication
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get(LivenessPath); code != http.StatusOK || body != "ok\n" {
		t.Errorf("liveness: %d %q", code, body)
	}
	if code, body := get(ReadinessPath); code != http.StatusServiceUnavailable || body != "not ready\n" {
		t.Errorf("readiness before ready: %d %q, want 503", code, body)
	}
	ready.Store(true)
	if code, body := get(ReadinessPath); code != http.StatusOK || body != "ok\n" {
		t.Errorf("readiness when ready: %d %q, want 200", code, body)
	}
}

func TestBearerIsRefusedOverPlainHTTPOnANonLoopbackAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ApprovalPolicy{})
	verify, err := StaticVerifier([]StaticToken{{SHA256: HashToken("t"), Subject: "alice", Role: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		local    string
		insecure bool
		want     int
	}{
		{"10.1.2.3:8080", false, http.StatusForbidden},
		{"10.1.2.3:8080", true, http.StatusOK},
		{"127.0.0.1:8080", false, http.StatusOK},
		{"[::1]:8080", false, http.StatusOK},
	} {
		h := f.gw.Handler(&HTTPOptions{Verifier: verify, Roles: Roles{"r": {"*"}}, ResourceURL: "https://gw.example/mcp", InsecurePlainBearer: c.insecure})
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer t")
		addr, _ := net.ResolveTCPAddr("tcp", c.local)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, addr))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		h.Close()
		if rec.Code != c.want {
			t.Errorf("bearer over plain HTTP to %s (insecure %v): %d, want %d", c.local, c.insecure, rec.Code, c.want)
		}
	}
}

// postOn sends one JSON-RPC message on session sid, with ctx.
func postOn(ctx context.Context, url, sid, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	return http.DefaultClient.Do(req)
}

func TestSessionExpiryCancelsItsCallsInFlight(t *testing.T) {
	t.Parallel()
	// Long enough for initialize, initialized and the call to reach the
	// session under the suite's load before it can expire (at 200 ms a
	// loaded run saw the session gone at initialized).
	r := newLimitRig(t, HTTPOptions{Limits: Limits{SessionIdleTimeout: 1500 * time.Millisecond}})
	_, sid := initialize(t, r.url, "", nil)
	if res, err := postOn(ctxT(t), r.url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %v %v", res, err)
	}
	// A call whose client goes away: its request ends, the call runs on,
	// and the session is idle.
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() {
		if res, err := postOn(ctx, r.url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{}}}`); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}()
	r.waitEntered(t, 1)
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var cancelled bool
		for _, ev := range r.mem.Events() {
			cancelled = cancelled || (ev.Kind == audit.CallErrored && ev.Tool == "hang" && ev.Reason == string(tool.ReasonCancelled))
		}
		closed := r.eventsOf(SessionClosed)
		if cancelled && len(closed) == 1 && closed[0].End == EndExpired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the idle timeout: call cancelled %v, sessions closed %+v; want the call cancelled and the session expired", cancelled, closed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestABatchCannotFanOutPastTheLimit(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{Limits: Limits{MaxCallsPerSession: 2}})
	// Batches exist up to 2025-03-26, which the gateway still negotiates.
	res, sid := initializeAt(t, r.url, "", "2025-03-26", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatal(res.Status)
	}
	mustPost := func(ctx context.Context, version, msg string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/mcp", strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", version)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := mustPost(ctxT(t), "2025-03-26", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); res.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s", res.Status)
	}
	var batch []string
	for i := range 6 {
		batch = append(batch, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"hang","arguments":{}}}`, 10+i))
	}
	res = mustPost(ctxT(t), "2025-03-26", "["+strings.Join(batch, ",")+"]")
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("a 2025-03-26 session's batch: %s %s", res.Status, b)
	}
	defer res.Body.Close()
	r.waitEntered(t, 2)
	// The four past the limit are answered while the two run.
	refused := 0
	sc := bufio.NewScanner(res.Body)
	for refused < 4 && sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data:") && strings.Contains(line, LimitCallsPerSession) && strings.Contains(line, `"isError":true`) {
			refused++
		}
	}
	if refused != 4 {
		t.Fatalf("%d of the batch's calls were refused naming %s, want 4 (%v)", refused, LimitCallsPerSession, sc.Err())
	}
	select {
	case <-r.entered:
		t.Error("a call of the batch past the limit reached the tool")
	default:
	}
	if code := deleteSession(t, r.url, sid); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
}
