package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// opFixture is a gateway on 127.0.0.1 whose approver keeps lasting
// approvals in files and lets calls wait for an operator in a file
// queue; operator is that queue as another process sees it.
type opFixture struct {
	url      string
	runs     map[string]*atomic.Int32
	mem      *audit.Memory
	grants   *approval.Files
	operator *approval.FileQueue
	approver *Approver
}

func newOpFixture(t *testing.T, ops Operators) *opFixture {
	t.Helper()
	dir := t.TempDir()
	f := &opFixture{runs: map[string]*atomic.Int32{}, mem: &audit.Memory{}}
	f.grants = approval.NewFiles(filepath.Join(dir, "approvals.json"))
	if ops.Queue == nil {
		ops.Queue = approval.NewFileQueue(filepath.Join(dir, "pending.json"), f.grants, "serve")
	}
	ops.Grants = f.grants
	ops.Logger = slog.New(slog.DiscardHandler)
	f.operator = approval.NewFileQueue(filepath.Join(dir, "pending.json"), approval.NewFiles(f.grants.Path()), "cli")
	f.approver = NewApprover(ApprovalPolicy{})
	f.approver.SetOperators(ops)
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: f.approver})
	log := audit.NewLog(f.mem, nil)
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log, Approvals: SessionApprovals(f.grants)})
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	for _, def := range []struct {
		name string
		tier tool.Tier
	}{{"delete_file", tool.Destructive}, {"write_file", tool.Write}} {
		n := &atomic.Int32{}
		f.runs[def.name] = n
		if err := reg.Register(&tool.Tool{
			Name: def.name, Description: def.name + " does its thing", InputSchema: schema, Tier: def.tier,
			Origin: tool.Origin{Source: "files", Name: def.name},
			Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
				n.Add(1)
				return tool.TextResult("done"), nil
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	verify, err := StaticVerifier([]StaticToken{{SHA256: HashToken(aliceToken), Subject: "alice", Role: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	gw := New(ex, &Options{Logger: slog.New(slog.DiscardHandler)})
	ts := httptest.NewServer(nil)
	h := gw.Handler(&HTTPOptions{Audit: log, Verifier: verify, Roles: Roles{"admin": {"*"}}})
	ts.Config.Handler = h
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })
	f.url = ts.URL
	return f
}

// dial connects a 2025 client (a session) with opts (nil: no
// elicitation: a headless agent).
func (f *opFixture) dial(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts).Connect(ctxT(t),
		&mcp.StreamableClientTransport{Endpoint: f.url + "/mcp", HTTPClient: bearerFor(aliceToken), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// startCall starts a call and returns its result's channel.
func startCall(t *testing.T, cs *mcp.ClientSession, name string, args any) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		out <- res
	}()
	return out
}

// pendingOne waits for the one request waiting (watching the queue) and
// returns it.
func (f *opFixture) pendingOne(t *testing.T) approval.Request {
	t.Helper()
	ctx := ctxT(t)
	changes := f.operator.Watch(ctx)
	for {
		list, err := f.operator.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			return list[0]
		}
		if len(list) > 1 {
			t.Fatalf("%d requests waiting, want one", len(list))
		}
		select {
		case <-changes:
		case <-ctx.Done():
			t.Fatal("no call came to wait for an operator")
		}
	}
}

// confirmations returns the confirmation outcomes of tool in the audit.
func (f *opFixture) confirmations(tool string) []audit.Event {
	var out []audit.Event
	for _, ev := range f.mem.Events() {
		if ev.Tool == tool && (ev.Kind == audit.ConfirmationAccepted || ev.Kind == audit.ConfirmationRejected) {
			out = append(out, ev)
		}
	}
	return out
}

// A headless agent's destructive call waits; the operator's decision of
// scope args, taken in another queue, runs it and the same call again
// without waiting; other arguments wait again, and a refusal says who
// refused. The audit names each decision's approval and who took it.
func TestHeadlessCallWaitsForAnOperatorsDecision(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{Wait: time.Minute})
	cs := f.dial(t, nil)

	done := startCall(t, cs, "delete_file", map[string]any{"path": "/srv/a"})
	req := f.pendingOne(t)
	if req.Tool != "delete_file" || req.Server != "files" || req.Tier != "destructive" || req.Caller != "alice (role admin)" ||
		string(req.Args) != `{"path":"/srv/a"}` || !strings.Contains(req.Reason, "elicitation") || req.Session == "" {
		t.Fatalf("pending request %+v", req)
	}
	if f.runs["delete_file"].Load() != 0 {
		t.Fatal("the call ran before a decision")
	}
	d, err := f.operator.Decide(ctxT(t), req.ID, approval.Decision{Approve: true, Scope: approval.Args, By: "cli:ann"})
	if err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.IsError {
		t.Fatalf("approved call: %s", text(res))
	}
	if res := <-startCall(t, cs, "delete_file", map[string]any{"path": "/srv/a"}); res.IsError {
		t.Fatalf("the same call again: %s", text(res))
	}
	if n := f.runs["delete_file"].Load(); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}

	done = startCall(t, cs, "delete_file", map[string]any{"path": "/srv/b"})
	other := f.pendingOne(t)
	if other.ID == req.ID {
		t.Fatal("other arguments were not asked about")
	}
	if _, err := f.operator.Decide(ctxT(t), other.ID, approval.Decision{Approve: false, By: "cli:bob", Reason: "not that one"}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if !res.IsError || !strings.Contains(text(res), `denied by "cli:bob"`) || !strings.Contains(text(res), "not that one") {
		t.Fatalf("refused call: %s", text(res))
	}
	if n := f.runs["delete_file"].Load(); n != 2 {
		t.Fatalf("ran %d times after a refusal, want 2", n)
	}

	got := f.confirmations("delete_file")
	if len(got) != 3 {
		t.Fatalf("%d confirmation outcomes, want 3: %+v", len(got), got)
	}
	wantFirst := "approval " + req.ID + ` by "cli:ann", granted ` + d.Grant + " (args scope)"
	if got[0].Kind != audit.ConfirmationAccepted || got[0].Reason != wantFirst {
		t.Errorf("first: %s %q; want accepted %q", got[0].Kind, got[0].Reason, wantFirst)
	}
	if got[1].Kind != audit.ConfirmationAccepted || got[1].Reason != "approval "+d.Grant {
		t.Errorf("second: %s %q; want accepted by the lasting approval %s", got[1].Kind, got[1].Reason, d.Grant)
	}
	if got[2].Kind != audit.ConfirmationRejected || !strings.Contains(got[2].Error, `denied by "cli:bob" (approval `+other.ID+")") {
		t.Errorf("third: %s %q", got[2].Kind, got[2].Error)
	}
}

// Past the wait the call is refused as approval required, as a call
// nobody can be asked about; with no wait it is refused at once, listed
// nowhere.
func TestOperatorWaitEndsInApprovalRequired(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{Wait: 50 * time.Millisecond})
	cs := f.dial(t, nil)
	res := <-startCall(t, cs, "write_file", map[string]any{"path": "/x"})
	if !res.IsError || !strings.Contains(text(res), "approval required") || !strings.Contains(text(res), "nobody decided within 50ms") {
		t.Fatalf("result: %s", text(res))
	}
	got := f.confirmations("write_file")
	if len(got) != 1 || got[0].Reason != string(tool.ReasonUnconfirmed) {
		t.Fatalf("audit: %+v; want one rejection, unconfirmed", got)
	}

	f.approver.SetOperators(Operators{Grants: f.grants, Queue: f.operator, Wait: 0})
	res = <-startCall(t, cs, "write_file", map[string]any{"path": "/y"})
	if !res.IsError || !strings.Contains(text(res), "does not support elicitation") {
		t.Fatalf("with no wait: %s", text(res))
	}
	if list, _ := f.operator.Pending(ctxT(t)); len(list) != 0 {
		t.Fatalf("listed with no wait: %+v", list)
	}
	if f.runs["write_file"].Load() != 0 {
		t.Fatal("an unapproved call ran")
	}
}

// An operator's lasting denial refuses the calls it covers at once,
// without anyone being asked.
func TestLastingDenialRefusesWithoutAsking(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{Wait: time.Minute})
	cs := f.dial(t, nil)
	done := startCall(t, cs, "delete_file", map[string]any{"path": "/1"})
	req := f.pendingOne(t)
	if _, err := f.operator.Decide(ctxT(t), req.ID, approval.Decision{Approve: false, Scope: approval.Tool, By: "ann", Reason: "frozen"}); err != nil {
		t.Fatal(err)
	}
	<-done
	var asked atomic.Int32
	cs2 := f.dial(t, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}})
	res := <-startCall(t, cs2, "delete_file", map[string]any{"path": "/2"})
	if !res.IsError || !strings.Contains(text(res), "lasting denial") || !strings.Contains(text(res), "frozen") {
		t.Fatalf("result: %s", text(res))
	}
	if asked.Load() != 0 || f.runs["delete_file"].Load() != 0 {
		t.Fatalf("asked %d times, ran %d times; want neither", asked.Load(), f.runs["delete_file"].Load())
	}
}

// A lasting denial given after a lasting approval of the same calls wins:
// the approval no longer runs them.
func TestLaterDenialWinsOverAnEarlierApproval(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{Wait: time.Minute})
	cs := f.dial(t, nil)
	decide := func(d approval.Decision) {
		t.Helper()
		done := startCall(t, cs, "delete_file", map[string]any{"path": "/keep"})
		req := f.pendingOne(t)
		if _, err := f.operator.Decide(ctxT(t), req.ID, d); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	decide(approval.Decision{Approve: true, Scope: approval.Args, By: "ann"})
	if res := <-startCall(t, cs, "delete_file", map[string]any{"path": "/keep"}); res.IsError {
		t.Fatalf("within the approval: %s", text(res))
	}
	done := startCall(t, cs, "delete_file", map[string]any{"path": "/other"})
	req := f.pendingOne(t)
	if _, err := f.operator.Decide(ctxT(t), req.ID, approval.Decision{Approve: false, Scope: approval.Tool, By: "bob", Reason: "freeze"}); err != nil {
		t.Fatal(err)
	}
	<-done
	res := <-startCall(t, cs, "delete_file", map[string]any{"path": "/keep"})
	if !res.IsError || !strings.Contains(text(res), "lasting denial") {
		t.Fatalf("the approved arguments after a denial of the tool: %s", text(res))
	}
	if n := f.runs["delete_file"].Load(); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
}

// The form offers the scopes; the one chosen is granted. A scope the
// form did not offer approves this call only.
func TestElicitationFormOffersScopes(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{})
	var mu sync.Mutex
	var schemas []map[string]any
	answer := map[string]any{"approve": true, "scope": "args"}
	cs := f.dial(t, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		raw, _ := json.Marshal(req.Params.RequestedSchema)
		var s map[string]any
		_ = json.Unmarshal(raw, &s)
		mu.Lock()
		defer mu.Unlock()
		schemas = append(schemas, s)
		return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
	}})
	if res := <-startCall(t, cs, "write_file", map[string]any{"path": "/a"}); res.IsError {
		t.Fatal(text(res))
	}
	raw, _ := json.Marshal(schemas[0]["properties"].(map[string]any)["scope"])
	for _, want := range []string{`"const":"once"`, `"const":"args"`, `"const":"tool"`, `"const":"session"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("scope offered: %s; lacks %s", raw, want)
		}
	}
	if res := <-startCall(t, cs, "write_file", map[string]any{"path": "/a"}); res.IsError {
		t.Fatal(text(res))
	}
	if len(schemas) != 1 {
		t.Fatalf("asked %d times; the approval of these arguments should have covered the second call", len(schemas))
	}
	// Session: covers other arguments in this session only.
	answer = map[string]any{"approve": true, "scope": "session"}
	<-startCall(t, cs, "write_file", map[string]any{"path": "/b"})
	<-startCall(t, cs, "write_file", map[string]any{"path": "/c"})
	if len(schemas) != 2 {
		t.Fatalf("asked %d times; the session approval should have covered /c", len(schemas))
	}
	cs2 := f.dial(t, cs2Options(&schemas, &mu))
	<-startCall(t, cs2, "write_file", map[string]any{"path": "/d"})
	if len(schemas) != 3 {
		t.Fatalf("asked %d times; another session must be asked", len(schemas))
	}
	if n := f.runs["write_file"].Load(); n != 5 {
		t.Fatalf("%d calls ran, want 5", n)
	}
}

// rawAnswer is a client that answers every question with answer, as a
// hostile client may (go-sdk's own client checks its answers against the
// form, so it would not send this).
type rawAnswer struct{ answer json.RawMessage }

func (r rawAnswer) capabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
}
func (r rawAnswer) ask(context.Context, tool.RequestKind, json.RawMessage) (json.RawMessage, error) {
	return r.answer, nil
}
func (rawAnswer) progress(context.Context, tool.Progress) {}
func (rawAnswer) log(context.Context, tool.LogMessage)    {}

// A scope the form did not offer, or one of another type, approves this
// call only: nothing lasting is granted.
func TestFormAnswerWithAScopeNotOfferedApprovesOnce(t *testing.T) {
	t.Parallel()
	grants := approval.NewFiles(filepath.Join(t.TempDir(), "approvals.json"))
	a := NewApprover(ApprovalPolicy{})
	a.SetOperators(Operators{Grants: grants})
	call := tool.PendingCall{Name: "delete_file", Tier: tool.Destructive, Args: json.RawMessage(`{}`),
		Key: tool.ApprovalKey{Caller: "alice", Tool: "delete_file", Definition: "d", Args: "a"}}
	for _, answer := range []string{
		`{"action":"accept","content":{"approve":true,"scope":"forever"}}`,
		`{"action":"accept","content":{"approve":true,"scope":"session"}}`, // no session: not offered
		`{"action":"accept","content":{"approve":true,"scope":["tool"]}}`,
		`{"action":"accept","content":{"approve":true,"scope":"TOOL"}}`,
	} {
		ok, err := a.Confirm(withDownstream(ctxT(t), rawAnswer{json.RawMessage(answer)}), call)
		if !ok || err != nil {
			t.Fatalf("%s: %v, %v; want approved once", answer, ok, err)
		}
	}
	if list, _ := grants.List(ctxT(t)); len(list) != 0 {
		t.Fatalf("granted %+v", list)
	}
	ok, _ := a.Confirm(withDownstream(ctxT(t), rawAnswer{json.RawMessage(`{"action":"accept","content":{"approve":"true","scope":"tool"}}`)}), call)
	if ok {
		t.Fatal(`"approve": "true" (a string) approved`)
	}
	// An approver that keeps no lasting approvals offers none, and takes
	// none a client names.
	bare := NewApprover(ApprovalPolicy{})
	ok, err := bare.Confirm(withDownstream(ctxT(t), rawAnswer{json.RawMessage(`{"action":"accept","content":{"approve":true,"scope":"args"}}`)}), call)
	if !ok || err != nil {
		t.Fatalf("scope args from an approver without approvals: %v, %v; want approved once", ok, err)
	}
}

// TestFormAnswerChoosesTheLifetime: the minutes a person gives with a
// lasting scope are its lifetime; anything but a whole number from 1 to a
// day's minutes gives the scope's default, never a longer one.
func TestFormAnswerChoosesTheLifetime(t *testing.T) {
	t.Parallel()
	call := tool.PendingCall{Name: "delete_file", Tier: tool.Destructive, Args: json.RawMessage(`{}`),
		Key: tool.ApprovalKey{Caller: "alice", Tool: "delete_file", Definition: "d", Args: "a"}}
	for _, c := range []struct {
		minutes string
		want    time.Duration
	}{
		{`5`, 5 * time.Minute},
		{`1440`, 24 * time.Hour},
		{`1441`, approval.DefaultFor(approval.Tool)},
		{`1e12`, approval.DefaultFor(approval.Tool)},
		{`0`, approval.DefaultFor(approval.Tool)},
		{`-30`, approval.DefaultFor(approval.Tool)},
		{`2.5`, approval.DefaultFor(approval.Tool)},
		{`"60"`, approval.DefaultFor(approval.Tool)},
		{`null`, approval.DefaultFor(approval.Tool)},
	} {
		grants := approval.NewFiles(filepath.Join(t.TempDir(), "approvals.json"))
		a := NewApprover(ApprovalPolicy{})
		a.SetOperators(Operators{Grants: grants})
		answer := `{"action":"accept","content":{"approve":true,"scope":"tool","minutes":` + c.minutes + `}}`
		before := time.Now()
		if ok, err := a.Confirm(withDownstream(ctxT(t), rawAnswer{json.RawMessage(answer)}), call); !ok || err != nil {
			t.Fatalf("%s: %v, %v", answer, ok, err)
		}
		list, _ := grants.List(ctxT(t))
		if len(list) != 1 {
			t.Fatalf("minutes %s: granted %+v; want one", c.minutes, list)
		}
		if got := list[0].Expires.Sub(before); got < c.want || got > c.want+time.Minute {
			t.Errorf("minutes %s: the approval lasts %v; want %v", c.minutes, got, c.want)
		}
	}
}

func cs2Options(schemas *[]map[string]any, mu *sync.Mutex) *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		*schemas = append(*schemas, nil)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}}
}

// webhookSink records the webhook's posts, answering each as answer
// says.
type webhookSink struct {
	mu     sync.Mutex
	posts  []webhookPost
	got    chan struct{}
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

// next waits for the next post.
func (s *webhookSink) next(t *testing.T) {
	t.Helper()
	select {
	case <-s.got:
	case <-ctxT(t).Done():
		t.Fatal("the webhook was not posted to (again)")
	}
}

type webhookPost struct {
	header http.Header
	body   []byte
}

func newWebhookSink(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) (*webhookSink, string) {
	s := &webhookSink{got: make(chan struct{}, 16), answer: answer}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.posts = append(s.posts, webhookPost{r.Header.Clone(), body})
		n := len(s.posts)
		s.mu.Unlock()
		s.got <- struct{}{}
		s.answer(n, w, r)
	}))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return s, ts.URL + "/hook"
}

// The webhook's post is signed as documented, shaped as a chat's
// incoming webhook, its text free of the markup a caller's words could
// smuggle in, and its link opens the call's page, where a decision with
// a scope runs the call.
func TestWebhookPostIsSignedAndItsLinkDecides(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret-webhook-key")
	sink, hook := newWebhookSink(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	f := newOpFixture(t, Operators{Wait: time.Minute, Webhook: &Webhook{URL: hook, Secret: secret}})
	cs := f.dial(t, nil)
	hostile := "/srv/x\x1b[2J<script>alert(1)</script>&<!here>"
	done := startCall(t, cs, "delete_file", map[string]any{"path": hostile})
	req := f.pendingOne(t)
	sink.next(t)
	sink.mu.Lock()
	p := sink.posts[0]
	sink.mu.Unlock()
	ts := p.header.Get(WebhookTimestampHeader)
	if got, want := p.header.Get(WebhookSignatureHeader), WebhookSignature(secret, ts, p.body); got != want || !strings.HasPrefix(got, "v1=") {
		t.Fatalf("signature %q, want %q", got, want)
	}
	if at, err := time.Parse(time.RFC3339, time.Unix(mustInt(t, ts), 0).Format(time.RFC3339)); err != nil || time.Since(at) > time.Hour {
		t.Fatalf("timestamp %q", ts)
	}
	if strings.Contains(string(p.body), string(secret)) {
		t.Fatal("the secret is in the body")
	}
	var msg WebhookMessage
	if err := json.Unmarshal(p.body, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Request.ID != req.ID || !jsonSame(msg.Request.Args, req.Args) || !strings.Contains(msg.Text, req.ID) ||
		!strings.Contains(msg.Text, "toolwire approvals approve "+req.ID) || !strings.HasPrefix(msg.URL, f.url+ApprovalPath) || !strings.Contains(msg.Text, msg.URL) {
		t.Fatalf("message %+v", msg)
	}
	// The arguments travel in the structured request only; the text names
	// the caller and tool, which here are plain.
	if strings.ContainsAny(msg.Text, "<>\x1b") && !strings.Contains(msg.Text, msg.URL) {
		t.Fatalf("text with markup: %q", msg.Text)
	}

	// The page shows the call escaped, offers the scopes, and decides.
	page, err := http.Get(msg.URL)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || strings.Contains(string(html), "<script>alert") || strings.Contains(string(html), "\x1b") ||
		!strings.Contains(string(html), `value="args"`) || !strings.Contains(string(html), `value="session"`) {
		t.Fatalf("page %d:\n%s", page.StatusCode, html)
	}
	post := func(form url.Values) int {
		resp, err := http.PostForm(msg.URL, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(url.Values{"decision": {"allow"}, "scope": {"forever"}}); code != http.StatusBadRequest {
		t.Fatalf("a scope not offered: %d", code)
	}
	for _, bad := range []string{"0", "1441", "-5", "2.5", "1e3", "ten"} {
		if code := post(url.Values{"decision": {"allow"}, "scope": {"args"}, "minutes": {bad}}); code != http.StatusBadRequest {
			t.Fatalf("minutes %q: %d; want 400", bad, code)
		}
	}
	if code := post(url.Values{"decision": {"allow"}, "scope": {"args"}, "minutes": {"90"}}); code != 200 {
		t.Fatalf("decision: %d", code)
	}
	if list, _ := f.grants.List(ctxT(t)); len(list) != 1 || time.Until(list[0].Expires) > 90*time.Minute || time.Until(list[0].Expires) < 80*time.Minute {
		t.Fatalf("the page's lasting approval of 90 minutes: %+v", list)
	}
	if res := <-done; res.IsError {
		t.Fatalf("call approved at the page: %s", text(res))
	}
	if code := post(url.Values{"decision": {"deny"}}); code != http.StatusNotFound && code != http.StatusConflict {
		t.Fatalf("a second decision: %d", code)
	}
	if res := <-startCall(t, cs, "delete_file", map[string]any{"path": hostile}); res.IsError {
		t.Fatalf("the same call within its scope: %s", text(res))
	}
	got := f.confirmations("delete_file")
	if len(got) != 2 || !strings.Contains(got[0].Reason, `by "approval page"`) {
		t.Fatalf("audit: %+v", got)
	}
	for _, ev := range f.mem.Events() {
		raw, _ := json.Marshal(ev)
		if strings.Contains(string(raw), string(secret)) {
			t.Fatalf("the webhook secret is in the audit: %s", raw)
		}
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("timestamp %q is not Unix seconds", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// A webhook that fails (500, tried again a bounded number of times) or
// hangs never holds the call: it still waits for the operator, and ends
// with the decision.
func TestWebhookThatFailsOrHangsDoesNotHoldTheCall(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // after the parallel subtests, unlike a defer
	for _, tc := range []struct {
		name   string
		answer func(n int, w http.ResponseWriter, r *http.Request)
		posts  int
	}{
		{"500", func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }, 2},
		{"hangs", func(_ int, _ http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink, hook := newWebhookSink(t, tc.answer)
			// No client timeout: a webhook that held the call would hold it
			// until the test ends, and the call would never complete.
			f := newOpFixture(t, Operators{Wait: time.Minute, Webhook: &Webhook{URL: hook, Secret: []byte("k"), Attempts: tc.posts, Client: &http.Client{}}})
			cs := f.dial(t, nil)
			done := startCall(t, cs, "delete_file", map[string]any{"path": "/x"})
			req := f.pendingOne(t)
			for range tc.posts {
				sink.next(t)
			}
			if _, err := f.operator.Decide(ctxT(t), req.ID, approval.Decision{Approve: true, By: "ann"}); err != nil {
				t.Fatal(err)
			}
			if res := <-done; res.IsError {
				t.Fatalf("call: %s", text(res))
			}
			sink.mu.Lock()
			n := len(sink.posts)
			sink.mu.Unlock()
			if n > tc.posts {
				t.Fatalf("%d posts, want at most %d", n, tc.posts)
			}
		})
	}
}

// Deciding a request nobody submitted, or one decided already, is an
// error the operator is told, and changes nothing.
func TestDecidingUnknownOrDecidedRequestsFails(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{Wait: time.Minute})
	if _, err := f.operator.Decide(ctxT(t), "ffffffffffffffff", approval.Decision{Approve: true, By: "ann"}); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	cs := f.dial(t, nil)
	done := startCall(t, cs, "delete_file", map[string]any{"path": "/x"})
	req := f.pendingOne(t)
	if _, err := f.operator.Decide(ctxT(t), req.ID, approval.Decision{Approve: false, By: "ann"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.operator.Decide(ctxT(t), req.ID, approval.Decision{Approve: true, By: "mallory"}); !errors.Is(err, approval.ErrDecided) {
		t.Fatalf("twice: %v", err)
	}
	if res := <-done; !res.IsError || !strings.Contains(text(res), `denied by "ann"`) {
		t.Fatalf("call: %s", text(res))
	}
	if f.runs["delete_file"].Load() != 0 {
		t.Fatal("a denied call ran")
	}
}

func jsonSame(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// The text a chat shows names the caller and the tool, which the caller
// and a server chose: escaped to one line, without the characters that
// are markup in a chat (a mention of everyone, a link of their own).
func TestWebhookTextIsFreeOfMarkup(t *testing.T) {
	t.Parallel()
	r := approval.Request{ID: "0123456789abcdef", Tool: "files__rm <!channel>", Tier: "destructive",
		Caller: "eve\x1b[2J\n<https://evil.example|click here> & co", Deadline: time.Now()}
	text := webhookText(r, "")
	for _, bad := range []string{"<", ">", "\x1b", "\n"} {
		if strings.Contains(text, bad) {
			t.Errorf("text holds %q: %q", bad, text)
		}
	}
	if !strings.Contains(text, "&lt;!channel&gt;") || !strings.Contains(text, "&amp; co") {
		t.Errorf("text %q: want the names escaped, not dropped", text)
	}
}

// A failing webhook's error, which is logged, names neither its URL (a
// chat's webhook URL is a secret) nor the signing secret.
func TestWebhookErrorsKeepTheURLAndSecretOut(t *testing.T) {
	t.Parallel()
	ln := httptest.NewServer(http.NotFoundHandler())
	addr := ln.URL
	ln.Close() // nothing listens there now: the POST fails to connect
	w := &Webhook{URL: addr + "/services/T000/B000/XXXXsecretpath", Secret: []byte("signing-secret"), Attempts: 1}
	err := w.post(ctxT(t), []byte(`{}`))
	if err == nil {
		t.Fatal("a POST to nothing succeeded")
	}
	if strings.Contains(err.Error(), "secretpath") || strings.Contains(err.Error(), "signing-secret") {
		t.Fatalf("error names a secret: %v", err)
	}
}

// A 2026-07-28 client that declares URL-mode elicitation is sent the
// waiting call's page: the call is listed as pending meanwhile (an
// operator could decide it too), the page offers no session scope (the
// revision has no session), and its decision with scope args runs this
// call and, without asking, the same call again.
func TestURLModeClientIsSentThePendingCallsPage(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{Wait: time.Minute})
	var asked atomic.Int32
	var problem atomic.Value
	urlOnly := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	opts := &mcp.ClientOptions{Capabilities: urlOnly, ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		link := req.Params.URL
		fail := func(s string) (*mcp.ElicitResult, error) {
			problem.Store(s)
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		if !strings.HasPrefix(link, f.url+ApprovalPath) {
			return fail("link " + link)
		}
		if list, err := f.operator.Pending(ctx); err != nil || len(list) != 1 || !strings.Contains(list[0].Reason, "approval page") {
			return fail(fmt.Sprintf("pending while the page is open: %+v, %v", list, err))
		}
		page, err := http.Get(link)
		if err != nil {
			return fail(err.Error())
		}
		body, _ := io.ReadAll(page.Body)
		page.Body.Close()
		if !strings.Contains(string(body), `value="args"`) || strings.Contains(string(body), `value="session"`) {
			return fail("page offers:\n" + string(body))
		}
		resp, err := http.PostForm(link, url.Values{"decision": {"allow"}, "scope": {"args"}})
		if err != nil || resp.StatusCode != 200 {
			return fail(fmt.Sprintf("decision: %v %v", resp, err))
		}
		resp.Body.Close()
		return &mcp.ElicitResult{Action: "accept"}, nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts).Connect(ctxT(t),
		&mcp.StreamableClientTransport{Endpoint: f.url + "/mcp", HTTPClient: bearerFor(aliceToken), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 2 {
		if res := <-startCall(t, cs, "delete_file", map[string]any{"path": "/p"}); res.IsError {
			t.Fatalf("call: %s (%v)", text(res), problem.Load())
		}
	}
	if p := problem.Load(); p != nil {
		t.Fatal(p)
	}
	if asked.Load() != 1 || f.runs["delete_file"].Load() != 2 {
		t.Fatalf("asked %d times, ran %d times; want 1 and 2", asked.Load(), f.runs["delete_file"].Load())
	}
	got := f.confirmations("delete_file")
	if len(got) != 2 || !strings.Contains(got[0].Reason, `by "approval page", granted`) || !strings.HasPrefix(got[1].Reason, "approval ") {
		t.Fatalf("audit: %+v", got)
	}
}

// A 2026-07-28 client is offered the scopes in its input request's form
// too (not the session's: the revision has none), and the one chosen is
// granted.
func TestInputRequestFormOffersScopes(t *testing.T) {
	t.Parallel()
	f := newOpFixture(t, Operators{})
	var asked atomic.Int32
	var offered atomic.Value
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			raw, _ := json.Marshal(req.Params.RequestedSchema)
			offered.Store(string(raw))
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "scope": "tool"}}, nil
		},
	}).Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: f.url + "/mcp", HTTPClient: bearerFor(aliceToken), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != Revision2026 {
		t.Fatalf("the client speaks %s", got)
	}
	for _, p := range []string{"/a", "/b"} {
		if res := <-startCall(t, cs, "write_file", map[string]any{"path": p}); res.IsError {
			t.Fatalf("call %s: %s", p, text(res))
		}
	}
	schema, _ := offered.Load().(string)
	if asked.Load() != 1 || !strings.Contains(schema, `"const":"tool"`) || strings.Contains(schema, `"const":"session"`) {
		t.Fatalf("asked %d times; offered %s", asked.Load(), schema)
	}
}
