package gateway

// The rig of the tests of every revision through one gateway: a go-sdk
// v1.8.0 server as the upstream, served over Streamable HTTP on 127.0.0.1
// and connected through mcpclient as "toolwire serve" connects one; the
// gateway's HTTP handler on 127.0.0.1 in front of it, with two callers
// (static tokens) of different roles; go-sdk v1.8.0 clients as the
// downstream peers, speaking the revision each test names.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// upstreamKind is one kind of upstream server the bridge is tested
// against: the revision mcpclient ends up speaking to it, and how to serve
// the go-sdk server so that it does.
type upstreamKind struct {
	rev   string
	serve func(*mcp.Server) http.Handler
}

// upstreamKinds are the upstreams of the matrix. A go-sdk server behind a
// stateful handler speaks the 2025 revisions only, so toolwire's client
// falls back to initialize; behind a stateless handler it serves
// 2026-07-28, which toolwire's client reaches with server/discover (and
// cancels by closing the request's stream).
var upstreamKinds = []upstreamKind{
	{rev: "2025-11-25", serve: func(s *mcp.Server) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	}},
	{rev: "2026-07-28", serve: func(s *mcp.Server) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	}},
}

// goUpstream is the go-sdk server behind the gateway, with what its tools
// observed.
type goUpstream struct {
	kind   upstreamKind
	url    string
	srv    *mcp.Server
	sig    signals      // "<key> entered" and "<key> cancelled" of the waiting tools, by their argument key
	reads  atomic.Int32 // resources/read received
	subs   atomic.Int32 // resources/subscribe received
	unsubs chan string  // resources/unsubscribe received, by URI
}

// signals are named one-shot events, each a channel made on first use, so
// that concurrent tests sharing an upstream wait on their own.
type signals struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (s *signals) ch(name string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]chan struct{}{}
	}
	c, ok := s.m[name]
	if !ok {
		c = make(chan struct{}, 8)
		s.m[name] = c
	}
	return c
}

// wait waits for the event name.
func (s *signals) wait(t *testing.T, name string) {
	t.Helper()
	receive(t, s.ch(name), name)
}

// The upstream's tools: echo, progress and log (read), deploy (write: the
// gateway asks for approval), ask, ask_url and sample (read; they ask the
// caller mid-call: a form, a URL, a model), wait (read; it waits to be
// cancelled), deploy_wait, deploy_ask and deploy_progress (write: an
// approval, then wait, ask or report progress).
var upstreamTools = []string{"ask", "ask_url", "deploy", "deploy_ask", "deploy_progress", "deploy_wait", "echo", "log", "progress", "sample", "wait"}

// upstreamTiers are the tiers the gateway's configuration gives the
// upstream's write tools; the others are read.
var upstreamTiers = map[string]string{"deploy": "write", "deploy_wait": "write", "deploy_ask": "write", "deploy_progress": "write"}

const upstreamPrivateURI = "res://private"

func newUpstream(t *testing.T, kind upstreamKind) *goUpstream {
	t.Helper()
	u := &goUpstream{kind: kind, unsubs: make(chan string, 16)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, &mcp.ServerOptions{
		Logger: slog.New(slog.DiscardHandler),
		SubscribeHandler: func(context.Context, *mcp.SubscribeRequest) error {
			u.subs.Add(1)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			u.unsubs <- req.Params.URI
			return nil
		},
		// Reads are fresh for 30 s; the private resource's are the
		// caller's own.
		SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok {
				c.TTLMs = 30000
				if p.URI == upstreamPrivateURI {
					c.CacheScope = "private"
				}
			}
		},
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-completed"}}}, nil
		},
	})
	u.srv = srv
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	add := func(name string, h mcp.ToolHandler) {
		srv.AddTool(&mcp.Tool{Name: name, Description: "the upstream's " + name, InputSchema: json.RawMessage(`{"type":"object"}`)}, h)
	}
	add("echo", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("echo " + string(req.Params.Arguments)), nil
	})
	add("deploy", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("deployed " + string(req.Params.Arguments)), nil
	})
	progress := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3}); err != nil {
					return nil, err
				}
			}
		}
		return text("progressed"), nil
	}
	add("progress", progress)
	add("deploy_progress", progress)
	add("log", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, line := range []string{"one", "two"} {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: line}); err != nil {
				return nil, err
			}
		}
		return text("logged"), nil
	})
	question := &mcp.ElicitParams{Message: "Which meaning?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"meaning": map[string]any{"type": "string"}},
	}}
	ask := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.ProtocolVersion() >= Revision2026 {
			// A 2026-07-28 server asks in its answer, and reads the
			// answer in the request that comes again (SEP-2322).
			r, ok := req.Params.InputResponses["meaning"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"meaning": question}}, nil
			}
			return text(fmt.Sprintf("upstream got %s %v", r.Action, r.Content["meaning"])), nil
		}
		r, err := req.Session.Elicit(ctx, question)
		if err != nil {
			// A question the gateway gave up on: its call is cancelled,
			// which the gateway's client announces before or after its
			// answer.
			if ctx.Err() != nil || strings.Contains(err.Error(), "did not answer") {
				var args struct{ Key string }
				_ = json.Unmarshal(req.Params.Arguments, &args)
				select {
				case <-ctx.Done():
					u.sig.ch(args.Key + " cancelled") <- struct{}{}
				case <-time.After(waitBound):
				}
			}
			return nil, err
		}
		return text(fmt.Sprintf("upstream got %s %v", r.Action, r.Content["meaning"])), nil
	}
	add("ask", ask)
	add("deploy_ask", ask)
	add("sample", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		prompt := &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{
			{Role: "user", Content: &mcp.TextContent{Text: "Capital of France?"}},
		}}
		var r *mcp.CreateMessageResult
		if req.ProtocolVersion() >= Revision2026 {
			got, ok := req.Params.InputResponses["model"].(*mcp.CreateMessageWithToolsResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"model": prompt}}, nil
			}
			r = &mcp.CreateMessageResult{Model: got.Model, Role: got.Role}
			if len(got.Content) > 0 {
				r.Content = got.Content[0]
			}
		} else {
			var err error
			if r, err = req.Session.CreateMessage(ctx, prompt); err != nil {
				return nil, err
			}
		}
		answer, _ := r.Content.(*mcp.TextContent)
		if answer == nil {
			return nil, errors.New("no text in the model's answer")
		}
		return text("the model said " + answer.Text), nil
	})
	add("ask_url", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Sign in to continue", URL: "https://auth.example.com/consent", ElicitationID: "e-1"})
		if err != nil {
			return nil, err
		}
		return text("upstream got " + r.Action), nil
	})
	wait := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Key string }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		u.sig.ch(args.Key + " entered") <- struct{}{}
		<-ctx.Done()
		u.sig.ch(args.Key + " cancelled") <- struct{}{}
		return nil, ctx.Err()
	}
	add("wait", wait)
	add("deploy_wait", wait)
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		n := u.reads.Add(1)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: fmt.Sprintf("read %d", n)}}}, nil
	}
	srv.AddResource(&mcp.Resource{Name: "private", URI: upstreamPrivateURI, MIMEType: "text/plain"}, read)
	srv.AddResource(&mcp.Resource{Name: "public", URI: "res://public", MIMEType: "text/plain"}, read)
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Hello " + req.Params.Arguments["name"]}}}}, nil
	})
	ts := httptest.NewServer(kind.serve(srv))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	u.url = ts.URL
	return u
}

// The callers of a bridge: alice's role sees the upstream's echo, deploy
// and deploy_ask tools, its public resource and its prompt; bob's sees
// everything.
const (
	aliceToken = "alice-token"
	bobToken   = "bob-token"
)

var bridgeRoles = Roles{
	"reader": {"up__echo", "up__deploy", "up__deploy_ask", "up__public", "up__greet"},
	"admin":  {"*"},
}

// bridge is a gateway on 127.0.0.1 in front of an upstream.
type bridge struct {
	up  *goUpstream
	gw  *Gateway
	h   *Handler
	url string // the gateway's base URL
	mem *audit.Memory

	mu     sync.Mutex
	events []Event
	// outcomesBefore holds, for each of events, how many outcomes of its
	// tool the audit log held when it was observed.
	outcomesBefore []int
}

// bridgeOptions adjusts a bridge.
type bridgeOptions struct {
	kind        upstreamKind
	parkTimeout time.Duration
	limits      Limits
	noAuth      bool // no tokens: every caller is the same, by address
	stateless   bool // HTTPOptions.Stateless: no sessions at all
	// verifier, when set, verifies the callers' tokens instead of the
	// static tokens of alice and bob alone.
	verifier auth.TokenVerifier
}

func newBridge(t *testing.T, o bridgeOptions) *bridge {
	t.Helper()
	if o.kind.rev == "" {
		o.kind = upstreamKinds[0]
	}
	b := &bridge{up: newUpstream(t, o.kind), mem: &audit.Memory{}}
	log := audit.NewLog(b.mem, nil)
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: NewApprover(ApprovalPolicy{})})
	srv, err := mcpclient.Connect(ctxT(t), config.Server{
		Name: "up", Transport: "http", URL: b.up.url, DefaultTier: "read", TierOverrides: upstreamTiers,
	}, reg, &mcpclient.Options{
		Logger: slog.New(slog.DiscardHandler),
		Relay:  mcpclient.RelayCapabilities{Sampling: true, Elicitation: true},
	})
	if err != nil {
		t.Fatalf("connecting the upstream: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if got := srv.Status().Protocol; got != o.kind.rev {
		t.Fatalf("toolwire's client speaks %q to the upstream, want %q", got, o.kind.rev)
	}
	b.gw = New(tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log}), &Options{
		Upstreams:   []Upstream{srv.Catalog()},
		Logger:      slog.New(slog.DiscardHandler),
		ParkTimeout: o.parkTimeout,
		CacheTTL:    time.Minute,
	})
	opts := HTTPOptions{Limits: o.limits, Audit: log, Stateless: o.stateless, Observe: func(e Event) {
		n := len(b.outcomes(e.Tool, ""))
		b.mu.Lock()
		defer b.mu.Unlock()
		b.events = append(b.events, e)
		b.outcomesBefore = append(b.outcomesBefore, n)
	}}
	if !o.noAuth {
		verify, err := StaticVerifier([]StaticToken{
			{SHA256: HashToken(aliceToken), Subject: "alice", Role: "reader"},
			{SHA256: HashToken(bobToken), Subject: "bob", Role: "admin"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if o.verifier != nil {
			verify = o.verifier
		}
		opts.Verifier, opts.Roles = verify, bridgeRoles
	}
	ts := httptest.NewServer(nil)
	b.h = b.gw.Handler(&opts)
	ts.Config.Handler = b.h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); b.h.Close() })
	b.url = ts.URL
	return b
}

// observedBeforeOutcome reports whether every event of kind was observed
// before the audit log held an outcome of its tool: for a test that calls
// each tool once (a second call's event would see the first's outcome).
func (b *bridge) observedBeforeOutcome(kind EventKind) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, e := range b.events {
		if e.Kind == kind && b.outcomesBefore[i] > 0 {
			return false
		}
	}
	return true
}

func (b *bridge) eventsOf(kind EventKind) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Event
	for _, e := range b.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// outcomes returns the audit log's outcome of each call of tool by client
// ("": any) (the events that end a call: executed, errored, refused,
// rejected).
func (b *bridge) outcomes(tool, client string) []audit.Event {
	var out []audit.Event
	for _, ev := range b.mem.Events() {
		if ev.Tool != tool || (client != "" && ev.Client != client) {
			continue
		}
		switch ev.Kind {
		case audit.CallExecuted, audit.CallErrored, audit.CallRefused, audit.ConfirmationRejected:
			out = append(out, ev)
		}
	}
	return out
}

// waitOutcome waits until the audit log has n outcomes of tool by client
// ("": any) and returns them.
func (b *bridge) waitOutcome(t *testing.T, tool, client string, n int) []audit.Event {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		if got := b.outcomes(tool, client); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log has %d outcome(s) of %s by %q, want %d: %v", len(b.outcomes(tool, client)), tool, client, n, kindsOf(b.mem.Events()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitBound bounds each wait for something the code under test should make
// happen, so that a bug fails the test instead of hanging it.
const waitBound = 20 * time.Second

func kindsOf(evs []audit.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, string(ev.Kind)+" "+ev.Tool+" "+ev.Reason)
	}
	return out
}

// rawClient sends the tests' hand-made requests on a transport of its
// own: httptest.Server.Close closes http.DefaultTransport's idle
// connections, and a POST that had just taken one of them fails with
// "transport connection broken" (a parallel test's server closing).
var rawClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

// bearerFor returns an HTTP client sending token (none when empty).
func bearerFor(token string) *http.Client {
	if token == "" {
		return http.DefaultClient
	}
	return &http.Client{Transport: bearer{token}}
}

// dial connects a go-sdk v1.8.0 client with opts to the gateway as the
// caller of token, speaking rev: "2026-07-28" as the client does by
// default (server/discover), anything else by initialize. It checks that
// the gateway agreed.
func (b *bridge) dial(t *testing.T, token, rev string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	var so *mcp.ClientSessionOptions
	if rev != Revision2026 {
		so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client-" + rev, Version: "1.0"}, opts).Connect(ctxT(t),
		&mcp.StreamableClientTransport{Endpoint: b.url + "/mcp", HTTPClient: bearerFor(token), MaxRetries: -1}, so)
	if err != nil {
		t.Fatalf("connect %s: %v", rev, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("the client speaks %s, want %s", got, rev)
	}
	if modern(rev) != (cs.ID() == "") {
		t.Fatalf("a %s client has session %q", rev, cs.ID())
	}
	return cs
}

// approving answers every elicitation: an approval with approve, an
// upstream's question with meaning; it records the messages shown.
type approving struct {
	approve bool
	meaning string
	mu      sync.Mutex
	shown   []string
	asked   chan struct{} // signalled on every question
}

func newApproving(approve bool) *approving {
	return &approving{approve: approve, meaning: "programming", asked: make(chan struct{}, 16)}
}

func (a *approving) handler(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	a.shown = append(a.shown, req.Params.Message)
	a.mu.Unlock()
	a.asked <- struct{}{}
	if strings.HasPrefix(req.Params.Message, "Allow this call?") {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": a.approve}}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"meaning": a.meaning}}, nil
}

func (a *approving) messages() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.shown)
}

// call calls name with args and returns the result's text and isError.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return text(res), res.IsError
}

// meta26 is the _meta of a raw 2026-07-28 request.
func meta26(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps +
		`,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"2"}}`
}

// raw is the first JSON-RPC message of an answer, and the answer's status.
type raw struct {
	status int
	body   string // the first message, or the whole body when not an event stream
	msg    map[string]any
}

// post26 sends body to the gateway as a 2026-07-28 client does, with
// headers (nil: none but the version) and token, and reads the first
// JSON-RPC message of the answer. keep, when set, leaves the event stream
// open: it is read until ctx ends.
func (b *bridge) post26(ctx context.Context, token string, headers map[string]string, body string) raw {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		return raw{body: "error: " + err.Error()}
	}
	defer resp.Body.Close()
	r := raw{status: resp.StatusCode}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, "jsonrpc") {
				r.body = d
				break
			}
		}
	} else {
		all, _ := io.ReadAll(resp.Body)
		r.body = string(all)
	}
	_ = json.Unmarshal([]byte(r.body), &r.msg)
	return r
}

// headers26 are the headers of a 2026-07-28 request of method (and name,
// when not empty).
func headers26(method, name string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": Revision2026, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// errorCode returns the JSON-RPC error code of m, or 0.
func errorCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

// openListen opens a raw subscriptions/listen stream as token's caller and
// returns its first message (the acknowledgement, or an error) and the
// function that closes it.
func (b *bridge) openListen(t *testing.T, token string, notifications string) (first map[string]any, closeIt func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":`+notifications+`,`+meta26(`{}`)+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers26("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("subscriptions/listen: %v", err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		_ = json.Unmarshal(body, &first)
		if first == nil {
			first = map[string]any{"status": resp.StatusCode, "body": string(body)}
		}
		return first, func() {}
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			_ = json.Unmarshal([]byte(d), &first)
			break
		}
	}
	return first, func() { cancel(); resp.Body.Close() }
}

// receive waits for a value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitBound):
		t.Fatalf("%s did not happen", what)
	}
	var zero T
	return zero
}
