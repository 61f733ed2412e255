package gateway

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// A call of a tool that the caller's role is not offered is refused
// before the executor, and audited with the caller and why, as the
// executor's own refusals are: call.requested, then its outcome.
func TestARefusedCallIsAuditedWithTheCaller(t *testing.T) {
	t.Parallel()
	f, url, mem := authServer(t)
	alice := connectAs(t, url, "alice-token")
	for _, name := range []string{"delete_file", "no_such_tool"} {
		if _, err := alice.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": "/x"}}); err == nil {
			t.Errorf("alice could call %s", name)
		}
	}
	if f.runs["delete_file"].Load() != 0 {
		t.Error("delete_file ran for alice")
	}
	type step struct{ kind, tool, caller, reason string }
	var got []step
	for _, ev := range mem.Events() {
		got = append(got, step{string(ev.Kind), ev.Tool, ev.Caller, ev.Reason})
	}
	want := []step{
		{string(audit.CallRequested), "delete_file", "alice", ""},
		{string(audit.CallRefused), "delete_file", "alice", string(tool.ReasonUnknownTool)},
		{string(audit.CallRequested), "no_such_tool", "alice", ""},
		{string(audit.CallRefused), "no_such_tool", "alice", string(tool.ReasonUnknownTool)},
	}
	if len(got) != len(want) {
		t.Fatalf("audit events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("audit event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A call that the approval policy denies is audited with the caller too.
func TestACallDeniedByPolicyIsAuditedWithTheCaller(t *testing.T) {
	t.Parallel()
	f, url, v, mem := bindingServer(t, ApprovalPolicy{Destructive: Deny})
	v.set("t", "tom", "admin")
	res := callTool(t, connectAs(t, url, "t"), "delete_file", map[string]any{"path": "/x"})
	if !res.IsError || f.runs["delete_file"].Load() != 0 {
		t.Fatalf("a denied call: isError=%v, ran %d times", res.IsError, f.runs["delete_file"].Load())
	}
	var rejected bool
	for _, ev := range mem.Events() {
		if ev.Caller != "tom" {
			t.Errorf("audit event %s of %s has caller %q, want tom", ev.Kind, ev.Tool, ev.Caller)
		}
		rejected = rejected || ev.Kind == audit.ConfirmationRejected && ev.Tool == "delete_file"
	}
	if !rejected {
		t.Errorf("no confirmation.rejected event for delete_file in %+v", mem.Events())
	}
}
