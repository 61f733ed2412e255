package policy_test

// What the policy adds to a call, on the executor with an in-process Go
// handler (tool's BenchmarkExecutorOnly measures the rest):
//
//	go test -run='^$' -bench=ExecutorPolicy -benchmem -count=6 ./policy/
//
// rules=none is the executor without a policy (what a configuration with
// no policy section gets); rules=0 a policy of no rules; rules=10 ten
// rules that each apply to the tool and read its arguments, none matching,
// so that all ten are evaluated on every call (the worst case for ten);
// rules=10/first the same ten where the first matches (allow).

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolwire/toolwire/policy"
	"github.com/toolwire/toolwire/tool"
)

func BenchmarkExecutorPolicy(b *testing.B) {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)
	args := json.RawMessage(`{"path":"/srv/shared/notes/today.txt","content":"hello"}`)
	ten := func(firstMatches bool) []policy.Rule {
		var rules []policy.Rule
		for i := range 10 {
			r := policy.Rule{Name: fmt.Sprintf("r%d", i), Tools: []string{"files__*"}, Effect: tool.Deny, Reason: "no",
				When: fmt.Sprintf(`!within(args.path, "/srv/shared") && args.content.size() > %d && caller.role != "admin"`, i)}
			if i == 0 && firstMatches {
				r.When, r.Effect = `within(args.path, "/srv/shared")`, tool.Allow
			}
			rules = append(rules, r)
		}
		return rules
	}
	cases := []struct {
		name  string
		rules []policy.Rule
		none  bool
	}{
		{"rules=none", nil, true},
		{"rules=0", nil, false},
		{"rules=10", ten(false), false},
		{"rules=10/first", ten(true), false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			reg := tool.NewRegistry(nil)
			err := reg.Register(&tool.Tool{Name: "files__write_file", Tier: tool.Read, InputSchema: schema,
				Origin:  tool.Origin{Source: "files", Name: "write_file"},
				Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }})
			if err != nil {
				b.Fatal(err)
			}
			var opts tool.ExecutorOptions
			if !c.none {
				p, err := policy.New(c.rules)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Check(reg.List()); err != nil {
					b.Fatal(err)
				}
				opts.Policy = p
			}
			ex := tool.NewExecutor(reg, &opts)
			ctx := context.Background()
			if res := ex.Call(ctx, "files__write_file", args); res.IsError {
				b.Fatal(res.Message)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if res := ex.Call(ctx, "files__write_file", args); res.IsError {
					b.Fatal(res.Message)
				}
			}
		})
	}
}
