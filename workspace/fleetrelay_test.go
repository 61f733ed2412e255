package workspace_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/pgtest"
)

// post sends body to the replica at base with alice's token and session
// sid ("" for none), and returns the response's status, its session
// header and its body.
func post(t *testing.T, base, sid, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// openSession opens a 2025-11-25 session on the replica at base, as a
// client would by hand, and returns its id.
func openSession(t *testing.T, base string) string {
	t.Helper()
	code, sid, body := post(t, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"hand","version":"1"}}}`)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q: %s", code, sid, body)
	}
	if code, _, body := post(t, base, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d: %s", code, body)
	}
	return sid
}

// count runs a count query on the fleet's database.
func count(t *testing.T, dbURL, query string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Issue 22.1: a client's POST whose body is an answer with an id that
// names a replica ("tw<N>-<k>") is passed on only when a replica of the
// fleet sent that request on that session. Answers naming an instance
// that does not exist, or a real one with an id it never sent, are
// refused where they land: no message is written for anyone, no instance
// is taken for lost, and the session goes on.
func TestFleetForgedAnswerIsNotRelayed(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	reps := openFleet(t, dbURL, 2, gateway.Limits{})
	sid := openSession(t, reps[0].url)
	other := reps[0].w.Store().Relay().Instance()
	big := strings.Repeat("x", 64<<10)
	for i, id := range []string{
		"tw999-1", "tw999-1-AAAAAAAAAAAAAAAAAAAAAA", "tw" + other + "-1", "tw" + other + "-1-AAAAAAAAAAAAAAAAAAAAAA",
		"tw-1", "tw" + other + "--x",
	} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"action":"accept","pad":%q}}`, id, big)
		code, _, text := post(t, reps[1].url, sid, body)
		if code != http.StatusBadRequest || !strings.Contains(text, "names no request this gateway sent") {
			t.Errorf("answer %d (id %q) on the other replica: %d %s; want 400 saying no such request was sent", i, id, code, strings.TrimSpace(text[:min(len(text), 200)]))
		}
	}
	if n := count(t, dbURL, "SELECT count(*) FROM toolwire.mailbox"); n != 0 {
		t.Errorf("%d messages in the mailbox after forged answers, want none", n)
	}
	if n := count(t, dbURL, "SELECT count(*) FROM toolwire.instances WHERE recovered_at IS NOT NULL"); n != 0 {
		t.Errorf("%d instances taken for lost after forged answers, want none", n)
	}
	// The session is served as before.
	if code, _, body := post(t, reps[1].url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); code != http.StatusOK || !strings.Contains(body, "demo__echo") {
		t.Errorf("tools/list after the forged answers: %d %s", code, body)
	}
}

// Issue 22.11: a replica whose claim in the fleet is gone (the database
// refuses its connections, so its lock is free and another replica may
// take it for lost) takes no calls until it holds its claim again: a call
// is refused with an error saying why, and served once the claim is back.
func TestFleetReplicaWithoutItsClaimTakesNoCalls(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	reps := openFleet(t, dbURL, 1, gateway.Limits{})
	s := &steer{replicas: reps, token: "alice-token", pick: func(string) int { return 0 }}
	cs := dial26(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	echo := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "x"}})
	}
	if res, err := echo(); err != nil || res.IsError {
		t.Fatalf("a call with the claim held: %v %+v", err, res)
	}
	allow := pgtest.Outage(t, dbURL)
	// The listener hears of its connection's end a moment later.
	pollUntil(t, "the replica did not find out that its claim's connection was gone", 10*time.Millisecond,
		func() bool { return reps[0].w.Store().Claim() != nil })
	if res, err := echo(); err == nil || !strings.Contains(err.Error(), "cannot take calls now") {
		t.Errorf("a call without the claim: %v %+v; want it refused, saying why", err, res)
	}
	allow()
	pollUntil(t, "the claim did not come back once the database took connections again", 50*time.Millisecond,
		func() bool { return reps[0].w.Store().Claim() == nil })
	if res, err := echo(); err != nil || res.IsError {
		t.Errorf("a call with the claim back: %v %+v", err, res)
	}
}

// pollUntil asks ok every so often until it reports true, and fails t
// with what once fleetWait has passed without.
func pollUntil(t *testing.T, what string, every time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(fleetWait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(every)
	}
}

// Issue 22.9: in a fleet a session is idle from the end of its last
// request, on the record's clock as on the replica's: a call that lasts
// longer than the idle timeout does not expire its own session, and the
// session's next request, on another replica, is served.
func TestFleetALongCallDoesNotExpireItsSession(t *testing.T) {
	t.Parallel()
	const idle = 1500 * time.Millisecond
	reps := openFleet(t, pgtest.DB(t), 2, gateway.Limits{SessionIdleTimeout: idle})
	var to atomic.Int32
	s := &steer{replicas: reps, token: "alice-token", pick: func(string) int { return int(to.Load()) }}
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-2025", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: reps[0].url + "/mcp", HTTPClient: &http.Client{Transport: s}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// Three idle timeouts long.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__slow_count", Arguments: map[string]any{"steps": 45, "interval_ms": 100}})
	if err != nil || res.IsError {
		t.Fatalf("the long call: %v %+v", err, res)
	}
	to.Store(1)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "after"}}); err != nil || res.IsError {
		t.Errorf("the session's next request, on the other replica, right after a call longer than the idle timeout: %v %+v", err, res)
	}
	to.Store(0)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "again"}}); err != nil || res.IsError {
		t.Errorf("the session's next request, on the first replica: %v %+v", err, res)
	}
}

// Issue 22.14: two gateways on one store in one process both serve the
// other replicas' requests about their parked calls: a second gateway
// made on replica 0 neither takes over the first one's relay handlers nor,
// when it closes, stops them.
func TestFleetTwoGatewaysOnOneStore(t *testing.T) {
	t.Parallel()
	reps := openFleet(t, pgtest.DB(t), 2, gateway.Limits{})
	second := reps[0].w.Gateway(nil) // registered after the first one
	s := &steer{replicas: reps, token: "alice-token", pick: retries}
	cs := dial26(t, s, &mcp.ClientOptions{ElicitationHandler: approve})
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	write := func(when string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": when, "body": "one"}})
		if err != nil || res.IsError {
			t.Errorf("a call of the first gateway answered on the other replica, %s: %v, %+v", when, err, res)
		}
	}
	write("with a second gateway on its store")
	second.Close()
	second.Close() // twice is fine
	write("once the second gateway closed")
	if s.served[1].Load() < 2 {
		t.Fatal("the retries were not steered to the other replica")
	}
}

// Issue 22.16: every response of a replica names it (Toolwire-Instance),
// the refusals and the health endpoints' included, and the audit view
// names the instance that wrote each event: a call served by replica 1
// is found under replica 1's id.
func TestFleetResponsesAndAuditNameTheReplica(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	reps := openFleet(t, dbURL, 2, gateway.Limits{})
	ids := []string{reps[0].w.Store().Relay().Instance(), reps[1].w.Store().Relay().Instance()}
	if ids[0] == ids[1] {
		t.Fatalf("both replicas are instance %s", ids[0])
	}
	for i, rep := range reps {
		for _, path := range []string{gateway.ReadinessPath, "/mcp"} {
			resp, err := http.Get(rep.url + path) // no token: refused, named all the same
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get(gateway.InstanceHeader); got != ids[i] {
				t.Errorf("replica %d, GET %s (%d): %s %q, want %q", i, path, resp.StatusCode, gateway.InstanceHeader, got, ids[i])
			}
		}
	}
	sid := openSession(t, reps[0].url)
	if code, _, body := post(t, reps[1].url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"x"}}}`); code != http.StatusOK || !strings.Contains(body, `"x"`) {
		t.Fatalf("a call on replica 1: %d %s", code, body)
	}
	if n := count(t, dbURL, "SELECT count(*) FROM toolwire.audit WHERE event->>'kind' = 'call.requested' AND instance = "+ids[1]); n != 1 {
		t.Errorf("%d call.requested events in the audit view under replica 1's instance, want 1", n)
	}
	if n := count(t, dbURL, "SELECT count(*) FROM toolwire.audit WHERE event->>'kind' = 'call.requested' AND instance IS DISTINCT FROM "+ids[1]); n != 0 {
		t.Errorf("%d call.requested events under another instance, want none", n)
	}
	// The event itself names the replica too, so a file or a log line
	// taken out of the table still says where it was recorded.
	if n := count(t, dbURL, "SELECT count(*) FROM toolwire.audit WHERE event->>'kind' = 'call.requested' AND event->>'instance' = '"+ids[1]+"'"); n != 1 {
		t.Errorf("%d call.requested events whose own instance is replica 1's, want 1", n)
	}
}
