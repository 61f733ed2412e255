package gateway

// Tests of what a hostile caller sends the gateway (issue 22): each sends
// the hostile form over a real socket on 127.0.0.1 and checks that it
// costs the caller, not the gateway.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// TestForgedRequestStatesDrawOnTheCallersRate: a 2026-07-28 tools/call
// carrying a requestState is counted against its caller's call rate before
// its state is opened. Past the rate, a forged state is refused by the
// rate, and writes nothing into the audit log; another caller is not
// affected.
func TestForgedRequestStatesDrawOnTheCallersRate(t *testing.T) {
	t.Parallel()
	const burst = 3
	b := newBridge(t, bridgeOptions{limits: Limits{CallRate: 0.001, CallBurst: burst}})
	bob, alice := b.manual(t, bobToken), b.manual(t, aliceToken)
	forge := func(cs *mcp.ClientSession) error {
		_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{
			Name: "up__echo", RequestState: "eyJ2IjoxfQ.Zm9yZ2Vk",
			InputResponses: mcp.InputResponseMap{"q1": approve},
		})
		return err
	}
	const sent = 8
	for i := range sent {
		err := forge(bob)
		want := "not issued by this gateway"
		if i >= burst {
			want = LimitCallRate
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("forged state %d: %v, want an error saying %q", i+1, err, want)
		}
	}
	if err := forge(alice); err == nil || !strings.Contains(err.Error(), "not issued by this gateway") {
		t.Errorf("another caller's forged state: %v, want it refused for its state, not by bob's rate", err)
	}
	var audited []string
	for _, ev := range b.mem.Events() {
		if ev.Tool == "up__echo" {
			audited = append(audited, string(ev.Kind)+" "+ev.Caller)
		}
	}
	if len(audited) != 2*(burst+1) {
		t.Errorf("the audit log has %d events of the forged states, want %d (requested and refused, for bob's %d within the rate and alice's one): %v",
			len(audited), 2*(burst+1), burst, audited)
	}
	refused := 0
	for _, e := range b.eventsOf(CallRefused) {
		if e.Limit == LimitCallRate && e.Tool == "up__echo" {
			refused++
		}
	}
	if refused != sent-burst {
		t.Errorf("%d retries observed refused by %s, want %d", refused, LimitCallRate, sent-burst)
	}
	for _, ev := range b.mem.Events() {
		if ev.Kind == audit.CallRefused && ev.Reason == LimitCallRate {
			t.Errorf("a retry refused by the rate is audited: %+v", ev)
		}
	}
}

// templated is a gateway on 127.0.0.1 in front of a go-sdk upstream that
// serves a resource template (res://item/{n}), so that every URI a client
// names is a resource of its own, and counts the resources/subscribe it
// receives.
type templated struct {
	url  string
	subs atomic.Int32
}

func newTemplated(t *testing.T, limits Limits) *templated {
	t.Helper()
	tp := &templated{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "items", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { tp.subs.Add(1); return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "item", URITemplate: "res://item/{n}", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item"}}}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { up.CloseClientConnections(); up.Close() })
	reg := tool.NewRegistry(nil)
	conn, err := mcpclient.Connect(ctxT(t), config.Server{Name: "up", Transport: "http", URL: up.URL, DefaultTier: "read"}, reg,
		&mcpclient.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("connecting the upstream: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	gw := New(tool.NewExecutor(reg, nil), &Options{Upstreams: []Upstream{conn.Catalog()}, Logger: slog.New(slog.DiscardHandler)})
	verify, err := StaticVerifier([]StaticToken{
		{SHA256: HashToken(aliceToken), Subject: "alice", Role: "admin"},
		{SHA256: HashToken(bobToken), Subject: "bob", Role: "admin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := gw.Handler(&HTTPOptions{Limits: limits, Verifier: verify, Roles: Roles{"admin": {"*"}}})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	tp.url = ts.URL
	return tp
}

// items is the JSON of a listen's notifications naming n resources of a
// templated upstream, from the first'th.
func items(first, n int) string {
	uris := make([]string, n)
	for i := range uris {
		uris[i] = fmt.Sprintf("%q", fmt.Sprintf("toolwire://up/res://item/%d", first+i))
	}
	return `{"resourceSubscriptions":[` + strings.Join(uris, ",") + `]}`
}

// TestAListenCannotFanOutPastTheLimits: one subscriptions/listen naming
// many resources of an upstream is bounded (MaxListenResources, refused
// with an error naming the bound before anything reaches the upstream),
// and each upstream subscription it makes draws on its caller's rate as a
// resources/subscribe does: past it the listen is refused, and the
// upstream has received no more than the rate allowed.
func TestAListenCannotFanOutPastTheLimits(t *testing.T) {
	t.Parallel()
	const burst, most = 5, 10
	tp := newTemplated(t, Limits{CallRate: 0.001, CallBurst: burst, MaxListenResources: most})
	b := &bridge{url: tp.url}

	first, closeIt := b.openListen(t, bobToken, items(0, most+1))
	closeIt()
	msg := errorMessage(first)
	if errorCode(first) != -32602 || !strings.Contains(msg, LimitListenResources) || !strings.Contains(msg, fmt.Sprint(most)) {
		t.Errorf("a listen naming %d resources: %v, want an invalid-params error naming %s and %d", most+1, first, LimitListenResources, most)
	}
	if n := tp.subs.Load(); n != 0 {
		t.Errorf("the upstream received %d subscribes for a listen refused for its size, want none", n)
	}

	first, closeIt = b.openListen(t, bobToken, items(100, burst+3))
	closeIt()
	msg = errorMessage(first)
	if !strings.Contains(msg, LimitCallRate) {
		t.Errorf("a listen naming %d resources past a burst of %d: %v, want it refused by %s", burst+3, burst, first, LimitCallRate)
	}
	if n := tp.subs.Load(); n != burst {
		t.Errorf("the upstream received %d subscribes, want the %d the caller's rate allows", n, burst)
	}

	// Another caller's rate is its own.
	ack, closeIt := b.openListen(t, aliceToken, items(200, 2))
	closeIt()
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Errorf("another caller's listen: %v", ack)
	}
}

// errorMessage returns the message of the JSON-RPC error m, or "".
func errorMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// staticAndJWT verifies the static tokens of alice and bob (the bridge's)
// and JWTs of testIssuer signed with the ES256 test key, as a gateway
// configured with both does; mint makes a JWT of sub with role admin.
func staticAndJWT(t *testing.T) (verify auth.TokenVerifier, mint func(sub string) string) {
	t.Helper()
	static, err := StaticVerifier([]StaticToken{
		{SHA256: HashToken(aliceToken), Subject: "alice", Role: "reader"},
		{SHA256: HashToken(bobToken), Subject: "bob", Role: "admin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	k := testKeys()
	j := newJWKS(t, publicJWK(k.ec, "ec-1", "ES256"))
	jv, err := JWTVerifier(ctxT(t), &JWTOptions{JWKSURL: j.url(), Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	verify = func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if ti, err := static(ctx, token, r); err == nil {
			return ti, nil
		}
		return jv(ctx, token, r)
	}
	mint = func(sub string) string {
		return sign(t, k.ec, "ec-1", jose.ES256, map[string]any{
			"iss": testIssuer, "aud": testAudience, "sub": sub, "role": "admin",
			"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		})
	}
	return verify, mint
}

// TestOneSubjectFromTwoCredentialsIsTwoCallers: a static token of subject
// "bob" and a JWT whose sub is "bob" are two callers: each has its own
// call rate and its own listens, and neither can continue the other's
// parked call.
func TestOneSubjectFromTwoCredentialsIsTwoCallers(t *testing.T) {
	t.Parallel()
	verify, mint := staticAndJWT(t)
	b := newBridge(t, bridgeOptions{verifier: verify, limits: Limits{CallRate: 0.001, CallBurst: 3, MaxListensPerCaller: 1}})
	jwtBob := mint("bob")
	// Whatever this test leaves waiting (a call continued by the wrong
	// caller waits on a question nobody answers) is cancelled, so that
	// the upstream can close.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		b.h.Drain(ctx, 0)
	})

	// The static bob parks a call (one token of its rate); the JWT's bob
	// cannot answer its question.
	static, jwt := b.manual(t, bobToken), b.manual(t, jwtBob)
	args := map[string]any{"env": "prod"}
	parked := question(t, static, "up__deploy_ask", args)
	if _, err := answer(ctxT(t), jwt, "up__deploy_ask", args, parked, parked.RequestState, approve); err == nil || !strings.Contains(err.Error(), "another caller") {
		t.Errorf("the JWT's bob answering the static bob's parked call: %v, want it refused as another caller's", err)
	}
	// The static bob spends the rest of its burst; the JWT's bob has a
	// bucket of its own.
	for range 2 {
		if got, isErr := call(t, b.dial(t, bobToken, Revision2026, nil), "up__echo", nil); isErr {
			t.Errorf("a call within the static bob's burst: %q", got)
		}
	}
	if got, isErr := call(t, b.dial(t, bobToken, Revision2026, nil), "up__echo", nil); !isErr || !strings.Contains(got, LimitCallRate) {
		t.Errorf("the static bob past its burst: %q (isError %v), want refused by %s", got, isErr, LimitCallRate)
	}
	if got, isErr := call(t, b.dial(t, jwtBob, Revision2026, nil), "up__echo", nil); isErr {
		t.Errorf("the JWT's bob is refused for the static bob's rate: %q", got)
	}
	// One listen each.
	ack, closeStatic := b.openListen(t, bobToken, `{"toolsListChanged":true}`)
	defer closeStatic()
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("the static bob's listen: %v", ack)
	}
	ack, closeJWT := b.openListen(t, jwtBob, `{"toolsListChanged":true}`)
	closeJWT()
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Errorf("the JWT's bob's listen while the static bob holds one: %v, want its own", ack)
	}
}

// openSession opens a session of revision version by hand (initialize,
// then initialized) and returns its id.
func openSession(t *testing.T, url, version string) string {
	t.Helper()
	send := func(sid, body string) *http.Response {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res
	}
	res := send("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize %s: %s, session %q", version, res.Status, sid)
	}
	if res := send(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); res.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s", res.Status)
	}
	return sid
}

// TestABatchIsJudgedByTheSessionsRevision: a session that negotiated
// 2025-06-18 or later cannot send a JSON-RPC batch by claiming an older
// revision in its request's version header, or by sending none; a
// 2025-03-26 session's batch is served whatever its header says.
func TestABatchIsJudgedByTheSessionsRevision(t *testing.T) {
	t.Parallel()
	r := newLimitRig(t, HTTPOptions{})
	batch := `[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`
	send := func(sid, header string) (int, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, r.url+"/mcp", strings.NewReader(batch))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		if header != "" {
			req.Header.Set("Mcp-Protocol-Version", header)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, rev := range []string{"2025-11-25", "2025-06-18"} {
		sid := openSession(t, r.url, rev)
		for _, header := range []string{"2025-03-26", "2024-11-05", ""} {
			status, body := send(sid, header)
			if status != http.StatusBadRequest || !strings.Contains(body, "batching is not supported") || !strings.Contains(body, rev) {
				t.Errorf("a batch in a %s session with version header %q: %d %q, want 400 refusing batches of %s", rev, header, status, body, rev)
			}
		}
	}
	sid := openSession(t, r.url, "2025-03-26")
	for _, header := range []string{"2025-03-26", ""} {
		if status, body := send(sid, header); status != http.StatusOK || strings.Count(body, `"tools"`) != 2 {
			t.Errorf("a batch in a 2025-03-26 session with version header %q: %d %q, want both answered", header, status, body)
		}
	}
}

// TestATitledMultiSelectIsRelayed: a titled multi-select elicitation
// (SEP-1330), written with "type": "string" beside the items' anyOf as
// go-sdk's reference server writes it, reaches the gateway's clients of
// both generations with its titles, and their answer reaches the
// upstream: go-sdk's client-side check inside toolwire does not refuse it.
func TestATitledMultiSelectIsRelayed(t *testing.T) {
	t.Parallel()
	titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}}
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"titledMulti":   map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "string", "anyOf": titled}},
		"untitledMulti": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []string{"a", "b"}}},
	}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "pick", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A decline: go-sdk's server checks an accepted answer's content
		// against its own schema, which it then refuses itself.
		r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Pick some options", RequestedSchema: schema})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "upstream got " + r.Action}}}, nil
	})
	b, _ := elicitingGateway(t, srv, nil)
	for _, rev := range []string{"2025-11-25", Revision2026} {
		var shown []string
		cs := b.dial(t, "", rev, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			raw, _ := json.Marshal(req.Params.RequestedSchema)
			shown = append(shown, req.Params.Message+" "+string(raw))
			return &mcp.ElicitResult{Action: "decline"}, nil
		}})
		got, isErr := call(t, cs, "up__pick", nil)
		if isErr || got != "upstream got decline" {
			t.Errorf("%s: %q (isError %v), want the client's answer to reach the upstream", rev, got, isErr)
		}
		if len(shown) != 1 || !strings.Contains(shown[0], "Pick some options") || !strings.Contains(shown[0], `"title":"Second Option"`) {
			t.Errorf("%s: the client was shown %q, want the question with its titled options", rev, shown)
		}
	}
}

// dialStateless connects a go-sdk client of revision rev to a --stateless
// gateway, as the caller of token, answering elicitations with handler.
func (b *bridge) dialStateless(t *testing.T, token, rev string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client-" + rev, Version: "1.0"}, opts).Connect(ctxT(t),
		&mcp.StreamableClientTransport{Endpoint: b.url + "/mcp", HTTPClient: bearerFor(token), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect %s: %v", rev, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestAStatelessCancelReachesTheUpstream: with --stateless, a 2025
// client's notifications/cancelled (its own request, with no session to
// tie it to the call) cancels the call it names, upstream too, and the
// call is audited as cancelled.
func TestAStatelessCancelReachesTheUpstream(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{stateless: true})
	// A call left running (the cancel lost) is cancelled at the end, so
	// that the upstream can close.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		b.h.Drain(ctx, 0)
	})
	for _, rev := range []string{"2025-03-26", "2025-11-25"} {
		cs := b.dialStateless(t, bobToken, rev, nil)
		ctx, cancel := context.WithCancel(ctxT(t))
		done := make(chan error, 1)
		key := "stateless " + rev
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__wait", Arguments: map[string]any{"key": key}})
			done <- err
		}()
		b.up.sig.wait(t, key+" entered")
		cancel()
		receive(t, done, "the cancelled call's return")
		select {
		case <-b.up.sig.ch(key + " cancelled"):
		case <-time.After(waitBound):
			t.Errorf("%s: the upstream's call was not cancelled", rev)
		}
	}
	if !t.Failed() {
		for _, ev := range b.waitOutcome(t, "up__wait", "", 2) {
			if ev.Reason != string(tool.ReasonCancelled) {
				t.Errorf("a cancelled call is audited as %s %s %q", ev.Kind, ev.Reason, ev.Error)
			}
		}
	}
	// No call is left over upstream to take another client's question
	// for its own: a 2026-07-28 client's sampling request is matched to
	// its call.
	cs := b.dial(t, bobToken, Revision2026, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}}, nil
		},
	})
	if got, isErr := call(t, cs, "up__sample", nil); isErr || got != "the model said Paris" {
		t.Errorf("another client's sampling after the cancelled calls: %q (isError %v)", got, isErr)
	}
}

// TestAStatelessCancelCancelsOnlyTheCallersOwnCall: with --stateless, a
// notifications/cancelled naming the request id of another caller's call
// cancels nothing; the caller's own cancels it.
func TestAStatelessCancelCancelsOnlyTheCallersOwnCall(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{stateless: true})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		b.h.Drain(ctx, 0)
	})
	hdr := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	answered := make(chan raw, 1)
	go func() {
		answered <- b.post26(ctxT(t), bobToken, hdr, `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"up__wait","arguments":{"key":"own"}}}`)
	}()
	b.up.sig.wait(t, "own entered")
	cancelBody := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77,"reason":"x"}}`
	if r := b.post26(ctxT(t), aliceToken, hdr, cancelBody); r.status != http.StatusAccepted {
		t.Fatalf("alice's notifications/cancelled: %d %s", r.status, r.body)
	}
	if evs := b.eventsOf(CallsCancelled); len(evs) != 0 {
		t.Fatalf("alice's notifications/cancelled cancelled bob's call: %+v", evs)
	}
	if r := b.post26(ctxT(t), bobToken, hdr, cancelBody); r.status != http.StatusAccepted {
		t.Fatalf("bob's notifications/cancelled: %d %s", r.status, r.body)
	}
	b.up.sig.wait(t, "own cancelled")
	if evs := b.eventsOf(CallsCancelled); len(evs) != 1 || evs[0].End != EndClientCancelled || evs[0].Caller != "subject:bob" {
		t.Errorf("cancellations observed: %+v, want bob's own", evs)
	}
	<-answered
}

// TestAStatelessRequestWithoutAVersionHeaderIsNotAuditedAsAGuess: with
// --stateless, a 2025 request without MCP-Protocol-Version (a 2024-11-05
// or 2025-03-26 client: neither sends one) is audited with no protocol,
// not go-sdk's guess of 2025-03-26; one with the header, with its revision.
func TestAStatelessRequestWithoutAVersionHeaderIsNotAuditedAsAGuess(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{stateless: true})
	for i, header := range []string{"", "2025-06-18"} {
		hdr := map[string]string{"Mcp-Protocol-Version": header}
		r := b.post26(ctxT(t), bobToken, hdr, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__echo","arguments":{"n":%d}}}`, i+1, i))
		if r.msg["result"] == nil {
			t.Fatalf("a call with version header %q: %d %s", header, r.status, r.body)
		}
	}
	var protocols []string
	for _, ev := range b.waitOutcome(t, "up__echo", "", 2) {
		protocols = append(protocols, ev.Protocol)
	}
	if len(protocols) != 2 || protocols[0] != "" || protocols[1] != "2025-06-18" {
		t.Errorf("the calls are audited with protocols %q, want none for the header-less one and 2025-06-18", protocols)
	}
}

// TestRetriesInProgressAreBoundedPerCaller: a caller's 2026-07-28 retries
// in progress are bounded by MaxCallsPerCaller (a call has at most one
// request waiting on it), before their state is opened: while the
// caller's one retry waits on its call, a forged one is refused by the
// limit, not opened; the call the waiting retry answered is not disturbed.
func TestRetriesInProgressAreBoundedPerCaller(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{limits: Limits{MaxCallsPerCaller: 1}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		b.h.Drain(ctx, 0)
	})
	cs := b.manual(t, bobToken)
	args := map[string]any{"key": "bounded"}
	parked := question(t, cs, "up__deploy_wait", args)
	// The approved call runs upstream until cancelled; the retry that
	// approved it waits on it meanwhile.
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	waiting := make(chan error, 1)
	go func() {
		_, err := answer(ctx, cs, "up__deploy_wait", args, parked, parked.RequestState, approve)
		waiting <- err
	}()
	b.up.sig.wait(t, "bounded entered")
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{
		Name: "up__echo", RequestState: "eyJ2IjoxfQ.Zm9yZ2Vk", InputResponses: mcp.InputResponseMap{"q1": approve},
	})
	if err == nil || !strings.Contains(err.Error(), LimitCallsPerCaller) {
		t.Errorf("a forged retry while the caller's one retry waits: %v, want it refused by %s", err, LimitCallsPerCaller)
	}
	for _, ev := range b.mem.Events() {
		if ev.Tool == "up__echo" {
			t.Errorf("the refused retry is audited: %s %s", ev.Kind, ev.Reason)
		}
	}
	select {
	case err := <-waiting:
		t.Errorf("the waiting retry returned: %v", err)
	default:
	}
	cancel()
	receive(t, waiting, "the waiting retry's end")
	b.up.sig.wait(t, "bounded cancelled")
}

// elicitingGateway serves srv over HTTP (with opts) as the upstream "up"
// of a gateway that relays its elicitations to its clients, and returns
// the bridge to the gateway and toolwire's connection to the upstream.
func elicitingGateway(t *testing.T, srv *mcp.Server, opts *mcp.StreamableHTTPOptions) (*bridge, *mcpclient.Server) {
	t.Helper()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
	t.Cleanup(func() { up.CloseClientConnections(); up.Close() })
	reg := tool.NewRegistry(nil)
	conn, err := mcpclient.Connect(ctxT(t), config.Server{Name: "up", Transport: "http", URL: up.URL, DefaultTier: "read"}, reg,
		&mcpclient.Options{Logger: slog.New(slog.DiscardHandler), Relay: mcpclient.RelayCapabilities{Elicitation: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	gw := New(tool.NewExecutor(reg, nil), &Options{Upstreams: []Upstream{conn.Catalog()}, Logger: slog.New(slog.DiscardHandler)})
	h := gw.Handler(&HTTPOptions{})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	return &bridge{url: ts.URL}, conn
}
