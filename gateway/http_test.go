package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// authServer serves the fixture's gateway over HTTP with two static tokens:
// alice (role reader: read_* tools) and bob (role admin: everything), and
// an audit log in memory.
func authServer(t *testing.T) (*fixture, string, *audit.Memory) {
	t.Helper()
	f := newFixture(t, ApprovalPolicy{Write: Allow, Destructive: Allow})
	mem := &audit.Memory{}
	f.ex = tool.NewExecutor(f.reg, &tool.ExecutorOptions{Audit: audit.NewLog(mem, nil)})
	f.gw = New(f.ex, nil)
	verify, err := StaticVerifier([]StaticToken{
		{SHA256: HashToken("alice-token"), Subject: "alice", Role: "reader"},
		{SHA256: HashToken("bob-token"), Subject: "bob", Role: "admin"},
		{SHA256: HashToken("eve-token"), Subject: "eve", Role: "nobody"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(nil)
	h := f.gw.Handler(&HTTPOptions{
		Verifier: verify, Roles: Roles{"reader": {"read_*"}, "admin": {"*"}},
		ResourceURL: ts.URL + "/mcp", AuthorizationServers: []string{"https://auth.example.com"},
	})
	ts.Config.Handler = h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	return f, ts.URL, mem
}

// legacySession makes a go-sdk client open a 2025-11-25 session rather than
// speak 2026-07-28, which it prefers: for the tests of what sessions do
// (limits, binding, DELETE, logging/setLevel). The 2026-07-28 revision's
// own tests are in revision2026_test.go.
var legacySession = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// connectAs opens a 2025-11-25 session as the caller of token.
func connectAs(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctxT(t),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}, legacySession)
	if err != nil {
		t.Fatalf("connect as %s: %v", token, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func listNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctxT(t), nil)
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

func TestHTTPWithoutAValidTokenIs401WithAChallenge(t *testing.T) {
	_, url, _ := authServer(t)
	for _, token := range []string{"", "wrong-token"} {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
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
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, "Bearer") || !strings.Contains(challenge, url+MetadataPath) {
			t.Errorf("token %q: status %d, WWW-Authenticate %q; want 401 pointing at the metadata", token, resp.StatusCode, challenge)
		}
	}
	resp, err := http.Get(url + MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(body, &meta); err != nil || meta.Resource != url+"/mcp" || len(meta.AuthorizationServers) != 1 {
		t.Errorf("metadata = %s (err %v)", body, err)
	}
}

func TestHTTPEachCallerSeesOnlyItsRolesTools(t *testing.T) {
	f, url, mem := authServer(t)
	alice := connectAs(t, url, "alice-token")
	if got := listNames(t, alice); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("alice (reader) sees %v, want [read_file]", got)
	}
	if _, err := alice.CallTool(ctxT(t), &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/x"}}); err == nil {
		t.Error("alice could call delete_file, which her role does not list")
	}
	if f.runs["delete_file"].Load() != 0 {
		t.Error("delete_file ran for alice")
	}
	bob := connectAs(t, url, "bob-token")
	if got := listNames(t, bob); len(got) != 4 {
		t.Errorf("bob (admin) sees %v, want all four tools", got)
	}
	if got := listNames(t, connectAs(t, url, "eve-token")); len(got) != 0 {
		t.Errorf("eve (unknown role) sees %v, want nothing", got)
	}

	if res := callTool(t, alice, "read_file", map[string]any{"path": "/a"}); res.IsError {
		t.Fatalf("alice read_file = %q", text(res))
	}
	if res := callTool(t, bob, "delete_file", map[string]any{"path": "/b"}); res.IsError {
		t.Fatalf("bob delete_file = %q", text(res))
	}
	callers := map[string]string{}
	for _, ev := range mem.Events() {
		if ev.Caller == "" {
			t.Errorf("audit event %s of %s has no caller", ev.Kind, ev.Tool)
		}
		callers[ev.Tool] = ev.Caller
	}
	if callers["read_file"] != "alice" || callers["delete_file"] != "bob" {
		t.Errorf("audit callers = %v, want read_file by alice and delete_file by bob", callers)
	}
}

func TestStaticVerifierRefusesBadConfiguration(t *testing.T) {
	for _, tokens := range [][]StaticToken{
		{{SHA256: "abc", Subject: "a", Role: "r"}},
		{{SHA256: HashToken("x"), Subject: "", Role: "r"}},
		{{SHA256: HashToken("x"), Subject: "a", Role: ""}},
	} {
		if _, err := StaticVerifier(tokens); err == nil {
			t.Errorf("StaticVerifier(%+v) accepted it", tokens)
		}
	}
	if err := (Roles{"r": {"[bad"}}).Validate(); err == nil || !strings.Contains(err.Error(), `"[bad"`) {
		t.Errorf("Validate of a bad glob = %v", err)
	}
}

func TestChallengeWithoutAConfiguredResourceURLPointsAtThisHost(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{})
	verify, err := StaticVerifier([]StaticToken{{SHA256: HashToken("t"), Subject: "s", Role: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	h := f.gw.Handler(&HTTPOptions{Verifier: verify, Roles: Roles{"r": {"*"}}})
	t.Cleanup(h.Close)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	resp, err := http.Post(ts.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(got, ts.URL+MetadataPath) {
		t.Errorf("status %d, challenge %q; want 401 pointing at %s", resp.StatusCode, got, ts.URL+MetadataPath)
	}
}
