package gateway

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRequestStateSealing(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	s := newSealer(key)
	now := time.UnixMilli(1_800_000_000_000)
	args := []byte(`{"b":[1,2.50,{"c":null}],"a":"x"}`)
	st := sealedState{ID: "call", Round: 2, Principal: "alice", Tool: "up__deploy", Args: argsDigest(args), Expires: now.Add(time.Minute).UnixMilli()}
	state := s.seal(st)
	payload, mac, _ := strings.Cut(state, ".")
	flip := func(x string) string {
		b := []byte(x)
		b[0] ^= 1
		return string(b)
	}
	for _, c := range []struct {
		name      string
		sealer    *sealer
		state     string
		principal string
		tool      string
		args      string
		at        time.Time
		want      error
	}{
		{"as sealed", s, state, "alice", "up__deploy", string(args), now, nil},
		{"same arguments, other order and spacing", s, state, "alice", "up__deploy", `{ "a": "x", "b": [1, 2.50, {"c": null}] }`, now, nil},
		{"payload changed", s, flip(payload) + "." + mac, "alice", "up__deploy", string(args), now, errStateForged},
		{"MAC changed", s, payload + "." + flip(mac), "alice", "up__deploy", string(args), now, errStateForged},
		{"no MAC", s, payload, "alice", "up__deploy", string(args), now, errStateForged},
		{"not base64", s, "!!." + mac, "alice", "up__deploy", string(args), now, errStateForged},
		{"another key", newSealer([]byte(strings.Repeat("j", 32))), state, "alice", "up__deploy", string(args), now, errStateForged},
		{"another caller", s, state, "bob", "up__deploy", string(args), now, errStateOtherCaller},
		{"unauthenticated", s, state, "", "up__deploy", string(args), now, errStateOtherCaller},
		{"another tool", s, state, "alice", "up__wipe", string(args), now, errStateOtherCall},
		{"other arguments", s, state, "alice", "up__deploy", `{"a":"y","b":[1,2.50,{"c":null}]}`, now, errStateOtherCall},
		{"a number written otherwise", s, state, "alice", "up__deploy", `{"a":"x","b":[1,2.5,{"c":null}]}`, now, errStateOtherCall},
		{"expired", s, state, "alice", "up__deploy", string(args), now.Add(time.Minute + time.Millisecond), errStateExpired},
	} {
		got, err := c.sealer.open(c.state, c.principal, c.tool, []byte(c.args), c.at)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if c.want == nil && got != (sealedState{V: stateVersion, ID: "call", Round: 2, Principal: "alice", Tool: "up__deploy", Args: st.Args, Expires: st.Expires}) {
			t.Errorf("%s: opened %+v", c.name, got)
		}
	}
	for _, empty := range []string{"", "null", "{}", "  "} {
		if argsDigest([]byte(empty)) != argsDigest(nil) {
			t.Errorf("arguments %q are not the same as none", empty)
		}
	}
}

// Two sealers without a key do not accept each other's states: a random
// key per process.
func TestRequestStateKeyIsRandomByDefault(t *testing.T) {
	a, b := newSealer(nil), newSealer(nil)
	state := a.seal(sealedState{ID: "x", Round: 1, Expires: time.Now().Add(time.Hour).UnixMilli(), Args: argsDigest(nil)})
	if _, err := a.open(state, "", "", nil, time.Now()); err != nil {
		t.Fatalf("its own state: %v", err)
	}
	if _, err := b.open(state, "", "", nil, time.Now()); !errors.Is(err, errStateForged) {
		t.Errorf("another process's state: %v, want refused as forged", err)
	}
}

func TestAShortStateKeyIsRefused(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Options.StateKey has 8 bytes") {
			t.Errorf("New with an 8-byte key: %v, want a panic naming the field", r)
		}
	}()
	New(newFixture(t, ApprovalPolicy{}).ex, &Options{StateKey: []byte("12345678")})
}

// Issue 22.13: a parked call is resumed only by the caller it was started
// for, with the tool it was started with: a requestState sealed with the
// gateway's own key (what someone holding the key could forge) that
// names another caller's call is taken for a call that is not waiting,
// and the call it names goes on for its own caller.
func TestAParkedCallIsBoundToItsCallerAndTool(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{})
	alice, bob := b.manual(t, aliceToken), b.manual(t, bobToken)
	args := map[string]any{"env": "prod"}
	mine := question(t, alice, "up__deploy_ask", args)
	theirs := question(t, bob, "up__deploy_ask", args)
	read := func(state string) sealedState {
		t.Helper()
		payload, _, _ := strings.Cut(state, ".")
		raw, err := base64.RawURLEncoding.DecodeString(payload)
		var st sealedState
		if err != nil || json.Unmarshal(raw, &st) != nil {
			t.Fatalf("the state does not read: %v", err)
		}
		return st
	}
	victim, thief := read(mine.RequestState), read(theirs.RequestState)
	for _, c := range []struct{ name, tool string }{{"another caller", "up__deploy_ask"}, {"another caller and tool", "up__deploy"}} {
		forged := victim
		forged.Principal, forged.Tool = thief.Principal, c.tool
		forged.Expires = time.Now().Add(time.Minute).UnixMilli()
		_, err := answer(ctxT(t), bob, c.tool, args, mine, b.gw.sealer.seal(forged), approve)
		if err == nil || !strings.Contains(err.Error(), "not waiting") {
			t.Errorf("%s's forged state naming alice's call: %v; want it taken for a call that is not waiting", c.name, err)
		}
	}
	// Each call goes on for its own caller, to its end.
	for _, c := range []struct {
		who string
		cs  *mcp.ClientSession
		res *mcp.CallToolResult
	}{{"alice", alice, mine}, {"bob", bob, theirs}} {
		next, err := answer(ctxT(t), c.cs, "up__deploy_ask", args, c.res, c.res.RequestState, approve)
		if err != nil || !next.NeedsInput() {
			t.Fatalf("%s's own retry after the forgeries: %v %+v", c.who, err, next)
		}
		final, err := answer(ctxT(t), c.cs, "up__deploy_ask", args, next, next.RequestState,
			&mcp.ElicitResult{Action: "accept", Content: map[string]any{"meaning": "music"}})
		if err != nil || final.IsError {
			t.Fatalf("%s's call's end: %v %+v", c.who, err, final)
		}
	}
}
