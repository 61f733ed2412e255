package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/tool"
)

// Issue 22.19: with --stateless, a 2025 client's notifications/cancelled
// that reaches the gateway before the call it names (the two requests
// raced) cancels the call as it starts: it does not run its full length
// upstream, and it is audited as cancelled. Another caller's early
// cancellation of the same id cancels nothing.
func TestAStatelessCancelBeforeItsCallCancelsIt(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{stateless: true})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		b.h.Drain(ctx, 0)
	})
	hdr := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	cancelBody := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":91,"reason":"raced"}}`
	if r := b.post26(ctxT(t), aliceToken, hdr, cancelBody); r.status != http.StatusAccepted {
		t.Fatalf("alice's notifications/cancelled: %d %s", r.status, r.body)
	}
	if r := b.post26(ctxT(t), bobToken, hdr, cancelBody); r.status != http.StatusAccepted {
		t.Fatalf("bob's notifications/cancelled: %d %s", r.status, r.body)
	}
	answered := make(chan raw, 1)
	go func() {
		answered <- b.post26(ctxT(t), bobToken, hdr, `{"jsonrpc":"2.0","id":91,"method":"tools/call","params":{"name":"up__wait","arguments":{"key":"early"}}}`)
	}()
	select {
	case r := <-answered:
		if !strings.Contains(r.body, "cancel") {
			t.Errorf("the call cancelled before it came: %d %s, want it answered as cancelled", r.status, r.body)
		}
	case <-b.up.sig.ch("early entered"):
		t.Fatal("the call cancelled before it came reached the upstream")
	case <-time.After(waitBound):
		t.Fatal("the call cancelled before it came was not answered")
	}
	if evs := b.waitOutcome(t, "up__wait", "", 1); evs[0].Reason != string(tool.ReasonCancelled) {
		t.Errorf("the call cancelled before it came is audited as %s %s %q", evs[0].Kind, evs[0].Reason, evs[0].Error)
	}
	if evs := b.eventsOf(CallsCancelled); len(evs) != 1 || evs[0].Caller != "subject:bob" || evs[0].End != EndClientCancelled {
		t.Errorf("cancellations observed: %+v, want bob's own, once", evs)
	}
	// Kept once: the same id again is a call of its own.
	go func() {
		answered <- b.post26(ctxT(t), bobToken, hdr, `{"jsonrpc":"2.0","id":91,"method":"tools/call","params":{"name":"up__wait","arguments":{"key":"again"}}}`)
	}()
	b.up.sig.wait(t, "again entered")
}

// Issue 22.19: over the wire, a caller's flood of notifications/cancelled
// naming ids that never come keeps no more of them than the caller's
// bound, and the gateway still serves the caller's calls.
func TestAStatelessCancellationFloodIsBounded(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{stateless: true})
	hdr := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	for i := range 4 * maxEarlyCancelsPerCaller {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"never-%d"}}`, i)
		if r := b.post26(ctxT(t), bobToken, hdr, body); r.status != http.StatusAccepted {
			t.Fatalf("cancellation %d: %d %s", i, r.status, r.body)
		}
	}
	b.h.tracker.mu.Lock()
	n, order := b.h.tracker.early.len()
	b.h.tracker.mu.Unlock()
	// Some may have expired on a slow machine; none beyond the bound.
	if n == 0 || n > maxEarlyCancelsPerCaller || order > 2*maxEarlyCancels {
		t.Errorf("after %d cancellations of ids that never came: %d kept (order %d), want some, at most the caller's bound %d",
			4*maxEarlyCancelsPerCaller, n, order, maxEarlyCancelsPerCaller)
	}
	if r := b.post26(ctxT(t), bobToken, hdr, `{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"up__echo","arguments":{"n":1}}}`); r.msg["result"] == nil {
		t.Errorf("a call after the flood: %d %s", r.status, r.body)
	}
}

// Issue 22.19: a flood of notifications/cancelled naming ids that never
// come keeps a bounded number of them: per caller, and in all; and one
// kept is forgotten after earlyCancelTTL.
func TestEarlyCancellationsAreBounded(t *testing.T) {
	t.Parallel()
	tr := newTracker(Limits{}, nil, nil)
	for i := range 100_000 {
		tr.cancelStateless("mallory\x00127.0.0.1\x00n"+strconv.Itoa(i), "subject:mallory")
	}
	if n, order := tr.early.len(); n == 0 || n > maxEarlyCancelsPerCaller || order > 2*maxEarlyCancels {
		t.Errorf("after one caller's flood: %d kept (order %d), want some, at most %d (the caller's bound)", n, order, maxEarlyCancelsPerCaller)
	}
	for c := range 200 {
		caller := "subject:c" + strconv.Itoa(c)
		for i := range 200 {
			tr.cancelStateless(caller+"\x00127.0.0.1\x00n"+strconv.Itoa(i), caller)
		}
	}
	if n, order := tr.early.len(); n == 0 || n > maxEarlyCancels || order > 2*maxEarlyCancels {
		t.Errorf("after many callers' floods: %d kept (order %d), want some, at most %d (the bound in all)", n, order, maxEarlyCancels)
	}
	// The same at one instant, where nothing expires: the bounds exactly.
	full := newRecentSet(earlyCancelTTL, 100, 10)
	now := time.Now()
	for c := range 30 {
		for i := range 30 {
			full.put(strconv.Itoa(c)+"/"+strconv.Itoa(i), strconv.Itoa(c), now)
		}
	}
	if n, order := full.len(); n != 100 || order > 200 {
		t.Errorf("30 owners putting 30 each at once, bounds 10 per owner and 100 in all: %d kept (order %d), want 100", n, order)
	}
	set := newRecentSet(earlyCancelTTL, 8, 4)
	set.put("k", "bob", now)
	if set.take("k", now.Add(earlyCancelTTL)) {
		t.Error("a cancellation older than earlyCancelTTL was taken")
	}
	set.put("k", "bob", now)
	if !set.take("k", now.Add(earlyCancelTTL/2)) || set.take("k", now.Add(earlyCancelTTL/2)) {
		t.Error("a recent cancellation is not taken exactly once")
	}
	if n, _ := set.len(); n != 0 {
		t.Errorf("%d entries left after all were taken", n)
	}
}

// Issue 22.19: with --stateless, a 2025 client's calls are audited with
// the client it named at its initialize and the revision it asked for,
// also a 2024-11-05 client's, which sends no version header (it was
// audited as 2025-03-26, go-sdk's guess, and with no client).
func TestAStatelessCallIsAuditedWithItsClient(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{stateless: true})
	revs := []string{"2024-11-05", "2025-03-26", "2025-11-25"}
	for i, rev := range revs {
		cs := b.dialStateless(t, bobToken, rev, nil)
		if got, isErr := call(t, cs, "up__echo", map[string]any{"n": i}); isErr {
			t.Fatalf("%s: %s", rev, got)
		}
	}
	evs := b.waitOutcome(t, "up__echo", "", len(revs))
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Protocol+" "+ev.Client)
	}
	var want []string
	for _, rev := range revs {
		want = append(want, rev+" client-"+rev+"/1.0")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the stateless calls are audited as %q, want %q", got, want)
	}

	// A 2024-11-05 client as it is written: no version header, ever; the
	// Mcp-Session-Id its initialize was answered with, sent back.
	post := func(sid, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, b.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+bobToken)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := rawClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	init := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"old-client","version":"0.9"}}}`)
	sid := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("a 2024-11-05 initialize: %d, Mcp-Session-Id %q", init.StatusCode, sid)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if r := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"n":9}}}`); r.StatusCode != http.StatusOK {
		t.Fatalf("the header-less client's call: %d", r.StatusCode)
	}
	evs = b.waitOutcome(t, "up__echo", "", len(revs)+1)
	if ev := evs[len(revs)]; ev.Protocol != "2024-11-05" || ev.Client != "old-client/0.9" {
		t.Errorf("a header-less 2024-11-05 client's call is audited as %q %q, want 2024-11-05 old-client/0.9", ev.Protocol, ev.Client)
	}
}

// Issue 22.19: what a client sends back as its Mcp-Session-Id is its own
// word, and read bounded: a revision the gateway serves (not 2026-07-28,
// which has no initialize), a name no longer than the audit keeps; a
// value too long, malformed, or not of this gateway is no client.
func TestClientFromTokenIsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("n", 10*maxClientName)
	for _, tc := range []struct {
		token string
		want  tool.Client
	}{
		{clientToken(tool.Client{Protocol: "2025-03-26", Name: "c/1"}), tool.Client{Protocol: "2025-03-26", Name: "c/1"}},
		{clientToken(tool.Client{Protocol: Revision2026, Name: "c/1"}), tool.Client{Name: "c/1"}},
		{clientToken(tool.Client{Protocol: "1999-01-01", Name: "c/1"}), tool.Client{Name: "c/1"}},
		{clientToken(tool.Client{Protocol: "2025-03-26", Name: long[:maxClientName+1]}), tool.Client{Protocol: "2025-03-26", Name: long[:maxClientName] + "…"}},
		{clientToken(tool.Client{Name: long}), tool.Client{}},
		{clientTokenPrefix + "!!!", tool.Client{}},
		{clientTokenPrefix + "bnVsbA", tool.Client{}},
		{"another-session-id", tool.Client{}},
		{"", tool.Client{}},
	} {
		if got := clientFromToken(tc.token); got != tc.want {
			t.Errorf("clientFromToken(%.40q…) = %+v, want %+v", tc.token, got, tc.want)
		}
	}
}
