package policy_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/policy"
	"github.com/toolwire/toolwire/tool"
)

// harness is an executor over a registry of a files server's tools, with
// a confirmer that counts what it is asked and an audit in memory.
type harness struct {
	ex    *tool.Executor
	asked atomic.Int32
	ran   atomic.Int32
	mem   *audit.Memory
}

func newHarness(t *testing.T, rules ...policy.Rule) *harness {
	t.Helper()
	h := &harness{mem: &audit.Memory{}}
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) {
		h.asked.Add(1)
		return true, nil
	})})
	handler := func(_ context.Context, args json.RawMessage) (*tool.Result, error) {
		h.ran.Add(1)
		if strings.Contains(string(args), "key") {
			return tool.TextResult("-----BEGIN OPENSSH PRIVATE KEY-----"), nil
		}
		return tool.TextResult("done"), nil
	}
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	for _, tl := range []*tool.Tool{
		{Name: "files__write_file", Tier: tool.Write, InputSchema: schema, Origin: tool.Origin{Source: "files", Name: "write_file"}, Handler: handler},
		{Name: "files__read_file", Tier: tool.Read, InputSchema: schema, Origin: tool.Origin{Source: "files", Name: "read_file"}, Handler: handler},
	} {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	var pol tool.Policy
	if len(rules) > 0 {
		p, err := policy.New(rules)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Check(reg.List()); err != nil {
			t.Fatal(err)
		}
		pol = p
	}
	h.ex = tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: audit.NewLog(h.mem, nil), Policy: pol})
	return h
}

func (h *harness) kinds() []string {
	var out []string
	for _, ev := range h.mem.Events() {
		s := string(ev.Kind)
		if ev.Rule != "" {
			s += "(" + ev.Rule + ":" + ev.Reason + ")"
		}
		out = append(out, s)
	}
	return out
}

var sharedOnly = policy.Rule{
	Name: "shared-only", Servers: []string{"files"}, Tiers: []tool.Tier{tool.Write},
	When: `!within(args.path, "/srv/shared")`, Effect: tool.Deny, Reason: "files are written under /srv/shared only",
}

func TestExecutorDeniesBeforeAskingAndAudits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, sharedOnly)
	res := h.ex.Call(t.Context(), "files__write_file", json.RawMessage(`{"path":"/srv/shared/../../etc/passwd"}`))
	if !res.IsError || res.Reason != tool.ReasonPolicy || !strings.Contains(res.Message, "files are written under /srv/shared only") || !strings.Contains(res.Message, "shared-only") {
		t.Fatalf("result %+v, want a policy denial with the rule and its reason", res)
	}
	if h.asked.Load() != 0 || h.ran.Load() != 0 {
		t.Errorf("asked %d, ran %d: a denied call must do neither", h.asked.Load(), h.ran.Load())
	}
	got := strings.Join(h.kinds(), " ")
	want := "call.requested validation.passed policy.decided(shared-only:deny) call.errored"
	if got != want {
		t.Errorf("audit %s, want %s", got, want)
	}
	// Inside: no rule matches, the tier asks.
	res = h.ex.Call(t.Context(), "files__write_file", json.RawMessage(`{"path":"/srv/shared/a"}`))
	if res.IsError || h.asked.Load() != 1 || h.ran.Load() != 1 {
		t.Errorf("inside: %+v, asked %d, ran %d; want the tier to ask, then the call to run", res, h.asked.Load(), h.ran.Load())
	}
}

func TestExecutorAllowSkipsAskAndAskAsksForReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t,
		policy.Rule{Name: "shared-writes-run", Tools: []string{"files__write_file"}, When: `within(args.path, "/srv/shared")`, Effect: tool.Allow},
		policy.Rule{Name: "etc-reads-ask", Tools: []string{"files__read_file"}, When: `within(args.path, "/etc")`, Effect: tool.Ask},
	)
	if res := h.ex.Call(t.Context(), "files__write_file", json.RawMessage(`{"path":"/srv/shared/a"}`)); res.IsError || h.asked.Load() != 0 {
		t.Errorf("allowed write: %+v, asked %d; want it run without asking", res, h.asked.Load())
	}
	if res := h.ex.Call(t.Context(), "files__read_file", json.RawMessage(`{"path":"/etc/shadow"}`)); res.IsError || h.asked.Load() != 1 {
		t.Errorf("read under /etc: %+v, asked %d; want it asked", res, h.asked.Load())
	}
	if res := h.ex.Call(t.Context(), "files__read_file", json.RawMessage(`{"path":"/tmp/x"}`)); res.IsError || h.asked.Load() != 1 {
		t.Errorf("other read: %+v, asked %d; want it run without asking", res, h.asked.Load())
	}
}

func TestExecutorWithholdsResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, policy.Rule{Name: "no-keys", On: policy.OnResult, When: `result.text.contains("PRIVATE KEY")`, Effect: tool.Deny, Reason: "it holds a private key"})
	res := h.ex.Call(t.Context(), "files__read_file", json.RawMessage(`{"path":"/home/a/.ssh/key"}`))
	if !res.IsError || res.Reason != tool.ReasonWithheld || strings.Contains(res.Text(), "BEGIN") || !strings.Contains(res.Message, "it holds a private key") {
		t.Fatalf("result %+v, want it withheld with the reason", res)
	}
	if h.ran.Load() != 1 {
		t.Errorf("ran %d, want 1", h.ran.Load())
	}
	got := strings.Join(h.kinds(), " ")
	if !strings.Contains(got, "policy.decided(no-keys:withhold) call.errored") {
		t.Errorf("audit %s, want the withholding recorded", got)
	}
	if res := h.ex.Call(t.Context(), "files__read_file", json.RawMessage(`{"path":"/tmp/x"}`)); res.IsError {
		t.Errorf("other read: %+v", res)
	}
}

func TestExecutorSetPolicyTakesEffect(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	args := json.RawMessage(`{"path":"/etc/passwd"}`)
	if res := h.ex.Call(t.Context(), "files__write_file", args); res.IsError {
		t.Fatalf("without a policy: %+v", res)
	}
	p, err := policy.New([]policy.Rule{sharedOnly})
	if err != nil {
		t.Fatal(err)
	}
	h.ex.SetPolicy(p)
	if res := h.ex.Call(t.Context(), "files__write_file", args); res.Reason != tool.ReasonPolicy {
		t.Errorf("with the policy: %+v, want denied", res)
	}
	h.ex.SetPolicy(nil)
	if res := h.ex.Call(t.Context(), "files__write_file", args); res.IsError {
		t.Errorf("policy removed: %+v", res)
	}
}

// Through the executor, the rules read the executor's own decoding of the
// arguments: numbers are typed by the schema there too.
func TestExecutorTypesNumbersBySchema(t *testing.T) {
	t.Parallel()
	reg := tool.NewRegistry(nil)
	err := reg.Register(&tool.Tool{Name: "files__chmod", Tier: tool.Read,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"integer"},"ratio":{"type":"number"}},"required":["mode","ratio"]}`),
		Handler:     func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.New([]policy.Rule{{Name: "modes", When: `args.mode > 511 || args.ratio == 2.0 || args.mode == 7`, Effect: tool.Deny}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Check(reg.List()); err != nil {
		t.Fatal(err)
	}
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Policy: p})
	for args, denied := range map[string]bool{
		`{"mode":420,"ratio":1}`:   false,
		`{"mode":4095,"ratio":1}`:  true,
		`{"mode":420,"ratio":2}`:   true, // an integral "number" is a double: 2 == 2.0
		`{"mode":7.0,"ratio":1.5}`: true, // 7.0 is an integer in JSON Schema
	} {
		res := ex.Call(t.Context(), "files__chmod", json.RawMessage(args))
		if got := res.Reason == tool.ReasonPolicy; got != denied {
			t.Errorf("%s: %+v, want denied %v", args, res, denied)
		}
	}
}
