package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// slowUpstream is an Upstream whose Session blocks while gate is open, as
// an upstream that takes its time to answer a listing would.
type slowUpstream struct{ gate chan struct{} }

func (u *slowUpstream) Name() string   { return "slow" }
func (u *slowUpstream) Prefix() string { return "slow" }
func (u *slowUpstream) Session() *mcp.ClientSession {
	<-u.gate
	return nil
}
func (u *slowUpstream) Timeout() time.Duration                              { return time.Minute }
func (u *slowUpstream) SetLogLevel(context.Context, mcp.LoggingLevel) error { return nil }
func (u *slowUpstream) Subscribe(context.Context, string) error             { return nil }
func (u *slowUpstream) Track(context.Context) func()                        { return func() {} }
func (u *slowUpstream) Mask(err error) error                                { return err }
func (u *slowUpstream) Watch(func(), func(string)) func()                   { return func() {} }

// TestARoleBeingMadeDoesNotHoldUpOtherRoles: while one role's server is
// being made (its catalog listing waits on a slow upstream), a role whose
// server exists is served at once.
func TestARoleBeingMadeDoesNotHoldUpOtherRoles(t *testing.T) {
	up := &slowUpstream{gate: make(chan struct{})}
	reg := tool.NewRegistry(nil)
	if err := reg.Register(&tool.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`), Tier: tool.Read,
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	g := New(tool.NewExecutor(reg, nil), &Options{Upstreams: []Upstream{up}})
	r := &roleServers{g: g, servers: map[string]*mcp.Server{}}
	defer r.stopAll()

	close(up.gate) // role a is made while the upstream answers at once
	a := r.get("a", nil)
	up.gate = make(chan struct{}) // from now on the upstream hangs
	defer close(up.gate)

	made := make(chan *mcp.Server, 1)
	go func() { made <- r.get("b", nil) }()
	got := make(chan *mcp.Server, 1)
	go func() { got <- r.get("a", nil) }()
	select {
	case s := <-got:
		if s != a {
			t.Error("role a got a new server instead of its own")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("role a waited for role b's server to be made")
	}
	select {
	case <-made:
		t.Error("role b's server was made although the upstream never answered")
	default:
	}
}
