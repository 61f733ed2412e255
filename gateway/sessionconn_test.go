package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/stdioconn"
)

// ownSessions serves srv's 2025 sessions on sessionTransport, as the
// stateful layer does, without its limits, binding or store.
type ownSessions struct {
	srv *mcp.Server

	mu       sync.Mutex
	sessions map[string]*sessionTransport
	served   map[string]*mcp.ServerSession
}

func newOwnSessions(srv *mcp.Server) *ownSessions {
	return &ownSessions{srv: srv, sessions: map[string]*sessionTransport{}, served: map[string]*mcp.ServerSession{}}
}

func (o *ownSessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(sessionHeader)
	o.mu.Lock()
	t := o.sessions[sid]
	o.mu.Unlock()
	if t == nil {
		if sid != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		t = newSessionTransport(rand.Text(), receivedMethods)
		ss, err := o.srv.Connect(context.WithoutCancel(r.Context()), t, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		o.mu.Lock()
		o.sessions[t.SessionID], o.served[t.SessionID] = t, ss
		o.mu.Unlock()
	}
	t.ServeHTTP(w, r)
}

func (o *ownSessions) session(id string) *mcp.ServerSession {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.served[id]
}

// sessionServer is a go-sdk server, with the middleware by which what a
// request's handler sends finds its POST, and one tool, "step", that reports
// progress when asked to and returns "done"; "hold" waits for release.
func sessionServer(release <-chan struct{}) *mcp.Server {
	return sessionServerEntered(release, nil)
}

// sessionServerEntered is sessionServer whose "hold" tells entered when a
// call of it starts, unless a signal is pending already.
func sessionServerEntered(release <-chan struct{}, entered chan<- struct{}) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{
		HasTools: true,
		// A notification's handler that sends something: it belongs to
		// no request.
		RootsListChangedHandler: func(ctx context.Context, req *mcp.RootsListChangedRequest) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "roots-changed", Progress: 1})
		},
	})
	srv.AddReceivingMiddleware(relatePost) // as the gateway's servers have it
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "step", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half"})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case entered <- struct{}{}: // a test waits for it
		default: // nobody waits, or a signal is pending already
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
	})
	return srv
}

// ownSessionRig serves sessionServer's sessions on sessionTransport, with
// one session open (2025-11-25).
type ownSessionRig struct {
	url, sid string
	own      *ownSessions
	entered  chan struct{} // a call of "hold" started (one at a time)
	release  func()        // lets every call of "hold" end; also when the test ends
}

func newOwnSessionRig(t *testing.T) *ownSessionRig {
	t.Helper()
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	own := newOwnSessions(sessionServerEntered(release, entered))
	ts := httptest.NewServer(own)
	t.Cleanup(ts.Close)
	r := &ownSessionRig{url: ts.URL, own: own, entered: entered, release: sync.OnceFunc(func() { close(release) })}
	t.Cleanup(r.release) // before the server closes: its calls end first
	r.sid = openSession(t, ts.URL, "2025-11-25")
	return r
}

// rawPost posts body to url in session sid with accept, and returns the
// status, the content type and the body.
func rawPost(t *testing.T, url, sid, accept, body string, header ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set(protocolHeader, "2025-11-25")
	if sid != "" {
		req.Header.Set(sessionHeader, sid)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, mediaType(resp.Header.Get("Content-Type")), string(b)
}

const (
	streamFirst = "text/event-stream, application/json"
	jsonFirst   = "application/json, text/event-stream"
)

// eventData returns the data of each event of an event stream.
func eventData(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// TestSessionRefusesWhatGoSDKRefuses posts every method go-sdk's server
// receives, and some it does not, as calls and as notifications, with
// params and without, to a session on go-sdk's transport and to one on
// toolwire's, and wants the same status, the same refusal and the same
// messages back: the session's method table is go-sdk's, and its codec
// gives go-sdk's bytes.
func TestSessionRefusesWhatGoSDKRefuses(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	srv := sessionServer(release)
	theirs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer theirs.Close()
	ours := httptest.NewServer(newOwnSessions(srv))
	defer ours.Close()
	theirSID, ourSID := openSession(t, theirs.URL, "2025-11-25"), openSession(t, ours.URL, "2025-11-25")

	methods := slices.Sorted(func(yield func(string) bool) {
		for m := range receivedMethods {
			if !yield(m) {
				return
			}
		}
	})
	// subscriptions/listen holds its answer open (2026-07-28's), and
	// initialize is a session's first request: both are served whole
	// elsewhere.
	methods = slices.DeleteFunc(methods, func(m string) bool { return m == "subscriptions/listen" })
	methods = append(methods, "no/such", "tools/calls", "")
	id := 10
	for _, m := range methods {
		for _, form := range []string{"call+params", "call", "notification+params", "notification"} {
			msg := map[string]any{"jsonrpc": "2.0", "method": m}
			if strings.HasPrefix(form, "call") {
				id++
				msg["id"] = id
			}
			if strings.HasSuffix(form, "+params") {
				msg["params"] = map[string]any{}
			}
			body, _ := json.Marshal(msg)
			ts, _, tb := rawPost(t, theirs.URL, theirSID, streamFirst, string(body))
			os, _, ob := rawPost(t, ours.URL, ourSID, streamFirst, string(body))
			if ts != os {
				t.Errorf("%s: status %d from toolwire's transport, %d from go-sdk's (bodies %q, %q)", body, os, ts, ob, tb)
				continue
			}
			if ts == http.StatusBadRequest && ob != tb {
				t.Errorf("%s: refused with %q, go-sdk refuses it with %q", body, ob, tb)
			}
			if ts == http.StatusOK && !slices.Equal(eventData(ob), eventData(tb)) {
				t.Errorf("%s: answered %q, go-sdk answers %q", body, eventData(ob), eventData(tb))
			}
		}
	}

	// Requests of 2026-07-28's form in a session: go-sdk's stateful
	// transport refuses them, with the version of the header.
	meta := func(v string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"}`
	}
	for _, c := range []struct {
		body   string
		header []string
	}{
		{`{"jsonrpc":"2.0","id":101,"method":"tools/call","params":{"name":"step","arguments":{},` + meta("2026-07-28") + `}}`, nil},
		{`{"jsonrpc":"2.0","id":102,"method":"tools/call","params":{"name":"step","arguments":{},` + meta("2025-11-25") + `}}`, nil},
		{`{"jsonrpc":"2.0","id":103,"method":"ping","params":{` + meta("2026-07-28") + `}}`, nil},
		{`{"jsonrpc":"2.0","id":104,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`, nil},
		{`{"jsonrpc":"2.0","id":105,"method":"tools/call","params":{"name":"step","arguments":{},"\u005fmeta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil},
		// The version named twice (the last counts), not a string, in
		// another case, and a _meta that is no object.
		{`{"jsonrpc":"2.0","id":111,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":5}}}`, nil},
		{`{"jsonrpc":"2.0","id":112,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":5,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil},
		{`{"jsonrpc":"2.0","id":113,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":{"IO.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil},
		{`{"jsonrpc":"2.0","id":114,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":5}}`, nil},
		{`{"jsonrpc":"2.0","id":115,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":null}}}`, nil},
		{`{"jsonrpc":"2.0","id":106,"method":"tools/call","params":{"name":"step","arguments":{}}}`, []string{protocolHeader, Revision2026}},
		{`{"jsonrpc":"2.0","id":107,"method":"tools/call","params":{"name":"step","arguments":{}}}`, []string{protocolHeader, ""}},
		{`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, []string{protocolHeader, Revision2026}},
		{`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, []string{protocolHeader, Revision2026, "Mcp-Method", "ping"}},
		{`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, []string{protocolHeader, Revision2026, "Mcp-Method", "notifications/roots/list_changed"}},
		{`{"jsonrpc":"2.0","id":108,"method":"server/discover","params":{` + meta("2026-07-28") + `}}`, nil},
		{`{"jsonrpc":"2.0","id":109,"method":"server/discover","params":{` + meta("2026-07-28") + `}}`, []string{protocolHeader, Revision2026, "Mcp-Method", "server/discover"}},
		{`{"jsonrpc":"2.0","id":110,"method":"server/discover","params":{}}`, []string{protocolHeader, Revision2026, "Mcp-Method", "server/discover"}},
	} {
		ts, _, tb := rawPost(t, theirs.URL, theirSID, streamFirst, c.body, c.header...)
		os, _, ob := rawPost(t, ours.URL, ourSID, streamFirst, c.body, c.header...)
		if ts != os || (ts != http.StatusOK && ob != tb) || (ts == http.StatusOK && !slices.Equal(eventData(ob), eventData(tb))) {
			t.Errorf("%s (headers %q):\n toolwire's %d %q\n go-sdk's   %d %q", c.body, c.header, os, ob, ts, tb)
		}
	}
}

// TestADroppedPostsCallKeepsItsID: a call whose client went is still in
// flight, as with go-sdk's transport: its id is refused to a new call
// until the call is answered, and its answer is not given to another.
func TestADroppedPostsCallKeepsItsID(t *testing.T) {
	t.Parallel()
	r := newOwnSessionRig(t)
	sid := r.sid

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hold","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", jsonFirst)
		req.Header.Set(sessionHeader, sid)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-r.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the held call did not start")
	}
	cancel()
	<-gone
	status, _, body := rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if status != http.StatusBadRequest || !strings.Contains(body, "duplicate in-flight request ID 5") {
		t.Errorf("a ping with the id of a call whose client went: %d %q; want it refused as a duplicate", status, body)
	}
	r.release()
	// Once the held call is answered (to nobody), its id is free.
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body = rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		if status != http.StatusBadRequest || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if status != http.StatusOK || body != `{"jsonrpc":"2.0","id":5,"result":{}}` {
		t.Errorf("a ping with the id once its call is answered: %d %q; want the ping's own answer", status, body)
	}
}

// TestSessionAnswersWholeOrStreams: a call whose answer is its response
// alone goes as JSON to a client that prefers JSON, and as an event stream
// to one that names the stream first; a call that reports progress first
// goes as an event stream with the progress before the response, which
// is the call's POST's, not the GET stream's.
func TestSessionAnswersWholeOrStreams(t *testing.T) {
	t.Parallel()
	r := newOwnSessionRig(t)
	sid := r.sid

	call := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"step","arguments":{}}}`
	status, ctype, body := rawPost(t, r.url, sid, jsonFirst, call)
	if status != http.StatusOK || ctype != "application/json" || !strings.Contains(body, `"id":"a"`) || !strings.Contains(body, `"done"`) {
		t.Errorf("a plain call, JSON preferred: %d %s %q; want its response as JSON", status, ctype, body)
	}
	status, ctype, body = rawPost(t, r.url, sid, streamFirst, call)
	if data := eventData(body); status != http.StatusOK || ctype != "text/event-stream" || len(data) != 1 || !strings.Contains(data[0], `"done"`) {
		t.Errorf("a plain call, the stream preferred: %d %s %q; want one event", status, ctype, body)
	}
	withProgress := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":{"progressToken":"p1"}}}`
	status, ctype, body = rawPost(t, r.url, sid, jsonFirst, withProgress)
	data := eventData(body)
	if status != http.StatusOK || ctype != "text/event-stream" || len(data) != 2 ||
		!strings.Contains(data[0], `"notifications/progress"`) || !strings.Contains(data[0], `"p1"`) ||
		!strings.Contains(data[1], `"id":7`) || !strings.Contains(data[1], `"done"`) {
		t.Errorf("a call with progress: %d %s %q; want the progress, then the response, as events", status, ctype, body)
	}
}

// TestSessionRefusesHostileRequests: an id already in flight, a second
// GET stream, and a Last-Event-ID (nothing is kept to resume from) are
// refused, and the session goes on serving.
func TestSessionRefusesHostileRequests(t *testing.T) {
	t.Parallel()
	r := newOwnSessionRig(t)
	sid := r.sid

	held := make(chan string, 1)
	go func() {
		_, _, body := rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
		held <- body
	}()
	select {
	case <-r.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the held call did not start")
	}
	status, _, body := rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if status != http.StatusBadRequest || !strings.Contains(body, `duplicate in-flight request ID 5`) || !strings.Contains(body, `"id":5`) {
		t.Errorf("a second call with an id in flight: %d %q; want 400 and a JSON-RPC error naming it", status, body)
	}
	r.release()
	if got := <-held; !strings.Contains(got, "released") {
		t.Errorf("the held call answered %q; want its result", got)
	}

	status, _, body = rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","id":6,"method":"ping"}`, "Last-Event-ID", "x_1")
	if status != http.StatusBadRequest || !strings.Contains(body, "Last-Event-ID") {
		t.Errorf("a POST with Last-Event-ID: %d %q; want 400", status, body)
	}

	get := func(ctx context.Context, lastEventID string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(sessionHeader, sid)
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := get(ctx, "")
	if first.StatusCode != http.StatusOK || mediaType(first.Header.Get("Content-Type")) != "text/event-stream" {
		t.Fatalf("the GET stream: %d %s", first.StatusCode, first.Header.Get("Content-Type"))
	}
	second := get(context.Background(), "")
	_, _ = io.Copy(io.Discard, second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusConflict {
		t.Errorf("a second GET stream: %d; want 409", second.StatusCode)
	}
	resumed := get(context.Background(), "x_1")
	_, _ = io.Copy(io.Discard, resumed.Body)
	resumed.Body.Close()
	if resumed.StatusCode != http.StatusBadRequest {
		t.Errorf("a GET with Last-Event-ID: %d; want 400", resumed.StatusCode)
	}
	cancel()
	first.Body.Close()

	if status, _, body := rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","id":8,"method":"ping"}`); status != http.StatusOK || !strings.Contains(body, `"id":8`) {
		t.Errorf("a ping after all that: %d %q; want it answered", status, body)
	}
}

// TestRejectedIsGoSDKs: a message the transport declines (here a request
// to the client with no stream to carry it) fails at once without
// breaking the session, because it wraps go-sdk's own sentinel; with any
// other error go-sdk would close the session.
func TestRejectedIsGoSDKs(t *testing.T) {
	t.Parallel()
	if errors.Is(rejected(), errDeclined) {
		t.Fatal("go-sdk's sentinel for a declined message could not be had")
	}
	r := newOwnSessionRig(t)
	sid := r.sid
	ss := r.own.session(sid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ss.ListRoots(ctx, nil); err == nil || ctx.Err() != nil {
		t.Fatalf("a request with nowhere to go: err %v (context %v); want it refused at once", err, ctx.Err())
	}
	if status, _, body := rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); status != http.StatusOK || !strings.Contains(body, `"id":9`) {
		t.Errorf("the session after a declined message: %d %q; want it serving", status, body)
	}
}

// serveGateway serves f's gateway on a listener of its own, its handler
// changed by change first (nil: as it comes), and returns its URL and the
// handler.
func serveGateway(t *testing.T, f *fixture, change func(*Handler)) (string, *Handler) {
	t.Helper()
	h := f.gw.Handler(&HTTPOptions{})
	if change != nil {
		change(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	return ts.URL, h
}

// TestDirectCallsAnswerAsTheSessionDoes posts the same tools/call bodies,
// well-formed and hostile, to a gateway whose sessions serve tools/call
// directly and to one whose sessions hand every call to go-sdk's session,
// and wants the same answers, byte for byte: the direct path decodes as
// go-sdk decodes (exact member names, the last of duplicate members),
// leaves go-sdk's refusals to go-sdk, and runs the same middleware and
// handlers.
func TestDirectCallsAnswerAsTheSessionDoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ApprovalPolicy{Write: Allow, Destructive: Deny})
	directURL, directH := serveGateway(t, f, nil)
	sessionURL, _ := serveGateway(t, f, func(h *Handler) { h.sessions.servedBy = nil })
	directSID := openSession(t, directURL, "2025-11-25")
	sessionSID := openSession(t, sessionURL, "2025-11-25")
	directH.sessions.mu.Lock()
	wired := directH.sessions.held[directSID].t.direct != nil
	directH.sessions.mu.Unlock()
	if !wired {
		t.Fatal("the session of the direct gateway serves no call directly")
	}

	for _, params := range []string{
		`{"name":"read_file","arguments":{"path":"/a"}}`,
		`{"name":"read_file","arguments":{"path":"/a"},"_meta":{"progressToken":"p"}}`,
		`{"name":"write_file","arguments":{"path":"/b"}}`,
		`{"name":"delete_file","arguments":{"path":"/c"}}`,
		`{"name":"no_such_tool","arguments":{}}`,
		`{"arguments":{}}`,
		`{"name":"read_file","arguments":{"path":5}}`,
		`{"name":"read_file","arguments":["/etc"]}`,
		`{"name":"read_file"}`,
		`{"name":"read_file","NAME":"delete_file","arguments":{"path":"/d"}}`,
		`{"Name":"delete_file","name":"read_file","arguments":{"path":"/d"}}`,
		`{"name":"delete_file","name":"read_file","arguments":{"path":"/e"}}`,
		`{"name":"read_file","arguments":{"path":"/f","path":"/g"}}`,
		`{"name":"read_file","arguments":{"path":"<b>&amp;</b>"}}`,
		`{"name":"read_file","arguments":{"path":"/h"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`null`,
		`"x"`,
		`{"name":"read_file","arguments":{"path":"/i"}`,
	} {
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + params + `}`
		ds, dt, db := rawPost(t, directURL+"/mcp", directSID, jsonFirst, body)
		ss, st, sb := rawPost(t, sessionURL+"/mcp", sessionSID, jsonFirst, body)
		if ds != ss || dt != st || db != sb {
			t.Errorf("params %s:\n direct  %d %s %q\n session %d %s %q", params, ds, dt, db, ss, st, sb)
		}
	}
}

// TestModernCallsAnswerAsGoSDKDoes posts the same 2026-07-28 tools/call
// requests, well-formed and hostile (headers that disagree with the body,
// a _meta go-sdk refuses, a parser differential), to a gateway that serves
// them itself (modernCalls) and to one that gives every request to
// go-sdk's stateless handler, and wants the same status, content type and
// body, byte for byte; and wants the well-formed ones served by
// modernCalls.
func TestModernCallsAnswerAsGoSDKDoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ApprovalPolicy{Write: Allow, Destructive: Deny})
	ownURL, own := serveGateway(t, f, nil)
	sdkURL, _ := serveGateway(t, f, func(h *Handler) { h.modern.servedBy = nil })
	ownURL, sdkURL = ownURL+"/mcp", sdkURL+"/mcp"

	meta := func(extra string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}` + extra + `}`
	}
	h26 := func(name string) []string {
		return []string{protocolHeader, Revision2026, "Mcp-Method", "tools/call", "Mcp-Name", name}
	}
	for _, c := range []struct {
		name, params string
		header       []string
		own          bool // served by modernCalls
	}{
		{"a read", `{"name":"read_file","arguments":{"path":"/a"},` + meta(``) + `}`, h26("read_file"), true},
		{"with progress", `{"name":"read_file","arguments":{"path":"/a"},` + meta(`,"progressToken":7`) + `}`, h26("read_file"), true},
		{"with a log level", `{"name":"read_file","arguments":{"path":"/a"},` + meta(`,"io.modelcontextprotocol/logLevel":"debug"`) + `}`, h26("read_file"), true},
		{"a write, allowed", `{"name":"write_file","arguments":{"path":"/b"},` + meta(``) + `}`, h26("write_file"), true},
		{"a destructive call, denied", `{"name":"delete_file","arguments":{"path":"/c"},` + meta(``) + `}`, h26("delete_file"), true},
		{"an unknown tool", `{"name":"no_such_tool","arguments":{},` + meta(``) + `}`, h26("no_such_tool"), true},
		{"arguments of the wrong type", `{"name":"read_file","arguments":{"path":5},` + meta(``) + `}`, h26("read_file"), true},
		{"HTML in an argument", `{"name":"read_file","arguments":{"path":"<b>&</b>"},` + meta(``) + `}`, h26("read_file"), true},
		{"a case differential", `{"name":"read_file","NAME":"delete_file","arguments":{"path":"/d"},` + meta(``) + `}`, h26("read_file"), true},
		{"Mcp-Name of another tool", `{"name":"read_file","arguments":{"path":"/a"},` + meta(``) + `}`, h26("delete_file"), false},
		{"no Mcp-Method", `{"name":"read_file","arguments":{"path":"/a"},` + meta(``) + `}`, []string{protocolHeader, Revision2026, "Mcp-Name", "read_file"}, false},
		{"no _meta version", `{"name":"read_file","arguments":{"path":"/a"},"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, h26("read_file"), false},
		{"an older _meta version", `{"name":"read_file","arguments":{"path":"/a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}`, h26("read_file"), false},
		{"no capabilities", `{"name":"read_file","arguments":{"path":"/a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, h26("read_file"), false},
		{"capabilities not an object", `{"name":"read_file","arguments":{"path":"/a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":5}}`, h26("read_file"), false},
		{"client info a string", `{"name":"read_file","arguments":{"path":"/a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":"me","io.modelcontextprotocol/clientCapabilities":{}}}`, h26("read_file"), false},
		{"client info null", `{"name":"read_file","arguments":{"path":"/a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":null,"io.modelcontextprotocol/clientCapabilities":{}}}`, h26("read_file"), false},
		{"params null", `null`, h26("read_file"), false},
	} {
		body := `{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":` + c.params + `}`
		before := own.modern.taken.Load()
		os, ot, ob := rawPost(t, ownURL, "", jsonFirst, body, c.header...)
		if taken := own.modern.taken.Load() != before; taken != c.own {
			t.Errorf("%s: served by modernCalls %v, want %v", c.name, taken, c.own)
		}
		ss, st, sb := rawPost(t, sdkURL, "", jsonFirst, body, c.header...)
		if os != ss || ot != st || ob != sb {
			t.Errorf("%s:\n own    %d %s %q\n go-sdk %d %s %q", c.name, os, ot, ob, ss, st, sb)
		}
	}
}

// TestModernCallsAskAsGoSDKDoes: a 2026-07-28 call that needs an approval
// is answered with the question (resultType input_required, content left
// out) as go-sdk's handler answers it; only the sealed requestState, which
// is random, differs.
func TestModernCallsAskAsGoSDKDoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, ApprovalPolicy{Write: Elicit, Destructive: Elicit})
	ownURL, own := serveGateway(t, f, nil)
	sdkURL, _ := serveGateway(t, f, func(h *Handler) { h.modern.servedBy = nil })
	ownURL, sdkURL = ownURL+"/mcp", sdkURL+"/mcp"
	body := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/w"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
	header := []string{protocolHeader, Revision2026, "Mcp-Method", "tools/call", "Mcp-Name", "write_file"}
	state := regexp.MustCompile(`"requestState":"[^"]*"`)
	os, ot, ob := rawPost(t, ownURL, "", jsonFirst, body, header...)
	ss, st, sb := rawPost(t, sdkURL, "", jsonFirst, body, header...)
	if own.modern.taken.Load() != 1 {
		t.Errorf("modernCalls served %d calls, want the one", own.modern.taken.Load())
	}
	if !strings.Contains(ob, `"resultType":"input_required"`) || !state.MatchString(ob) {
		t.Errorf("the question: %q; want input_required with a requestState", ob)
	}
	ob, sb = state.ReplaceAllString(ob, `"requestState":"…"`), state.ReplaceAllString(sb, `"requestState":"…"`)
	if os != ss || ot != st || ob != sb {
		t.Errorf("the question:\n own    %d %s %q\n go-sdk %d %s %q", os, ot, ob, ss, st, sb)
	}
}

// TestWithResultTypeKeepsEveryField: withResultType copies every field
// of go-sdk's tools/call result, and its templates carry the resultType.
func TestWithResultTypeKeepsEveryField(t *testing.T) {
	t.Parallel()
	var names []string
	rt := reflect.TypeFor[mcp.CallToolResult]()
	for i := range rt.NumField() {
		if rt.Field(i).IsExported() {
			names = append(names, rt.Field(i).Name)
		}
	}
	want := []string{"Meta", "Content", "StructuredContent", "IsError", "InputRequests", "RequestState"}
	if !slices.Equal(names, want) {
		t.Fatalf("go-sdk's CallToolResult has the fields %v; withResultType copies %v", names, want)
	}
	res := &mcp.CallToolResult{
		Meta: mcp.Meta{"k": "v"}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: map[string]any{"a": 1.0},
		IsError: true, InputRequests: mcp.InputRequestMap{}, RequestState: "s",
	}
	out := withResultType(res, true)
	if !out.NeedsInput() || withResultType(res, false).NeedsInput() {
		t.Fatalf("the resultType of the copies: %v and %v; want input_required, then complete", out.NeedsInput(), withResultType(res, false).NeedsInput())
	}
	a, _ := json.Marshal(res)
	b, _ := json.Marshal(out)
	if !strings.Contains(string(b), `"resultType":"input_required"`) || strings.Replace(string(b), `"resultType":"input_required",`, "", 1) != string(a) {
		t.Errorf("the copy encodes as %s; want %s with its resultType", b, a)
	}
}

// TestModernCapabilitiesAreGoSDKs: the cache of decoded capabilities
// answers what go-sdk's decoding answers, for good and hostile values,
// from a cache that stays bounded.
func TestModernCapabilitiesAreGoSDKs(t *testing.T) {
	t.Parallel()
	m := &modernCalls{}
	values := []any{
		map[string]any{},
		map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		map[string]any{"roots": map[string]any{"listChanged": true}, "sampling": map[string]any{}},
		map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		map[string]any{"roots": 5},
		map[string]any{"elicitation": "yes"},
		"capabilities",
		5.0,
		[]any{},
		map[string]any{"x": strings.Repeat("y", 3000)},
	}
	for round := range 2 { // the second round from the cache
		for _, v := range values {
			call := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{mcp.MetaKeyClientCapabilities: v}}}
			got, want := m.capabilities(call), call.ClientCapabilities()
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if (got == nil) != (want == nil) || string(gb) != string(wb) {
				t.Errorf("round %d, capabilities %v: %s, go-sdk decodes %s", round, v, gb, wb)
			}
		}
	}
	for i := range 3 * maxCachedCaps {
		call := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{mcp.MetaKeyClientCapabilities: map[string]any{"experimental": map[string]any{"n": float64(i)}}}}}
		m.capabilities(call)
	}
	if n := len(m.caps); n > maxCachedCaps {
		t.Errorf("the cache holds %d entries, more than %d", n, maxCachedCaps)
	}
}

// TestANotificationsHandlerSendsOnTheGETStream: what the handler of a
// notification sends belongs to no request, so it goes on the client's GET
// stream, as with go-sdk's transport (not refused as if sent for a POST
// that is over).
func TestANotificationsHandlerSendsOnTheGETStream(t *testing.T) {
	t.Parallel()
	r := newOwnSessionRig(t)
	sid := r.sid

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(sessionHeader, sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if status, _, _ := rawPost(t, r.url, sid, jsonFirst, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`); status != http.StatusAccepted {
		t.Fatalf("notifications/roots/list_changed: status %d, want 202", status)
	}
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"roots-changed"`) {
			return
		}
	}
	t.Fatalf("the GET stream ended without what the notification's handler sent (%v)", sc.Err())
}

// TestPlainImplementationIsTheDecodedEncoding: the client's info built
// straight from its _meta value is what encoding and decoding it (go-sdk's
// way) gives, and whatever else a client may send is left to that way.
func TestPlainImplementationIsTheDecodedEncoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw   string
		plain bool
	}{
		{`{"name":"raw","version":"1"}`, true},
		{`{"name":"a<b>&\u2028","title":"T","description":"D","version":"","websiteUrl":"https://x.test/"}`, true},
		{`{}`, true},
		{`{"name":"a","icons":[{"src":"https://x.test/i.png"}]}`, false},
		{`{"Name":"case","version":"1"}`, false},
		{`{"name":"a","version":1}`, false},
		{`{"name":"a","extra":"b"}`, false},
		{`{"name":null}`, false},
		{`["name"]`, false},
		{`"name"`, false},
	} {
		var raw any
		if err := json.Unmarshal([]byte(tc.raw), &raw); err != nil {
			t.Fatal(err)
		}
		info, plain := plainImplementation(raw)
		if plain != tc.plain {
			t.Errorf("%s: taken as plain %v, want %v", tc.raw, plain, tc.plain)
			continue
		}
		if !plain {
			continue
		}
		b, _ := json.Marshal(raw)
		var want *mcp.Implementation
		if err := stdioconn.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(info, want) {
			t.Errorf("%s: built %+v, decoding its encoding gives %+v", tc.raw, info, want)
		}
	}
}
