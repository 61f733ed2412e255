package gateway_test

// A 2025 session served by two replicas of a gateway that share one
// SessionStore (the store's own implementation, here in memory as the
// files store keeps it): each replica has its own upstream (the
// conformance fixture server over stdio) and serves the session from the
// store's record when a request of it reaches the replica. The client's
// requests are sent to the replica each test step names.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/workspace"
)

// fleetRoles are what the callers of the fleet tests may do: as the
// tests change them.
type fleetRoles struct {
	mu   sync.Mutex
	role map[string]string // by token
}

func (f *fleetRoles) set(token, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.role[token] = role
}

// verifier accepts the tokens the roles name, the subject being the token.
func (f *fleetRoles) verifier(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	role, ok := f.role[token]
	if !ok {
		return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour), Extra: map[string]any{"toolwire.role": role}}, nil
}

// replicaRig is one replica: its own upstream and gateway, on 127.0.0.1.
type replicaRig struct {
	url string
	h   *gateway.Handler
}

func newReplicas(t *testing.T, n int, roles *fleetRoles, sessions gateway.SessionStore) []*replicaRig {
	t.Helper()
	var out []*replicaRig
	for range n {
		r := newRig(t, false)
		ts := httptest.NewServer(nil)
		h := r.gw.Handler(&gateway.HTTPOptions{
			Verifier: roles.verifier, Roles: gateway.Roles{"ops": {"*"}, "other": {"*"}},
			ResourceURL: ts.URL + "/mcp", Sessions: sessions,
		})
		ts.Config.Handler = h
		t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
		out = append(out, &replicaRig{url: ts.URL, h: h})
	}
	return out
}

// memorySessions is a SessionStore as the files store keeps sessions.
func memorySessions(t *testing.T) gateway.SessionStore {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(t.Context(), "", &store.Options{PinsFile: filepath.Join(dir, "pins.json"), OAuthFile: filepath.Join(dir, "oauth.json")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return workspace.GatewaySessions(st)
}

// router sends every request to the replica of to, with the bearer token
// of token, and counts what each replica served.
type router struct {
	replicas []*replicaRig
	token    string
	to       atomic.Int32
	served   []atomic.Int32
}

func newRouter(replicas []*replicaRig, token string) *router {
	return &router{replicas: replicas, token: token, served: make([]atomic.Int32, len(replicas))}
}

func (r *router) RoundTrip(req *http.Request) (*http.Response, error) {
	i := r.to.Load()
	target, _ := url.Parse(r.replicas[i].url)
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = target.Scheme, target.Host, target.Host
	req.Header.Set("Authorization", "Bearer "+r.token)
	r.served[i].Add(1)
	return http.DefaultTransport.RoundTrip(req)
}

// raw sends one JSON-RPC message of session sid to replica i with token,
// and returns the status and body.
func raw(t *testing.T, replica *replicaRig, token, sid, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(bounded(t, waitTime), http.MethodPost, replica.url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", rev2025)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const pingBody = `{"jsonrpc":"2.0","id":99,"method":"ping"}`

// Issue 17: a session opened on one replica is served by the other from
// its record, and what the client changes on one holds on the other: the
// log level it set on B filters the log lines of a call on A; a
// subscription made on B is made again by A, which then delivers the
// upstream's updates on the event stream the client keeps on A. DELETE on
// B ends the session on A too.
func TestFleetSessionIsServedByEveryReplica(t *testing.T) {
	t.Parallel()
	roles := &fleetRoles{role: map[string]string{"alice": "ops"}}
	sessions := memorySessions(t)
	reps := newReplicas(t, 2, roles, sessions)
	rt := newRouter(reps, "alice")
	logs := newLogLines()
	updated, onUpdate := updates()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-client", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: logs.handler, ResourceUpdatedHandler: onUpdate,
	}).Connect(bounded(t, waitTime), &mcp.StreamableClientTransport{Endpoint: reps[0].url + "/mcp", HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: rev2025})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sid := cs.ID()
	ctx := bounded(t, waitTime)
	if _, err := sessions.Get(ctx, sid); err != nil {
		t.Fatalf("the session's record after initialize: %v", err)
	}

	// B has no copy of the session: it rebuilds one, and the level set
	// there is the record's.
	rt.to.Store(1)
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("setLevel on the replica that did not open the session: %v", err)
	}
	if rec, err := sessions.Get(ctx, sid); err != nil || rec.LogLevel != "info" {
		t.Fatalf("the record after setLevel on B: %+v, %v", rec, err)
	}
	name := prefix + "__test_tool_with_logging"
	for _, i := range []int32{0, 1} {
		rt.to.Store(i)
		before := rt.served[i].Load()
		res := callTool(t, cs, name, map[string]any{})
		if res.IsError {
			t.Fatalf("call on replica %d: %s", i, text(res))
		}
		// The client hands over the result before the notifications
		// that came ahead of it are handled.
		logs.waitLen(ctx, len(fixtureLogLines))
		if got := logs.take(); !slices.Equal(got, fixtureLogLines) {
			t.Errorf("log lines of the call on replica %d: %q, want %q", i, got, fixtureLogLines)
		}
		if rt.served[i].Load() == before {
			t.Errorf("replica %d served nothing of the call", i)
		}
	}

	// Subscribed on B; A is brought up to date by the next request it
	// serves, and its own upstream's updates reach the client's stream,
	// which is on A (where the session opened).
	served := "toolwire://" + prefix + "/test://watched-resource"
	rt.to.Store(1)
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: served}); err != nil {
		t.Fatalf("subscribe on B: %v", err)
	}
	rt.to.Store(0)
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitUpdate(t, updated, served)
	if rec, _ := sessions.Get(ctx, sid); !slices.Equal(rec.Subscriptions, []string{served}) {
		t.Errorf("the record's subscriptions: %q", rec.Subscriptions)
	}

	// DELETE on B: the session is gone from the store and from A.
	rt.to.Store(1)
	if err := cs.Close(); err != nil {
		t.Fatalf("close (DELETE) on B: %v", err)
	}
	if _, err := sessions.Get(ctx, sid); err == nil {
		t.Error("the record outlived the DELETE")
	}
	if status, body := raw(t, reps[0], "alice", sid, pingBody); status != http.StatusNotFound {
		t.Errorf("a request of the deleted session on A: %d %q, want 404", status, body)
	}
}

// Issue 17: the binding of a session to its credential holds on every
// replica: another caller's token naming the session on B is refused
// (403) and the session goes on; a role that changed ends the session on
// B and on A, which held it; a token that no longer verifies ends it too.
func TestFleetSessionBindingHoldsOnEveryReplica(t *testing.T) {
	t.Parallel()
	roles := &fleetRoles{role: map[string]string{"alice": "ops", "mallory": "ops", "carol": "ops"}}
	sessions := memorySessions(t)
	reps := newReplicas(t, 2, roles, sessions)
	open := func(token string) string {
		t.Helper()
		status, body, sid := initialize(t, reps[0], token)
		if status != http.StatusOK || sid == "" {
			t.Fatalf("initialize as %s on A: %d %q", token, status, body)
		}
		return sid
	}

	sid := open("alice")
	if status, body := raw(t, reps[1], "mallory", sid, pingBody); status != http.StatusForbidden || !strings.Contains(body, "another credential") {
		t.Errorf("another caller's token on B: %d %q, want 403", status, body)
	}
	if status, body := raw(t, reps[1], "alice", sid, pingBody); status != http.StatusOK {
		t.Errorf("the session's own token on B after the refusal: %d %q, want 200", status, body)
	}

	roles.set("alice", "other")
	if status, body := raw(t, reps[1], "alice", sid, pingBody); status != http.StatusNotFound || !strings.Contains(body, "role changed") {
		t.Errorf("a changed role on B: %d %q, want 404 saying the role changed", status, body)
	}
	roles.set("alice", "ops")
	if status, body := raw(t, reps[0], "alice", sid, pingBody); status != http.StatusNotFound {
		t.Errorf("the ended session on A, which opened it: %d %q, want 404", status, body)
	}

	// A token the verifier now refuses ends the session it opened, on the
	// replica that refuses it and so everywhere.
	sid = open("carol")
	if status, _ := raw(t, reps[1], "carol", sid, pingBody); status != http.StatusOK {
		t.Fatalf("carol's session on B: %d", status)
	}
	roles.mu.Lock()
	delete(roles.role, "carol")
	roles.mu.Unlock()
	if status, _ := raw(t, reps[1], "carol", sid, pingBody); status != http.StatusUnauthorized {
		t.Errorf("a revoked token on B: %d, want 401", status)
	}
	roles.set("carol", "ops")
	if status, body := raw(t, reps[0], "carol", sid, pingBody); status != http.StatusNotFound {
		t.Errorf("the session of the revoked token on A: %d %q, want 404", status, body)
	}
}

// initialize opens a 2025-11-25 session on replica with token and returns
// the status, the body and the session id.
func initialize(t *testing.T, replica *replicaRig, token string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(bounded(t, waitTime), http.MethodPost, replica.url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Mcp-Session-Id")
}
