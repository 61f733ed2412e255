package tool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// What a confirmer notes about its yes is the reason of the call's
// confirmation.accepted event; a note made with a no is not recorded as
// an approval's, and a note outside a call does nothing.
func TestConfirmersNoteIsTheAcceptedEventsReason(t *testing.T) {
	t.Parallel()
	tool.NoteConfirmation(context.Background(), "nobody listens") // outside a call: no effect, no panic
	answer := true
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: tool.ConfirmFunc(func(ctx context.Context, _ tool.PendingCall) (bool, error) {
		tool.NoteConfirmation(ctx, "approval 5d1c by \"cli:ann\"")
		return answer, nil
	})})
	if err := reg.Register(&tool.Tool{Name: "rm", Tier: tool.Destructive, InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	ex, mem := newAuditedExecutor(reg, false)
	ex.Call(t.Context(), "rm", nil)
	answer = false
	ex.Call(t.Context(), "rm", nil)
	var got []audit.Event
	for _, ev := range mem.Events() {
		if ev.Kind == audit.ConfirmationAccepted || ev.Kind == audit.ConfirmationRejected {
			got = append(got, ev)
		}
	}
	if len(got) != 2 || got[0].Kind != audit.ConfirmationAccepted || got[0].Reason != `approval 5d1c by "cli:ann"` ||
		got[1].Kind != audit.ConfirmationRejected || got[1].Reason != string(tool.ReasonDeclined) {
		t.Fatalf("confirmation events: %+v", got)
	}
}
