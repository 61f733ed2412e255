package gateway

// Tests of what a hostile caller sends the gateway (issue 22): each sends
// the hostile form over a real socket on 127.0.0.1 and checks that it
// costs the caller, not the gateway.

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
)

// TestForgedRequestStatesDrawOnTheCallersRate: a 2026-07-28 tools/call
// carrying a requestState is counted against its caller's call rate before
// its state is opened. Past the rate, a forged state is refused by the
// rate, and writes nothing into the audit log; another caller is not
// affected.
func TestForgedRequestStatesDrawOnTheCallersRate(t *testing.T) {
	t.Parallel()
	const burst = 3
	b := newBridge(t, bridgeOptions{limits: Limits{CallRate: 0.001, CallBurst: burst}})
	bob, alice := b.manual(t, bobToken), b.manual(t, aliceToken)
	forge := func(cs *mcp.ClientSession) error {
		_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{
			Name: "up__echo", RequestState: "eyJ2IjoxfQ.Zm9yZ2Vk",
			InputResponses: mcp.InputResponseMap{"q1": approve},
		})
		return err
	}
	const sent = 8
	for i := range sent {
		err := forge(bob)
		want := "not issued by this gateway"
		if i >= burst {
			want = LimitCallRate
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("forged state %d: %v, want an error saying %q", i+1, err, want)
		}
	}
	if err := forge(alice); err == nil || !strings.Contains(err.Error(), "not issued by this gateway") {
		t.Errorf("another caller's forged state: %v, want it refused for its state, not by bob's rate", err)
	}
	var audited []string
	for _, ev := range b.mem.Events() {
		if ev.Tool == "up__echo" {
			audited = append(audited, string(ev.Kind)+" "+ev.Caller)
		}
	}
	if len(audited) != 2*(burst+1) {
		t.Errorf("the audit log has %d events of the forged states, want %d (requested and refused, for bob's %d within the rate and alice's one): %v",
			len(audited), 2*(burst+1), burst, audited)
	}
	refused := 0
	for _, e := range b.eventsOf(CallRefused) {
		if e.Limit == LimitCallRate && e.Tool == "up__echo" {
			refused++
		}
	}
	if refused != sent-burst {
		t.Errorf("%d retries observed refused by %s, want %d", refused, LimitCallRate, sent-burst)
	}
	for _, ev := range b.mem.Events() {
		if ev.Kind == audit.CallRefused && ev.Reason == LimitCallRate {
			t.Errorf("a retry refused by the rate is audited: %+v", ev)
		}
	}
}

// errorMessage returns the message of the JSON-RPC error m, or "".
func errorMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}
