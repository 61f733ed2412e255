package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/audit"
)

// An approval given at the prompt lets the same call run later without
// anyone to ask, within its scope and until it is revoked; a changed
// policy needs a new one.
func TestApprovalsLastWithinTheirScope(t *testing.T) {
	t.Parallel()
	f := newPinFixture(t, "  pins: off\n") // the approvals file is beside this test's pins file
	call := func(stdin string, terminal bool, body string) outcome {
		return f.run(t, stdin, terminal, "call", "demo__write_note", "title=kept", "body="+body)
	}
	call("", false, "one").expect(t, exitDeclined) // nobody to ask

	o := call("a\n", true, "one")
	o.expect(t, exitOK)
	m := regexp.MustCompile(`approval ([0-9a-f]{16}) kept until`).FindStringSubmatch(o.stderr)
	if !strings.Contains(o.stderr, "Answer a to also approve these arguments") || m == nil {
		t.Fatalf("the prompt did not offer or keep an approval:\n%s", o.stderr)
	}
	id := m[1]
	call("", false, "one").expect(t, exitOK)       // the same arguments: approved
	call("", false, "two").expect(t, exitDeclined) // other arguments: not

	var approvedBy []string
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev audit.Event
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == audit.ConfirmationAccepted && strings.HasPrefix(ev.Reason, "approval ") {
			approvedBy = append(approvedBy, ev.Reason)
		}
	}
	if len(approvedBy) != 1 || approvedBy[0] != "approval "+id {
		t.Errorf("confirmations by approval in the audit: %q, want one by %s", approvedBy, id)
	}

	o = f.run(t, "", false, "approvals", "list")
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, id) || !strings.Contains(o.stdout, "demo__write_note") || !strings.Contains(o.stdout, "these arguments") {
		t.Errorf("approvals list:\n%s", o.stdout)
	}
	f.run(t, "", false, "approvals", "revoke", id).expect(t, exitOK)
	call("", false, "one").expect(t, exitDeclined)
	f.run(t, "", false, "approvals", "revoke", id).expect(t, exitUsage)

	// This tool, any arguments; until the policy changes.
	call("t\n", true, "three").expect(t, exitOK)
	call("", false, "four").expect(t, exitOK)
	f.addPolicy(t, "policy:\n  rules:\n    - name: echo-runs\n      tools: [demo__echo]\n      decision: allow\n")
	call("", false, "four").expect(t, exitDeclined)
}

// approvals list and revoke need the store, not a configuration: like
// pins and auth status, they work where no configuration file is.
func TestApprovalsNeedNoConfiguration(t *testing.T) {
	t.Parallel()
	o := runIn(t, map[string]string{}, nil, "approvals", "list")
	o.expect(t, exitOK)
	mustContain(t, "stdout", o.stdout, "no approvals")
}
