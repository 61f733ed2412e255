package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// A call whose answer is its result alone is answered with JSON, in a
// 2025 session and as a 2026-07-28 request; one whose upstream reports
// progress is answered with the event stream, the progress first. A client
// that accepts only event streams gets one.
func TestAWholeAnswerIsJSONAndAStreamedOneStaysAStream(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	sid := rawSession(t, b.url, bobToken)

	r, err := post(ctxT(t), b.url, bobToken, sid, callBody(2, "up__echo", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("2025 echo: Content-Type %q, want application/json; body %s", ct, r.body)
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Errorf("2025 echo: Content-Length %q for a body of %d bytes", cl, len(r.body))
	}
	if r.msg == nil || r.msg.Result == nil || string(r.msg.ID) != "2" || !strings.Contains(r.msg.text(), `echo {"n":1}`) {
		t.Errorf("2025 echo: answer %s", r.body)
	}

	r, err = post(ctxT(t), b.url, bobToken, sid,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__progress","arguments":{},"_meta":{"progressToken":"p1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("2025 progress: Content-Type %q, want text/event-stream; body %s", ct, r.body)
	}
	var methods []string
	sc := bufio.NewScanner(strings.NewReader(r.body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event %q: %v", d, err)
			}
			methods = append(methods, m.Method+string(m.ID))
		}
	}
	want := "notifications/progress notifications/progress notifications/progress 3"
	if got := strings.Join(methods, " "); got != want {
		t.Errorf("2025 progress: events %q, want %q", got, want)
	}

	// 2026-07-28: no session, the version on every request.
	body := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"up__echo","arguments":{"n":2},` + meta26(`{}`) + `}}`
	resp := postRaw(t, b.url, bobToken, "application/json, text/event-stream", headers26("tools/call", "up__echo"), body)
	if ct := resp.header.Get("Content-Type"); ct != "application/json" || !strings.Contains(resp.body, `echo {\"n\":2}`) {
		t.Errorf("2026 echo: Content-Type %q, body %s; want JSON with the result", ct, resp.body)
	}

	// A 2026 client that takes only event streams (go-sdk's handler
	// accepts that of a 2026 request) gets one.
	resp = postRaw(t, b.url, bobToken, "text/event-stream", headers26("tools/call", "up__echo"), body)
	if ct := resp.header.Get("Content-Type"); resp.status == http.StatusOK && ct != "text/event-stream" {
		t.Errorf("2026 echo accepting only a stream: Content-Type %q, body %s", ct, resp.body)
	}
}

type rawReply struct {
	status int
	header http.Header
	body   string
}

// postRaw posts body to the gateway with accept and headers, as token's
// caller, and reads the whole answer.
func postRaw(t *testing.T, url, token, accept string, headers map[string]string, body string) rawReply {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	all, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawReply{status: resp.StatusCode, header: resp.Header, body: string(all)}
}

// A handler that opens its event stream with a flush, before it has
// anything to send, has it open at once: the client sees the header while
// the handler still waits (without this, the client would wait for the
// handler's end, and the handler for the client: the test would time out
// at waitBound).
func TestAFlushBeforeAnyEventOpensTheStream(t *testing.T) {
	t.Parallel()
	seen := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		select {
		case <-seen:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	})
	ts := httptest.NewServer(wholeAnswers(h))
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(ctxT(t), waitBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, strings.NewReader("{}"))
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the stream's header did not come: %v", err)
	}
	defer resp.Body.Close()
	close(seen)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want the stream it was", ct)
	}
	all, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(all), `"id":1`) {
		t.Errorf("body %q, want the response event", all)
	}
}

// JSON is what a client gets that prefers it: a higher q, or the same q
// and named first.
func TestPrefersJSON(t *testing.T) {
	t.Parallel()
	for accept, want := range map[string]bool{
		"application/json, text/event-stream":           true,
		"text/event-stream, application/json":           false,
		"text/event-stream;q=0.5, application/json":     true,
		"application/json;q=0.4, text/event-stream":     false,
		"application/json;q=0, text/event-stream":       false,
		"application/json":                              true,
		"text/event-stream":                             false,
		"*/*":                                           true,
		"text/*, application/*":                         false,
		"application/json;q=bogus, text/event-stream":   true,
		"application/json;Q=0.2, text/event-stream;q=1": false,
		"": false,
	} {
		if got := prefersJSON([]string{accept}); got != want {
			t.Errorf("prefersJSON(%q) = %v, want %v", accept, got, want)
		}
	}
	if !prefersJSON([]string{"application/json", "text/event-stream"}) || prefersJSON([]string{"text/event-stream", "application/json"}) {
		t.Error("Accept in two header lines: the first line's type should win a tie")
	}
}

// Only a message go-sdk encodes as a response is taken for one: a request
// or notification, an id that hides "result" in a string, or anything not
// in go-sdk's form is streamed as it came.
func TestIsResponseKnowsOnlyResponses(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                                       true,
		`{"jsonrpc":"2.0","id":"a\"b","result":{}}`:                                  true,
		`{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":-32601,"message":"x"}}`:        true,
		`{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}`:          true,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`:            false,
		`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}`:         false,
		`{"jsonrpc":"2.0","id":"x\",\"result\":","method":"sampling/createMessage"}`: false,
		`{"jsonrpc":"2.0","id":"unterminated`:                                        false,
		`{"id":1,"jsonrpc":"2.0","result":{}}`:                                       false,
		`{"jsonrpc":"2.0","id":,"result":{}}`:                                        false,
		``:                                                                           false,
	} {
		if got := isResponse([]byte(msg)); got != want {
			t.Errorf("isResponse(%s) = %v, want %v", msg, got, want)
		}
	}
	for ev, want := range map[string]bool{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n":           true,
		"event: message\nid: 5\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n":    false, // resumable: streamed
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\nevent: x\n": false,
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n":                           false,
		": ok\n\n": false,
	} {
		if _, got := responseEvent([]byte(ev)); got != want {
			t.Errorf("responseEvent(%q) = %v, want %v", ev, got, want)
		}
	}
}
