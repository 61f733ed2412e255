package tool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

func TestRefuseRecordsTheRequestAndItsOutcomeWithTheCaller(t *testing.T) {
	mem := &audit.Memory{}
	ex := tool.NewExecutor(tool.NewRegistry(nil), &tool.ExecutorOptions{Audit: audit.NewLog(mem, nil), LogArguments: true})
	ctx := tool.WithIdentity(context.Background(), "alice")
	res := ex.Refuse(ctx, tool.Call{Name: "files__wipe", Args: json.RawMessage(`{"path":"/"}`)}, "limited", "too many calls")
	if !res.IsError || res.Reason != "limited" || res.Message != "too many calls" {
		t.Errorf("result = %+v, want an error result with the reason and message", res)
	}
	evs := mem.Events()
	if len(evs) != 2 {
		t.Fatalf("%d events, want call.requested and call.refused: %+v", len(evs), evs)
	}
	req, out := evs[0], evs[1]
	if req.Kind != audit.CallRequested || string(req.Args) != `{"path":"/"}` || req.Caller != "alice" || req.Tool != "files__wipe" {
		t.Errorf("first event = %+v, want call.requested of files__wipe by alice with its arguments", req)
	}
	if out.Kind != audit.CallRefused || out.Reason != "limited" || out.Error != "too many calls" || out.Caller != "alice" || out.Batch != req.Batch || out.Args != nil {
		t.Errorf("second event = %+v, want call.refused by alice, in the request's batch, with the reason", out)
	}
}
