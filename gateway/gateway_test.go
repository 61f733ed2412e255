package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fixture is a registry of Go tools behind a gateway, with counters of the
// calls that actually ran.
type fixture struct {
	reg  *tool.Registry
	ex   *tool.Executor
	gw   *Gateway
	runs map[string]*atomic.Int32
}

func newFixture(t *testing.T, policy ApprovalPolicy) *fixture {
	t.Helper()
	f := &fixture{runs: map[string]*atomic.Int32{}}
	f.reg = tool.NewRegistry(&tool.RegistryOptions{Confirmer: NewApprover(policy)})
	f.ex = tool.NewExecutor(f.reg, nil)
	f.gw = New(f.ex, nil)
	pathSchema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	for _, def := range []struct {
		name   string
		tier   tool.Tier
		source string
	}{{"read_file", tool.Read, "files"}, {"write_file", tool.Write, "files"}, {"delete_file", tool.Destructive, "files"}, {"local_note", tool.Write, ""}} {
		n := &atomic.Int32{}
		f.runs[def.name] = n
		if err := f.reg.Register(&tool.Tool{
			Name: def.name, Description: def.name + " does its thing", InputSchema: pathSchema, Tier: def.tier,
			Origin: tool.Origin{Source: def.source, Name: def.name},
			Handler: func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
				n.Add(1)
				return tool.TextResult("ran with " + string(args)), nil
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// connect serves the gateway (visible may be nil) and connects a client.
func (f *fixture) connect(t *testing.T, visible func(string) bool, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	srv, stop := f.gw.Server(visible)
	t.Cleanup(stop)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctxT(t), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctxT(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestAnnotationsFollowTheEnforcedTier(t *testing.T) {
	cases := []struct {
		tier               tool.Tier
		source             string
		readOnly           bool
		destructive, openW *bool
	}{
		{tool.Read, "", true, ptr(false), nil},
		{tool.Read, "files", true, ptr(false), ptr(true)},
		{tool.Write, "", false, nil, nil},
		{tool.Write, "files", false, nil, ptr(true)},
		{tool.Destructive, "files", false, ptr(true), ptr(true)},
		{tool.Tier(0), "", false, ptr(true), nil}, // unknown: the guarded side
	}
	for _, c := range cases {
		a := Annotations(&tool.Tool{Tier: c.tier, Origin: tool.Origin{Source: c.source}})
		if a.ReadOnlyHint != c.readOnly || !samePtr(a.DestructiveHint, c.destructive) || !samePtr(a.OpenWorldHint, c.openW) {
			t.Errorf("%s/%q: got readOnly=%v destructive=%v openWorld=%v", c.tier, c.source, a.ReadOnlyHint, show(a.DestructiveHint), show(a.OpenWorldHint))
		}
	}
}

func samePtr(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func show(p *bool) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func TestAdvertisedSchemaIsAnObjectSchema(t *testing.T) {
	obj := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)
	if got := advertisedSchema(&tool.Tool{InputSchema: obj}); string(got) != string(obj) {
		t.Errorf("object schema advertised as %s", got)
	}
	for _, s := range []string{`{"type":"array"}`, `{"anyOf":[{"type":"object"}]}`, `true`} {
		if got := advertisedSchema(&tool.Tool{InputSchema: json.RawMessage(s)}); string(got) != `{"type":"object"}` {
			t.Errorf("%s advertised as %s, want a permissive object", s, got)
		}
	}
}

func TestListingShowsDerivedAnnotationsAndHidesInvisibleTools(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{})
	cs := f.connect(t, func(name string) bool { return name != "local_note" }, nil)
	res, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tl
	}
	if len(got) != 3 || got["local_note"] != nil {
		t.Fatalf("listing = %v, want the three visible tools", keys(got))
	}
	if a := got["read_file"].Annotations; !a.ReadOnlyHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("read_file annotations = %+v", a)
	}
	if a := got["delete_file"].Annotations; a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("delete_file annotations = %+v", a)
	}
	// An invisible tool is absent: calling it is a protocol error, and its
	// handler never runs.
	if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "local_note", Arguments: map[string]any{"path": "x"}}); err == nil {
		t.Error("calling an invisible tool succeeded")
	}
	if n := f.runs["local_note"].Load(); n != 0 {
		t.Errorf("invisible tool ran %d times", n)
	}
}

func TestReadCallRunsAndBadArgumentsAreResults(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{})
	cs := f.connect(t, nil, nil)
	if res := callTool(t, cs, "read_file", map[string]any{"path": "/a"}); res.IsError || text(res) != `ran with {"path":"/a"}` {
		t.Errorf("read_file = %+v (%s)", res, text(res))
	}
	res := callTool(t, cs, "read_file", map[string]any{"path": 7})
	if !res.IsError || !strings.Contains(text(res), "/path") {
		t.Errorf("invalid arguments = %q, want an isError result naming /path", text(res))
	}
	if n := f.runs["read_file"].Load(); n != 1 {
		t.Errorf("read_file ran %d times, want 1 (the invalid call must not run)", n)
	}
}

// elicitingClient answers every elicitation with action and approve, and
// records the messages it was shown.
func elicitingClient(action string, approve any, shown *[]string) *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		*shown = append(*shown, req.Params.Message)
		res := &mcp.ElicitResult{Action: action}
		if action == "accept" {
			res.Content = map[string]any{"approve": approve}
		}
		return res, nil
	}}
}

func TestDestructiveCallIsConfirmedThroughElicitation(t *testing.T) {
	cases := []struct {
		name    string
		action  string
		approve any
		runs    bool
	}{
		{"accepted and ticked", "accept", true, true},
		{"accepted but not ticked", "accept", false, false},
		{"declined", "decline", nil, false},
		{"cancelled", "cancel", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, ApprovalPolicy{})
			var shown []string
			cs := f.connect(t, nil, elicitingClient(c.action, c.approve, &shown))
			res := callTool(t, cs, "delete_file", map[string]any{"path": "/tmp/x", "approved": true})
			ran := f.runs["delete_file"].Load() == 1
			if ran != c.runs || res.IsError == c.runs {
				t.Fatalf("ran=%v isError=%v (%s), want ran=%v", ran, res.IsError, text(res), c.runs)
			}
			if len(shown) != 1 {
				t.Fatalf("client was asked %d times, want once", len(shown))
			}
			// The user sees the validated arguments, re-encoded: the
			// client's "approved": true is just an argument, shown too,
			// and decides nothing.
			for _, want := range []string{"delete_file", "destructive", `"path": "/tmp/x"`} {
				if !strings.Contains(shown[0], want) {
					t.Errorf("approval message lacks %q:\n%s", want, shown[0])
				}
			}
			if !c.runs && !strings.Contains(text(res), "declined") {
				t.Errorf("refusal text = %q", text(res))
			}
		})
	}
}

func TestClientWithoutElicitationIsRefused(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{})
	cs := f.connect(t, nil, nil)
	res := callTool(t, cs, "write_file", map[string]any{"path": "/x"})
	if !res.IsError || !strings.Contains(text(res), "approval required") || !strings.Contains(text(res), "elicitation") {
		t.Errorf("result = %q, want an isError result saying approval is required", text(res))
	}
	if n := f.runs["write_file"].Load(); n != 0 {
		t.Errorf("write_file ran %d times without approval", n)
	}
}

func TestApprovalPolicyPerTierAndPerTool(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{Write: Allow, Destructive: Deny, Tools: map[string]Approval{"local_note": Deny}})
	var shown []string
	cs := f.connect(t, nil, elicitingClient("accept", true, &shown))
	if res := callTool(t, cs, "write_file", map[string]any{"path": "/x"}); res.IsError {
		t.Errorf("write with Allow = %q", text(res))
	}
	if res := callTool(t, cs, "delete_file", map[string]any{"path": "/x"}); !res.IsError || !strings.Contains(text(res), "policy") {
		t.Errorf("destructive with Deny = %q", text(res))
	}
	if res := callTool(t, cs, "local_note", map[string]any{"path": "/x"}); !res.IsError {
		t.Errorf("per-tool Deny over tier Allow = %q", text(res))
	}
	if len(shown) != 0 {
		t.Errorf("the client was asked %d times; allow and deny never ask", len(shown))
	}
	if f.runs["write_file"].Load() != 1 || f.runs["delete_file"].Load() != 0 || f.runs["local_note"].Load() != 0 {
		t.Errorf("runs: write %d, delete %d, local %d", f.runs["write_file"].Load(), f.runs["delete_file"].Load(), f.runs["local_note"].Load())
	}
}

func TestRegistryChangesReachConnectedClients(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{})
	changed := make(chan struct{}, 8)
	cs := f.connect(t, nil, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if err := f.reg.Register(&tool.Tool{Name: "fresh", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
		return tool.TextResult("new"), nil
	}}); err != nil {
		t.Fatal(err)
	}
	f.reg.Deregister("read_file")
	deadline := time.After(10 * time.Second)
	for {
		res, err := cs.ListTools(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, tl := range res.Tools {
			names[tl.Name] = true
		}
		if names["fresh"] && !names["read_file"] {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("listing never showed the change: %v", names)
		}
	}
	if res := callTool(t, cs, "fresh", nil); text(res) != "new" {
		t.Errorf("new tool = %q", text(res))
	}
}

func TestProgressIsRelayedUnderTheClientsToken(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{})
	if err := f.reg.Register(&tool.Tool{Name: "slow", Tier: tool.Read, Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
		c := tool.CallerFrom(ctx)
		if c == nil {
			return tool.ErrorResult(tool.ReasonFailed, "no caller in context"), nil
		}
		for i := 1; i <= 3; i++ {
			c.Progress(ctx, tool.Progress{Progress: float64(i), Total: 3, Message: "step"})
		}
		return tool.TextResult("done"), nil
	}}); err != nil {
		t.Fatal(err)
	}
	got := make(chan *mcp.ProgressNotificationParams, 8)
	cs := f.connect(t, nil, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		got <- req.Params
	}})
	params := &mcp.CallToolParams{Name: "slow"}
	params.SetProgressToken("client-token-7")
	res, err := cs.CallTool(ctxT(t), params)
	if err != nil || text(res) != "done" {
		t.Fatalf("slow = %v, %v", res, err)
	}
	select {
	case p := <-got:
		if p.ProgressToken != "client-token-7" || p.Progress != 1 || p.Total != 3 {
			t.Errorf("first progress = %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress reached the client")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestUnprefixedServesUpstreamNamesAndRefusesCollisions(t *testing.T) {
	f := newFixture(t, ApprovalPolicy{Write: Allow})
	f.gw = New(f.ex, &Options{Unprefixed: true})
	if err := f.gw.Collisions(); err != nil {
		t.Fatalf("fixture has no collision, got %v", err)
	}
	// The fixture's tools carry origin names equal to their registered
	// ones; give one an upstream name that differs, as a real server would.
	ran := false
	if err := f.reg.Register(&tool.Tool{Name: "files__stat", Tier: tool.Read, Origin: tool.Origin{Source: "files", Name: "stat"},
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			ran = true
			return tool.TextResult("stat ok"), nil
		}}); err != nil {
		t.Fatal(err)
	}
	cs := f.connect(t, nil, nil)
	names := map[string]bool{}
	res, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		names[tl.Name] = true
	}
	if !names["stat"] || names["files__stat"] {
		t.Fatalf("unprefixed listing = %v, want stat and not files__stat", keys(names))
	}
	if r := callTool(t, cs, "stat", nil); text(r) != "stat ok" || !ran {
		t.Errorf("calling stat = %q (ran %v)", text(r), ran)
	}

	// A second upstream with a tool of the same name is a collision
	// naming both.
	if err := f.reg.Register(&tool.Tool{Name: "other__stat", Tier: tool.Read, Origin: tool.Origin{Source: "other", Name: "stat"},
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("other"), nil }}); err != nil {
		t.Fatal(err)
	}
	err = f.gw.Collisions()
	if err == nil || !strings.Contains(err.Error(), `"files__stat"`) || !strings.Contains(err.Error(), `"other__stat"`) || !strings.Contains(err.Error(), `"stat"`) {
		t.Errorf("Collisions = %v, want both tools and the shared name", err)
	}
}
