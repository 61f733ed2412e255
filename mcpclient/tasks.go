package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// Tasks: a server may run a tool call as a task, which the client polls
// for its status and result. Two designs exist: MCP 2025-11-25's
// (experimental; the client asks for a task with a "task" field on
// tools/call, a tool says in its listing whether it needs one, and
// tasks/get, tasks/result and tasks/cancel follow), and 2026-07-28's tasks
// extension (SEP-2663: the client declares the extension on the request,
// the server decides, and tasks/get, tasks/update and tasks/cancel
// follow). go-sdk v1.8.0 has neither: its types drop a tool's "execution",
// the server's "tasks" capability and a result's task, and it will not
// send a tools/call it did not build (docs/protocol.md#client). So a tool
// that needs a task is called here, on the raw path (raw.go), and polled;
// its caller sees an ordinary call that returns the final result, which
// both designs allow, with the task's status messages as progress.
//
// Which tools need a task is learned from the server's refusal of a plain
// call: under 2025-11-25 a "method not found" (-32601) error or, as the
// TypeScript SDK answers, an error result saying the tool "requires task
// augmentation", confirmed by the tool's execution.taskSupport in a raw
// listing (the refusal alone could be a tool's own error text, and the
// call would then run twice); under 2026-07-28 a "missing capability"
// (-32021) error naming the tasks extension, which the server sends before
// running anything. The listing is kept for the connection's life.

const (
	// tasksExtension is the 2026-07-28 tasks extension's identifier.
	tasksExtension = "io.modelcontextprotocol/tasks"
	// relatedTaskKey is the _meta key by which a 2025-11-25 server ties a
	// request it makes (an elicitation) to a task.
	relatedTaskKey = "io.modelcontextprotocol/related-task"
	// codeMissingCapability is 2026-07-28's error for a request that needs
	// a capability the client did not declare.
	codeMissingCapability = -32021
	// taskRefusalText is how the TypeScript SDK's servers refuse a plain
	// call of a tool that requires a task, in an error result.
	taskRefusalText = "requires task augmentation"
)

// Poll intervals are the server's suggestion, within these bounds.
const (
	minPollInterval     = 50 * time.Millisecond
	maxPollInterval     = 5 * time.Second
	defaultPollInterval = time.Second
)

// taskEra says which design a task call follows.
type taskEra int

const (
	noTask    taskEra = iota
	tasks2025         // 2025-11-25's experimental tasks
	tasks2026         // 2026-07-28's tasks extension
)

// taskTools is what a connection learned of the tools that need a task.
type taskTools struct {
	mu  sync.Mutex
	era map[string]taskEra // the tools known to need a task, by their own name

	listMu   sync.Mutex      // held while the raw listing is read
	listed   bool            // the raw listing was read
	required map[string]bool // what it says needs a task
}

// needs returns the design a tool's calls are known to need, or noTask.
func (tt *taskTools) needs(name string) taskEra {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.era[name]
}

func (tt *taskTools) note(name string, era taskEra) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.era == nil {
		tt.era = map[string]taskEra{}
	}
	tt.era[name] = era
}

// registerTaskMethods lets a client send the task methods go-sdk does not
// know, through its custom-method API.
func registerTaskMethods(client *mcp.Client) error {
	return errors.Join(
		mcp.AddSendingCustomMethod[*taskParams, *taskState](client, "tasks/get"),
		mcp.AddSendingCustomMethod[*taskParams, *mcp.CallToolResult](client, "tasks/result"),
		mcp.AddSendingCustomMethod[*taskParams, *taskState](client, "tasks/cancel"),
	)
}

// taskParams are the parameters of tasks/get, tasks/result, tasks/update
// and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string          `json:"taskId"`
	RequestState   string          `json:"requestState,omitempty"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}

// taskState is a task as tasks/get describes it, in either design (the
// 2026 extension's drafts have named the poll interval three ways).
type taskState struct {
	mcp.ResultBase
	ResultType     string `json:"resultType,omitempty"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	PollInterval   *int64 `json:"pollInterval,omitempty"`
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
	PollIntervalMS *int64 `json:"pollIntervalMilliseconds,omitempty"`
	RequestState   string `json:"requestState,omitempty"`
	// The 2026 extension inlines what the status brings.
	InputRequests mcp.InputRequestMap `json:"inputRequests,omitempty"`
	Result        json.RawMessage     `json:"result,omitempty"`
	Error         *jsonrpc.Error      `json:"error,omitempty"`
}

func (t *taskState) interval() time.Duration {
	for _, ms := range []*int64{t.PollInterval, t.PollIntervalMs, t.PollIntervalMS} {
		if ms != nil && *ms > 0 {
			return min(max(time.Duration(*ms)*time.Millisecond, minPollInterval), maxPollInterval)
		}
	}
	return defaultPollInterval
}

func (t *taskState) terminal() bool {
	switch t.Status {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

// taskNeeded says whether a plain call's outcome is the server's refusal
// of a tool that needs a task, and in which design; a 2025-11-25 refusal
// is confirmed against the server's own listing first.
func (s *Server) taskNeeded(ctx context.Context, c *conn, name string, r *mcp.CallToolResult, err error) taskEra {
	var we *jsonrpc.Error
	switch {
	case errors.As(err, &we) && we.Code == codeMissingCapability && strings.Contains(string(we.Data), tasksExtension):
		if stateless(c.protocol) {
			return tasks2026
		}
	case errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound,
		err == nil && r != nil && r.IsError && strings.Contains(resultText(r), taskRefusalText):
		if !stateless(c.protocol) && s.listedAsRequired(ctx, c, name) {
			return tasks2025
		}
	}
	return noTask
}

// resultText is the text of a result's text blocks.
func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// listedAsRequired reports whether the server's listing says that the tool
// name requires a task (execution.taskSupport), reading the listing on the
// raw path the first time it is needed.
func (s *Server) listedAsRequired(ctx context.Context, c *conn, name string) bool {
	if c.caller != nil {
		// A listing goes with the operator's identity, on the shared
		// connection, never a caller's.
		if c = s.sup.current(); c == nil {
			return false
		}
	}
	tt := &c.tasks
	tt.listMu.Lock()
	defer tt.listMu.Unlock()
	if !tt.listed {
		required, err := s.rawListing(ctx, c)
		if err != nil {
			s.set.logger.Warn("could not read the raw tool listing to learn which tools need a task", "server", s.set.cfg.Name, "error", s.set.secrets.String(err.Error()))
			return false
		}
		tt.listed, tt.required = true, required
	}
	return tt.required[name]
}

// rawListing lists the server's tools on the raw path and returns those
// whose execution.taskSupport is "required".
func (s *Server) rawListing(ctx context.Context, c *conn) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.set.timeout)
	defer cancel()
	required := map[string]bool{}
	cursor := ""
	for range 1000 {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := c.rawCall(ctx, "tools/list", "", params, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range page.Tools {
			if t.Execution.TaskSupport == "required" {
				required[t.Name] = true
			}
		}
		if page.NextCursor == "" {
			return required, nil
		}
		cursor = page.NextCursor
	}
	return nil, errors.New("tools/list: too many pages")
}

// callTask calls the tool name as a task of the given design and waits for
// its result, under the server's timeout within ctx. The call counts as in
// flight, with a progress token valid for the task's life; a request the
// server makes about the task (an elicitation naming it, or the 2026
// extension's input requests) goes to the call's caller; a status message
// that changes is reported as progress. When ctx ends first, the task is
// cancelled (tasks/cancel) and the call ends with ctx's error.
func (s *Server) callTask(ctx context.Context, c *conn, name string, args json.RawMessage, era taskEra) (*tool.Result, error) {
	pt := &mcp.CallToolParams{Name: name}
	callCtx, end := c.relay.beginCall(ctx, pt)
	defer end()
	cctx, cancel := context.WithTimeout(callCtx, s.set.timeout)
	defer cancel()
	what := fmt.Sprintf("call %q as a task", name)

	meta := map[string]any{}
	if era == tasks2026 {
		meta = s.sup.dial.requestMeta(c, tasksExtension)
	}
	if token := pt.GetProgressToken(); token != nil {
		meta["progressToken"] = token
	}
	params := map[string]any{"name": name, "arguments": json.RawMessage(args)}
	if len(args) == 0 {
		params["arguments"] = map[string]any{}
	}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	if era == tasks2025 {
		params["task"] = map[string]any{"ttl": s.set.timeout.Milliseconds()}
	}
	raw, err := c.rawCall(cctx, "tools/call", name, params, c.relay.onRawNotification)
	if err != nil {
		return nil, s.set.requestError(ctx, cctx, what, authorizationOf(err))
	}
	task, done, err := createdTask(raw, era)
	if err != nil {
		return nil, s.set.requestError(ctx, cctx, what, err)
	}
	if done != nil {
		return convertResult(done), nil // the server chose to answer at once
	}
	if ut := tool.UpstreamTaskFrom(ctx); ut != nil && ut.Started != nil {
		ut.Started(s.set.cfg.Name, task.TaskID)
	}
	return s.awaitTask(ctx, callCtx, cctx, c, task, era, what)
}

// awaitTask drives task, which the server runs for a call begun as
// callCtx (cctx: the same under the server's timeout), to its result; it
// cancels the task when cctx ends first. what names the call in an error.
func (s *Server) awaitTask(ctx, callCtx, cctx context.Context, c *conn, task *taskState, era taskEra, what string) (*tool.Result, error) {
	defer c.relay.followTask(task.TaskID, callCtx)()
	r, err := s.driveTask(cctx, c, task, era)
	if err != nil && cctx.Err() != nil {
		s.cancelTask(c, task, era)
	}
	c.relay.catchUp(cctx)
	if err != nil {
		return nil, s.set.requestError(ctx, cctx, what, authorizationOf(err))
	}
	return convertResult(r), nil
}

// resumeTask follows the task id that the server already runs for a call
// of the tool name (started through another connection, by a process
// that is gone) to its result, in the design of the connection's
// revision, as callTask does after starting one.
func (s *Server) resumeTask(ctx context.Context, c *conn, name, id string) (*tool.Result, error) {
	era := tasks2025
	if stateless(c.protocol) {
		era = tasks2026
	}
	pt := &mcp.CallToolParams{Name: name}
	callCtx, end := c.relay.beginCall(ctx, pt)
	defer end()
	cctx, cancel := context.WithTimeout(callCtx, s.set.timeout)
	defer cancel()
	task := &taskState{TaskID: id, Status: "working"}
	return s.awaitTask(ctx, callCtx, cctx, c, task, era, fmt.Sprintf("follow the task %q of a call of %q", id, name))
}

// createdTask reads tools/call's answer: a task, or (under the 2026
// extension, where the server decides) the final result.
func createdTask(raw json.RawMessage, era taskEra) (*taskState, *mcp.CallToolResult, error) {
	if era == tasks2025 {
		var created struct {
			Task *taskState `json:"task"`
		}
		if err := json.Unmarshal(raw, &created); err != nil {
			return nil, nil, err
		}
		if created.Task == nil || created.Task.TaskID == "" {
			return nil, nil, errors.New("the server answered a task-augmented call without a task")
		}
		return created.Task, nil, nil
	}
	var kind struct {
		ResultType string `json:"resultType"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return nil, nil, err
	}
	if kind.ResultType != "task" {
		var r mcp.CallToolResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, nil, err
		}
		return nil, &r, nil
	}
	var task taskState
	if err := json.Unmarshal(raw, &task); err != nil {
		return nil, nil, err
	}
	if task.TaskID == "" {
		return nil, nil, errors.New("the server answered with a task without an id")
	}
	return &task, nil, nil
}

// driveTask polls the task until its result is in. Under 2025-11-25 the
// result comes from tasks/result, which blocks until the task is done and
// on whose stream the server asks what it needs; it is called once the task
// is done or needs input, while polling goes on for the status messages.
// Under the 2026 extension, tasks/get carries the input requests (answered
// with tasks/update) and the result.
func (s *Server) driveTask(ctx context.Context, c *conn, task *taskState, era taskEra) (*mcp.CallToolResult, error) {
	type outcome struct {
		r   *mcp.CallToolResult
		err error
	}
	var result chan outcome // tasks/result's, once asked (2025)
	answered := map[string]bool{}
	reports := 0
	lastMessage := ""
	report := func(t *taskState) {
		if t.StatusMessage == "" || t.StatusMessage == lastMessage {
			return
		}
		lastMessage = t.StatusMessage
		reports++
		c.relay.taskProgress(ctx, tool.Progress{Progress: float64(reports), Message: t.StatusMessage})
	}
	state := task
	for {
		report(state)
		switch {
		case era == tasks2025 && result == nil && (state.terminal() || state.Status == "input_required"):
			result = make(chan outcome, 1)
			go func() {
				r, err := mcp.CallCustomMethod[*taskParams, *mcp.CallToolResult](ctx, c.session, "tasks/result", &taskParams{TaskID: task.TaskID})
				result <- outcome{r, err}
			}()
		case era == tasks2026 && state.terminal():
			return finishedTask(state)
		case era == tasks2026 && state.Status == "input_required":
			if err := s.answerTask(ctx, c, state, answered); err != nil {
				return nil, err
			}
		}
		timer := time.NewTimer(state.interval())
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case o := <-result:
			timer.Stop()
			return o.r, o.err
		case <-timer.C:
		}
		next, err := s.getTask(ctx, c, state, era)
		if err != nil {
			return nil, err
		}
		// The latest state's requestState goes with the next request, or
		// none if it has none (SEP-2663).
		state = next
	}
}

// getTask asks for the task's state: through go-sdk's custom methods under
// 2025-11-25; on the raw path under the 2026 extension, whose requests
// carry the task's id as their Mcp-Name over HTTP (go-sdk sets that header
// only for the methods it knows).
func (s *Server) getTask(ctx context.Context, c *conn, task *taskState, era taskEra) (*taskState, error) {
	if era == tasks2025 {
		return mcp.CallCustomMethod[*taskParams, *taskState](ctx, c.session, "tasks/get", &taskParams{TaskID: task.TaskID})
	}
	raw, err := c.rawCall(ctx, "tasks/get", task.TaskID, s.taskRequest(c, task, nil), c.relay.onRawNotification)
	if err != nil {
		return nil, err
	}
	var next taskState
	if err := json.Unmarshal(raw, &next); err != nil {
		return nil, fmt.Errorf("tasks/get: %w", err)
	}
	if next.TaskID == "" {
		next.TaskID = task.TaskID
	}
	return &next, nil
}

// taskRequest returns the parameters of a 2026 extension's tasks/*
// request about task.
func (s *Server) taskRequest(c *conn, task *taskState, responses map[string]any) map[string]any {
	p := map[string]any{"taskId": task.TaskID, "_meta": s.sup.dial.requestMeta(c, tasksExtension)}
	if task.RequestState != "" {
		p["requestState"] = task.RequestState
	}
	if responses != nil {
		p["inputResponses"] = responses
	}
	return p
}

// answerTask answers the input requests of a 2026 task not answered yet,
// through the call's caller, and sends the answers with tasks/update.
func (s *Server) answerTask(ctx context.Context, c *conn, task *taskState, answered map[string]bool) error {
	responses := map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(task.InputRequests)) {
		if answered[key] {
			continue
		}
		answer, err := s.fulfil(ctx, c, task.InputRequests[key])
		if err != nil {
			return fmt.Errorf("input request %q of task %s: %w", key, task.TaskID, err)
		}
		responses[key] = answer
		answered[key] = true
	}
	if len(responses) == 0 {
		return nil
	}
	_, err := c.rawCall(ctx, "tasks/update", task.TaskID, s.taskRequest(c, task, responses), c.relay.onRawNotification)
	return err
}

// fulfil answers one input request of a task: elicitation and sampling
// through the call's caller (ctx names the call), roots from the server's
// configuration.
func (s *Server) fulfil(ctx context.Context, c *conn, req mcp.InputRequest) (any, error) {
	switch p := req.(type) {
	case *mcp.ElicitParams:
		var res mcp.ElicitResult
		err := c.relay.ask(ctx, tool.Elicitation, p, &res)
		return &res, err
	case *mcp.CreateMessageWithToolsParams, *mcp.CreateMessageParams:
		var res json.RawMessage
		err := c.relay.ask(ctx, tool.Sampling, p, &res)
		return res, err
	case *mcp.ListRootsParams:
		roots, err := s.sup.dial.expand()
		if err != nil {
			return nil, err
		}
		return &mcp.ListRootsResult{Roots: rootsOf(roots)}, nil
	}
	return nil, fmt.Errorf("unknown input request %T", req)
}

// finishedTask is the outcome of a 2026 task in a terminal state.
func finishedTask(t *taskState) (*mcp.CallToolResult, error) {
	switch t.Status {
	case "completed":
		var r mcp.CallToolResult
		if err := json.Unmarshal(t.Result, &r); err != nil {
			return nil, fmt.Errorf("the task's result: %w", err)
		}
		return &r, nil
	case "failed":
		if t.Error != nil {
			return nil, t.Error
		}
		return nil, fmt.Errorf("the task failed: %s", t.StatusMessage)
	}
	return nil, fmt.Errorf("the server cancelled the task: %s", t.StatusMessage)
}

// cancelTask asks the server to cancel a task whose call was cancelled or
// timed out, bounded on its own: the call's context has ended.
func (s *Server) cancelTask(c *conn, task *taskState, era taskEra) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	var err error
	if era == tasks2025 {
		_, err = mcp.CallCustomMethod[*taskParams, *taskState](ctx, c.session, "tasks/cancel", &taskParams{TaskID: task.TaskID})
	} else {
		_, err = c.rawCall(ctx, "tasks/cancel", task.TaskID, s.taskRequest(c, task, nil), nil)
	}
	if err != nil {
		s.set.logger.Warn("could not cancel a task", "server", s.set.cfg.Name, "task", task.TaskID, "error", s.set.secrets.String(err.Error()))
	}
}
