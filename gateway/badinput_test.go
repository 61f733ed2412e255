package gateway

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// badBodyLimit is the body limit the bad-input servers are given: small,
// so that a refusal shows the configured limit is the one enforced (the
// SDK's default is 4 MiB).
const badBodyLimit = 4096

// badInputServer serves the fixture's gateway with a body limit of
// badBodyLimit, accepting the static tokens alice-token (role reader:
// read_*) and bob-token (role admin: everything) and ES256 JWTs from
// testIssuer for testAudience, role in the "role" claim. It returns the
// URL, the fixture and a function minting JWTs: with key nil, signed by
// the issuer's key.
func badInputServer(t *testing.T, stateless bool) (string, *fixture, func(key *ecdsa.PrivateKey, sub, role, aud string, exp time.Time) string) {
	t.Helper()
	f := newFixture(t, ApprovalPolicy{Write: Allow, Destructive: Allow})
	static, err := StaticVerifier([]StaticToken{
		{SHA256: HashToken("alice-token"), Subject: "alice", Role: "reader"},
		{SHA256: HashToken("bob-token"), Subject: "bob", Role: "admin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	issuerKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	j := newJWKS(t, publicJWK(issuerKey, "ec-1", "ES256"))
	jwtVerify, err := JWTVerifier(ctxT(t), &JWTOptions{JWKSURL: j.url(), Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	// A token with two dots is a JWT; anything else is looked up among
	// the static tokens. Each answer is the refusal of the verifier that
	// applies.
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if strings.Count(token, ".") == 2 {
			return jwtVerify(ctx, token, r)
		}
		return static(ctx, token, r)
	}
	ts := httptest.NewServer(nil)
	h := f.gw.Handler(&HTTPOptions{
		Verifier: verify, Roles: Roles{"reader": {"read_*"}, "admin": {"*"}},
		ResourceURL: ts.URL + "/mcp", AuthorizationServers: []string{testIssuer},
		Stateless: stateless, MaxBodyBytes: badBodyLimit,
	})
	ts.Config.Handler = h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	mint := func(key *ecdsa.PrivateKey, sub, role, aud string, exp time.Time) string {
		if key == nil {
			key = issuerKey
		}
		return sign(t, key, "ec-1", jose.ES256, map[string]any{
			"iss": testIssuer, "aud": aud, "sub": sub, "role": role,
			"exp": exp.Unix(), "iat": time.Now().Add(-time.Minute).Unix(),
		})
	}
	return ts.URL, f, mint
}

// reply is the answer to a raw POST: its status, headers and body, and the
// JSON-RPC message in the body when there is one (a single message, as
// JSON or as the first event of a stream).
type reply struct {
	status int
	header http.Header
	body   string
	msg    *rpcMessage
}

type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError bool             `json:"isError"`
		Content []map[string]any `json:"content"`
		Tools   []map[string]any `json:"tools"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (m *rpcMessage) text() string {
	var b strings.Builder
	if m != nil && m.Result != nil {
		for _, c := range m.Result.Content {
			if s, ok := c["text"].(string); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

// post sends body to url's /mcp as a client that negotiated 2025-11-25
// would, with token as bearer token (none when empty) and in session sid
// (none when empty).
func post(ctx context.Context, url, token, sid, body string) (*reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := &reply{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	data := ""
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		data = r.body
	case strings.HasPrefix(ct, "text/event-stream"):
		sc := bufio.NewScanner(strings.NewReader(r.body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = d
				break
			}
		}
	}
	if data != "" {
		r.msg = &rpcMessage{}
		if err := json.Unmarshal([]byte(data), r.msg); err != nil {
			return nil, fmt.Errorf("reply %q: %v", data, err)
		}
	}
	return r, nil
}

// rawSession opens a session as a raw client would: initialize, then the
// initialized notification. It returns the session ID.
func rawSession(t *testing.T, url, token string) string {
	t.Helper()
	r, err := post(ctxT(t), url, token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || sid == "" || r.msg == nil || r.msg.Result == nil {
		t.Fatalf("initialize: status %d, session %q, body %s", r.status, sid, r.body)
	}
	if r, err = post(ctxT(t), url, token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || r.status != http.StatusAccepted {
		t.Fatalf("initialized: %v %+v", err, r)
	}
	return sid
}

// callBody is a tools/call of name with args (raw JSON) as request id.
func callBody(id int, name, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
}

// sizedCall is a tools/call of read_file whose body is exactly n bytes.
func sizedCall(n int) string {
	empty := callBody(7, "read_file", `{"path":""}`)
	pad := n - len(empty)
	return callBody(7, "read_file", `{"path":"`+strings.Repeat("x", pad)+`"}`)
}

// Where a bad request is sent.
const (
	noSession    = iota
	ownSession   // the misbehaving caller's own session
	aliceSession // the well-behaved caller's session, with another caller's token
)

type badCase struct {
	name    string
	token   string
	session int
	body    string
	check   func(t *testing.T, r *reply)
}

// plain checks a plain HTTP refusal: status, a body saying why, and no
// JSON-RPC message.
func plain(status int, why ...string) func(*testing.T, *reply) {
	return func(t *testing.T, r *reply) {
		t.Helper()
		says := true
		for _, w := range why {
			says = says && strings.Contains(r.body, w)
		}
		if r.status != status || !says || r.msg != nil {
			t.Errorf("status %d, body %q; want %d saying %q", r.status, r.body, status, why)
		}
	}
}

// rpcError checks a JSON-RPC error answer to request id 3.
func rpcError(code int, why string) func(*testing.T, *reply) {
	return func(t *testing.T, r *reply) {
		t.Helper()
		if r.status != http.StatusOK || r.msg == nil || r.msg.Error == nil || r.msg.Result != nil ||
			r.msg.Error.Code != code || !strings.Contains(r.msg.Error.Message, why) || string(r.msg.ID) != "3" {
			t.Errorf("status %d, body %q; want a JSON-RPC error %d to id 3 saying %q", r.status, r.body, code, why)
		}
	}
}

// toolError checks an isError result (not a protocol error) saying why.
func toolError(why ...string) func(*testing.T, *reply) {
	return func(t *testing.T, r *reply) {
		t.Helper()
		if r.status != http.StatusOK || r.msg == nil || r.msg.Error != nil || r.msg.Result == nil || !r.msg.Result.IsError {
			t.Errorf("status %d, body %q; want an isError result", r.status, r.body)
			return
		}
		for _, w := range why {
			if !strings.Contains(r.msg.text(), w) {
				t.Errorf("isError text %q does not say %q", r.msg.text(), w)
			}
		}
	}
}

// unauthorized checks a 401 with a Bearer challenge pointing at the
// metadata, whose body says why and does not repeat the token.
func unauthorized(url, token, why string) func(*testing.T, *reply) {
	return func(t *testing.T, r *reply) {
		t.Helper()
		challenge := r.header.Get("WWW-Authenticate")
		if r.status != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer ") ||
			!strings.Contains(challenge, `resource_metadata="`+url+MetadataPath+`"`) {
			t.Errorf("status %d, WWW-Authenticate %q; want 401 with a Bearer challenge naming %s", r.status, challenge, url+MetadataPath)
		}
		if !strings.Contains(r.body, why) || r.msg != nil {
			t.Errorf("401 body %q; want it to say %q", r.body, why)
		}
		if token != "" && strings.Contains(r.body, token) {
			t.Errorf("the 401 body repeats the token")
		}
	}
}

// badCases are the bad requests, each with the answer go-sdk (and the
// gateway's executor, for arguments) gives it; where the 2025 sessions'
// transport (toolwire's, sessionconn.go) words a refusal otherwise, what
// both say. mint makes JWTs as
// [badInputServer]'s does.
func badCases(t *testing.T, url string, mint func(*ecdsa.PrivateKey, string, string, string, time.Time) string) []badCase {
	t.Helper()
	const bob = "bob-token"
	later, earlier := time.Now().Add(time.Hour), time.Now().Add(-time.Hour)
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	expired := mint(nil, "dave", "admin", testAudience, earlier)
	otherAud := mint(nil, "dave", "admin", "https://elsewhere.example.com/mcp", later)
	forged := mint(forger, "dave", "admin", testAudience, later)
	huge := sizedCall(badBodyLimit + 1)
	return []badCase{
		// (a) Not JSON: a plain 400, not a -32700 response.
		{"truncated JSON, no session", bob, noSession, `{"jsonrpc":"2.0","id":1,"method":`,
			plain(http.StatusBadRequest, "malformed payload: ", "unexpected")},
		{"truncated JSON", bob, ownSession, `{"jsonrpc":"2.0","id":1,"method":`,
			plain(http.StatusBadRequest, "malformed payload: ", "unexpected")},
		{"not JSON at all", bob, ownSession, `hello`,
			plain(http.StatusBadRequest, "malformed payload")},
		// (b) JSON but not JSON-RPC: a plain 400, not -32600.
		{"JSON without jsonrpc", bob, ownSession, `{"hello":"world"}`,
			plain(http.StatusBadRequest, `malformed payload: `, `version`, `""`, `"2.0"`)},
		{"jsonrpc 1.0", bob, ownSession, `{"jsonrpc":"1.0","id":3,"method":"tools/list"}`,
			plain(http.StatusBadRequest, `malformed payload: `, `version`, `"1.0"`, `"2.0"`)},
		{"an object as id", bob, ownSession, `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
			plain(http.StatusBadRequest, "malformed payload: parse error: invalid ID type")},
		{"empty batch", bob, ownSession, `[]`,
			plain(http.StatusBadRequest, "malformed payload: empty batch")},
		// Batches went with 2025-06-18; post says 2025-11-25.
		{"a batch", bob, ownSession, `[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`,
			plain(http.StatusBadRequest, "JSON-RPC batching is not supported")},
		{"a batch after white space", bob, ownSession, " \r\n\t [{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}]",
			plain(http.StatusBadRequest, "JSON-RPC batching is not supported")},
		{"unknown method", bob, ownSession, `{"jsonrpc":"2.0","id":3,"method":"no/such"}`,
			plain(http.StatusBadRequest, `"no/such" unsupported`)},
		{"params not an object", bob, ownSession, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}`,
			rpcError(-32602, "invalid params")},
		// (c) Over the configured limit: 413 before it is parsed. A body
		// of exactly the limit is served (see the test).
		{"one byte over the limit", bob, ownSession, huge,
			plain(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", badBodyLimit))},
		{"over the limit, no session", bob, noSession, huge,
			plain(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", badBodyLimit))},
		{"over the limit, and not JSON", bob, ownSession, strings.Repeat("{", 2*badBodyLimit),
			plain(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", badBodyLimit))},
		// (d) Unknown tools: a JSON-RPC error.
		{"unknown tool", bob, ownSession, callBody(3, "no_such_tool", `{}`),
			rpcError(-32602, `unknown tool "no_such_tool"`)},
		{"no tool name", bob, ownSession, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}`,
			rpcError(-32602, `unknown tool ""`)},
		// (e) Invalid arguments: an isError result naming where.
		{"argument of the wrong type", bob, ownSession, callBody(3, "read_file", `{"path":5}`),
			toolError(`invalid arguments for tool "read_file"`, "/path: got number, want string")},
		{"missing argument", bob, ownSession, callBody(3, "read_file", `{}`),
			toolError(`invalid arguments for tool "read_file"`, "missing property 'path'")},
		{"arguments not an object", bob, ownSession, callBody(3, "delete_file", `["/etc"]`),
			toolError(`invalid arguments for tool "delete_file"`, "arguments must be a JSON object")},
		// (f) Authentication: 401 with a challenge, before anything else.
		{"no token", "", noSession, callBody(3, "read_file", `{"path":"/a"}`),
			unauthorized(url, "", "no bearer token")},
		{"wrong token", "not-a-token", noSession, callBody(3, "read_file", `{"path":"/a"}`),
			unauthorized(url, "not-a-token", "unknown token")},
		{"expired JWT", expired, noSession, callBody(3, "read_file", `{"path":"/a"}`),
			unauthorized(url, expired, "jwt: expired")},
		{"JWT for another audience", otherAud, noSession, callBody(3, "read_file", `{"path":"/a"}`),
			unauthorized(url, otherAud, "jwt: wrong audience")},
		{"JWT signed by another key", forged, noSession, callBody(3, "read_file", `{"path":"/a"}`),
			unauthorized(url, forged, "jwt: bad signature")},
		{"wrong token in a session", "not-a-token", aliceSession, callBody(3, "read_file", `{"path":"/a"}`),
			unauthorized(url, "not-a-token", "unknown token")},
		{"no token, over the limit", "", noSession, huge,
			unauthorized(url, "", "no bearer token")},
		// Another caller's session: refused, and the session is not
		// disturbed (the test goes on using it).
		{"another caller's session", bob, aliceSession, callBody(3, "read_file", `{"path":"/a"}`),
			plain(http.StatusForbidden, "opened with another credential")},
		{"garbage into another caller's session", bob, aliceSession, `{"jsonrpc":`,
			plain(http.StatusForbidden, "opened with another credential")},
	}
}

// TestBadInputIsAnsweredAndOthersAreStillServed sends every kind of bad
// request to a stateful gateway, checks each answer, then checks that
// callers connected before (with a static token and with a JWT) are
// still served, that the misbehaving caller's own session still works,
// and that new sessions open; then sends the bad requests again from
// several goroutines while a well-behaved caller keeps calling.
func TestBadInputIsAnsweredAndOthersAreStillServed(t *testing.T) {
	url, f, mint := badInputServer(t, false)
	later := time.Now().Add(time.Hour)

	// Connected before any bad request.
	alice := connectAs(t, url, "alice-token")
	dave := connectAs(t, url, mint(nil, "dave", "admin", testAudience, later))
	if got := listNames(t, alice); !slices.Equal(got, []string{"read_file"}) {
		t.Fatalf("alice (reader) sees %v, want [read_file]", got)
	}
	bobSID := rawSession(t, url, "bob-token")
	if alice.ID() == "" {
		t.Fatal("alice's session has no ID")
	}
	sessions := map[int]string{noSession: "", ownSession: bobSID, aliceSession: alice.ID()}

	cases := badCases(t, url, mint)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := post(ctxT(t), url, c.token, sessions[c.session], c.body)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, r)
		})
	}
	if n := f.runs["read_file"].Load() + f.runs["delete_file"].Load(); n != 0 {
		t.Fatalf("a bad request ran a tool (%d runs)", n)
	}

	// The limit is the configured one, to the byte.
	r, err := post(ctxT(t), url, "bob-token", bobSID, sizedCall(badBodyLimit))
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK || r.msg == nil || r.msg.Result == nil || r.msg.Result.IsError || !strings.HasPrefix(r.msg.text(), "ran with") {
		t.Errorf("a body of exactly %d bytes: status %d, body %.200s; want it served", badBodyLimit, r.status, r.body)
	}

	// The misbehaving caller's own session still answers, also a request
	// led by white space, which the batch check read and gave back.
	r, err = post(ctxT(t), url, "bob-token", bobSID, " \n\t{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}")
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK || r.msg == nil || r.msg.Result == nil || len(r.msg.Result.Tools) != 4 {
		t.Errorf("a request led by white space: status %d, body %.300s; want 4 tools", r.status, r.body)
	}
	r, err = post(ctxT(t), url, "bob-token", bobSID, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK || r.msg == nil || r.msg.Result == nil || len(r.msg.Result.Tools) != 4 {
		t.Errorf("bob's session after his bad requests: status %d, body %.300s; want 4 tools", r.status, r.body)
	}

	// Those connected before are served as before.
	if got := listNames(t, alice); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("after the bad requests alice sees %v, want [read_file]", got)
	}
	if res := callTool(t, alice, "read_file", map[string]any{"path": "/a"}); res.IsError || text(res) != `ran with {"path":"/a"}` {
		t.Errorf("after the bad requests alice's read_file = %q (isError %v)", text(res), res.IsError)
	}
	if got := listNames(t, dave); len(got) != 4 {
		t.Errorf("after the bad requests dave (JWT, admin) sees %v, want four tools", got)
	}
	if res := callTool(t, dave, "delete_file", map[string]any{"path": "/d"}); res.IsError {
		t.Errorf("after the bad requests dave's delete_file = %q", text(res))
	}
	// And new sessions open.
	bob := connectAs(t, url, "bob-token")
	if got := listNames(t, bob); len(got) != 4 {
		t.Errorf("a new session for bob sees %v, want four tools", got)
	}
	if res := callTool(t, bob, "read_file", map[string]any{"path": "/b"}); res.IsError {
		t.Errorf("a new session's read_file = %q", text(res))
	}
	if got := f.runs["read_file"].Load(); got != 3 {
		t.Errorf("read_file ran %d times, want 3 (the sized call, alice's, bob's)", got)
	}

	// The bad requests again, from several goroutines at once (each with
	// its own session for those sent in one, so that no two requests of a
	// session share an ID), while alice keeps calling. Each gets the same
	// answer as alone.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const workers, rounds, aliceCalls = 4, 5, 20
	var wg sync.WaitGroup
	errs := make(chan string, workers*len(cases)*rounds+aliceCalls)
	for i := range workers {
		own := map[int]string{noSession: "", ownSession: rawSession(t, url, "bob-token"), aliceSession: alice.ID()}
		wg.Go(func() {
			for round := range rounds {
				for j, c := range cases {
					if j%workers != i {
						continue
					}
					r, err := post(ctx, url, c.token, own[c.session], c.body)
					if err != nil {
						errs <- fmt.Sprintf("round %d, %s: %v", round, c.name, err)
						continue
					}
					c.check(t, r) // reports with t.Errorf, which goroutines may call
				}
			}
		})
	}
	wg.Go(func() {
		for i := range aliceCalls {
			res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": fmt.Sprint("/c", i)}})
			switch {
			case err != nil:
				errs <- fmt.Sprintf("alice's call %d during the bad requests: %v", i, err)
			case res.IsError || text(res) != fmt.Sprintf(`ran with {"path":"/c%d"}`, i):
				errs <- fmt.Sprintf("alice's call %d during the bad requests = %q", i, text(res))
			}
		}
	})
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := f.runs["read_file"].Load(); got != 3+aliceCalls {
		t.Errorf("read_file ran %d times, want %d: only alice's calls should have run", got, 3+aliceCalls)
	}
	if got := listNames(t, alice); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("at the end alice sees %v, want [read_file]", got)
	}
}

// TestBadInputStatelessIsAnsweredAndOthersAreStillServed does the same
// without sessions, where the SDK takes another path for each request.
func TestBadInputStatelessIsAnsweredAndOthersAreStillServed(t *testing.T) {
	url, f, mint := badInputServer(t, true)
	alice := connectAs(t, url, "alice-token")
	for _, c := range badCases(t, url, mint) {
		if c.session == aliceSession {
			continue // no sessions to reach into
		}
		t.Run(c.name, func(t *testing.T) {
			r, err := post(ctxT(t), url, c.token, "", c.body)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, r)
		})
	}
	if n := f.runs["read_file"].Load() + f.runs["delete_file"].Load(); n != 0 {
		t.Fatalf("a bad request ran a tool (%d runs)", n)
	}
	r, err := post(ctxT(t), url, "bob-token", "", sizedCall(badBodyLimit))
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK || r.msg == nil || r.msg.Result == nil || r.msg.Result.IsError {
		t.Errorf("a body of exactly %d bytes: status %d, body %.200s; want it served", badBodyLimit, r.status, r.body)
	}
	if res := callTool(t, alice, "read_file", map[string]any{"path": "/a"}); res.IsError || text(res) != `ran with {"path":"/a"}` {
		t.Errorf("after the bad requests alice's read_file = %q (isError %v)", text(res), res.IsError)
	}
	if got := listNames(t, connectAs(t, url, "bob-token")); len(got) != 4 {
		t.Errorf("a new client for bob sees %v, want four tools", got)
	}
}
