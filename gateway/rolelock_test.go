package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// slowUpstream is an Upstream whose listing blocks while gate is open, as
// an upstream that takes its time to answer would, and that reports a
// change when the test says so.
type slowUpstream struct {
	gate chan struct{}

	mu      sync.Mutex
	changed []func() // the watchers' changed
}

func (u *slowUpstream) Name() string   { return "slow" }
func (u *slowUpstream) Prefix() string { return "slow" }
func (u *slowUpstream) List(context.Context) ([]*mcp.Resource, []*mcp.ResourceTemplate, []*mcp.Prompt, error) {
	<-u.gate
	return nil, nil, nil, nil
}
func (u *slowUpstream) ReadResource(context.Context, string) (*mcp.ReadResourceResult, error) {
	return nil, errors.New("no resources")
}
func (u *slowUpstream) GetPrompt(context.Context, string, map[string]string) (*mcp.GetPromptResult, error) {
	return nil, errors.New("no prompts")
}
func (u *slowUpstream) Complete(context.Context, *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return nil, errors.New("no completions")
}
func (u *slowUpstream) SetLogLevel(context.Context, mcp.LoggingLevel) error { return nil }
func (u *slowUpstream) Subscribe(context.Context, string) error             { return nil }
func (u *slowUpstream) Unsubscribe(context.Context, string) error           { return nil }
func (u *slowUpstream) Watch(changed func(), _ func(string)) func() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.changed = append(u.changed, changed)
	return func() {}
}

// change reports a change to the watchers.
func (u *slowUpstream) change() {
	u.mu.Lock()
	watchers := slices.Clone(u.changed)
	u.mu.Unlock()
	for _, f := range watchers {
		f()
	}
}

// TestARoleBeingMadeDoesNotHoldUpOtherRoles: while one role's server is
// being made (its catalog listing waits on a slow upstream, which has
// reported a change since the last listing), a role whose server exists is
// served at once.
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
	up.change() // and what role a's server offers must be listed again

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
