package gateway

// Tests of what a hostile caller sends the gateway (issue 22): each sends
// the hostile form over a real socket on 127.0.0.1 and checks that it
// costs the caller, not the gateway.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
