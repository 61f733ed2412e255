package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/task"
	"github.com/toolwire/toolwire/tool"
)

// taskGateway is a gateway over HTTP with tasks kept in a directory: a
// tool "slow" that returns when release is closed (or its context ends),
// "fails", which returns an error result, and "quick". Callers: alice and
// bob, static tokens.
type taskGateway struct {
	url     string
	release chan struct{}
	started chan struct{} // a value per slow call that started
	ended   atomic.Int32  // slow calls whose context ended before release
	st      *task.Store
	mem     *audit.Memory
	h       *Handler
	// approver confirms "publish" (write) by asking the client, or an
	// operator when SetOperators gave it a queue.
	approver *Approver
}

func newTaskGateway(t *testing.T) *taskGateway {
	t.Helper()
	return newTaskGatewayWith(t, false)
}

// newTaskGatewayWith is newTaskGateway, with no sessions at all when
// stateless (--stateless).
func newTaskGatewayWith(t *testing.T, stateless bool) *taskGateway {
	t.Helper()
	tg := &taskGateway{release: make(chan struct{}), started: make(chan struct{}, 64), mem: &audit.Memory{}}
	files, err := task.OpenFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { files.Close() })
	tg.st = task.NewStore(files, nil)
	tg.approver = NewApprover(ApprovalPolicy{Write: Allow, Destructive: Allow, Tools: map[string]Approval{"publish": Elicit}})
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: tg.approver})
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	if err := reg.Register(&tool.Tool{Name: "publish", Description: "publish", InputSchema: schema, Tier: tool.Write,
		Handler: func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
			return tool.TextResult("published"), nil
		}}); err != nil {
		t.Fatal(err)
	}
	for _, def := range []struct {
		name string
		run  func(ctx context.Context, args json.RawMessage) (*tool.Result, error)
	}{
		{"slow", func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
			tg.started <- struct{}{}
			select {
			case <-tg.release:
				return tool.TextResult("slow done with " + string(args)), nil
			case <-ctx.Done():
				tg.ended.Add(1)
				return nil, ctx.Err()
			}
		}},
		{"fails", func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
			return tool.ErrorResult(tool.ReasonTool, "disk full"), nil
		}},
		{"quick", func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
			var a struct{ N int }
			_ = json.Unmarshal(args, &a)
			time.Sleep(time.Duration(a.N) * time.Millisecond) // how long it runs, for the races
			return tool.TextResult("quick " + string(args)), nil
		}},
	} {
		if err := reg.Register(&tool.Tool{Name: def.name, Description: def.name, InputSchema: schema, Tier: tool.Read, Handler: def.run}); err != nil {
			t.Fatal(err)
		}
	}
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: audit.NewLog(tg.mem, nil)})
	gw := New(ex, &Options{Tasks: tg.st})
	verify, err := StaticVerifier([]StaticToken{
		{SHA256: HashToken("alice-token"), Subject: "alice", Role: "all"},
		{SHA256: HashToken("bob-token"), Subject: "bob", Role: "all"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(nil)
	h := gw.Handler(&HTTPOptions{Verifier: verify, Roles: Roles{"all": {"*"}}, ResourceURL: ts.URL + "/mcp", Stateless: stateless})
	ts.Config.Handler = h
	tg.h = h
	t.Cleanup(func() {
		select {
		case <-tg.release:
		default:
			close(tg.release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Drain(ctx, 0) // the tasks' calls end before their directory goes
		ts.CloseClientConnections()
		ts.Close()
		h.Close()
	})
	tg.url = ts.URL + "/mcp"
	return tg
}

// taskSession is a 2025 session spoken in JSON-RPC by hand: go-sdk's
// client cannot send a task.
type taskSession struct {
	t     *testing.T
	url   string
	token string
	sid   string
	rev   string
	next  atomic.Int64
	init  map[string]any // the initialize's result
}

func openRaw(t *testing.T, url, token, rev string) *taskSession {
	t.Helper()
	s := &taskSession{t: t, url: url, token: token, rev: rev}
	res, rpcErr := s.call("initialize", map[string]any{
		"protocolVersion": rev, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"},
	})
	if rpcErr != nil {
		t.Fatalf("initialize: %v", rpcErr)
	}
	s.init = res
	s.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return s
}

// close ends the session (DELETE), as a client that goes away does.
func (s *taskSession) close() {
	req, _ := http.NewRequest(http.MethodDelete, s.url, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set(sessionHeader, s.sid)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
	}
}

func (s *taskSession) post(msg any) *http.Response {
	s.t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.postRaw(b)
}

func (s *taskSession) postRaw(b []byte) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sid != "" {
		req.Header.Set(sessionHeader, s.sid)
	}
	if s.sid != "" || s.init != nil {
		req.Header.Set(protocolHeader, s.rev) // after the initialize, as a client does
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	s.t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		s.t.Fatal(err)
	}
	if id := resp.Header.Get(sessionHeader); id != "" && s.sid == "" {
		s.sid = id
	}
	return resp
}

type taskRPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *taskRPCError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

// call sends a request and returns its result or error.
func (s *taskSession) call(method string, params any) (map[string]any, *taskRPCError) {
	s.t.Helper()
	id := s.next.Add(1)
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		s.t.Fatal(err)
	}
	return s.callRaw(b)
}

func (s *taskSession) callRaw(body []byte) (map[string]any, *taskRPCError) {
	s.t.Helper()
	resp := s.postRaw(body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("HTTP %d: %s", resp.StatusCode, b)
	}
	var msg struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *taskRPCError   `json:"error"`
	}
	if !responseIn(resp, func(data []byte) bool {
		msg.ID, msg.Result, msg.Error = nil, nil, nil
		return json.Unmarshal(data, &msg) == nil && (msg.ID != nil || msg.Error != nil) // an error's id may be null
	}) {
		s.t.Fatal("no response")
	}
	if msg.Error != nil {
		return nil, msg.Error
	}
	var out map[string]any
	if err := json.Unmarshal(msg.Result, &out); err != nil {
		s.t.Fatal(err)
	}
	return out, nil
}

// startTask calls tool as a task and returns its id.
func (s *taskSession) startTask(name string, args map[string]any) string {
	s.t.Helper()
	res, err := s.call("tools/call", map[string]any{"name": name, "arguments": args, "task": map[string]any{"ttl": 120000}})
	if err != nil {
		s.t.Fatalf("tools/call %s as a task: %v", name, err)
	}
	tk, _ := res["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if id == "" || tk["status"] != "working" || tk["createdAt"] == nil || tk["ttl"] != float64(120000) {
		s.t.Fatalf("tools/call %s as a task answered %v; want a task, working, its ttl 120000", name, res)
	}
	return id
}

func resultText(res map[string]any) string {
	content, _ := res["content"].([]any)
	var b strings.Builder
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["text"].(string)
			b.WriteString(t)
		}
	}
	return b.String()
}

// TestATaskOutlivesItsClient: a client asks for a task, is answered at
// once (the call still running), goes away (its session deleted); the
// call finishes; the client comes back on a new session and fetches the
// result. The session declares the tasks capability and lists its tools
// as task-capable.
func TestATaskOutlivesItsClient(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	s1 := openRaw(t, tg.url, "alice-token", "2025-11-25")
	caps, _ := s1.init["capabilities"].(map[string]any)
	tasks, _ := caps["tasks"].(map[string]any)
	requests, _ := tasks["requests"].(map[string]any)
	if tasks["list"] == nil || tasks["cancel"] == nil || requests["tools"] == nil {
		t.Errorf("the initialize's capabilities: %v; want tasks with list, cancel and requests.tools.call", caps)
	}
	list, rerr := s1.call("tools/list", map[string]any{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, x := range list["tools"].([]any) {
		tl := x.(map[string]any)
		if ex, _ := tl["execution"].(map[string]any); ex["taskSupport"] != "optional" {
			t.Errorf("tool %v: execution %v; want taskSupport optional", tl["name"], tl["execution"])
		}
	}
	id := s1.startTask("slow", map[string]any{"n": 7})
	<-tg.started // the call runs in the background
	got, rerr := s1.call("tasks/get", map[string]any{"taskId": id})
	if rerr != nil || got["status"] != "working" || got["taskId"] != id {
		t.Fatalf("tasks/get while it runs: %v, %v; want working", got, rerr)
	}
	s1.close()
	close(tg.release)

	s2 := openRaw(t, tg.url, "alice-token", "2025-11-25")
	res, rerr := s2.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil {
		t.Fatalf("tasks/result on a new session: %v", rerr)
	}
	if txt := resultText(res); txt != `slow done with {"n":7}` {
		t.Errorf("the result: %q; want the call's", txt)
	}
	meta, _ := res["_meta"].(map[string]any)
	if rel, _ := meta[relatedTaskKey].(map[string]any); rel["taskId"] != id {
		t.Errorf("the result's _meta: %v; want the related task", meta)
	}
	got, rerr = s2.call("tasks/get", map[string]any{"taskId": id})
	if rerr != nil || got["status"] != "completed" {
		t.Errorf("tasks/get after: %v, %v; want completed", got, rerr)
	}
	listed, rerr := s2.call("tasks/list", map[string]any{})
	if rerr != nil || len(listed["tasks"].([]any)) != 1 {
		t.Errorf("tasks/list: %v, %v; want the one task", listed, rerr)
	}
	if tg.ended.Load() != 0 {
		t.Error("the call was cancelled when its client went away")
	}
	// The call went through the executor: audited as any call, once.
	executed := 0
	for _, ev := range tg.mem.Events() {
		if ev.Kind == audit.CallExecuted && ev.Tool == "slow" {
			executed++
			if ev.Caller != "alice" {
				t.Errorf("audited caller %q; want alice", ev.Caller)
			}
		}
	}
	if executed != 1 {
		t.Errorf("%d call.executed events for the task's call; want 1", executed)
	}
}

// TestTaskFailureAndOlderRevisions: an error result ends the task failed
// (its result still the tool's); a session of 2025-06-18, which has no
// tasks, is served the call itself, and no task method.
func TestTaskFailureAndOlderRevisions(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	s := openRaw(t, tg.url, "alice-token", "2025-11-25")
	id := s.startTask("fails", nil)
	res, rerr := s.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil || res["isError"] != true || resultText(res) != "disk full" {
		t.Errorf("tasks/result of a failing call: %v, %v; want its error result", res, rerr)
	}
	got, _ := s.call("tasks/get", map[string]any{"taskId": id})
	if got["status"] != "failed" || got["statusMessage"] != "disk full" {
		t.Errorf("tasks/get: %v; want failed, saying why", got)
	}

	old := openRaw(t, tg.url, "alice-token", "2025-06-18")
	if caps, _ := old.init["capabilities"].(map[string]any); caps["tasks"] != nil {
		t.Errorf("a 2025-06-18 session was offered tasks: %v", caps)
	}
	res, rerr = old.call("tools/call", map[string]any{"name": "quick", "arguments": map[string]any{"n": 1}, "task": map[string]any{"ttl": 1000}})
	if rerr != nil || res["task"] != nil || resultText(res) != `quick {"n":1}` {
		t.Errorf("a 2025-06-18 call asking for a task: %v, %v; want the call's result", res, rerr)
	}
	if _, rerr := old.call("tasks/get", map[string]any{"taskId": id}); rerr == nil || rerr.Code != -32601 {
		t.Errorf("tasks/get on a 2025-06-18 session: %v; want method not found", rerr)
	}
}

// TestTasksAreTheirOwnersOnly: another caller, a forged id, an id of the
// wrong form, a cursor tampered with, and garbage task parameters: each
// refused, and the owner's task untouched. Another's task is not found in
// exactly the words an unknown one is (no oracle).
func TestTasksAreTheirOwnersOnly(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	alice := openRaw(t, tg.url, "alice-token", "2025-11-25")
	bob := openRaw(t, tg.url, "bob-token", "2025-11-25")
	id := alice.startTask("slow", nil)
	<-tg.started

	var unknown *taskRPCError
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		_, forged := bob.call(method, map[string]any{"taskId": task.NewID()})
		_, theirs := bob.call(method, map[string]any{"taskId": id})
		if theirs == nil || forged == nil || theirs.Code != -32602 || *theirs != *forged {
			t.Errorf("%s of alice's task by bob: %v; of a forged id: %v; want the same -32602", method, theirs, forged)
		}
		unknown = forged
	}
	for _, bad := range []any{"../../etc/passwd", strings.Repeat("A", 100000), 42, nil, map[string]any{"x": 1}} {
		_, rerr := bob.call("tasks/get", map[string]any{"taskId": bad})
		if rerr == nil || rerr.Code != -32602 || len(rerr.Message) > 200 {
			t.Errorf("tasks/get of %.20v: %v; want a short -32602", bad, rerr)
		}
	}
	if listed, rerr := bob.call("tasks/list", map[string]any{}); rerr != nil || len(listed["tasks"].([]any)) != 0 {
		t.Errorf("bob's tasks/list: %v, %v; want none", listed, rerr)
	}
	for _, cursor := range []string{"garbage", strings.Repeat("x", 5000), task.Cursor{ID: id}.String() + "AA"} {
		if _, rerr := bob.call("tasks/list", map[string]any{"cursor": cursor}); rerr == nil || rerr.Code != -32602 {
			t.Errorf("tasks/list with cursor %.20q: %v; want -32602", cursor, rerr)
		}
	}
	// A cursor is no key: one made at alice's task lists bob's after it.
	forged := task.Cursor{Created: time.Unix(0, 0), ID: id}.String()
	if listed, rerr := bob.call("tasks/list", map[string]any{"cursor": forged}); rerr != nil || len(listed["tasks"].([]any)) != 0 {
		t.Errorf("bob's tasks/list from a cursor naming alice's task: %v, %v; want none of hers", listed, rerr)
	}
	for _, bad := range []any{"now", 12, []any{1}, map[string]any{"ttl": "long"}, map[string]any{"ttl": -5}, map[string]any{"ttl": 1e300}} {
		_, rerr := bob.call("tools/call", map[string]any{"name": "quick", "task": bad})
		if rerr == nil || rerr.Code != -32602 || !strings.Contains(rerr.Message, "task") {
			t.Errorf("a tools/call with task %v: %v; want -32602 naming the task", bad, rerr)
		}
	}
	// A huge task parameter within the body limit: refused, not stored.
	huge := fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"quick","task":{"ttl":1000,"pad":%q}}}`, strings.Repeat("p", 1<<20))
	if res, rerr := bob.callRaw([]byte(huge)); rerr != nil || res["task"] == nil {
		t.Errorf("a task with 1 MiB of unknown members: %v, %v; want a task (unknown members ignored)", res, rerr)
	}
	got, rerr := alice.call("tasks/get", map[string]any{"taskId": id})
	if rerr != nil || got["status"] != "working" {
		t.Errorf("alice's task after all that: %v, %v; want working", got, rerr)
	}
	if unknown.Message != "tasks/cancel: task not found" {
		t.Errorf("not found says %q", unknown.Message)
	}
}

// TestATaskCancelRacingItsEndHasOneOutcome: tasks/cancel sent as the
// call returns: either the cancellation wins (cancelled, and tasks/result
// says so) or the call does (completed, and the cancel is refused as too
// late); never both, never neither.
func TestATaskCancelRacingItsEndHasOneOutcome(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	s := openRaw(t, tg.url, "alice-token", "2025-11-25")
	outcomes := map[string]int{}
	for i := range 12 {
		// The call runs 0 to 22 ms: some end before the cancel, some after.
		id := s.startTask("quick", map[string]any{"n": 2 * i})
		var cancelled map[string]any
		var cerr *taskRPCError
		var wg sync.WaitGroup
		wg.Go(func() { cancelled, cerr = s.call("tasks/cancel", map[string]any{"taskId": id}) })
		wg.Wait()
		res, rerr := s.call("tasks/result", map[string]any{"taskId": id})
		got, _ := s.call("tasks/get", map[string]any{"taskId": id})
		switch {
		case cerr == nil:
			if cancelled["status"] != "cancelled" || got["status"] != "cancelled" || rerr != nil || res["isError"] != true {
				t.Fatalf("round %d: cancel won (%v) but the task is %v, its result %v, %v", i, cancelled, got["status"], res, rerr)
			}
		case cerr.Code == -32602 && strings.Contains(cerr.Message, "already ended (completed)"):
			if got["status"] != "completed" || rerr != nil || res["isError"] == true {
				t.Fatalf("round %d: the call won, but the task is %v, its result %v, %v", i, got["status"], res, rerr)
			}
		default:
			t.Fatalf("round %d: tasks/cancel: %v", i, cerr)
		}
		outcomes[got["status"].(string)]++
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestCancellingATaskCancelsItsCall: a running task's cancel reaches its
// call, which stops; the task stays cancelled.
func TestCancellingATaskCancelsItsCall(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	s := openRaw(t, tg.url, "alice-token", "2025-11-25")
	id := s.startTask("slow", nil)
	<-tg.started
	got, rerr := s.call("tasks/cancel", map[string]any{"taskId": id})
	if rerr != nil || got["status"] != "cancelled" {
		t.Fatalf("tasks/cancel: %v, %v", got, rerr)
	}
	res, rerr := s.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil || res["isError"] != true {
		t.Errorf("tasks/result of a cancelled task: %v, %v; want an error result", res, rerr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tg.ended.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if tg.ended.Load() != 1 {
		t.Error("the call of the cancelled task was not cancelled")
	}
	if _, rerr := s.call("tasks/cancel", map[string]any{"taskId": id}); rerr == nil || rerr.Code != -32602 {
		t.Errorf("a second tasks/cancel: %v; want -32602", rerr)
	}
}

// call26 sends a 2026-07-28 request as token's caller, with the routing
// headers (name: Mcp-Name, "" for none) and, when ext, the tasks
// extension declared; it returns the HTTP status and the JSON-RPC
// message.
func call26(t *testing.T, url, token, method, name string, params map[string]any, ext bool) (int, map[string]any) {
	t.Helper()
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if ext {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    Revision2026,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw26", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", Revision2026)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req.WithContext(ctxT(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg map[string]any
	responseIn(resp, func(data []byte) bool { return json.Unmarshal(data, &msg) == nil && msg["id"] != nil })
	return resp.StatusCode, msg
}

// responseIn reads resp's body, JSON or a stream of events, and gives
// decode each message in it until decode says it was the response it
// looks for; it returns whether one was.
func responseIn(resp *http.Response, decode func(data []byte) bool) bool {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, err := io.ReadAll(resp.Body)
		return err == nil && decode(raw)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && decode([]byte(data)) {
			return true
		}
	}
	return false
}

// TestTasksOfThe2026Extension: a 2026-07-28 client that declares the
// tasks extension gets a task for its call (resultType "task"), follows
// it with tasks/get (routed by its id in Mcp-Name) to its inline result,
// and may cancel one; a client that does not declare it gets the call's
// result and may not use the methods; server/discover declares the
// extension; another caller's task is not found; a missing or wrong
// Mcp-Name is refused before anything is read.
func TestTasksOfThe2026Extension(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	_, disc := call26(t, tg.url, "alice-token", "server/discover", "", map[string]any{}, false)
	caps, _ := disc["result"].(map[string]any)["capabilities"].(map[string]any)
	if ext, _ := caps["extensions"].(map[string]any); ext["io.modelcontextprotocol/tasks"] == nil {
		t.Errorf("server/discover's capabilities: %v; want the tasks extension", caps)
	}
	// Without the extension: the result itself.
	_, plain := call26(t, tg.url, "alice-token", "tools/call", "quick", map[string]any{"name": "quick", "arguments": map[string]any{"n": 1}}, false)
	if res, _ := plain["result"].(map[string]any); res["resultType"] == "task" || resultText(res) != `quick {"n":1}` {
		t.Errorf("a call without the extension: %v; want its result", plain)
	}
	// With it, a call that may need an approval stays a call (its
	// question a multi round-trip result); a read call is a task.
	_, asking := call26(t, tg.url, "alice-token", "tools/call", "publish", map[string]any{"name": "publish"}, true)
	if res, _ := asking["result"].(map[string]any); res["resultType"] != "input_required" || res["inputRequests"] == nil {
		t.Errorf("a write call declaring the extension: %v; want its approval asked, not a task", asking)
	}
	_, created := call26(t, tg.url, "alice-token", "tools/call", "slow", map[string]any{"name": "slow", "arguments": map[string]any{"n": 2}}, true)
	res, _ := created["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" || res["status"] != "working" || res["ttlMs"] == nil {
		t.Fatalf("a call declaring the extension: %v; want a task", created)
	}
	<-tg.started
	status, got := call26(t, tg.url, "alice-token", "tasks/get", id, map[string]any{"taskId": id}, true)
	if r, _ := got["result"].(map[string]any); status != 200 || r["status"] != "working" || r["resultType"] != "complete" || r["pollIntervalMs"] == nil {
		t.Errorf("tasks/get while it runs: %d %v", status, got)
	}
	for _, tc := range []struct {
		name, header string
		params       map[string]any
	}{
		{"no Mcp-Name", "", map[string]any{"taskId": id}},
		{"another task's id in Mcp-Name", task.NewID(), map[string]any{"taskId": id}},
		{"a taskId that is not a string", id, map[string]any{"taskId": 7}},
	} {
		status, msg := call26(t, tg.url, "alice-token", "tasks/get", tc.header, tc.params, true)
		if e, _ := msg["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != float64(-32020) {
			t.Errorf("%s: %d %v; want 400 and -32020", tc.name, status, msg)
		}
	}
	if _, msg := call26(t, tg.url, "alice-token", "tasks/get", id, map[string]any{"taskId": id}, false); msg["error"] == nil ||
		msg["error"].(map[string]any)["code"] != float64(-32021) {
		t.Errorf("tasks/get without the extension declared: %v; want -32021", msg)
	}
	_, theirs := call26(t, tg.url, "bob-token", "tasks/get", id, map[string]any{"taskId": id}, true)
	forgedID := task.NewID()
	_, forged := call26(t, tg.url, "bob-token", "tasks/get", forgedID, map[string]any{"taskId": forgedID}, true)
	if fmt.Sprint(theirs["error"]) != fmt.Sprint(forged["error"]) || theirs["error"] == nil {
		t.Errorf("bob's tasks/get of alice's task: %v; of a forged id: %v; want the same error", theirs, forged)
	}
	if _, msg := call26(t, tg.url, "alice-token", "tasks/update", id, map[string]any{"taskId": id, "inputResponses": map[string]any{"x": map[string]any{}}}, true); msg["result"] == nil {
		t.Errorf("tasks/update: %v; want an acknowledgement", msg)
	}
	close(tg.release)
	var final map[string]any
	for range 200 { // at the poll interval the task gives, bounded
		_, got = call26(t, tg.url, "alice-token", "tasks/get", id, map[string]any{"taskId": id}, true)
		final, _ = got["result"].(map[string]any)
		if final["status"] != "working" {
			break
		}
		time.Sleep(time.Duration(final["pollIntervalMs"].(float64)) * time.Millisecond)
	}
	if final["status"] != "completed" || resultText(final["result"].(map[string]any)) != `slow done with {"n":2}` {
		t.Errorf("the task at its end: %v; want completed with the call's result inline", final)
	}
	// A tool's error result is a completed task (SEP-2663), and a cancel
	// is acknowledged, even after the end.
	_, created = call26(t, tg.url, "alice-token", "tools/call", "fails", map[string]any{"name": "fails"}, true)
	fid := created["result"].(map[string]any)["taskId"].(string)
	for range 200 {
		_, got = call26(t, tg.url, "alice-token", "tasks/get", fid, map[string]any{"taskId": fid}, true)
		if final, _ = got["result"].(map[string]any); final["status"] != "working" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if final["status"] != "completed" || final["result"].(map[string]any)["isError"] != true || final["error"] != nil {
		t.Errorf("a task whose tool returned an error: %v; want completed, its result isError", final)
	}
	if _, msg := call26(t, tg.url, "alice-token", "tasks/cancel", fid, map[string]any{"taskId": fid}, true); msg["result"] == nil {
		t.Errorf("tasks/cancel of an ended task: %v; want an acknowledgement", msg)
	}
}

// TestATaskWaitsForItsApproval: a task's call that needs its client's
// approval asks on the session (elicitation/create naming the task in
// related-task), the task input_required while it waits; approved, the
// call runs and the task completes.
func TestATaskWaitsForItsApproval(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	asked := make(chan *mcp.ElicitRequest, 1)
	decide := make(chan struct{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "approver", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req
			select {
			case <-decide:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	}).Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: tg.url, HTTPClient: &http.Client{Transport: bearer{"alice-token"}}, MaxRetries: -1}, legacySession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	s := &taskSession{t: t, url: tg.url, token: "alice-token", sid: cs.ID(), rev: "2025-11-25"}
	id := s.startTask("publish", nil)
	var req *mcp.ElicitRequest
	select {
	case req = <-asked:
	case <-ctxT(t).Done():
		t.Fatal("the client was not asked to approve the task's call")
	}
	rel, _ := req.Params.Meta[relatedTaskKey].(map[string]any)
	if rel["taskId"] != id {
		t.Errorf("the approval's _meta: %v; want related-task %s", req.Params.Meta, id)
	}
	got, rerr := s.call("tasks/get", map[string]any{"taskId": id})
	if rerr != nil || got["status"] != "input_required" {
		t.Errorf("tasks/get while the approval waits: %v, %v; want input_required", got, rerr)
	}
	close(decide)
	res, rerr := s.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil || resultText(res) != "published" {
		t.Errorf("tasks/result once approved: %v, %v", res, rerr)
	}
	if got, _ := s.call("tasks/get", map[string]any{"taskId": id}); got["status"] != "completed" {
		t.Errorf("tasks/get at the end: %v; want completed", got)
	}
}

// TestAHeadlessTaskWaitsForAnOperator: a task's call whose client cannot
// be asked waits for an operator with the task input_required, saying so,
// and completes once an operator (another process's queue on the same
// file) approves it.
func TestAHeadlessTaskWaitsForAnOperator(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	dir := t.TempDir()
	grants := approval.NewFiles(filepath.Join(dir, "approvals.json"))
	tg.approver.SetOperators(Operators{Wait: time.Minute, Grants: grants, Logger: slog.New(slog.DiscardHandler),
		Queue: approval.NewFileQueue(filepath.Join(dir, "pending.json"), grants, "serve")})
	operator := approval.NewFileQueue(filepath.Join(dir, "pending.json"), approval.NewFiles(grants.Path()), "cli")

	s := openRaw(t, tg.url, "alice-token", "2025-11-25") // no elicitation: headless
	id := s.startTask("publish", nil)
	ctx := ctxT(t)
	changes := operator.Watch(ctx)
	var pending []approval.Request
	for len(pending) == 0 {
		var err error
		if pending, err = operator.Pending(ctx); err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			select {
			case <-changes:
			case <-ctx.Done():
				t.Fatal("the task's call never waited for an operator")
			}
		}
	}
	got, rerr := s.call("tasks/get", map[string]any{"taskId": id})
	if rerr != nil || got["status"] != "input_required" || !strings.Contains(fmt.Sprint(got["statusMessage"]), "operator's approval of publish") {
		t.Errorf("tasks/get while an operator is awaited: %v, %v; want input_required, waiting for an operator", got, rerr)
	}
	if _, err := operator.Decide(ctx, pending[0].ID, approval.Decision{Approve: true, By: "cli:ann"}); err != nil {
		t.Fatal(err)
	}
	res, rerr := s.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil || resultText(res) != "published" {
		t.Errorf("tasks/result once an operator approved: %v, %v", res, rerr)
	}
}

// TestTasksEndFailedWhenTheGatewayDrains: a replica that shuts down gives
// its tasks' calls the drain's grace, then cancels them; each task ends
// failed, saying the replica shut down (not working forever, not
// cancelled as if its client had asked).
func TestTasksEndFailedWhenTheGatewayDrains(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	s := openRaw(t, tg.url, "alice-token", "2025-11-25")
	id := s.startTask("slow", nil)
	<-tg.started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n := tg.h.Drain(ctx, 0); n < 1 {
		t.Errorf("Drain cancelled %d calls; want the task's", n)
	}
	r, err := tg.st.Get(ctx, "subject:alice", id)
	if err != nil || r.Status != task.Failed || !strings.Contains(r.Message, "shut down") {
		t.Errorf("the task after the drain: %+v, %v; want failed, saying the replica shut down", r, err)
	}
}

// TestACallersRunningTasksAreBounded: a caller runs at most 32 tasks at
// once on a replica; the next is refused, another caller's is not, and
// one ending makes room.
func TestACallersRunningTasksAreBounded(t *testing.T) {
	t.Parallel()
	tg := newTaskGateway(t)
	s := openRaw(t, tg.url, "alice-token", "2025-11-25")
	for range maxTasksRunning {
		s.startTask("slow", nil)
	}
	_, rerr := s.call("tools/call", map[string]any{"name": "slow", "task": map[string]any{}})
	if rerr == nil || rerr.Code != -32600 {
		t.Errorf("task %d of one caller: %v; want refused (-32600)", maxTasksRunning+1, rerr)
	}
	bob := openRaw(t, tg.url, "bob-token", "2025-11-25")
	bob.startTask("quick", nil)
	for range maxTasksRunning {
		<-tg.started
	}
	close(tg.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, rerr = s.call("tools/call", map[string]any{"name": "quick", "task": map[string]any{}})
		if rerr == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rerr != nil {
		t.Errorf("a task once the others ended: %v", rerr)
	}
}

// TestTasksWithoutSessions: a gateway serving --stateless offers 2025 tasks
// all the same (its task methods are custom methods there), each request
// on its own.
func TestTasksWithoutSessions(t *testing.T) {
	t.Parallel()
	tg := newTaskGatewayWith(t, true)
	s := openRaw(t, tg.url, "alice-token", "2025-11-25")
	// A stateless gateway's Mcp-Session-Id is only the client's own
	// description of itself (clientTokenPrefix), for its audit, never a
	// session.
	if s.sid != "" && !strings.HasPrefix(s.sid, clientTokenPrefix) {
		t.Fatalf("a stateless gateway gave a session: %s", s.sid)
	}
	id := s.startTask("slow", map[string]any{"n": 3})
	<-tg.started
	if got, rerr := s.call("tasks/get", map[string]any{"taskId": id}); rerr != nil || got["status"] != "working" {
		t.Errorf("tasks/get: %v, %v; want working", got, rerr)
	}
	if _, rerr := openRaw(t, tg.url, "bob-token", "2025-11-25").call("tasks/get", map[string]any{"taskId": id}); rerr == nil || rerr.Code != -32602 {
		t.Errorf("bob's tasks/get of alice's task: %v; want not found", rerr)
	}
	close(tg.release)
	res, rerr := s.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil || resultText(res) != `slow done with {"n":3}` {
		t.Errorf("tasks/result: %v, %v", res, rerr)
	}
}

// TestDeclaresTasksReadsTheMetaAsDecoded: declaresTasks answers from the
// request's _meta as it came, as go-sdk's decoding of the capabilities
// would answer, and without encoding and decoding them again.
func TestDeclaresTasksReadsTheMetaAsDecoded(t *testing.T) {
	// Not parallel: testing.AllocsPerRun needs the test alone.
	for _, capsJSON := range []string{
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":null}}`,
		`{"extensions":{"io.modelcontextprotocol/other":{}}}`,
		`{"extensions":{"IO.modelcontextprotocol/TASKS":{}}}`,
		`{"Extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		`{"extensions":["io.modelcontextprotocol/tasks"]}`,
		`{"extensions":"io.modelcontextprotocol/tasks"}`,
		`{"elicitation":{}}`,
		`{}`,
		`"io.modelcontextprotocol/tasks"`,
		``,
	} {
		meta := mcp.Meta{}
		if capsJSON != "" {
			var caps any
			if err := json.Unmarshal([]byte(capsJSON), &caps); err != nil {
				t.Fatal(err)
			}
			meta[mcp.MetaKeyClientCapabilities] = caps
		}
		req := &mcp.ServerRequest[*mcp.CallToolParamsRaw]{Params: &mcp.CallToolParamsRaw{Meta: meta, Name: "demo__echo"}}
		want := false
		if caps := req.ClientCapabilities(); caps != nil {
			_, want = caps.Extensions[tasksExtension]
		}
		if got := declaresTasks(req); got != want {
			t.Errorf("capabilities %s: declaresTasks %v, go-sdk's decoding says %v", capsJSON, got, want)
		}
	}
	var caps any
	_ = json.Unmarshal([]byte(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`), &caps)
	req := &mcp.ServerRequest[*mcp.CallToolParamsRaw]{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{mcp.MetaKeyClientCapabilities: caps}}}
	if n := testing.AllocsPerRun(100, func() { declaresTasks(req) }); n != 0 {
		t.Errorf("declaresTasks allocates %v times a call; want none (it decoded the capabilities again)", n)
	}
}
