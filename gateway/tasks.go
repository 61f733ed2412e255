package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/task"
	"github.com/toolwire/toolwire/tool"
)

// Tasks through the gateway (MCP 2025-11-25, basic/utilities/tasks): a
// client that asks for a task on a tools/call is answered at once with the
// task, once its record is durable in [Options].Tasks; the call runs in
// the background, through the same middleware and executor as any call
// (visibility, limits, validation, approval, audit), and its outcome goes
// into the record. tasks/get, tasks/result, tasks/list and tasks/cancel
// are answered from the store, so any replica of a fleet answers them,
// and only for the caller who created the task (callerName: credential
// kind, issuer, subject); another's task, an unknown id and an expired
// one are the same "not found".
//
// go-sdk v1.8.0 drops a tools/call's "task" field, and has neither the
// server's tasks capability nor a tool's execution (docs/protocol.md), so
// three pieces work around it:
//
//  1. taskBodies, in front of the HTTP handlers, moves a tools/call's
//     "task" into its _meta under a key of this process's (taskKey)
//     that no client can know, before go-sdk decodes the request;
//  2. taskCalls, receiving middleware inside the gateway's own, finds it
//     there and starts the task; it also hands the caller to the task
//     methods, which go-sdk gives no request to;
//  3. taskAdvert, the outermost middleware, adds the tasks capability to
//     an initialize's result and execution.taskSupport to the tools of a
//     listing, for a session of 2025-11-25 over HTTP.
//
// Every tool is offered with taskSupport "optional": the gateway holds
// each call itself (or polls its upstream's task), so any call can be a
// task, and none needs to be. Tasks are offered over HTTP only (a stdio
// client has one process to talk to, which ends with it).

// taskPollInterval is the poll interval the gateway suggests.
const taskPollInterval = 500 * time.Millisecond

// maxTasksRunning bounds the tasks one caller runs at once on one
// replica; a call beyond is refused (2025-11-25 asks receivers to limit
// concurrent tasks per requestor).
const maxTasksRunning = 32

// relatedTaskKey is the _meta key that ties a message to a task.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// taskRunner runs a gateway's tasks and knows the ones this process runs.
type taskRunner struct {
	st  *task.Store
	key string // the _meta key taskBodies moves "task" to
	// resume follows the upstream task of a task adopted from a lost
	// replica to its result (Gateway.resumeTask).
	resume func(ctx context.Context, r *task.Record) (mcp.Result, error)

	// audit records what becomes of a task adopted from a lost replica
	// (task.adopted, task.ended); nil: nowhere. Set by Handler before
	// anything is served.
	audit *audit.Log

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc // by task id
	byOwner map[string]int
	wg      sync.WaitGroup
}

func newTaskRunner(st *task.Store) *taskRunner {
	if st == nil {
		return nil
	}
	return &taskRunner{
		st: st, key: "io.toolwire/task-" + rand.Text(),
		running: map[string]context.CancelCauseFunc{}, byOwner: map[string]int{},
	}
}

// taskBodies moves the "task" of a tools/call in a POST's body into its
// _meta under tr.key (see the top of this file). Only a single request
// (not a batch) that names tools/call and has "task" is decoded; any
// other body, and one over limit bytes, goes on as it came.
//
// It also carries a 2025 session's task methods past go-sdk's transport,
// which refuses a method it does not know when, as in the gateway's own
// session layer, it was connected without go-sdk's handler: such a
// request goes on as a ping whose _meta holds the method and its
// parameters, and taskCalls answers it (through all the middleware a
// session's request passes: the session's binding, the limits).
func (tr *taskRunner) taskBodies(next http.Handler, limit int64) http.Handler {
	if tr == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		body, complete := peek(r, limit)
		if !complete {
			next.ServeHTTP(w, r)
			return
		}
		taskMethod := bytes.Contains(body, []byte(`"tasks/`))
		if taskMethod && modern(r.Header.Get(protocolHeader)) {
			if id, method, problem := routedTask(r, body); problem != "" {
				writeRPCError(w, http.StatusBadRequest, id, mcp.CodeHeaderMismatch, problem+" ("+method+" is routed by its task's id: SEP-2663)")
				return
			}
		}
		var moved []byte
		ok := false
		switch {
		case bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"task"`)):
			moved, ok = tr.moveTask(body)
		case taskMethod && r.Header.Get(sessionHeader) != "":
			moved, ok = tr.asPing(body)
		}
		if ok {
			r.Body = &replayed{Reader: bytes.NewReader(moved), Closer: r.Body}
			r.ContentLength = int64(len(moved))
			r.Header.Set("Content-Length", strconv.Itoa(len(moved)))
		}
		next.ServeHTTP(w, r)
	})
}

// routedTask checks that a 2026-07-28 request of a task method names its
// task in the Mcp-Name header, as the tasks extension requires, so that a
// load balancer routing by the header routes what the body is about. It
// returns the problem ("" when there is none, or body is no such request).
func routedTask(r *http.Request, body []byte) (id json.RawMessage, method, problem string) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID any `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || !taskMethods2026[msg.Method] {
		return nil, "", ""
	}
	taskID, _ := msg.Params.TaskID.(string)
	switch got := r.Header.Get("Mcp-Name"); {
	case got == "":
		return msg.ID, msg.Method, "missing required Mcp-Name header"
	case got != taskID:
		return msg.ID, msg.Method, "header mismatch: the Mcp-Name header is not the body's taskId"
	}
	return nil, "", ""
}

// taskMethods2026 are the methods of 2026-07-28's tasks extension.
var taskMethods2026 = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// writeRPCError answers an HTTP request with a JSON-RPC error.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// asPing returns body, a request of a task method, as a ping carrying it
// in its _meta under tr.key, or false when body is no such request.
func (tr *taskRunner) asPing(body []byte) ([]byte, bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return nil, false
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || !taskMethods[method] || msg["id"] == nil {
		return nil, false
	}
	params := msg["params"]
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	carried, err := json.Marshal(map[string]any{"_meta": map[string]any{tr.key: map[string]json.RawMessage{
		"method": msg["method"], "params": params,
	}}})
	if err != nil {
		return nil, false
	}
	msg["method"], msg["params"] = json.RawMessage(`"ping"`), carried
	out, err := json.Marshal(msg)
	return out, err == nil
}

// taskMethods are the methods of 2025-11-25's tasks.
var taskMethods = map[string]bool{"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true}

// moveTask returns body with params.task moved to params._meta[tr.key],
// or false when body is not a tools/call with a task.
func (tr *taskRunner) moveTask(body []byte) ([]byte, bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return nil, false
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || method != "tools/call" {
		return nil, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return nil, false
	}
	t, ok := params["task"]
	if !ok || bytes.Equal(bytes.TrimSpace(t), []byte("null")) {
		return nil, false
	}
	delete(params, "task")
	if setIn(params, t, "_meta", tr.key) != nil {
		return nil, false // go-sdk refuses the _meta as it is
	}
	var err error
	if msg["params"], err = json.Marshal(params); err != nil {
		return nil, false
	}
	out, err := json.Marshal(msg)
	return out, err == nil
}

// taskAsk is what a client asked for in a tools/call's "task".
type taskAsk struct {
	TTL *float64 `json:"ttl"`
}

// parseTaskAsk reads the task a client asked for (as moved into _meta,
// decoded by go-sdk), or returns what is wrong with it.
func parseTaskAsk(v any) (time.Duration, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	if len(raw) == 0 || raw[0] != '{' {
		return 0, errors.New(`"task" must be an object, such as {"ttl": 60000}`)
	}
	var a taskAsk
	if err := json.Unmarshal(raw, &a); err != nil {
		return 0, errors.New(`"task.ttl" must be a number of milliseconds`)
	}
	if a.TTL == nil {
		return 0, nil
	}
	ttl := *a.TTL
	if ttl < 0 || math.IsNaN(ttl) || ttl > float64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, fmt.Errorf(`"task.ttl" must be a number of milliseconds from 0 to %d`, math.MaxInt64/int64(time.Millisecond))
	}
	return time.Duration(ttl) * time.Millisecond, nil
}

// taskOwnerKey carries, for the task methods, the caller asking.
type taskOwnerKey struct{}

// taskCalls returns receiving middleware (inside the gateway's own) for
// the served server s: it starts the task a tools/call asks for, and gives
// the task methods their caller.
func (tr *taskRunner) taskCalls(s *served) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return tr.callsOf(s, next)
	}
}

func (tr *taskRunner) callsOf(s *served, next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
			if !ok {
				return next(ctx, method, req)
			}
			if modern(revisionOf(req)) {
				delete(p.Meta, tr.key) // a 2026 client asks by declaring the extension
				extra := req.GetExtra()
				if !declaresTasks(req) || p.RequestState != "" || extra == nil || extra.Header == nil {
					return next(ctx, method, req) // a retry continues its parked call
				}
				s.mu.Lock()
				t := s.offered[p.Name]
				s.mu.Unlock()
				// The server decides (SEP-2663): a read call becomes a task;
				// one that may need its client's approval stays a call, whose
				// question the multi round-trip request carries.
				if t == nil || t.Tier != tool.Read {
					return next(ctx, method, req)
				}
				return tr.start(ctx, method, req, t, 0, next)
			}
			if p.Meta == nil {
				return next(ctx, method, req)
			}
			asked, has := p.Meta[tr.key]
			if !has {
				return next(ctx, method, req)
			}
			delete(p.Meta, tr.key)
			if !tasksServed(req) {
				// Not a revision with tasks: the call is served as
				// asked, ignoring the task (2025-11-25: "MUST process
				// requests of that type normally").
				return next(ctx, method, req)
			}
			ttl, err := parseTaskAsk(asked)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: " + err.Error()}
			}
			s.mu.Lock()
			t := s.offered[p.Name] // the guard outside let only an offered tool through
			s.mu.Unlock()
			if t == nil {
				return next(ctx, method, req)
			}
			return tr.start(ctx, method, req, t, ttl, next)
		case "ping":
			p, ok := req.GetParams().(*mcp.PingParams)
			if !ok || p == nil || p.Meta == nil || p.Meta[tr.key] == nil {
				return next(ctx, method, req)
			}
			carried, err := json.Marshal(p.Meta[tr.key])
			if err != nil {
				return nil, err
			}
			var c struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(carried, &c); err != nil || !taskMethods[c.Method] {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "ping: unexpected _meta"}
			}
			if !tasksServed(req) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + c.Method + " is not in this session's revision"}
			}
			return tr.serveMethod(ctx, ownerOf(req), c.Method, c.Params)
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
			if modern(revisionOf(req)) {
				return tr.serve2026(ctx, method, req)
			}
			if !tasksServed(req) || method == "tasks/update" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method + " is not in this session's revision"}
			}
			return next(context.WithValue(ctx, taskOwnerKey{}, ownerOf(req)), method, req)
		}
		return next(ctx, method, req)
	}
}

// tasksServed reports whether req comes from a client that may use tasks:
// over HTTP, of 2025-11-25 (2026-07-28's tasks are an extension).
func tasksServed(req mcp.Request) bool {
	extra := req.GetExtra()
	return extra != nil && extra.Header != nil && revisionOf(req) == latestLegacy
}

// ownerOf is the owner of the tasks req's caller creates: the caller as
// the gateway keys callers, "" without a credential.
func ownerOf(req mcp.Request) string {
	if extra := req.GetExtra(); extra != nil {
		return callerName(extra.TokenInfo)
	}
	return ""
}

// start creates the task of a tools/call and runs the call in the
// background; it answers once the record is durable.
func (tr *taskRunner) start(ctx context.Context, method string, req mcp.Request, t *tool.Tool, ttl time.Duration, next mcp.MethodHandler) (mcp.Result, error) {
	owner := ownerOf(req)
	tr.mu.Lock()
	full := tr.byOwner[owner] >= maxTasksRunning
	if !full {
		tr.byOwner[owner]++
	}
	tr.mu.Unlock()
	if full {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("tools/call: this caller runs %d tasks already, the most one may; wait for one to end", maxTasksRunning)}
	}
	release := func() {
		tr.mu.Lock()
		if tr.byOwner[owner]--; tr.byOwner[owner] <= 0 {
			delete(tr.byOwner, owner)
		}
		tr.mu.Unlock()
	}
	rec, err := tr.st.Create(ctx, &task.Record{Owner: owner, Tool: t.Name, Server: t.Origin.Source}, ttl)
	if err != nil {
		release()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tools/call: the task could not be stored; retry"}
	}
	callCtx, cancel := context.WithCancelCause(unrelated{context.WithoutCancel(ctx)})
	callCtx = context.WithValue(callCtx, runningTaskKey{}, &runningTask{st: tr.st, id: rec.ID})
	callCtx = tool.WithCallID(callCtx, taskCallID(rec.ID)) // the call's audit events name the task
	// An upstream that runs the call as a task of its own names it: kept
	// in the record, so that another replica can follow it if this one is
	// lost.
	callCtx = tool.WithUpstreamTask(callCtx, &tool.UpstreamTask{Started: func(server, id string) {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.st.SetUpstream(sctx, rec.ID, server, id) // without it, the task fails if this replica is lost
	}})
	tr.mu.Lock()
	tr.running[rec.ID] = cancel
	tr.mu.Unlock()
	tr.wg.Go(func() {
		defer release()
		defer func() {
			tr.mu.Lock()
			delete(tr.running, rec.ID)
			tr.mu.Unlock()
			cancel(nil)
		}()
		stop := tr.watch(callCtx, rec.ID, cancel)
		res, err := next(callCtx, method, req)
		stop()
		if errors.Is(context.Cause(callCtx), errTasksDraining) {
			res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the gateway replica shut down before the call ended; its outcome is not known"}
		}
		tr.finish(rec.ID, res, err)
	})
	if modern(revisionOf(req)) {
		return wireTask2026(rec, "task"), nil
	}
	return &createTaskResult{Task: wireTask(rec)}, nil
}

// watch cancels the call of task id when the task ends elsewhere (a
// tasks/cancel that another replica served), looking every second.
func (tr *taskRunner) watch(ctx context.Context, id string, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			r, err := tr.st.Lookup(ctx, id)
			if err == nil && r.Status.Terminal() {
				cancel(errTaskEnded)
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// errTaskEnded cancels the call of a task that was cancelled.
var errTaskEnded = errors.New("the task was cancelled")

// errTasksDraining cancels the calls of tasks when the gateway shuts down.
var errTasksDraining = errors.New("the gateway is shutting down")

// drain lets the tasks this process runs finish within grace, then
// cancels them (each ends failed, saying the replica shut down) and waits
// for them until ctx ends. It returns how many it cancelled.
func (tr *taskRunner) drain(ctx context.Context, grace time.Duration) int {
	if tr == nil {
		return 0
	}
	done := make(chan struct{})
	go func() { tr.wg.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return 0
	case <-ctx.Done():
	case <-t.C:
	}
	tr.mu.Lock()
	n := len(tr.running)
	for _, cancel := range tr.running {
		cancel(errTasksDraining)
	}
	tr.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return n
}

// finish stores the outcome of a task's call: the first outcome is kept
// (a cancellation that came first stays).
// taskCallID is the call ID of task id's call in the audit.
func taskCallID(id string) string { return "task:" + id }

func (tr *taskRunner) finish(id string, res mcp.Result, callErr error) task.Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := task.Outcome{Status: task.Completed}
	if callErr != nil {
		out.Status, out.Message = task.Failed, callErr.Error()
		var je *jsonrpc.Error
		if !errors.As(callErr, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: callErr.Error()}
		}
		out.Error, _ = json.Marshal(je)
	} else {
		raw, err := json.Marshal(res)
		if err != nil {
			out.Status, out.Message = task.Failed, "the result could not be encoded: "+err.Error()
			out.Error, _ = json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: out.Message})
		} else {
			out.Result = raw
			r, _ := res.(*mcp.CallToolResult)
			switch {
			case r != nil && len(r.InputRequests) > 0:
				// A 2026-07-28 call asking its client (an approval) through a
				// multi round-trip result, which a task's record cannot
				// carry back to the client.
				out.Status, out.Result = task.Failed, nil
				out.Message = "the call needs its client's answer (an approval), which a task cannot ask for yet: call the tool without a task"
				out.Error, _ = json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: out.Message})
			case r != nil && r.IsError:
				out.Status, out.Message = task.Failed, firstText(r)
			}
		}
	}
	// ErrTerminal: cancelled first (or settled), which stays: the
	// outcome is the record's.
	if _, err := tr.st.Finish(ctx, id, out); errors.Is(err, task.ErrTerminal) {
		out = task.Outcome{Status: task.Failed, Message: "the task had ended already"}
		if r, lerr := tr.st.Lookup(ctx, id); lerr == nil {
			out.Status, out.Message = r.Status, r.Message
		}
	}
	return out
}

// firstText is the text of a result's first text content, for a status
// message.
func firstText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "the tool returned an error"
}

// adopt takes over r, a task whose upstream runs it, if the replica that
// followed it is lost: this replica then follows it to its result. Of
// several replicas reading it at once, one adopts it.
func (tr *taskRunner) adopt(ctx context.Context, r *task.Record) {
	if r.Status.Terminal() || r.UpstreamTask == "" || tr.resume == nil {
		return
	}
	lost, err := tr.st.HolderLost(ctx, r)
	if err != nil || !lost {
		return
	}
	lostInstance := r.Instance
	won, err := tr.st.Adopt(ctx, r.ID, r.Instance)
	if err != nil || !won {
		return
	}
	tr.record(audit.Event{Kind: audit.TaskAdopted, CallID: taskCallID(r.ID), Caller: r.Owner, Tool: r.Tool, Source: r.Server,
		Reason: "the replica that ran it (instance " + lostInstance + ") was lost; this one follows its upstream task " + r.UpstreamTask})
	callCtx, cancel := context.WithCancelCause(context.Background())
	tr.mu.Lock()
	tr.running[r.ID] = cancel
	tr.mu.Unlock()
	tr.wg.Go(func() {
		defer func() {
			tr.mu.Lock()
			delete(tr.running, r.ID)
			tr.mu.Unlock()
			cancel(nil)
		}()
		stop := tr.watch(callCtx, r.ID, cancel)
		res, err := tr.resume(callCtx, r)
		stop()
		if errors.Is(context.Cause(callCtx), errTasksDraining) {
			res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the gateway replica shut down before the call ended; its outcome is not known"}
		}
		out := tr.finish(r.ID, res, err)
		ev := audit.Event{Kind: audit.TaskEnded, CallID: taskCallID(r.ID), Caller: r.Owner, Tool: r.Tool, Source: r.Server, Reason: string(out.Status)}
		if out.Status != task.Completed {
			ev.Error = out.Message
		}
		tr.record(ev)
	})
}

// record writes ev to the audit, if there is one.
func (tr *taskRunner) record(ev audit.Event) {
	if tr.audit != nil {
		ev.Time = time.Now()
		_ = tr.audit.Record(ev) // a failure is the log's to count and report
	}
}

// cancelLocal cancels the call of task id if this process runs it.
func (tr *taskRunner) cancelLocal(id string) {
	tr.mu.Lock()
	cancel := tr.running[id]
	tr.mu.Unlock()
	if cancel != nil {
		cancel(errTaskEnded)
	}
}

// runningTaskKey carries, in a task's call, the task: its progress goes
// into the record.
type runningTaskKey struct{}

type runningTask struct {
	st *task.Store
	id string

	mu   sync.Mutex
	last time.Time
}

// report records a progress report of the call, at most every 200 ms (the
// last of a burst may be skipped; the next one brings it up to date).
func (rt *runningTask) report(ctx context.Context, p tool.Progress) {
	rt.mu.Lock()
	now := time.Now()
	due := now.Sub(rt.last) >= 200*time.Millisecond
	if due {
		rt.last = now
	}
	rt.mu.Unlock()
	if due {
		_ = rt.st.Report(context.WithoutCancel(ctx), rt.id, p.Message, p.Progress, p.Total, false)
	}
}

// taskCaller wraps the caller of a task's call so that its progress goes
// into the task's record as well as to the client, and its client so that
// a question it is asked (an approval) is tied to the task and sets the
// task input_required while it waits.
func taskCaller(ctx context.Context) context.Context {
	rt, _ := ctx.Value(runningTaskKey{}).(*runningTask)
	if rt == nil {
		return ctx
	}
	if d := downstreamFrom(ctx); d != nil {
		ctx = withDownstream(ctx, taskDownstream{downstream: d, rt: rt})
	}
	r, ok := tool.CallerFrom(ctx).(relay)
	if !ok {
		return ctx
	}
	return tool.WithCaller(ctx, taskRelay{relay: r, rt: rt})
}

// taskWaiting marks the task whose call ctx is (if any) input_required
// with message, until the returned function is called: a task-augmented
// call waiting for an operator's decision says so to the client polling
// it, which may go away and come back.
func taskWaiting(ctx context.Context, message string) (done func()) {
	rt, _ := ctx.Value(runningTaskKey{}).(*runningTask)
	if rt == nil {
		return func() {}
	}
	bg := context.WithoutCancel(ctx)
	_ = rt.st.Report(bg, rt.id, message, -1, 0, true)
	return func() { _ = rt.st.Report(bg, rt.id, "working", -1, 0, false) }
}

// taskDownstream is the client of a task's call.
type taskDownstream struct {
	downstream
	rt *runningTask
}

// ask asks the client with the task named in the request's _meta
// (2025-11-25: a request a task depends on carries related-task), the
// task input_required meanwhile (the client is told to call tasks/result,
// on whose stream, or the session's own, the question comes).
func (d taskDownstream) ask(ctx context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	var p map[string]any
	if json.Unmarshal(params, &p) == nil && p != nil {
		meta, _ := p["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[relatedTaskKey] = map[string]any{"taskId": d.rt.id}
		p["_meta"] = meta
		if b, err := json.Marshal(p); err == nil {
			params = b
		}
	}
	bg := context.WithoutCancel(ctx)
	_ = d.rt.st.Report(bg, d.rt.id, "waiting for the client's answer", -1, 0, true)
	defer func() { _ = d.rt.st.Report(bg, d.rt.id, "working", -1, 0, false) }()
	return d.downstream.ask(ctx, kind, params)
}

// unrelated hides the request that started a task from the transport:
// what the task's call sends its client (a question, progress) then goes
// on the session's own stream, since the request's stream ended with its
// answer, the task. A 2025 session's transport (sessionconn.go) keys the
// relation by postKey; go-sdk's, which serves the rest, by a type of its
// own, found by name: should it change, messages are refused as on a
// closed stream, and an approval is refused (fail closed).
type unrelated struct{ context.Context }

func (u unrelated) Value(key any) any {
	if _, ok := key.(postKey); ok {
		return nil
	}
	if t := reflect.TypeOf(key); t != nil && t.PkgPath() == "github.com/modelcontextprotocol/go-sdk/mcp" && t.Name() == "idContextKey" {
		return nil
	}
	return u.Context.Value(key)
}

type taskRelay struct {
	relay
	rt *runningTask
}

func (r taskRelay) Progress(ctx context.Context, p tool.Progress) {
	r.rt.report(ctx, p)
	r.relay.Progress(ctx, p)
}

// wire forms of 2025-11-25's tasks.

type wiredTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

func wireTask(r *task.Record) wiredTask {
	ttl := r.TTL.Milliseconds()
	w := wiredTask{
		TaskID: r.ID, Status: string(r.Status), StatusMessage: r.Message,
		CreatedAt: r.Created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: r.Updated.UTC().Format(time.RFC3339Nano),
		TTL: &ttl,
	}
	if !r.Status.Terminal() {
		w.PollInterval = taskPollInterval.Milliseconds()
	}
	return w
}

type createTaskResult struct {
	mcp.ResultBase
	Task wiredTask `json:"task"`
}

type taskResult struct {
	mcp.ResultBase
	wiredTask
}

type taskListResult struct {
	mcp.ResultBase
	Tasks      []wiredTask `json:"tasks"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// storedResult is a CallToolResult as the record keeps it, served with
// the _meta go-sdk or the gateway adds.
type storedResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (s *storedResult) MarshalJSON() ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(s.raw, &m); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	if old, ok := m["_meta"]; ok {
		_ = json.Unmarshal(old, &meta)
	}
	for k, v := range s.Meta {
		meta[k] = v
	}
	if len(meta) > 0 {
		b, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		m["_meta"] = b
	}
	return json.Marshal(m)
}

type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// register adds the task methods to srv: taskMethods and
// taskMethods2026, which a session's transport takes as the server's
// (withTaskMethods).
func (tr *taskRunner) register(srv *mcp.Server) {
	err := errors.Join(
		mcp.AddReceivingCustomMethod(srv, "tasks/get", tr.get),
		mcp.AddReceivingCustomMethod(srv, "tasks/result", tr.result),
		mcp.AddReceivingCustomMethod(srv, "tasks/list", tr.list),
		mcp.AddReceivingCustomMethod(srv, "tasks/cancel", tr.cancel),
		// The 2026 extension's, answered by taskCalls (serve2026).
		mcp.AddReceivingCustomMethod(srv, "tasks/update", func(context.Context, *mcp.ServerSession, *taskIDParams) (*taskResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: tasks/update is 2026-07-28's"}
		}),
	)
	if err != nil {
		panic("gateway: the task methods: " + err.Error()) // go-sdk knows them as standard: a programming error
	}
}

// serveMethod answers a task method carried in a ping (see asPing).
func (tr *taskRunner) serveMethod(ctx context.Context, owner, method string, params json.RawMessage) (mcp.Result, error) {
	ctx = context.WithValue(ctx, taskOwnerKey{}, owner)
	if method == "tasks/list" {
		var p taskListParams
		if len(params) > 0 && string(params) != "null" {
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": the parameters do not decode: want {\"cursor\": string}"}
			}
		}
		return tr.list(ctx, nil, &p)
	}
	var p taskIDParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": the parameters do not decode: want {\"taskId\": string}"}
	}
	switch method {
	case "tasks/get":
		return tr.get(ctx, nil, &p)
	case "tasks/result":
		return tr.result(ctx, nil, &p)
	default:
		return tr.cancel(ctx, nil, &p)
	}
}

func ownerFrom(ctx context.Context) (string, error) {
	owner, ok := ctx.Value(taskOwnerKey{}).(string)
	if !ok {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
	}
	return owner, nil
}

// lookupError is the protocol error for a task that cannot be read.
func lookupError(method string, err error) error {
	if errors.Is(err, task.ErrNotFound) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": task not found"}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: method + ": the task store cannot be read now; retry"}
}

func (tr *taskRunner) get(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	owner, err := ownerFrom(ctx)
	if err != nil {
		return nil, err
	}
	r, err := tr.st.Get(ctx, owner, p.TaskID)
	if err != nil {
		return nil, lookupError("tasks/get", err)
	}
	tr.adopt(ctx, r)
	return &taskResult{wiredTask: wireTask(r)}, nil
}

// result blocks until the task ends, then returns what the call returned:
// its result, or its JSON-RPC error.
func (tr *taskRunner) result(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*storedResult, error) {
	owner, err := ownerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if r, err := tr.st.Get(ctx, owner, p.TaskID); err == nil {
		tr.adopt(ctx, r)
	}
	r, err := tr.waitAdopting(ctx, owner, p.TaskID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, lookupError("tasks/result", err)
	}
	if len(r.Error) > 0 && len(r.Result) == 0 {
		var je jsonrpc.Error
		if json.Unmarshal(r.Error, &je) == nil && je.Code != 0 {
			return nil, &je
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: r.Message}
	}
	res := &storedResult{raw: r.Result}
	if len(res.raw) == 0 {
		res.raw = json.RawMessage(`{"content":[]}`)
	}
	res.Meta = mcp.Meta{relatedTaskKey: map[string]any{"taskId": r.ID}}
	return res, nil
}

// waitAdopting is Store.Wait that adopts the task meanwhile if the
// replica following its upstream task is lost (it may be found lost only
// after the wait began: the fleet's grace).
func (tr *taskRunner) waitAdopting(ctx context.Context, owner, id string) (*task.Record, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := tr.st.Wait(wctx, owner, id, taskPollInterval)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return r, err
		}
		if r, err := tr.st.Get(ctx, owner, id); err == nil {
			tr.adopt(ctx, r)
		}
	}
}

func (tr *taskRunner) list(ctx context.Context, _ *mcp.ServerSession, p *taskListParams) (*taskListResult, error) {
	owner, err := ownerFrom(ctx)
	if err != nil {
		return nil, err
	}
	q := task.Query{Owner: owner, Limit: 50}
	if p.Cursor != "" {
		c, err := task.ParseCursor(p.Cursor)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tasks/list: the cursor is not one this server gave"}
		}
		q.After = &c
	}
	recs, next, err := tr.st.List(ctx, q)
	if err != nil {
		return nil, lookupError("tasks/list", err)
	}
	out := &taskListResult{Tasks: []wiredTask{}, NextCursor: next}
	for _, r := range recs {
		tr.adopt(ctx, r)
		out.Tasks = append(out.Tasks, wireTask(r))
	}
	return out, nil
}

func (tr *taskRunner) cancel(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	owner, err := ownerFrom(ctx)
	if err != nil {
		return nil, err
	}
	r, err := tr.st.Cancel(ctx, owner, false, p.TaskID, "The task was cancelled by its client.")
	if errors.Is(err, task.ErrTerminal) {
		if r == nil { // it ended between the read and the change
			r, err = tr.st.Get(ctx, owner, p.TaskID)
			if err != nil {
				return nil, lookupError("tasks/cancel", err)
			}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tasks/cancel: the task already ended (%s)", r.Status)}
	}
	if err != nil {
		return nil, lookupError("tasks/cancel", err)
	}
	tr.cancelLocal(r.ID)
	return &taskResult{wiredTask: wireTask(r)}, nil
}

// taskAdvert is receiving middleware, outermost: for a 2025-11-25
// session over HTTP it declares the tasks capability in the initialize's
// result and each tool's execution.taskSupport in a listing.
func (tr *taskRunner) taskAdvert(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err
		}
		extra := req.GetExtra()
		if extra == nil || extra.Header == nil {
			return res, err
		}
		switch method {
		case "initialize":
			if ir, ok := res.(*mcp.InitializeResult); ok && ir.ProtocolVersion == latestLegacy {
				return &initializeWithTasks{InitializeResult: ir}, nil
			}
		case "server/discover":
			return &withTasksExtension{Result: res}, nil
		case "tools/list":
			if lr, ok := res.(*mcp.ListToolsResult); ok && revisionOf(req) == latestLegacy {
				return &toolsWithTasks{ListToolsResult: lr}, nil
			}
		}
		return res, err
	}
}

// initializeWithTasks is an initialize's result with the server's tasks
// capability (2025-11-25: list, cancel, and task-augmented tools/call).
type initializeWithTasks struct {
	*mcp.InitializeResult
}

func (r *initializeWithTasks) MarshalJSON() ([]byte, error) {
	return patchJSON(r.InitializeResult, func(m map[string]json.RawMessage) error {
		return setIn(m, json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`), "capabilities", "tasks")
	})
}

// toolsWithTasks is a listing whose tools say they may run as tasks.
type toolsWithTasks struct {
	*mcp.ListToolsResult
}

func (r *toolsWithTasks) MarshalJSON() ([]byte, error) {
	return patchJSON(r.ListToolsResult, func(m map[string]json.RawMessage) error {
		var tools []map[string]json.RawMessage
		if err := json.Unmarshal(m["tools"], &tools); err != nil {
			return err
		}
		for _, t := range tools {
			t["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
		}
		b, err := json.Marshal(tools)
		m["tools"] = b
		return err
	})
}

// patchJSON marshals v as an object, lets patch change its members, and
// marshals the result.
func patchJSON(v any, patch func(map[string]json.RawMessage) error) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if err := patch(m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// setIn sets the member at path (one name or more) of obj to v, decoding
// and encoding again each object on the way; an object absent or null on
// the way is made anew.
func setIn(obj map[string]json.RawMessage, v json.RawMessage, path ...string) error {
	if len(path) == 1 {
		obj[path[0]] = v
		return nil
	}
	var inner map[string]json.RawMessage
	if b, ok := obj[path[0]]; ok {
		if err := json.Unmarshal(b, &inner); err != nil {
			return err
		}
	}
	if inner == nil {
		inner = map[string]json.RawMessage{}
	}
	if err := setIn(inner, v, path[1:]...); err != nil {
		return err
	}
	b, err := json.Marshal(inner)
	obj[path[0]] = b
	return err
}

// resumeTask follows r's upstream task to its result, through its tool's
// source, for a task adopted from a lost replica. The call was validated,
// approved and audited as requested where it started; the result is
// masked and bounded as any call's.
func (g *Gateway) resumeTask(ctx context.Context, r *task.Record) (mcp.Result, error) {
	t, ok := g.ex.Registry().Lookup(r.Tool)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the tool %q is not registered on this replica: its upstream task cannot be followed", r.Tool)}
	}
	res, err := t.Handler(tool.WithUpstreamTask(ctx, &tool.UpstreamTask{Resume: r.UpstreamTask}), nil)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: g.ex.Mask().String(err.Error())}
	}
	res = res.Masked(g.ex.Mask())
	return toMCP(res.Truncated(g.opts.MaxResultBytes), g.rewriteFor(t.Origin.Source)), nil
}

// The 2026-07-28 tasks extension (SEP-2663): the gateway declares it in
// server/discover; a client that declares it on a tools/call gets a task
// (the server decides; the gateway always does, since it holds every
// call), which it follows with tasks/get (the result or error inline once
// it ends), tasks/update (nothing to answer yet: the gateway's tasks ask
// nothing) and tasks/cancel, each routed by the task's id in Mcp-Name.

// tasksExtension is the 2026-07-28 tasks extension's identifier.
const tasksExtension = "io.modelcontextprotocol/tasks"

// codeMissingCapability is 2026-07-28's error for a request that needs a
// capability its client did not declare.
const codeMissingCapability = -32021

// declaresTasks reports whether the 2026 client of req declared the tasks
// extension in the request's capabilities.
//
// It is asked of every 2026 tools/call, so it reads the capabilities in
// the request's _meta as they were decoded, as go-sdk's decoding them
// would (the same key, "extensions" matched exactly): go-sdk's
// ClientCapabilities encodes and decodes them again, a 32 KiB buffer a
// call. Anything else (a 2025 session's initialize) goes that way.
func declaresTasks(req mcp.Request) bool {
	if p := paramsOf(req); p != nil {
		if caps, ok := p.GetMeta()[mcp.MetaKeyClientCapabilities].(map[string]any); ok {
			extensions, _ := caps["extensions"].(map[string]any)
			_, declared := extensions[tasksExtension]
			return declared
		}
	}
	caps := capabilitiesOf(req)
	if caps == nil || caps.Extensions == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// wiredTask2026 is a task as the extension carries it: a CreateTaskResult
// (resultType "task") or a tasks/get result ("complete", with the result
// or error of a task that ended).
type wiredTask2026 struct {
	mcp.ResultBase
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          json.RawMessage `json:"error,omitempty"`
}

// wireTask2026 is r for a 2026 client. The extension keeps "failed" for a
// JSON-RPC error: a tool's own error result is a completed task whose
// result says isError.
func wireTask2026(r *task.Record, resultType string) *wiredTask2026 {
	ttl := r.TTL.Milliseconds()
	w := &wiredTask2026{
		ResultType: resultType, TaskID: r.ID, Status: string(r.Status), StatusMessage: r.Message,
		CreatedAt: r.Created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: r.Updated.UTC().Format(time.RFC3339Nano),
		TTLMs: &ttl,
	}
	switch r.Status {
	case task.Completed:
		w.Result = r.Result
	case task.Failed:
		if len(r.Error) > 0 {
			w.Error = r.Error
		} else {
			w.Status, w.Result = string(task.Completed), r.Result
		}
	case task.Cancelled:
	default:
		w.PollIntervalMs = taskPollInterval.Milliseconds()
	}
	return w
}

// serve2026 answers a 2026-07-28 client's task method.
func (tr *taskRunner) serve2026(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	if method == "tasks/result" || method == "tasks/list" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method + " is not in 2026-07-28's tasks extension"}
	}
	if !declaresTasks(req) {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: method + ": declare the tasks extension (" + tasksExtension + ") in the request's capabilities", Data: data}
	}
	p, ok := req.GetParams().(*taskIDParams)
	if !ok || p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": want {\"taskId\": string}"}
	}
	owner := ownerOf(req)
	switch method {
	case "tasks/get":
		r, err := tr.st.Get(ctx, owner, p.TaskID)
		if err != nil {
			return nil, lookupError(method, err)
		}
		tr.adopt(ctx, r)
		return wireTask2026(r, "complete"), nil
	case "tasks/update":
		// Nothing the gateway's tasks ask is outstanding: the responses
		// are ignored (SEP-2663), once the task is known to be theirs.
		if _, err := tr.st.Get(ctx, owner, p.TaskID); err != nil {
			return nil, lookupError(method, err)
		}
		return &ackResult{ResultType: "complete"}, nil
	default: // tasks/cancel
		r, err := tr.st.Cancel(ctx, owner, false, p.TaskID, "The task was cancelled by its client.")
		if err != nil && !errors.Is(err, task.ErrTerminal) {
			return nil, lookupError(method, err)
		}
		if err == nil {
			tr.cancelLocal(r.ID)
		}
		// Cancellation is cooperative: a task that ended keeps its end,
		// and the request is acknowledged all the same.
		return &ackResult{ResultType: "complete"}, nil
	}
}

// ackResult is the extension's empty acknowledgement.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// withTasksExtension is a server/discover result that declares the tasks
// extension among the server's capabilities.
type withTasksExtension struct {
	mcp.Result
}

func (r *withTasksExtension) MarshalJSON() ([]byte, error) {
	return patchJSON(r.Result, func(m map[string]json.RawMessage) error {
		return setIn(m, json.RawMessage(`{}`), "capabilities", "extensions", tasksExtension)
	})
}
