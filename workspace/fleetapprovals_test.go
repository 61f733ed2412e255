package workspace_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/pgtest"
)

// An approval of scope session, given at a 2025 session's form on one
// replica, covers that session's later calls of the tool on another
// replica (the session's copy there), whatever their arguments; when the
// session ends, its record deleted, every replica's store forgets it.
func TestFleetSessionApprovalLastsAsLongAsItsSession(t *testing.T) {
	t.Parallel()
	replicas := openFleet(t, pgtest.DB(t), 2, gateway.Limits{})
	var asked atomic.Int32
	next := 0
	s := &steer{replicas: replicas, token: "alice-token", pick: func(string) int { return next }}
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-2025", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "scope": "session"}}, nil
		},
	}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: replicas[0].url + "/mcp", HTTPClient: &http.Client{Transport: s}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	write := func(title string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": title, "body": "b"}})
		if err != nil || res.IsError {
			t.Fatalf("write_note %s: %v %+v", title, err, res)
		}
	}
	write("one")
	next = 1 // the same session, served by the other replica
	write("two")
	if asked.Load() != 1 {
		t.Fatalf("asked %d times; the session approval should have covered the second call", asked.Load())
	}
	grants, err := replicas[1].w.Approvals().List(ctx)
	if err != nil || len(grants) != 1 || grants[0].Scope != approval.Session || grants[0].Session == "" {
		t.Fatalf("approvals: %+v, %v", grants, err)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		grants, err = replicas[0].w.Approvals().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(grants) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the ended session's approval is still kept: %+v", grants)
		case <-time.After(50 * time.Millisecond): // the deletion's notification is on its way
		}
	}
}
