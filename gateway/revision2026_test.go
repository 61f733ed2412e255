package gateway

// Tests of MCP 2026-07-28 through the gateway, beside the 2025 revisions,
// on the rig of bridge_test.go: real sockets on 127.0.0.1, go-sdk v1.8.0
// clients and server.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// downstreamRevisions are the revisions of the matrix's clients.
var downstreamRevisions = []string{"2024-11-05", "2025-06-18", "2025-11-25", Revision2026}

// TestRevisionMatrix: a client of each revision lists, calls, gets
// progress, is asked for an approval and cancels, through one gateway in
// front of each kind of upstream (see upstreamKinds).
func TestRevisionMatrix(t *testing.T) {
	t.Parallel()
	for _, kind := range upstreamKinds {
		t.Run("upstream "+kind.rev, func(t *testing.T) {
			t.Parallel()
			b := newBridge(t, bridgeOptions{kind: kind})
			for _, rev := range downstreamRevisions {
				t.Run("downstream "+rev, func(t *testing.T) {
					t.Parallel()
					matrixCell(t, b, rev)
				})
			}
		})
	}
}

func matrixCell(t *testing.T, b *bridge, rev string) {
	progress := make(chan *mcp.ProgressNotificationParams, 8)
	approver := newApproving(true)
	cs := b.dial(t, bobToken, rev, &mcp.ClientOptions{
		ElicitationHandler: approver.handler,
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	})
	client := "client-" + rev + "/1.0"

	// List.
	var want []string
	for _, name := range upstreamTools {
		want = append(want, "up__"+name)
	}
	if got := listNames(t, cs); !slices.Equal(got, want) {
		t.Errorf("list: %v, want %v", got, want)
	}

	// Call.
	if got, isErr := call(t, cs, "up__echo", map[string]any{"x": 1}); isErr || got != `echo {"x":1}` {
		t.Errorf("call: %q (isError %v)", got, isErr)
	}

	// Progress, under the client's own token, all before the result.
	params := &mcp.CallToolParams{Name: "up__progress", Arguments: map[string]any{}}
	params.SetProgressToken("token-" + rev)
	if res, err := cs.CallTool(ctxT(t), params); err != nil || res.IsError || text(res) != "progressed" {
		t.Fatalf("progress call: %v %+v", err, res)
	}
	for i := 1; i <= 3; i++ {
		p := receive(t, progress, fmt.Sprintf("progress report %d", i))
		if p.ProgressToken != "token-"+rev || p.Progress != float64(i) || p.Total != 3 {
			t.Errorf("progress report %d: %+v, want %d/3 under the client's token", i, p, i)
		}
	}

	// Approval: a revision with elicitation is asked, once; 2024-11-05 has
	// none, so nobody can be asked and the call does not run.
	got, isErr := call(t, cs, "up__deploy", map[string]any{"env": rev})
	if rev < "2025-06-18" {
		if !isErr || !strings.Contains(got, "cannot be asked") || len(approver.messages()) != 0 {
			t.Errorf("approval at %s: %q (isError %v), asked %d times; want it refused unasked", rev, got, isErr, len(approver.messages()))
		}
		if out := b.waitOutcome(t, "up__deploy", client, 1); out[0].Reason != string(tool.ReasonUnconfirmed) {
			t.Errorf("approval at %s audited as %s %s, want unconfirmed", rev, out[0].Kind, out[0].Reason)
		}
	} else {
		shown := approver.messages()
		if isErr || got != `deployed {"env":"`+rev+`"}` || len(shown) != 1 || !strings.HasPrefix(shown[0], "Allow this call?") {
			t.Errorf("approval: %q (isError %v), asked %q; want it run after one question", got, isErr, shown)
		}
	}

	// Cancel: the call's upstream handler is cancelled, and the call is
	// audited as cancelled.
	ctx, cancel := context.WithCancel(ctxT(t))
	returned := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__wait", Arguments: map[string]any{"key": rev}})
		returned <- err
	}()
	b.up.sig.wait(t, rev+" entered")
	cancel()
	b.up.sig.wait(t, rev+" cancelled")
	if err := receive(t, returned, "the cancelled call's return"); err == nil {
		t.Error("the cancelled call returned no error")
	}
	if out := b.waitOutcome(t, "up__wait", client, 1); out[0].Reason != string(tool.ReasonCancelled) {
		t.Errorf("the cancelled call is audited as %s %s, want cancelled", out[0].Kind, out[0].Reason)
	}
}

// TestA2025AndA2026ClientShareOneGateway: the two kinds of client, on one
// gateway at once, each list, call and are asked for an approval, their
// questions outstanding at the same time.
func TestA2025AndA2026ClientShareOneGateway(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	both := make(chan struct{})
	var once sync.Once
	var asked sync.WaitGroup
	asked.Add(2)
	// Each client's answer waits until both were asked: neither question
	// can be answered before the other is outstanding.
	handler := func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Done()
		once.Do(func() { go func() { asked.Wait(); close(both) }() })
		select {
		case <-both:
		case <-time.After(waitBound):
			return nil, fmt.Errorf("the other client was never asked")
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}
	old := b.dial(t, bobToken, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: handler})
	current := b.dial(t, bobToken, Revision2026, &mcp.ClientOptions{ElicitationHandler: handler})
	for _, cs := range []*mcp.ClientSession{old, current} {
		if got := listNames(t, cs); len(got) != len(upstreamTools) {
			t.Errorf("list: %v", got)
		}
		if got, isErr := call(t, cs, "up__echo", map[string]any{"n": 2}); isErr || got != `echo {"n":2}` {
			t.Errorf("call: %q (isError %v)", got, isErr)
		}
	}
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, cs := range []*mcp.ClientSession{old, current} {
		wg.Go(func() {
			got, isErr := call(t, cs, "up__deploy", map[string]any{"by": i})
			if isErr {
				got = "error: " + got
			}
			results[i] = got
		})
	}
	wg.Wait()
	if results[0] != `deployed {"by":0}` || results[1] != `deployed {"by":1}` {
		t.Errorf("approved calls: %q", results)
	}
}

// TestServerDiscoverOffersEveryRevision: a 2026-07-28 client's
// server/discover is answered with every revision the gateway serves and
// its own identity, and a go-sdk client then speaks 2026-07-28 without a
// session.
func TestServerDiscoverOffersEveryRevision(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	r := b.post26(ctxT(t), bobToken, headers26("server/discover", ""),
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta26(`{}`)+`}}`)
	var res struct {
		Result struct {
			SupportedVersions []string       `json:"supportedVersions"`
			Capabilities      map[string]any `json:"capabilities"`
			Meta              map[string]any `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || r.status != http.StatusOK {
		t.Fatalf("server/discover: %d %s", r.status, r.body)
	}
	if got := res.Result.SupportedVersions; !slices.Equal(got, protocolVersions) {
		t.Errorf("supportedVersions %v, want %v", got, protocolVersions)
	}
	info, _ := res.Result.Meta[mcp.MetaKeyServerInfo].(map[string]any)
	if info["name"] != "toolwire" || res.Result.Capabilities["tools"] == nil {
		t.Errorf("discover result: serverInfo %v, capabilities %v", info, res.Result.Capabilities)
	}
	b.dial(t, bobToken, Revision2026, nil) // checks the revision and that there is no session
}

// TestRequestsCarryTheirRevisionAndClientIntoTheAudit: a 2026-07-28
// request's _meta names its revision and client, which the audit events
// of its call carry, as a 2025 session's initialize does for its calls.
func TestRequestsCarryTheirRevisionAndClientIntoTheAudit(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	for _, rev := range []string{"2025-06-18", Revision2026} {
		cs := b.dial(t, bobToken, rev, nil)
		if _, isErr := call(t, cs, "up__echo", map[string]any{"rev": rev}); isErr {
			t.Fatalf("%s call failed", rev)
		}
		out := b.waitOutcome(t, "up__echo", "client-"+rev+"/1.0", 1)
		var n int
		for _, ev := range b.mem.Events() {
			if ev.Tool == "up__echo" && ev.Client == "client-"+rev+"/1.0" {
				n++
				if ev.Protocol != rev || ev.Caller != "bob" {
					t.Errorf("%s: event %s has protocol %q and caller %q", rev, ev.Kind, ev.Protocol, ev.Caller)
				}
			}
		}
		if n < 3 || out[0].Kind != audit.CallExecuted {
			t.Errorf("%s: %d events of the call, ending %s", rev, n, out[0].Kind)
		}
	}
}

// TestRoutingHeadersAreCheckedAgainstTheBody: a 2026-07-28 request whose
// Mcp-Method or Mcp-Name header disagrees with its body, or that leaves
// out the version header, is refused with 400 whichever way the gateway
// routes it; the body limit holds on both routes, and a GET is answered as
// its revision says.
func TestRoutingHeadersAreCheckedAgainstTheBody(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{noAuth: true})
	ctx := ctxT(t)
	callEcho := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{},` + meta26(`{}`) + `}}`
	for _, c := range []struct {
		name    string
		headers map[string]string
		code    int
	}{
		{"Mcp-Name of another tool", headers26("tools/call", "up__deploy"), -32020},
		{"Mcp-Method of another method", headers26("tools/list", "up__echo"), -32020},
		{"no Mcp-Method", map[string]string{"Mcp-Protocol-Version": Revision2026, "Mcp-Name": "up__echo"}, -32020},
		// Routed by its body (no version header): refused all the same.
		{"no version header", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "up__echo"}, -32020},
	} {
		r := b.post26(ctx, "", c.headers, callEcho)
		if r.status != http.StatusBadRequest || errorCode(r.msg) != c.code {
			t.Errorf("%s: %d %s, want 400 with %d", c.name, r.status, r.body, c.code)
		}
	}
	if r := b.post26(ctx, "", headers26("tools/call", "up__echo"), callEcho); r.status != http.StatusOK || !strings.Contains(r.body, `echo {}`) {
		t.Errorf("the well-formed request: %d %s", r.status, r.body)
	}
	// The Origin check comes first, whatever the revision.
	foreign := headers26("tools/call", "up__echo")
	foreign["Origin"] = "https://evil.example"
	if r := b.post26(ctx, "", foreign, callEcho); r.status != http.StatusForbidden {
		t.Errorf("a 2026-07-28 request from a foreign origin: %d, want 403", r.status)
	}
	huge := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__echo","arguments":{"pad":"` +
		strings.Repeat("x", int(mcp.DefaultMaxRequestBodyBytes)) + `"},` + meta26(`{}`) + `}}`
	for name, h := range map[string]map[string]string{
		"2026-07-28":         headers26("tools/call", "up__echo"),
		"without any header": {"Mcp-Protocol-Version": ""},
	} {
		if r := b.post26(ctx, "", h, huge); r.status != http.StatusRequestEntityTooLarge {
			t.Errorf("a body past the limit, %s: %d, want 413", name, r.status)
		}
	}
	for _, c := range []struct {
		version string
		status  int
	}{{Revision2026, http.StatusMethodNotAllowed}, {"", http.StatusBadRequest}} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		if c.version != "" {
			req.Header.Set("Mcp-Protocol-Version", c.version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("GET with version %q: %d, want %d", c.version, resp.StatusCode, c.status)
		}
	}
}

// TestInitializeAskingFor2026GetsASessionOfTheLatestLegacyRevision: a
// client that asks for 2026-07-28 in initialize (which that revision does
// not have) gets a 2025-11-25 session, and is asked for approvals with
// elicitation/create, as a 2025 client is, not with input requests it
// could not read.
func TestInitializeAskingFor2026GetsASessionOfTheLatestLegacyRevision(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{noAuth: true})
	r, err := post(ctxT(t), b.url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28",`+
		`"capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	sid := r.header.Get("Mcp-Session-Id")
	if sid == "" || !strings.Contains(r.body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize asking for 2026-07-28: session %q, %s", sid, r.body)
	}
	if r, err := post(ctxT(t), b.url, "", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || r.status != http.StatusAccepted {
		t.Fatalf("initialized: %v %+v", err, r)
	}
	// The first message on the call's stream is the question, asked on the
	// session; the client never answers, and the test's context ends the
	// stream.
	ctx, cancel := context.WithTimeout(ctxT(t), waitBound)
	defer cancel()
	first := b.post26(ctx, "", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid},
		callBody(2, "up__deploy", `{}`))
	if first.msg["method"] != "elicitation/create" {
		t.Errorf("the session's first message for the call: %s, want elicitation/create", first.body)
	}
}

// TestApprovalOfA2026CallThroughInputRequests: a 2026-07-28 client's
// write call is approved through an input request and the client's retry;
// declined, it does not run. Either way the audit log has one call, one
// question and one outcome.
func TestApprovalOfA2026CallThroughInputRequests(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	for _, approve := range []bool{true, false} {
		a := newApproving(approve)
		cs := b.dial(t, bobToken, Revision2026, &mcp.ClientOptions{ElicitationHandler: a.handler})
		got, isErr := call(t, cs, "up__deploy", map[string]any{"approve": approve})
		if approve && (isErr || got != `deployed {"approve":true}`) {
			t.Errorf("approved: %q (isError %v)", got, isErr)
		}
		if !approve && (!isErr || !strings.Contains(got, "declined")) {
			t.Errorf("declined: %q (isError %v), want it refused", got, isErr)
		}
		if shown := a.messages(); len(shown) != 1 || !strings.Contains(shown[0], `"approve": `+fmt.Sprint(approve)) {
			t.Errorf("the client was shown %q, want one question showing the arguments", shown)
		}
	}
	var kinds []string
	for _, ev := range b.mem.Events() {
		if ev.Tool == "up__deploy" && ev.Kind != audit.ValidationPassed {
			kinds = append(kinds, string(ev.Kind))
		}
	}
	want := []string{"call.requested", "confirmation.requested", "confirmation.accepted", "call.executed",
		"call.requested", "confirmation.requested", "confirmation.rejected"}
	if !slices.Equal(kinds, want) {
		t.Errorf("audit:\n%v\nwant\n%v", kinds, want)
	}
}

// manual returns a 2026-07-28 client that answers input requests itself
// (go-sdk's multi round-trip handling off), declaring elicitation.
func (b *bridge) manual(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	return b.dial(t, token, Revision2026, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("not asked this way") // declares the capability
		},
	})
}

// question calls name and returns the input request it gets instead of a
// result.
func question(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
		t.Fatalf("call %s: %+v (%q), want one input request", name, res, text(res))
	}
	return res
}

// answer retries name with the answer to the input request of res.
func answer(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, res *mcp.CallToolResult, state string, a *mcp.ElicitResult) (*mcp.CallToolResult, error) {
	responses := mcp.InputResponseMap{}
	for key := range res.InputRequests {
		responses[key] = a
	}
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, InputResponses: responses, RequestState: state})
}

var approve = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}

// TestRequestStateIsSealedAndBound: the requestState that continues a
// parked call is refused, with an error saying why and a refusal in the
// audit log, when it was altered, when another caller sends it, when it
// comes with other arguments, and when its question was answered already;
// the call it names goes on.
func TestRequestStateIsSealedAndBound(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	alice, bob := b.manual(t, aliceToken), b.manual(t, bobToken)
	args := map[string]any{"env": "prod", "n": 1}
	res := question(t, alice, "up__deploy_ask", args)
	state := res.RequestState

	payload, mac, _ := strings.Cut(state, ".")
	flipped := []byte(payload)
	flipped[len(flipped)/2] ^= 1
	for _, c := range []struct {
		name  string
		cs    *mcp.ClientSession
		args  map[string]any
		state string
		why   string
	}{
		{"altered", alice, args, string(flipped) + "." + mac, "not issued by this gateway"},
		{"truncated", alice, args, payload, "not issued by this gateway"},
		{"another caller's", bob, args, state, "another caller"},
		{"other arguments", alice, map[string]any{"env": "test", "n": 1}, state, "another tool or with other arguments"},
	} {
		_, err := answer(ctxT(t), c.cs, "up__deploy_ask", c.args, res, c.state, approve)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s requestState: %v, want an error saying %q", c.name, err, c.why)
		}
	}
	// The same arguments in another key order continue the call, which
	// asks its second question: the upstream's.
	next, err := answer(ctxT(t), alice, "up__deploy_ask", map[string]any{"n": 1, "env": "prod"}, res, state, approve)
	if err != nil || !next.NeedsInput() {
		t.Fatalf("the genuine retry: %v %+v", err, next)
	}
	for _, ir := range next.InputRequests {
		if p, ok := ir.(*mcp.ElicitParams); !ok || p.Message != "Which meaning?" {
			t.Errorf("second question: %+v, want the upstream's", ir)
		}
	}
	// The first round's state again: its question was answered.
	if _, err := answer(ctxT(t), alice, "up__deploy_ask", args, res, state, approve); err == nil || !strings.Contains(err.Error(), "answered already") {
		t.Errorf("replayed round: %v, want it refused as answered already", err)
	}
	final, err := answer(ctxT(t), alice, "up__deploy_ask", args, next, next.RequestState,
		&mcp.ElicitResult{Action: "accept", Content: map[string]any{"meaning": "music"}})
	if err != nil || final.IsError || text(final) != "upstream got accept music" {
		t.Fatalf("the call's end: %v %+v %q", err, final, text(final))
	}
	// Once the result was taken, the call is gone.
	if _, err := answer(ctxT(t), alice, "up__deploy_ask", args, next, next.RequestState, approve); err == nil || !strings.Contains(err.Error(), "not waiting") {
		t.Errorf("a state of an ended call: %v, want it refused", err)
	}
	var refusals []string
	for _, ev := range b.mem.Events() {
		if ev.Kind == audit.CallRefused && ev.Reason == string(ReasonRequestState) {
			refusals = append(refusals, ev.Caller)
		}
	}
	if !slices.Equal(refusals, []string{"alice", "alice", "bob", "alice", "alice", "alice"}) {
		t.Errorf("audited refusals by %v, want six, each with its caller", refusals)
	}
	kinds := map[audit.Kind]int{}
	for _, ev := range b.outcomes("up__deploy_ask", "") {
		kinds[ev.Kind]++
	}
	if len(kinds) != 2 || kinds[audit.CallRefused] != 6 || kinds[audit.CallExecuted] != 1 {
		t.Errorf("outcomes: %v, want the six refusals and the call executed once", kinds)
	}
}

// TestAParkedCallsProgressGoesToTheCurrentRound: the progress a parked
// call reports after its question goes to the request of the round then
// waiting, under that request's token.
func TestAParkedCallsProgressGoesToTheCurrentRound(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	progress := make(chan *mcp.ProgressNotificationParams, 8)
	cs := b.dial(t, bobToken, Revision2026, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("not asked this way")
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	})
	first := &mcp.CallToolParams{Name: "up__deploy_progress", Arguments: map[string]any{}}
	first.SetProgressToken("round-0")
	res, err := cs.CallTool(ctxT(t), first)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first request: %v %+v", err, res)
	}
	retry := &mcp.CallToolParams{Name: "up__deploy_progress", Arguments: map[string]any{}, RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"q1": approve}}
	retry.SetProgressToken("round-1")
	done, err := cs.CallTool(ctxT(t), retry)
	if err != nil || done.IsError || text(done) != "progressed" {
		t.Fatalf("retry: %v %+v", err, done)
	}
	for i := 1; i <= 3; i++ {
		if p := receive(t, progress, fmt.Sprintf("progress %d", i)); p.ProgressToken != "round-1" || p.Progress != float64(i) {
			t.Errorf("progress %d: %+v, want it under the retry's token", i, p)
		}
	}
}

// TestAParkedCallIsCancelledWhenNobodyAnswers: a question left unanswered
// past the park timeout cancels the call, upstream too, audited as
// cancelled for that reason; a retry with its requestState after the
// expiry is refused as expired.
func TestAParkedCallIsCancelledWhenNobodyAnswers(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{parkTimeout: 300 * time.Millisecond})
	cs := b.manual(t, bobToken)
	// An approval nobody gives.
	approval := question(t, cs, "up__deploy", map[string]any{})
	out := b.waitOutcome(t, "up__deploy", "", 1)
	if out[0].Kind != audit.ConfirmationRejected || out[0].Reason != string(tool.ReasonCancelled) || !strings.Contains(out[0].Error, "did not answer within 300ms") {
		t.Errorf("unanswered approval audited as %s %s %q", out[0].Kind, out[0].Reason, out[0].Error)
	}
	// An upstream's question nobody answers: the upstream call is
	// cancelled with it.
	question(t, cs, "up__ask", map[string]any{"key": "expiry"})
	b.up.sig.wait(t, "expiry cancelled")
	out = b.waitOutcome(t, "up__ask", "", 1)
	if out[0].Reason != string(tool.ReasonCancelled) || !strings.Contains(out[0].Error, "did not answer within 300ms") {
		t.Errorf("unanswered upstream question audited as %s %s %q", out[0].Kind, out[0].Reason, out[0].Error)
	}
	if n := len(b.eventsOf(CallsCancelled)); n != 2 {
		t.Errorf("%d cancellations observed, want 2", n)
	}
	// Observed before the call could end: a reader of the outcome finds
	// the cancellation already told.
	if !b.observedBeforeOutcome(CallsCancelled) {
		t.Errorf("a cancellation was observed after its call's outcome was recorded")
	}
	waitExpired(t, approval.RequestState)
	if _, err := answer(ctxT(t), cs, "up__deploy", map[string]any{}, approval, approval.RequestState, approve); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a retry after the expiry: %v, want it refused as expired", err)
	}
}

// manualAsk starts deploy_wait on cs (a manual client), approves it, and
// returns the call's context's cancel once the upstream's handler runs.
func (b *bridge) manualAsk(t *testing.T, cs *mcp.ClientSession, args map[string]any) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	res := question(t, cs, "up__deploy_wait", args)
	go func() { _, _ = answer(ctx, cs, "up__deploy_wait", args, res, res.RequestState, approve) }()
	b.up.sig.wait(t, args["key"].(string)+" entered")
	return cancel
}

// waitExpired waits until the requestState state has expired.
func waitExpired(t *testing.T, state string) {
	t.Helper()
	payload, _, _ := strings.Cut(state, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var st sealedState
	if err != nil || json.Unmarshal(raw, &st) != nil {
		t.Fatalf("requestState %q does not decode", state)
	}
	time.Sleep(time.Until(time.UnixMilli(st.Expires + 1)))
}

// TestAParkedCallIsCancelledWhenItsClientGoesAway: a 2026-07-28 client that
// closes the request waiting on its call (its retry, here) cancels the
// call, upstream too.
func TestAParkedCallIsCancelledWhenItsClientGoesAway(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	cs := b.manual(t, bobToken)
	cancel := b.manualAsk(t, cs, map[string]any{"key": "gone"})
	cancel()
	b.up.sig.wait(t, "gone cancelled")
	out := b.waitOutcome(t, "up__deploy_wait", "", 1)
	if out[0].Reason != string(tool.ReasonCancelled) || !strings.Contains(out[0].Error, "closed its request") {
		t.Errorf("audited as %s %s %q, want cancelled because the client closed its request", out[0].Kind, out[0].Reason, out[0].Error)
	}
	if evs := b.eventsOf(CallsCancelled); len(evs) != 1 || evs[0].End != EndClientGone {
		t.Errorf("observed %+v, want one cancellation as %s", evs, EndClientGone)
	}
	if !b.observedBeforeOutcome(CallsCancelled) {
		t.Errorf("the cancellation was observed after the call's outcome was recorded")
	}
}

// TestUpstreamQuestionsReachEveryClient: what an upstream asks during a
// call (elicitation, sampling) reaches the client that made the call, in
// the form of each side's revision: a 2025 upstream asks by request and a
// 2026-07-28 one in its answer (multi round-trip); a 2025-11-25 client is
// asked by request on its session and a 2026-07-28 client in the answer
// to its call. A client that declared neither capability is not asked,
// and the upstream is told.
func TestUpstreamQuestionsReachEveryClient(t *testing.T) {
	t.Parallel()
	for _, kind := range upstreamKinds {
		t.Run("upstream "+kind.rev, func(t *testing.T) {
			t.Parallel()
			b := newBridge(t, bridgeOptions{kind: kind})
			// One downstream after the other: a 2025 upstream's question
			// says nothing of the call it belongs to, so the gateway
			// routes it only while that call is the one in flight.
			for _, rev := range []string{"2025-11-25", Revision2026} {
				t.Run("downstream "+rev, func(t *testing.T) {
					a := newApproving(true)
					var mu sync.Mutex
					var sampled []string
					cs := b.dial(t, bobToken, rev, &mcp.ClientOptions{
						ElicitationHandler: a.handler,
						CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
							mu.Lock()
							sampled = append(sampled, req.Params.Messages[0].Content.(*mcp.TextContent).Text)
							mu.Unlock()
							return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}}, nil
						},
					})
					if got, isErr := call(t, cs, "up__ask", nil); isErr || got != "upstream got accept programming" {
						t.Errorf("elicitation: %q (isError %v)", got, isErr)
					}
					if shown := a.messages(); !slices.Equal(shown, []string{"Which meaning?"}) {
						t.Errorf("the client was asked %q", shown)
					}
					got, isErr := call(t, cs, "up__sample", nil)
					mu.Lock()
					asked := slices.Clone(sampled)
					mu.Unlock()
					if isErr || got != "the model said Paris" || !slices.Equal(asked, []string{"Capital of France?"}) {
						t.Errorf("sampling: %q (isError %v), the client's model was asked %q", got, isErr, asked)
					}
					// A client that declared neither is not asked: the
					// upstream is told.
					plain := b.dial(t, bobToken, rev, nil)
					for name, why := range map[string]string{"up__ask": "does not support elicitation", "up__sample": "does not support sampling"} {
						if got, isErr := call(t, plain, name, nil); !isErr || !strings.Contains(got, why) {
							t.Errorf("%s without the capability: %q (isError %v), want %q", name, got, isErr, why)
						}
					}
				})
			}
		})
	}
}

// TestURLModeElicitationReachesOnlyClientsThatDeclareIt: a URL-mode
// elicitation asked during a call reaches a client that declares URL mode,
// as an input request on 2026-07-28 and by elicitation/create on a
// 2025-11-25 session; a client that declares only forms, or whose
// revision has no URL mode, is not asked and the asker is told. The asker
// is a tool of the gateway's own registry, asking through its caller as
// mcpclient relays an upstream's question (mcpclient does not declare URL
// mode to its upstreams yet; see docs/protocol.md).
func TestURLModeElicitationReachesOnlyClientsThatDeclareIt(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	if err := b.gw.ex.Registry().Register(&tool.Tool{
		Name: "consent", Description: "asks for consent at a URL", Tier: tool.Read, InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			asker, _ := tool.CallerFrom(ctx).(tool.Asker)
			if asker == nil {
				return nil, fmt.Errorf("no caller to ask")
			}
			raw, err := asker.Ask(ctx, tool.Elicitation, json.RawMessage(`{"mode":"url","message":"Sign in to continue","url":"https://auth.example.com/consent"}`))
			if err != nil {
				return nil, err
			}
			var res mcp.ElicitResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return nil, err
			}
			return tool.TextResult("consent " + res.Action), nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	urlCaps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	for _, c := range []struct {
		rev   string
		caps  *mcp.ClientCapabilities
		asked bool
	}{
		{Revision2026, urlCaps, true},
		{"2025-11-25", urlCaps, true},
		{Revision2026, nil, false},     // forms only
		{"2025-06-18", urlCaps, false}, // a revision without URL mode
	} {
		var got []*mcp.ElicitParams
		cs := b.dial(t, bobToken, c.rev, &mcp.ClientOptions{
			Capabilities: c.caps,
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				got = append(got, req.Params)
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
		})
		res, isErr := call(t, cs, "consent", nil)
		switch {
		case c.asked && (isErr || res != "consent accept" || len(got) != 1 || got[0].Mode != "url" || got[0].URL != "https://auth.example.com/consent"):
			t.Errorf("%s with URL mode: %q (isError %v), asked %+v", c.rev, res, isErr, got)
		case !c.asked && (!isErr || !strings.Contains(res, "does not support URL-mode elicitation") || len(got) != 0):
			t.Errorf("%s without URL mode: %q (isError %v), asked %d time(s); want the asker told", c.rev, res, isErr, len(got))
		}
	}
}

// TestPrivateResultsAreNotServedToAnotherCaller: listings are private when
// callers' roles differ, and so are reads (whether a read succeeds depends
// on the role), no fresher than their upstream allows; the gateway keeps
// no cache of its own, so each caller's read is its own.
func TestPrivateResultsAreNotServedToAnotherCaller(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	alice, bob := b.dial(t, aliceToken, Revision2026, nil), b.dial(t, bobToken, Revision2026, nil)
	list, err := bob.ListTools(ctxT(t), nil)
	if err != nil || list.CacheScope != "private" || list.TTLMs != 60000 {
		t.Fatalf("tools/list: %v, scope %q, ttl %d; want private, the gateway's 60000", err, list.CacheScope, list.TTLMs)
	}
	read := func(cs *mcp.ClientSession, uri string) *mcp.ReadResourceResult {
		t.Helper()
		res, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("read %s: %v %+v", uri, err, res)
		}
		return res
	}
	public := "toolwire://up/res://public"
	first, second := read(alice, public), read(bob, public)
	if first.Contents[0].Text != "read 1" || second.Contents[0].Text != "read 2" || b.up.reads.Load() != 2 {
		t.Errorf("reads: alice %q, bob %q, upstream read %d times; want each caller's own", first.Contents[0].Text, second.Contents[0].Text, b.up.reads.Load())
	}
	for _, res := range []*mcp.ReadResourceResult{first, second, read(bob, "toolwire://up/"+upstreamPrivateURI)} {
		if res.CacheScope != "private" || res.TTLMs != 30000 {
			t.Errorf("read: scope %q, ttl %d; want private and the upstream's 30000", res.CacheScope, res.TTLMs)
		}
	}
}

// TestLimitsCount2026Requests: without sessions, a caller's calls count
// against its limits whatever client makes them, a parked call holds its
// slot across its rounds, and its open subscriptions/listen streams are
// capped.
func TestLimitsCount2026Requests(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{limits: Limits{MaxCallsPerCaller: 1, MaxListensPerCaller: 1}})
	first, second := b.manual(t, bobToken), b.dial(t, bobToken, Revision2026, nil)
	// A parked call holds the caller's one slot.
	res := question(t, first, "up__deploy", map[string]any{})
	if got, isErr := call(t, second, "up__echo", nil); !isErr || !strings.Contains(got, LimitCallsPerCaller) {
		t.Errorf("a call while another is parked: %q (isError %v), want refused by %s", got, isErr, LimitCallsPerCaller)
	}
	done, err := answer(ctxT(t), first, "up__deploy", map[string]any{}, res, res.RequestState, approve)
	if err != nil || done.IsError {
		t.Fatalf("the parked call's end: %v %+v", err, done)
	}
	if got, isErr := call(t, second, "up__echo", nil); isErr {
		t.Errorf("a call after the parked one ended: %q", got)
	}
	// One listen per caller.
	ack, closeFirst := b.openListen(t, bobToken, `{"toolsListChanged":true}`)
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("the first listen: %v", ack)
	}
	refused, closeSecond := b.openListen(t, bobToken, `{"toolsListChanged":true}`)
	closeSecond()
	if msg, _ := refused["error"].(map[string]any)["message"].(string); !strings.Contains(msg, LimitListensPerCaller) {
		t.Errorf("a second listen: %v, want refused by %s", refused, LimitListensPerCaller)
	}
	other, closeOther := b.openListen(t, aliceToken, `{"toolsListChanged":true}`)
	closeOther()
	if other["method"] != "notifications/subscriptions/acknowledged" {
		t.Errorf("another caller's listen: %v", other)
	}
	// Counted before the listen closes: the loop below may be refused
	// until the slot is freed.
	if n := len(b.eventsOf(CallRefused)); n != 2 {
		t.Errorf("%d refusals observed, want the call's and the listen's", n)
	}
	closeFirst()
	deadline := time.Now().Add(waitBound)
	for {
		again, closeAgain := b.openListen(t, bobToken, `{"toolsListChanged":true}`)
		closeAgain()
		if again["method"] == "notifications/subscriptions/acknowledged" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the caller's slot was not freed when its listen closed: %v", again)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLimitsRate2026Calls: a 2026-07-28 caller's calls draw on its rate.
func TestLimitsRate2026Calls(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{limits: Limits{CallRate: 0.001, CallBurst: 2}})
	cs := b.dial(t, bobToken, Revision2026, nil)
	for i := range 2 {
		if got, isErr := call(t, cs, "up__echo", nil); isErr {
			t.Fatalf("call %d within the burst: %q", i, got)
		}
	}
	if got, isErr := call(t, b.dial(t, bobToken, Revision2026, nil), "up__echo", nil); !isErr || !strings.Contains(got, LimitCallRate) {
		t.Errorf("a call past the rate from another client of the caller: %q (isError %v)", got, isErr)
	}
}

// TestVisibilityIsTheSameWhateverTheRevision: a 2026-07-28 caller sees and
// reaches what its role allows, as a 2025 session's does: listings, calls,
// reads, prompts, completions and subscriptions.
func TestVisibilityIsTheSameWhateverTheRevision(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	for _, rev := range []string{"2025-11-25", Revision2026} {
		cs := b.dial(t, aliceToken, rev, nil)
		ctx := ctxT(t)
		if got := listNames(t, cs); !slices.Equal(got, []string{"up__deploy", "up__deploy_ask", "up__echo"}) {
			t.Errorf("%s: tools %v", rev, got)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__wait", Arguments: map[string]any{"key": "hidden"}}); err == nil {
			t.Errorf("%s: calling a hidden tool succeeded", rev)
		}
		resources, err := cs.ListResources(ctx, nil)
		if err != nil || len(resources.Resources) != 1 || resources.Resources[0].URI != "toolwire://up/res://public" {
			t.Errorf("%s: resources %v %v", rev, resources, err)
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://up/" + upstreamPrivateURI}); err == nil {
			t.Errorf("%s: reading a hidden resource succeeded", rev)
		}
		p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__greet", Arguments: map[string]string{"name": "Ada"}})
		if err != nil || p.Messages[0].Content.(*mcp.TextContent).Text != "Hello Ada" {
			t.Errorf("%s: prompt %v %v", rev, p, err)
		}
		c, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "up__greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
		if err != nil || !slices.Equal(c.Completion.Values, []string{"A-completed"}) {
			t.Errorf("%s: completion %v %v", rev, c, err)
		}
	}
	// A listen naming a hidden resource is refused; a visible one is
	// acknowledged.
	hidden, closeHidden := b.openListen(t, aliceToken, `{"resourceSubscriptions":["toolwire://up/`+upstreamPrivateURI+`"]}`)
	closeHidden()
	if hidden["error"] == nil {
		t.Errorf("a listen to a hidden resource: %v, want an error", hidden)
	}
	visible, closeVisible := b.openListen(t, aliceToken, `{"resourceSubscriptions":["toolwire://up/res://public"]}`)
	closeVisible()
	if visible["method"] != "notifications/subscriptions/acknowledged" {
		t.Errorf("a listen to a visible resource: %v", visible)
	}
}

// TestLogLevelOf2026RequestsComesFromTheirMeta: a 2026-07-28 client gets
// the log lines of its call at the level its request's _meta names, and
// none without one; the upstream is asked for that level.
func TestLogLevelOf2026RequestsComesFromTheirMeta(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	lines := make(chan string, 8)
	cs := b.dial(t, bobToken, Revision2026, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		lines <- fmt.Sprint(req.Params.Data)
	}})
	quiet := &mcp.CallToolParams{Name: "up__log", Arguments: map[string]any{}}
	if res, err := cs.CallTool(ctxT(t), quiet); err != nil || text(res) != "logged" {
		t.Fatalf("call without a level: %v %+v", err, res)
	}
	verbose := &mcp.CallToolParams{Name: "up__log", Arguments: map[string]any{}, Meta: mcp.Meta{mcp.MetaKeyLogLevel: "info"}}
	if res, err := cs.CallTool(ctxT(t), verbose); err != nil || text(res) != "logged" {
		t.Fatalf("call at info: %v %+v", err, res)
	}
	// The lines of the second call only: the first's were never sent (its
	// request named no level), and the second's come in order.
	if got := []string{receive(t, lines, "log line one"), receive(t, lines, "log line two")}; !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("log lines %q", got)
	}
	select {
	case l := <-lines:
		t.Errorf("a third log line %q", l)
	default:
	}
}

// TestListenDeliversChangesToBothRevisions: a tool that appears and an
// upstream resource that changes are announced to a 2025 session and to a
// 2026-07-28 client's subscriptions/listen alike; the upstream is
// subscribed once for both, and unsubscribed when the last goes.
func TestListenDeliversChangesToBothRevisions(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	type client struct {
		rev     string
		cs      *mcp.ClientSession
		tools   chan struct{}
		updated chan string
	}
	var clients []*client
	for _, rev := range []string{"2025-11-25", Revision2026} {
		c := &client{rev: rev, tools: make(chan struct{}, 4), updated: make(chan string, 4)}
		c.cs = b.dial(t, bobToken, rev, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { c.tools <- struct{}{} },
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { c.updated <- req.Params.URI },
		})
		clients = append(clients, c)
	}
	uri := "toolwire://up/res://public"
	for _, c := range clients {
		subscribed := make(chan error, 1)
		// A 2026-07-28 Subscribe is a listen, which lasts until
		// Unsubscribe: it returns then.
		go func() { subscribed <- c.cs.Subscribe(ctxT(t), &mcp.SubscribeParams{URI: uri}) }()
		if c.rev != Revision2026 {
			if err := receive(t, subscribed, "the 2025 subscription"); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(waitBound)
	for b.gw.subs.active(b.gw.upstreams.list[0], "res://public") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two subscriptions did not reach the gateway")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := b.up.subs.Load(); n != 1 {
		t.Errorf("the upstream was subscribed %d times for two clients, want once", n)
	}
	if err := b.up.srv.ResourceUpdated(ctxT(t), &mcp.ResourceUpdatedNotificationParams{URI: "res://public"}); err != nil {
		t.Fatal(err)
	}
	if err := b.gw.ex.Registry().Register(&tool.Tool{Name: "added", InputSchema: json.RawMessage(`{"type":"object"}`), Tier: tool.Read,
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		if got := receive(t, c.updated, c.rev+"'s resources/updated"); got != uri {
			t.Errorf("%s: updated %q, want %q", c.rev, got, uri)
		}
		receive(t, c.tools, c.rev+"'s tools/list_changed")
	}
	for _, c := range clients {
		if err := c.cs.Unsubscribe(ctxT(t), &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if got := receive(t, b.up.unsubs, "the upstream's unsubscription"); got != "res://public" {
		t.Errorf("unsubscribed upstream from %q", got)
	}
}

// claimingUpstream is an Upstream whose results name it in _meta, as a
// 2026-07-28 server's do.
type claimingUpstream struct{ slowUpstream }

func (u *claimingUpstream) List(context.Context) ([]*mcp.Resource, []*mcp.ResourceTemplate, []*mcp.Prompt, error) {
	return []*mcp.Resource{{Name: "doc", URI: "res://doc"}}, nil, []*mcp.Prompt{{Name: "greet"}}, nil
}

var upstreamInfo = mcp.Meta{mcp.MetaKeyServerInfo: map[string]any{"name": "the-upstream", "version": "9"}, "other": "kept"}

func (u *claimingUpstream) ReadResource(_ context.Context, uri string) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Meta: maps.Clone(upstreamInfo), Contents: []*mcp.ResourceContents{{URI: uri, Text: "doc"}}}, nil
}

func (u *claimingUpstream) GetPrompt(context.Context, string, map[string]string) (*mcp.GetPromptResult, error) {
	return &mcp.GetPromptResult{Meta: maps.Clone(upstreamInfo), Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
}

func (u *claimingUpstream) Complete(_ context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	if p.Meta != nil {
		return nil, fmt.Errorf("the client's _meta reached the upstream: %v", p.Meta)
	}
	return &mcp.CompleteResult{Meta: maps.Clone(upstreamInfo), Completion: mcp.CompletionResultDetails{Values: []string{"x"}}}, nil
}

// TestUpstreamServerInfoIsNotPassedOn: results the gateway passes on from
// an upstream name the gateway in _meta, not the upstream, to a 2026-07-28
// client; the client's own _meta does not go upstream.
func TestUpstreamServerInfoIsNotPassedOn(t *testing.T) {
	t.Parallel()
	up := &claimingUpstream{slowUpstream{gate: make(chan struct{})}}
	close(up.gate)
	gw := New(tool.NewExecutor(tool.NewRegistry(nil), nil), &Options{Upstreams: []Upstream{up}})
	srv, stop := gw.Server(nil)
	t.Cleanup(stop)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctxT(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctxT(t), ct, nil)
	if err != nil || cs.InitializeResult().ProtocolVersion != Revision2026 {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	ctx := ctxT(t)
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://slow/res://doc"})
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "slow__greet"})
	if err != nil {
		t.Fatal(err)
	}
	completion, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "slow__greet"}, Argument: mcp.CompleteParamsArgument{Name: "a", Value: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	for what, meta := range map[string]mcp.Meta{"read": read.Meta, "prompt": prompt.Meta, "completion": completion.Meta} {
		info, _ := meta[mcp.MetaKeyServerInfo].(map[string]any)
		if info["name"] != "toolwire" || meta["other"] != "kept" {
			t.Errorf("%s: _meta %v, want the gateway's serverInfo and the upstream's other keys", what, meta)
		}
	}
}

// TestDrainEnds2026Work: the drain refuses a 2026-07-28 client's new calls
// and listens, cancels its parked call after the grace (audited as the
// drain's doing) and ends its open listen.
func TestDrainEnds2026Work(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	cs := b.manual(t, bobToken)
	parked := question(t, cs, "up__deploy", map[string]any{})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+meta26(`{}`)+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bobToken)
	for k, v := range headers26("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(ended) }()

	if n := b.h.Drain(ctxT(t), 50*time.Millisecond); n != 1 {
		t.Errorf("Drain cancelled %d calls, want the parked one", n)
	}
	receive(t, ended, "the end of the listen stream")
	out := b.waitOutcome(t, "up__deploy", "", 1)
	if out[0].Reason != string(tool.ReasonCancelled) || !strings.Contains(out[0].Error, "shutting down") {
		t.Errorf("the parked call is audited as %s %s %q", out[0].Kind, out[0].Reason, out[0].Error)
	}
	if got, isErr := call(t, b.dial(t, bobToken, Revision2026, nil), "up__echo", nil); !isErr || !strings.Contains(got, LimitDraining) {
		t.Errorf("a call while draining: %q (isError %v)", got, isErr)
	}
	if first, closeIt := b.openListen(t, bobToken, `{"toolsListChanged":true}`); first["error"] == nil {
		closeIt()
		t.Errorf("a listen while draining: %v, want refused", first)
	}
	// The parked call's state now names a call that ended: its result.
	res, err := answer(ctxT(t), cs, "up__deploy", map[string]any{}, parked, parked.RequestState, approve)
	if err != nil || !res.IsError || !strings.Contains(text(res), "shutting down") {
		t.Errorf("a retry after the drain: %v %+v", err, res)
	}
}

// BenchmarkCallByRevision: one call of a tool that echoes its arguments,
// over HTTP on 127.0.0.1, by a go-sdk client of each generation: through
// the gateway (a 2026-07-28 call is a request of its own and runs as a
// parked call), and, for the floor, to a bare go-sdk server (stateful for
// 2025, stateless for 2026-07-28).
//
//	go test -run='^$' -bench=CallByRevision -benchtime=3000x ./gateway/
func BenchmarkCallByRevision(b *testing.B) {
	for _, server := range []string{"gateway", "go-sdk"} {
		for _, rev := range []string{"2025-11-25", Revision2026} {
			b.Run(server+"/"+rev, func(b *testing.B) {
				var h http.Handler
				if server == "gateway" {
					reg := tool.NewRegistry(nil)
					if err := reg.Register(&tool.Tool{Name: "echo", Tier: tool.Read, InputSchema: json.RawMessage(`{"type":"object"}`),
						Handler: func(_ context.Context, args json.RawMessage) (*tool.Result, error) {
							return tool.TextResult(string(args)), nil
						}}); err != nil {
						b.Fatal(err)
					}
					gh := New(tool.NewExecutor(reg, nil), nil).Handler(&HTTPOptions{})
					defer gh.Close()
					h = gh
				} else {
					srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
					srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
					})
					mux := http.NewServeMux()
					mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: modern(rev)}))
					h = mux
				}
				benchCalls(b, h, rev)
			})
		}
	}
}

func benchCalls(b *testing.B, h http.Handler, rev string) {
	ts := httptest.NewServer(h)
	defer ts.Close()
	var so *mcp.ClientSessionOptions
	if rev != Revision2026 {
		so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1}, so)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	if cs.InitializeResult().ProtocolVersion != rev {
		b.Fatalf("speaking %s", cs.InitializeResult().ProtocolVersion)
	}
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
}

// TestApprovalAtAPageForURLModeClients: a client that declares URL-mode
// elicitation and not forms is asked for an approval with a link to the
// call's page; the decision taken there is the answer, on 2026-07-28 and
// on a 2025-11-25 session alike. The page shows the call as a form would,
// refuses another site's post and a second decision, and is gone once the
// question is.
func TestApprovalAtAPageForURLModeClients(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	urlOnly := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	for _, c := range []struct {
		rev      string
		decision string
	}{{Revision2026, "allow"}, {Revision2026, "deny"}, {"2025-11-25", "allow"}} {
		var link string
		cs := b.dial(t, bobToken, c.rev, &mcp.ClientOptions{
			Capabilities: urlOnly,
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				if req.Params.Mode != "url" || !strings.HasPrefix(req.Params.URL, b.url+ApprovalPath) {
					return nil, fmt.Errorf("asked %+v, want a link to an approval page", req.Params)
				}
				link = req.Params.URL
				// The user opens the page, reads the call, and decides.
				page := httpDo(t, http.MethodGet, link, nil, nil)
				if page.status != http.StatusOK || !strings.Contains(page.body, "up__deploy is a write tool") || !strings.Contains(page.body, "&#34;env&#34;: &#34;"+c.rev) ||
					page.header.Get("X-Frame-Options") != "DENY" || page.header.Get("Cache-Control") != "no-store" {
					return nil, fmt.Errorf("the page: %d %v\n%s", page.status, page.header, page.body)
				}
				if r := httpDo(t, http.MethodPost, link, map[string]string{"Origin": "https://evil.example"}, strings.NewReader("decision=allow")); r.status != http.StatusForbidden {
					return nil, fmt.Errorf("another site's post: %d, want 403", r.status)
				}
				own := map[string]string{"Origin": b.url, "Content-Type": "application/x-www-form-urlencoded"}
				if r := httpDo(t, http.MethodPost, link, own, strings.NewReader("decision="+c.decision)); r.status != http.StatusOK {
					return nil, fmt.Errorf("the decision: %d %s", r.status, r.body)
				}
				if r := httpDo(t, http.MethodPost, link, own, strings.NewReader("decision=allow")); r.status != http.StatusConflict {
					return nil, fmt.Errorf("a second decision: %d, want 409", r.status)
				}
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
		})
		got, isErr := call(t, cs, "up__deploy", map[string]any{"env": c.rev})
		if c.decision == "allow" && (isErr || got != `deployed {"env":"`+c.rev+`"}`) {
			t.Errorf("%s allowed at the page: %q (isError %v)", c.rev, got, isErr)
		}
		if c.decision == "deny" && (!isErr || !strings.Contains(got, "declined")) {
			t.Errorf("%s denied at the page: %q (isError %v)", c.rev, got, isErr)
		}
		if link == "" {
			t.Fatalf("%s: the client was not asked", c.rev)
		}
		if r := httpDo(t, http.MethodGet, link, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("%s: the page after the call: %d, want 404", c.rev, r.status)
		}
	}
}

type httpReply struct {
	status int
	header http.Header
	body   string
}

// httpDo sends one request; a request that cannot be made is a reply of
// status 0 with the error as its body (it may run off the test's goroutine).
func httpDo(t *testing.T, method, url string, headers map[string]string, body io.Reader) httpReply {
	req, err := http.NewRequestWithContext(ctxT(t), method, url, body)
	if err != nil {
		return httpReply{body: err.Error()}
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpReply{body: err.Error()}
	}
	defer resp.Body.Close()
	all, _ := io.ReadAll(resp.Body)
	return httpReply{status: resp.StatusCode, header: resp.Header, body: string(all)}
}
