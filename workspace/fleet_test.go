package workspace_test

// Replicas of a fleet in this process: workspaces opened on one
// PostgreSQL database (internal/pgtest), each with its own demo server
// and its gateway served on 127.0.0.1, as "toolwire serve --http" serves
// it. A client's requests are sent to the replica each step names, so
// that what one replica holds is asked of another.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/workspace"
)

const fleetWait = 60 * time.Second

// fleetReplica is one replica: a workspace on the fleet's database and its
// gateway on 127.0.0.1.
type fleetReplica struct {
	w   *workspace.Workspace
	url string
}

// openFleet opens n replicas on dbURL with the demo server (write_note a
// write tool: its calls are approved by eliciting), callers "alice" and
// "bob" (static tokens, one role seeing every tool), and limits.
func openFleet(t *testing.T, dbURL string, n int, limits gateway.Limits) []*fleetReplica {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = dbURL
	}
	return openFleetAt(t, urls, limits)
}

// openFleetAt opens a replica on each of dbURLs (one database, reached
// as the role each URL names), as openFleet does.
func openFleetAt(t *testing.T, dbURLs []string, limits gateway.Limits) []*fleetReplica {
	t.Helper()
	f := newFixture(t)
	file := f.load(t, demoServer+"security:\n  pins: off\n")
	verify, err := gateway.StaticVerifier([]gateway.StaticToken{
		{SHA256: gateway.HashToken("alice-token"), Subject: "alice", Role: "ops"},
		{SHA256: gateway.HashToken("bob-token"), Subject: "bob", Role: "ops"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*fleetReplica
	for _, dbURL := range dbURLs {
		ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
		w, err := workspace.Open(ctx, file, &workspace.Options{
			Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{}), StoreURL: dbURL, LookupEnv: fleetEnv,
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		ts := httptest.NewServer(nil)
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
		ts.Config.Handler = w.Handler(w.Gateway(nil), &gateway.HTTPOptions{
			Verifier: verify, Roles: gateway.Roles{"ops": {"*"}}, ResourceURL: ts.URL + "/mcp", Limits: limits,
		})
		out = append(out, &fleetReplica{w: w, url: ts.URL})
	}
	return out
}

// fleetEnv is the replicas' environment: the passphrase the fleet's keys
// are sealed under, the same on every replica.
func fleetEnv(name string) (string, bool) {
	if name == oauth.PassphraseEnv {
		return "the fleet's passphrase in the tests", true
	}
	return os.LookupEnv(name)
}

// steer sends each request to the replica pick names, with the bearer
// token of token.
type steer struct {
	replicas []*fleetReplica
	token    string
	pick     func(body string) int
	served   [8]atomic.Int32
}

func (s *steer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	i := s.pick(string(body))
	target, _ := url.Parse(s.replicas[i].url)
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(strings.NewReader(string(body)))
	req.URL.Scheme, req.URL.Host, req.Host = target.Scheme, target.Host, target.Host
	req.Header.Set("Authorization", "Bearer "+s.token)
	s.served[i].Add(1)
	return http.DefaultTransport.RoundTrip(req)
}

// retries picks replica 1 for a tools/call that answers a parked call
// (it carries requestState), 0 for anything else.
func retries(body string) int {
	if strings.Contains(body, `"requestState"`) {
		return 1
	}
	return 0
}

func dial26(t *testing.T, s *steer, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-2026", Version: "1"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: s.replicas[0].url + "/mcp", HTTPClient: &http.Client{Transport: s}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if cs.InitializeResult().ProtocolVersion != gateway.Revision2026 {
		t.Fatalf("the client speaks %s", cs.InitializeResult().ProtocolVersion)
	}
	return cs
}

func approve(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
}

// Issue 17: a 2026-07-28 client's call that asks for approval is parked
// on the replica that started it; the client's retry with the answer
// lands on the other replica, which passes it to the holder, and the
// call's result comes back through it.
func TestFleetParkedCallAnsweredOnAnotherReplica(t *testing.T) {
	t.Parallel()
	reps := openFleet(t, pgtest.DB(t), 2, gateway.Limits{})
	s := &steer{replicas: reps, token: "alice-token", pick: retries}
	cs := dial26(t, s, &mcp.ClientOptions{ElicitationHandler: approve})
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": "fleet", "body": "one"}})
	if err != nil || res.IsError {
		t.Fatalf("write_note approved on the other replica: %v, %+v", err, res)
	}
	if s.served[1].Load() == 0 {
		t.Fatal("no request reached the second replica: the retry was not steered there")
	}
}

// Issue 17: when the replica holding a parked call is gone, the client's
// retry on another replica gets an error saying so, at once.
func TestFleetRetryOfACallOnALostReplicaFails(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	reps := openFleet(t, dbURL, 2, gateway.Limits{})
	asked, answer := make(chan struct{}), make(chan struct{})
	s := &steer{replicas: reps, token: "alice-token", pick: retries}
	cs := dial26(t, s, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		close(asked)
		<-answer
		return approve(ctx, req)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": "lost", "body": "one"}})
		done <- err
	}()
	<-asked
	// The first replica's end, as the database sees the end of a
	// process: its connections go, and with them its lock.
	terminateInstance(t, dbURL, reps[0].w.Store().Relay().Instance())
	close(answer)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "gateway replica that is gone") {
			t.Errorf("the retry of a call whose replica is gone: %v; want an error saying so", err)
		}
	case <-ctx.Done():
		t.Fatal("the retry of a call whose replica is gone did not end")
	}
}

// terminateInstance ends the database connection that holds instance's
// lock, as the end of its process would.
func terminateInstance(t *testing.T, dbURL, instance string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND classid::bigint = 1953955841 AND objid::bigint = $1::bigint AND objsubid = 2 AND mode = 'ExclusiveLock' AND granted`, instance).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("terminated %d connections holding instance %s's lock, want 1", n, instance)
	}
}

// Issue 17: a client that declares URL-mode elicitation and not forms is
// asked for an approval with a link; the page is held by the replica
// whose call asked, and opened and decided through the other one.
func TestFleetApprovalPageOnAnotherReplica(t *testing.T) {
	t.Parallel()
	reps := openFleet(t, pgtest.DB(t), 2, gateway.Limits{})
	s := &steer{replicas: reps, token: "bob-token", pick: func(string) int { return 0 }}
	var pageErr error
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-2025", Version: "1"}, &mcp.ClientOptions{
		Capabilities: caps,
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			pageErr = decideOn(ctx, reps[1].url, req.Params.URL)
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: reps[0].url + "/mcp", HTTPClient: &http.Client{Transport: s}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": "page", "body": "one"}})
	if pageErr != nil {
		t.Fatalf("the approval page on the other replica: %v", pageErr)
	}
	if err != nil || res.IsError {
		t.Fatalf("write_note allowed at a page of the other replica: %v, %+v", err, res)
	}
}

// decideOn opens the approval page link on the replica at base (not the
// one the link names) and allows the call there.
func decideOn(ctx context.Context, base, link string) error {
	u, err := url.Parse(link)
	if err != nil {
		return err
	}
	page := base + u.Path
	resp, err := http.Get(page)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "demo__write_note") {
		return errors.New("GET " + page + ": " + resp.Status + ": " + string(body))
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, page, strings.NewReader("decision=allow"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "allowed") {
		return errors.New("POST " + page + ": " + resp.Status + ": " + string(body))
	}
	return nil
}

// Issue 17: a caller's rate of calls is one bucket for the fleet: the
// calls it made on one replica count on the other.
func TestFleetRateLimitIsOneBucket(t *testing.T) {
	t.Parallel()
	reps := openFleet(t, pgtest.DB(t), 2, gateway.Limits{CallRate: 0.01, CallBurst: 3})
	to := atomic.Int32{}
	s := &steer{replicas: reps, token: "alice-token", pick: func(string) int { return int(to.Load()) }}
	cs := dial26(t, s, nil)
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	call := func() *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range 3 {
		if res := call(); res.IsError {
			t.Fatalf("call %d of a burst of 3 on the first replica refused: %+v", i+1, res.Content)
		}
	}
	to.Store(1)
	res := call()
	text, _ := json.Marshal(res.Content)
	if !res.IsError || !strings.Contains(string(text), gateway.LimitCallRate) {
		t.Errorf("the fourth call, on the second replica: %s (isError %v); want refused by %s", text, res.IsError, gateway.LimitCallRate)
	}
}

// Issue 17: a replica is ready only while it can use its store: with the
// database refusing connections, /readyz answers 503 (a load balancer
// sends its requests to the others); once the database takes them again,
// 200.
func TestFleetReadinessNeedsTheStore(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	reps := openFleet(t, dbURL, 1, gateway.Limits{})
	ready := func() int {
		t.Helper()
		resp, err := http.Get(reps[0].url + gateway.ReadinessPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := ready(); got != http.StatusOK {
		t.Fatalf("/readyz with the database up: %d", got)
	}
	allow := pgtest.Outage(t, dbURL)
	if got := ready(); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the database refusing connections: %d, want 503", got)
	}
	allow()
	// The pool and the listener connect again on their own.
	pollUntil(t, "/readyz did not come back once the database took connections again", 50*time.Millisecond,
		func() bool { return ready() == http.StatusOK })
}
