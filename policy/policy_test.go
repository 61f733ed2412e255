package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

// filesTool is a files server's write tool.
func filesTool(name string, tier tool.Tier, schema string) *tool.Tool {
	return &tool.Tool{
		Name: "files__" + name, Tier: tier, InputSchema: json.RawMessage(schema),
		Origin:  tool.Origin{Source: "files", Name: name},
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil },
	}
}

const writeSchema = `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"integer"}},"required":["path","content"]}`

func mustNew(t *testing.T, rules ...Rule) *Policy {
	t.Helper()
	p, err := New(rules)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func TestWritesOutsideSharedAreDenied(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Rule{
		Name: "shared-only", Servers: []string{"files"}, Tiers: []tool.Tier{tool.Write, tool.Destructive},
		When: `!within(args.path, "/srv/shared")`, Effect: tool.Deny, Reason: "files are written under /srv/shared only",
	})
	w := filesTool("write_file", tool.Write, writeSchema)
	for _, tc := range []struct {
		path string
		want tool.Effect
	}{
		{"/srv/shared/a.txt", tool.NoMatch},
		{"/srv/shared", tool.NoMatch},
		{"/srv/shared/sub/../b.txt", tool.NoMatch},
		{"/srv/shared/../../etc/passwd", tool.Deny},
		{"/srv/shared/..", tool.Deny},
		{"/srv/sharedx/a", tool.Deny},
		{"/etc/passwd", tool.Deny},
		{"srv/shared/a", tool.Deny},
		{"../srv/shared/a", tool.Deny},
		{"//srv/shared/a", tool.NoMatch},
		{"/srv/shared/a\x00/../../x", tool.Deny},
	} {
		args, _ := json.Marshal(map[string]any{"path": tc.path, "content": "x"})
		d := p.Decide(t.Context(), tool.PolicyCall{Tool: w, Args: args})
		if d.Effect != tc.want {
			t.Errorf("path %q: %v (%s), want %v", tc.path, d.Effect, d.Reason, tc.want)
		}
		if d.Effect == tool.Deny && (d.Rule != "shared-only" || d.Reason != "files are written under /srv/shared only") {
			t.Errorf("path %q: decision %+v, want the rule and its reason", tc.path, d)
		}
	}
	// A read tool of the same server is not selected by the rule.
	r := filesTool("read_file", tool.Read, writeSchema)
	if d := p.Decide(t.Context(), tool.PolicyCall{Tool: r, Args: json.RawMessage(`{"path":"/etc/passwd","content":""}`)}); d.Effect != tool.NoMatch {
		t.Errorf("read tool: %+v, want no match", d)
	}
}

func TestMisspeltArgumentFailsTheCheck(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Rule{
		Name: "shared-only", File: "toolwire.yaml", Line: 7, WhenLine: 9, Tools: []string{"files__write_*"},
		When: `!within(args.pth, "/srv/shared")`, Effect: tool.Deny,
	})
	w := filesTool("write_file", tool.Write, writeSchema)
	_, err := p.Check([]*tool.Tool{w, filesTool("read_file", tool.Read, writeSchema)})
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("Check: %v, want a FitError", err)
	}
	msg := err.Error()
	for _, want := range []string{"toolwire.yaml:9:", `"shared-only"`, `"files__write_file"`, "pth"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "read_file") {
		t.Errorf("error %q names a tool the rule does not apply to", msg)
	}
	// Called anyway, the rule denies, saying why.
	d := p.Decide(t.Context(), tool.PolicyCall{Tool: w, Args: json.RawMessage(`{"path":"/srv/shared/a","content":"x"}`)})
	if d.Effect != tool.Deny || !strings.Contains(d.Reason, "pth") {
		t.Errorf("decision %+v, want a denial naming pth", d)
	}
}

func TestWrongTypeFailsTheCheck(t *testing.T) {
	t.Parallel()
	for _, when := range []string{`args.mode == "644"`, `args.path > 3`, `args.content > 3`, `args.mode.startsWith("6")`} {
		p := mustNew(t, Rule{Name: "r", Tools: []string{"*"}, When: when, Effect: tool.Deny})
		if _, err := p.Check([]*tool.Tool{filesTool("write_file", tool.Write, writeSchema)}); err == nil {
			t.Errorf("%s: Check passed, want a type error", when)
		}
	}
	p := mustNew(t, Rule{Name: "r", Tools: []string{"*"}, When: `args.mode > 420 && args.path.size() > 1`, Effect: tool.Deny})
	if _, err := p.Check([]*tool.Tool{filesTool("write_file", tool.Write, writeSchema)}); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestAbsentArgumentDeniesSayingWhy(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Rule{Name: "small-modes", Tools: []string{"*"}, When: `args.mode > 511`, Effect: tool.Deny})
	w := filesTool("write_file", tool.Write, writeSchema)
	d := p.Decide(t.Context(), tool.PolicyCall{Tool: w, Args: json.RawMessage(`{"path":"/a","content":"x"}`)})
	if d.Effect != tool.Deny || d.Rule != "small-modes" || !strings.Contains(d.Reason, "mode") {
		t.Errorf("decision %+v, want a denial by small-modes naming mode", d)
	}
	d = p.Decide(t.Context(), tool.PolicyCall{Tool: w, Args: json.RawMessage(`{"path":"/a","content":"x","mode":420}`)})
	if d.Effect != tool.NoMatch {
		t.Errorf("decision %+v, want no match", d)
	}
	p = mustNew(t, Rule{Name: "guarded", Tools: []string{"*"}, When: `has(args.mode) && args.mode > 511`, Effect: tool.Deny})
	if d := p.Decide(t.Context(), tool.PolicyCall{Tool: w, Args: json.RawMessage(`{"path":"/a","content":"x"}`)}); d.Effect != tool.NoMatch {
		t.Errorf("has(): decision %+v, want no match", d)
	}
}

func TestAdminOnlyDestructive(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Rule{Name: "admin-destroys", Tiers: []tool.Tier{tool.Destructive}, When: `caller.role != "admin"`, Effect: tool.Deny, Reason: "only admins"})
	del := filesTool("delete", tool.Destructive, `{"type":"object","properties":{"path":{"type":"string"}}}`)
	admin := tool.WithPrincipal(t.Context(), tool.Principal{Subject: "ann", Role: "admin", Credential: tool.CredentialStatic})
	dev := tool.WithPrincipal(t.Context(), tool.Principal{Subject: "bob", Role: "dev", Credential: tool.CredentialStatic})
	if d := p.Decide(admin, tool.PolicyCall{Tool: del, Args: nil}); d.Effect != tool.NoMatch {
		t.Errorf("admin: %+v", d)
	}
	if d := p.Decide(dev, tool.PolicyCall{Tool: del, Args: nil}); d.Effect != tool.Deny {
		t.Errorf("dev: %+v", d)
	}
	if d := p.Decide(t.Context(), tool.PolicyCall{Tool: del, Args: nil}); d.Effect != tool.Deny {
		t.Errorf("nobody: %+v", d)
	}
}

func TestEmailOutsideDomainAsks(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Rule{Name: "outside-asks", Tools: []string{"mail__send_email"}, When: `args.to.exists(a, emailDomain(a) != "example.com")`, Effect: tool.Ask},
		Rule{Name: "inside-runs", Tools: []string{"mail__send_email"}, Effect: tool.Allow})
	send := &tool.Tool{Name: "mail__send_email", Tier: tool.Write, Origin: tool.Origin{Source: "mail", Name: "send_email"},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"to":{"type":"array","items":{"type":"string"}},"body":{"type":"string"}}}`)}
	for _, tc := range []struct {
		to   []string
		want tool.Effect
	}{
		{[]string{"a@example.com"}, tool.Allow},
		{[]string{"A <a@EXAMPLE.com>"}, tool.Allow},
		{[]string{"a@example.com", "b@evil.com"}, tool.Ask},
		{[]string{"a@example.com.evil.com"}, tool.Ask},
		{[]string{"a@evil.com, b@example.com"}, tool.Deny}, // not one address: the rule fails, and denies
		{[]string{"\"a@example.com\"@evil.com"}, tool.Ask},
	} {
		args, _ := json.Marshal(map[string]any{"to": tc.to, "body": "hi"})
		if d := p.Decide(t.Context(), tool.PolicyCall{Tool: send, Args: args}); d.Effect != tc.want {
			t.Errorf("to %q: %v (%s), want %v", tc.to, d.Effect, d.Reason, tc.want)
		}
	}
}

func TestResultWithheld(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Rule{Name: "no-keys", On: OnResult, When: `result.text.contains("PRIVATE KEY")`, Effect: tool.Deny, Reason: "a private key"})
	r := filesTool("read_file", tool.Read, writeSchema)
	if d := p.Withhold(t.Context(), tool.PolicyCall{Tool: r, Args: nil}, tool.TextResult("-----BEGIN PRIVATE KEY-----")); d.Effect != tool.Deny {
		t.Errorf("key: %+v", d)
	}
	if d := p.Withhold(t.Context(), tool.PolicyCall{Tool: r, Args: nil}, tool.TextResult("hello")); d.Effect != tool.NoMatch {
		t.Errorf("hello: %+v", d)
	}
	if d := p.Decide(t.Context(), tool.PolicyCall{Tool: r, Args: nil}); d.Effect != tool.NoMatch {
		t.Errorf("a rule on results decided a call: %+v", d)
	}
}

func TestNewReportsEveryBadRule(t *testing.T) {
	t.Parallel()
	_, err := New([]Rule{
		{Name: "syntax", File: "f.yaml", WhenLine: 3, When: `args.path.startsWith(`, Effect: tool.Deny},
		{Name: "caller-typo", File: "f.yaml", WhenLine: 5, When: `caller.rol == "admin"`, Effect: tool.Deny},
		{Name: "not-bool", File: "f.yaml", WhenLine: 7, When: `caller.role`, Effect: tool.Deny},
		{Name: "ask-result", File: "f.yaml", Line: 8, On: OnResult, Effect: tool.Ask},
		{Name: "result-on-call", File: "f.yaml", WhenLine: 11, When: `result.isError`, Effect: tool.Deny},
		{Name: "syntax", File: "f.yaml", Line: 12, Effect: tool.Deny},
	})
	if err == nil {
		t.Fatal("New accepted bad rules")
	}
	msg := err.Error()
	for _, want := range []string{"f.yaml:3:", "f.yaml:5:", "rol", "f.yaml:7:", "not a bool", "f.yaml:8:", "f.yaml:11:", "f.yaml:12:", "another rule has this name"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
}
