package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds and defaults of the slow_count arguments, mirrored in its schema.
const (
	defaultSteps      = 5
	maxSteps          = 100
	defaultIntervalMS = 500
	maxIntervalMS     = 10000
	maxWaitCancelled  = 1000000
)

// notifyProgress sends a progress notification for req if the client asked
// for progress by supplying a token. A failed notification is only logged:
// progress is advisory, and a dead session also ends ctx, which the caller
// notices on its own.
func (ts *toolset) notifyProgress(ctx context.Context, req *mcp.CallToolRequest, progress, total float64, message string) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return
	}
	err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: token,
		Progress:      progress,
		Total:         total,
		Message:       message,
	})
	if err != nil && ctx.Err() == nil {
		ts.log.Warn("sending progress notification", "tool", req.Params.Name, "error", err)
	}
}

// slowCount implements the slow_count tool.
func (ts *toolset) slowCount(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Steps      *float64 `json:"steps"`
		IntervalMS *float64 `json:"interval_ms"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(err), nil
	}
	steps, err := optionalInt("steps", args.Steps, defaultSteps, 1, maxSteps)
	if err != nil {
		return errorResult(err), nil
	}
	intervalMS, err := optionalInt("interval_ms", args.IntervalMS, defaultIntervalMS, 1, maxIntervalMS)
	if err != nil {
		return errorResult(err), nil
	}
	interval := time.Duration(intervalMS) * time.Millisecond

	timer := time.NewTimer(interval)
	defer timer.Stop()
	for step := 1; step <= steps; step++ {
		select {
		case <-ctx.Done():
			ts.st.countCancelled()
			return nil, ctx.Err()
		case <-timer.C:
		}
		ts.notifyProgress(ctx, req, float64(step), float64(steps), fmt.Sprintf("step %d of %d", step, steps))
		timer.Reset(interval)
	}
	return textResult(fmt.Sprintf("counted to %d", steps)), nil
}

// waitForCancel implements the wait_for_cancel tool. The SDK ends ctx when
// the client cancels the call or the session closes, so waiting on ctx alone
// cannot leak the handler.
func (ts *toolset) waitForCancel(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := noArgs(req); err != nil {
		return errorResult(err), nil
	}
	// The notification tells a client that the call has reached the handler,
	// so it can cancel without racing the request's delivery.
	ts.notifyProgress(ctx, req, 0, 0, "waiting for cancellation")
	<-ctx.Done()
	ts.st.countCancelled()
	return nil, ctx.Err()
}

// statsOutput is the structured content of the stats tool.
type statsOutput struct {
	Calls     int `json:"calls"`
	Cancelled int `json:"cancelled"`
}

// stats implements the stats tool.
func (ts *toolset) stats(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		WaitForCancelled *float64 `json:"wait_for_cancelled"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(err), nil
	}
	want, err := optionalInt("wait_for_cancelled", args.WaitForCancelled, 0, 0, maxWaitCancelled)
	if err != nil {
		return errorResult(err), nil
	}
	if want > 0 {
		if err := ts.st.waitCancelled(ctx, want); err != nil {
			return nil, err
		}
	}
	calls, cancelled := ts.st.counters()
	return structuredResult(statsOutput{Calls: calls, Cancelled: cancelled})
}
