package gateway

import (
	"errors"
	"strings"
	"testing"
	"time"
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
