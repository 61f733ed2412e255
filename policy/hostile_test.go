package policy

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

// A rule over a huge argument cannot hold a call: past its cost limit the
// rule fails, and a failed rule denies.
func TestCostLimitDenies(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Rule{Name: "pairs", Tools: []string{"*"}, When: `args.items.exists(a, args.items.exists(b, a + b == "never"))`, Effect: tool.Deny})
	tl := &tool.Tool{Name: "x__y", Tier: tool.Read, InputSchema: json.RawMessage(`{"type":"object","properties":{"items":{"type":"array","items":{"type":"string"}}}}`)}
	items := make([]string, 5000)
	for i := range items {
		items[i] = "v"
	}
	args, _ := json.Marshal(map[string]any{"items": items})
	d := p.Decide(t.Context(), tool.PolicyCall{Tool: tl, Args: args})
	if d.Effect != tool.Deny || !strings.Contains(d.Reason, "cost") {
		t.Errorf("decision %+v, want a denial for the cost", d)
	}
	small, _ := json.Marshal(map[string]any{"items": []string{"a", "b"}})
	if d := p.Decide(t.Context(), tool.PolicyCall{Tool: tl, Args: small}); d.Effect != tool.NoMatch {
		t.Errorf("small: %+v", d)
	}
}

// A server's schema is untrusted: deep nesting, odd property names and
// forms the shapes do not read are checked loosely, never crash, and
// never make a declared argument unreadable.
func TestHostileSchemas(t *testing.T) {
	t.Parallel()
	deep := `{"type":"string"}`
	for range 40 {
		deep = `{"type":"object","properties":{"a":` + deep + `}}`
	}
	for _, tc := range []struct {
		schema, when, args string
		checks             bool
		want               tool.Effect
	}{
		{deep, `has(args.a.a.a)`, `{"a":{"a":{"a":{}}}}`, true, tool.Deny},
		{`{"type":"object","properties":{"file-path":{"type":"string"}}}`, "args.`file-path` == \"/x\"", `{"file-path":"/x"}`, true, tool.Deny},
		{`{"type":"object","properties":{"in":{"type":"integer"}}}`, "args.`in` > 3", `{"in":4}`, true, tool.Deny},
		{`{"type":"object","properties":{"n":{"type":["integer","null"]}}}`, `args.n > 3`, `{"n":null}`, true, tool.Deny}, // null: the rule fails, and denies
		{`{"type":"object","properties":{"n":{"type":"integer"}}}`, `args.n == 2`, `{"n":2.0}`, true, tool.Deny},
		{`{"type":"object","properties":{"n":{"type":"number"}}}`, `args.n > 2`, `{"n":3}`, true, tool.Deny},
		{`{"type":"object","properties":{"n":{"$ref":"#/$defs/x"}}}`, `args.n.foo == 1`, `{"n":{"foo":1}}`, true, tool.Deny},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, `has(args.anything) && args.anything == "1"`, `{}`, true, tool.NoMatch},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, `args.anything == 1`, `{"anything":"1"}`, false, tool.Deny},
		{`not json`, `args.x == 1`, `{"x":1}`, true, tool.Deny},
		{`{"type":"object","properties":{"x":{"type":"string"}}}`, `args.y == "1"`, `{"x":"1"}`, false, tool.Deny},
	} {
		p := mustNew(t, Rule{Name: "r", Tools: []string{"*"}, When: tc.when, Effect: tool.Deny})
		tl := &tool.Tool{Name: "x__y", Tier: tool.Read, InputSchema: json.RawMessage(tc.schema)}
		_, err := p.Check([]*tool.Tool{tl})
		if (err == nil) != tc.checks {
			t.Errorf("%s against %s: Check = %v, want passing %v", tc.when, tc.schema, err, tc.checks)
		}
		if d := p.Decide(t.Context(), tool.PolicyCall{Tool: tl, Args: json.RawMessage(tc.args)}); d.Effect != tc.want {
			t.Errorf("%s on %s: %+v, want %v", tc.when, tc.args, d, tc.want)
		}
	}
}

func FuzzWithin(f *testing.F) {
	for _, s := range []string{"/srv/shared/a", "/srv/shared/../etc", "/srv/sharedx", "a/../..", "/srv/shared/./../shared/b", "//srv//shared"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !Within(p, "/srv/shared") {
			return
		}
		c := path.Clean(p)
		if c != "/srv/shared" && !strings.HasPrefix(c, "/srv/shared/") {
			t.Fatalf("Within(%q) but it cleans to %q", p, c)
		}
		if strings.ContainsRune(p, 0) || !strings.HasPrefix(p, "/") {
			t.Fatalf("Within(%q): a NUL or relative path is never within", p)
		}
	})
}

func FuzzEmailDomain(f *testing.F) {
	for _, s := range []string{"a@example.com", "A <a@example.com>", "a@evil.com, b@example.com", `"a@example.com"@evil.com`, "a@example.com.evil.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := EmailDomain(s)
		if err != nil {
			return
		}
		if d == "example.com" && strings.Contains(strings.ToLower(s), "evil.com") && !strings.Contains(strings.ToLower(s), "example.com") {
			t.Fatalf("EmailDomain(%q) = %q", s, d)
		}
		if strings.ContainsAny(d, "@ ,<>") {
			t.Fatalf("EmailDomain(%q) = %q, not a domain", s, d)
		}
	})
}
