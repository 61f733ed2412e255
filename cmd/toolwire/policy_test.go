package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/gateway"
)

// sharedNotesPolicy is the first example on the demo server,
// whose write_note names what it writes by its title: a note is written
// under /srv/shared only, however its title climbs; there, it is written
// without asking.
const sharedNotesPolicy = `policy:
  rules:
    - name: shared-only
      tools: [demo__write_note]
      when: '!within(args.title, "/srv/shared")'
      decision: deny
      reason: notes are written under /srv/shared only
    - name: shared-runs
      tools: [demo__write_note]
      decision: allow
`

// addPolicy appends a policy section to the fixture's configuration and
// returns the line its first line is on.
func (f *fixture) addPolicy(t *testing.T, section string) int {
	t.Helper()
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Count(string(raw), "\n") + 1
	if err := os.WriteFile(f.config, append(raw, section...), 0o600); err != nil {
		t.Fatal(err)
	}
	return line
}

// policyEvents returns the audit's policy.decided events.
func (f *fixture) policyEvents(t *testing.T) []audit.Event {
	t.Helper()
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev audit.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if ev.Kind == audit.PolicyDecided {
			out = append(out, ev)
		}
	}
	return out
}

func TestPolicyStopsAWriteOutsideSharedThroughCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.addPolicy(t, sharedNotesPolicy)

	o := f.run(t, "", false, "call", "demo__write_note", "title=/srv/shared/../../etc/cron.d/x", "body=evil")
	if o.code == exitOK {
		t.Fatalf("the write ran:\n%s%s", o.stdout, o.stderr)
	}
	out := o.stdout + o.stderr
	for _, want := range []string{"shared-only", "notes are written under /srv/shared only"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
	if titles := f.noteTitles(t); len(titles) != 0 {
		t.Errorf("notes written: %v", titles)
	}
	// Inside, the allow rule runs it without --yes and without a terminal
	// to ask on.
	f.run(t, "", false, "call", "demo__write_note", "title=/srv/shared/plan", "body=ok").expect(t, exitOK)
	if titles := f.noteTitles(t); !slices.Equal(titles, []string{"/srv/shared/plan"}) {
		t.Errorf("notes %v, want the one under /srv/shared", titles)
	}
	o = f.run(t, "", false, "config", "check", "--tools")
	o.expect(t, exitOK)
	for _, want := range []string{"rule shared-only (line ", "applies to   demo__write_note\n", `when         !within(args.title, "/srv/shared")`} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("config check --tools does not show %q:\n%s", want, o.stdout)
		}
	}
	evs := f.policyEvents(t)
	if len(evs) != 2 || evs[0].Rule != "shared-only" || evs[0].Reason != "deny" || evs[1].Rule != "shared-runs" || evs[1].Reason != "allow" {
		t.Errorf("policy events %+v, want shared-only deny then shared-runs allow", evs)
	}
}

func TestPolicyRuleNamingAMisspeltArgumentFailsAtLoad(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	at := f.addPolicy(t, `policy:
  rules:
    - name: shared-only
      tools: [demo__write_note]
      when: '!within(args.titel, "/srv/shared")'
      decision: deny
`)
	whenLine := at + 4
	for _, args := range [][]string{{"call", "demo__echo", "text=hi"}, {"tools"}, {"config", "check", "--tools"}} {
		o := f.run(t, "", false, args...)
		if o.code != exitUsage {
			t.Errorf("%v: exit status %d, want %d\n%s%s", args, o.code, exitUsage, o.stdout, o.stderr)
			continue
		}
		for _, want := range []string{"toolwire.yaml:" + itoa(whenLine) + ":", `"shared-only"`, "titel", "demo__write_note"} {
			if !strings.Contains(o.stderr, want) {
				t.Errorf("%v: error does not say %q:\n%s", args, want, o.stderr)
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestPolicyStopsAWriteOutsideSharedThroughTheGateway(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.addPolicy(t, sharedNotesPolicy)
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0")
	cs := connectHTTP(t, s.url, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(title string) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": title, "body": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call("/srv/shared/..")
	if !res.IsError || !strings.Contains(resultText(res), "notes are written under /srv/shared only") || !strings.Contains(resultText(res), "shared-only") {
		t.Errorf("outside: %+v, want refused with the rule and its reason", resultText(res))
	}
	if res := call("/srv/shared/a"); res.IsError {
		t.Errorf("inside: %s", resultText(res))
	}
	if titles := f.noteTitles(t); !slices.Equal(titles, []string{"/srv/shared/a"}) {
		t.Errorf("notes %v, want the one under /srv/shared", titles)
	}
}

// Through the gateway, a rule sees the caller's role: only admin deletes.
// And a rule that asks about a call has a person asked even where the
// gateway's approvals allow the tier without asking: a client that
// cannot be asked has the call refused, not run.
func TestPolicySeesTheGatewayCallersRoleAndItsAskIsNotApprovedByTier(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	adminToken, devToken := "admin-token-of-the-policy-test", "dev-token-of-the-policy-test"
	f.addPolicy(t, `gateway:
  approvals:
    write: allow
    destructive: allow
    operatorWait: 0s # refused at once, not after waiting for an operator
  roles:
    admin: ["*"]
    dev: ["*"]
  tokens:
    - sha256: `+gateway.HashToken(adminToken)+`
      subject: ann
      role: admin
    - sha256: `+gateway.HashToken(devToken)+`
      subject: bob
      role: dev
policy:
  rules:
    - name: admins-destroy
      tiers: [destructive]
      when: caller.role != "admin" || caller.credential != "static"
      decision: deny
      reason: destructive tools are for admins
    - name: drafts-ask
      tools: [demo__write_note]
      when: args.title.startsWith("draft/")
      decision: ask
`)
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(token, name string, args map[string]any) *mcp.CallToolResult {
		cs := connectHTTP(t, s.url, token, nil)
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	call(adminToken, "demo__write_note", map[string]any{"title": "a", "body": "x"})
	call(adminToken, "demo__write_note", map[string]any{"title": "b", "body": "x"})
	if res := call(devToken, "demo__delete_note", map[string]any{"title": "a"}); !res.IsError || !strings.Contains(resultText(res), "destructive tools are for admins") {
		t.Errorf("dev's delete: %s, want refused by admins-destroy", resultText(res))
	}
	if res := call(adminToken, "demo__delete_note", map[string]any{"title": "b"}); res.IsError {
		t.Errorf("admin's delete: %s", resultText(res))
	}
	if res := call(adminToken, "demo__write_note", map[string]any{"title": "draft/c", "body": "x"}); !res.IsError {
		t.Errorf("a write the rule asks about ran without anyone asked: %s", resultText(res))
	}
	titles := f.noteTitles(t)
	slices.Sort(titles)
	if !slices.Equal(titles, []string{"a"}) {
		t.Errorf("notes %v, want a (b deleted by admin, a kept from dev, draft/c never written)", titles)
	}
}

// A rule sees the tool's pin state: with pins: warn, a tool whose
// definition changed since it was approved is let in, and a rule can
// still refuse to call it.
func TestPolicySeesTheToolsPinState(t *testing.T) {
	t.Parallel()
	f := newPinFixture(t, "  pins: warn\n")
	f.addPolicy(t, `policy:
  rules:
    - name: approved-only
      when: tool.pin != "approved"
      decision: deny
      reason: the tool changed since it was approved
`)
	f.run(t, "", false, "call", "demo__echo", "text=first").expect(t, exitOK) // pinned on first use
	f.setEchoDescription(t, "Echoes, and now also something else.")
	o := f.run(t, "", false, "call", "demo__echo", "text=second")
	if o.code == exitOK || !strings.Contains(o.stdout+o.stderr, "the tool changed since it was approved") {
		t.Errorf("a changed tool was called, or not refused by the rule (exit %d):\n%s%s", o.code, o.stdout, o.stderr)
	}
	f.run(t, "", false, "call", "demo__add", "a=1", "b=2").expect(t, exitOK) // unchanged
}

// config check --json carries each rule, and with --tools the tools it
// applies to.
func TestConfigCheckJSONShowsTheRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	at := f.addPolicy(t, sharedNotesPolicy)
	for _, withTools := range []bool{false, true} {
		args := []string{"config", "check", "--json"}
		if withTools {
			args = append(args, "--tools")
		}
		o := f.run(t, "", false, args...)
		o.expect(t, exitOK)
		var r configReport
		if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
			t.Fatalf("%s: %v", o.stdout, err)
		}
		if r.Policy == nil || len(r.Policy.Rules) != 2 || r.Policy.Checked != withTools {
			t.Fatalf("--tools %v: policy %+v", withTools, r.Policy)
		}
		first := r.Policy.Rules[0]
		if first.Name != "shared-only" || first.Line != at+2 || first.Decision != "deny" || first.Reason != "notes are written under /srv/shared only" {
			t.Errorf("first rule %+v", first)
		}
		wantTools := []string(nil)
		if withTools {
			wantTools = []string{"demo__write_note"}
		}
		if !slices.Equal(first.Tools, wantTools) {
			t.Errorf("--tools %v: applies to %v, want %v", withTools, first.Tools, wantTools)
		}
	}
}

// A rule naming a server the configuration does not have would never
// match: it is an error naming the rule's line.
func TestPolicyRuleNamingAnUnknownServerIsAnError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	at := f.addPolicy(t, "policy:\n  rules:\n    - name: typo\n      servers: [dmeo]\n      decision: deny\n")
	o := f.run(t, "", false, "config", "check")
	o.expect(t, exitUsage)
	if want := "toolwire.yaml:" + itoa(at+2) + `: policy rule "typo": servers: no server "dmeo" is configured`; !strings.Contains(o.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, o.stderr)
	}
}
