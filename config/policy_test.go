package config

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	src := `servers:
  files: {command: x}
policy:
  rules:
    - name: shared-only
      servers: [files]
      tiers: [write, destructive]
      tools: ["files__*"]
      when: |
        !within(args.path, "/srv/shared")
        && true
      decision: deny
      reason: "  writes stay under /srv/shared  "
    - name: keys
      on: result
      when: 'result.text.contains("KEY")'
      decision: deny
`
	f, err := Parse("t.yaml", []byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Policy == nil || f.Policy.File != "t.yaml" || len(f.Policy.Rules) != 2 {
		t.Fatalf("policy %+v", f.Policy)
	}
	r := f.Policy.Rules[0]
	if r.Name != "shared-only" || r.Line != 5 || r.WhenLine != 10 || r.On != "call" || r.Decision != "deny" ||
		r.Reason != "writes stay under /srv/shared" || !slices.Equal(r.Tiers, []string{"write", "destructive"}) ||
		!slices.Equal(r.Servers, []string{"files"}) || !slices.Equal(r.Tools, []string{"files__*"}) || !strings.HasPrefix(r.When, "!within(") {
		t.Errorf("rule 0 = %+v", r)
	}
	if r := f.Policy.Rules[1]; r.On != "result" || r.WhenLine != 16 {
		t.Errorf("rule 1 = %+v", r)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ rules, want string }{
		{"    - {name: a, decision: maybe}\n", `t.yaml:5: policy.rules[0].decision: unknown decision "maybe" (want "allow", "deny" or "ask")`},
		{"    - {name: a}\n", `t.yaml:5: policy.rules[0]: a rule needs a decision`},
		{"    - {decision: deny}\n", `t.yaml:5: policy.rules[0]: a rule needs a name`},
		{"    - {name: a, decision: deny, whn: x}\n", `t.yaml:5: policy.rules[0].whn: unknown field (did you mean "when"?)`},
		{"    - {name: a, decision: ask, on: result}\n", `policy.rules[0].decision: a rule on results may allow or deny`},
		{"    - {name: a, decision: deny, on: reply}\n", `unknown stage "reply"`},
		{"    - {name: a, decision: deny, tiers: [admin]}\n", `policy.rules[0].tiers[0]: unknown tier "admin"`},
		{"    - {name: a, decision: deny, tools: ['[']}\n", `policy.rules[0].tools[0]: invalid pattern "["`},
		{"    - {name: a, decision: deny, when: 3}\n", `policy.rules[0].when: want a CEL condition (a string), got integer 3`},
		{"    - {name: a, decision: deny}\n    - {name: a, decision: allow}\n", `t.yaml:6: policy.rules[1].name: duplicate rule name "a" (first on line 5)`},
	} {
		src := "servers:\n  files: {command: x}\npolicy:\n  rules:\n" + tc.rules
		_, err := Parse("t.yaml", []byte(src), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(tc.rules), err, tc.want)
		}
	}
	if _, err := Parse("t.yaml", []byte("servers:\n  files: {command: x}\npolicy:\n  rule: []\n"), ""); err == nil || !strings.Contains(err.Error(), `policy.rule: unknown field (did you mean "rules"?)`) {
		t.Errorf("policy.rule: %v", err)
	}
}

func TestLoadAllPolicyInTwoFiles(t *testing.T) {
	t.Parallel()
	write := writeFiles(t, t.TempDir())
	first := write("first.yaml", "servers:\n  b: {command: x}\npolicy:\n  rules: []\n")
	second := write("second.yaml", "servers:\n  c: {command: x}\npolicy:\n  rules: []\n")
	plain := write("plain.yaml", "servers:\n  a: {command: x}\n")
	f, err := LoadAll([]string{plain, first})
	if err != nil || f.Policy == nil || f.Policy.File != first {
		t.Fatalf("LoadAll = %+v, %v; want the policy of %s", f, err, first)
	}
	if _, err := LoadAll([]string{first, second}); err == nil || !strings.Contains(err.Error(), second+":3: policy: also configured at "+first+":3") {
		t.Errorf("two policies: %v", err)
	}
}
