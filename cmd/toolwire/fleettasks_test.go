package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/task"
)

// brewUpstream is an MCP server of 2026-07-28 whose tool "brew" runs only
// as a task (the tasks extension, SEP-2663): a plain call is refused with
// -32021 naming the extension, a call declaring it gets a task, which
// completes after its brewing time. Its tasks are the process's, answered
// on any request (the revision has no sessions), as a server whose tasks
// outlive its clients keeps them. Everything else is go-sdk's stateless
// server.
type brewUpstream struct {
	next http.Handler
	brew time.Duration

	mu      sync.Mutex
	tasks   map[string]*brewTask
	polls   int
	started int
}

type brewTask struct {
	args      string
	start     time.Time
	cancelled bool
}

const tasksExt = "io.modelcontextprotocol/tasks"

func newBrewUpstream(t *testing.T, brew time.Duration) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "brewery", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "brew", Description: "brews, as a task", InputSchema: json.RawMessage(`{"type":"object","properties":{"tea":{"type":"string"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("brew runs only as a task")
		})
	u := &brewUpstream{brew: brew, tasks: map[string]*brewTask{},
		next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})}
	ts := httptest.NewServer(u)
	t.Cleanup(ts.Close)
	return ts.URL
}

func (u *brewUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		u.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			TaskID    string          `json:"taskId"`
			Meta      struct {
				Caps struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		u.next.ServeHTTP(w, r)
		return
	}
	reply := func(status int, v map[string]any) {
		v["jsonrpc"], v["id"] = "2.0", m.ID
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	state := func(id, status string, extra map[string]any) map[string]any {
		s := map[string]any{"resultType": "complete", "taskId": id, "status": status,
			"createdAt": "2026-08-01T00:00:00Z", "lastUpdatedAt": "2026-08-01T00:00:00Z", "ttlSeconds": 600, "pollIntervalMilliseconds": 200}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case m.Method == "tools/call" && m.Params.Name == "brew":
		if _, ok := m.Params.Meta.Caps.Extensions[tasksExt]; !ok {
			reply(http.StatusBadRequest, map[string]any{"error": map[string]any{"code": -32021, "message": "brew runs as a task",
				"data": map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExt: map[string]any{}}}}}})
			return
		}
		u.started++
		id := fmt.Sprintf("brew-%d", u.started)
		u.tasks[id] = &brewTask{args: string(m.Params.Arguments), start: time.Now()}
		s := state(id, "working", map[string]any{"statusMessage": "steeping"})
		s["resultType"] = "task"
		reply(http.StatusOK, map[string]any{"result": s})
	case m.Method == "tasks/get", m.Method == "tasks/cancel":
		bt := u.tasks[m.Params.TaskID]
		if bt == nil {
			reply(http.StatusOK, map[string]any{"error": map[string]any{"code": -32602, "message": "no such task"}})
			return
		}
		u.polls++
		if m.Method == "tasks/cancel" {
			bt.cancelled = true
		}
		switch {
		case bt.cancelled:
			reply(http.StatusOK, map[string]any{"result": state(m.Params.TaskID, "cancelled", nil)})
		case time.Since(bt.start) >= u.brew:
			reply(http.StatusOK, map[string]any{"result": state(m.Params.TaskID, "completed", map[string]any{"result": map[string]any{
				"content": []any{map[string]any{"type": "text", "text": "brewed " + bt.args}}}})})
		default:
			reply(http.StatusOK, map[string]any{"result": state(m.Params.TaskID, "working", map[string]any{"statusMessage": "steeping"})})
		}
	default:
		u.mu.Unlock()
		u.next.ServeHTTP(w, r)
		u.mu.Lock()
	}
}

// rpcSession is a 2025-11-25 session spoken by hand (go-sdk's client
// cannot ask for a task), to one address.
type rpcSession struct {
	t      *testing.T
	url    string
	token  string
	sid    string
	next   atomic.Int64
	client *http.Client
}

func openRPC(t *testing.T, url, token string) *rpcSession {
	t.Helper()
	s := &rpcSession{t: t, url: url, token: token, client: &http.Client{Timeout: fleetWait}}
	if _, err := s.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "tasks", "version": "1"}}); err != nil {
		t.Fatalf("initialize at %s: %v", url, err)
	}
	resp := s.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	resp.Body.Close()
	return s
}

func (s *rpcSession) post(body []byte) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sid != "" {
		req.Header.Set("Mcp-Session-Id", s.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" && s.sid == "" {
		s.sid = id
	}
	return resp
}

type rpcErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcErr) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

func (s *rpcSession) call(method string, params any) (map[string]any, error) {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.next.Add(1), "method": method, "params": params})
	resp := s.post(body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, b)
	}
	var msg struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *rpcErr         `json:"error"`
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				if json.Unmarshal([]byte(data), &msg) == nil && msg.ID != nil {
					break
				}
			}
		}
	} else if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if msg.Error != nil {
		return nil, msg.Error
	}
	var out map[string]any
	if err := json.Unmarshal(msg.Result, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return out, nil
}

func (s *rpcSession) startTask(name string, args map[string]any) string {
	s.t.Helper()
	res, err := s.call("tools/call", map[string]any{"name": name, "arguments": args, "task": map[string]any{"ttl": 600000}})
	if err != nil {
		s.t.Fatalf("tools/call %s as a task: %v", name, err)
	}
	tk, _ := res["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if id == "" {
		s.t.Fatalf("tools/call %s as a task: %v; want a task", name, res)
	}
	return id
}

func contentText(res map[string]any) string {
	var b strings.Builder
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// TestFleetTaskOfAKilledReplica is issue 27's done-when: a client starts
// two tasks through replica r0, and leaves: one of a tool its upstream
// runs as a task of its own (brew, a few seconds' brewing), one of a plain
// upstream call (the demo server's slow_count, a minute of counting). r0
// is killed (SIGKILL, with its demo server) and started again. The
// client, on r1, fetches both: the upstream's task is followed by r1 to
// its result; the plain call, which nothing can finish any more, has
// ended failed, saying that its replica was lost. Each has one outcome.
func TestFleetTaskOfAKilledReplica(t *testing.T) {
	t.Parallel()
	brewURL := newBrewUpstream(t, 3*time.Second)
	c := startCluster(t, fleetOptions{replicas: 2, callers: 1, security: "  pins: off\n",
		extra: "  up:\n    url: " + quoteYAML(brewURL+"/mcp") + "\n"})
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	st, err := store.Open(ctx, c.dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := st.Tasks()
	if err != nil {
		t.Fatal(err)
	}

	on0 := openRPC(t, "http://"+c.replicas[0].addr+"/mcp", c.tokens[0])
	brewID := on0.startTask("up__brew", map[string]any{"tea": "sencha"})
	slowID := on0.startTask("demo__slow_count", map[string]any{"steps": 60, "interval_ms": 1000})
	// Before the kill: r0 holds both, the brew's upstream task is in its
	// record, and the count is under way (its progress is recorded).
	await := func(what string, ok func() bool) {
		t.Helper()
		for ctx.Err() == nil && !ok() {
			time.Sleep(50 * time.Millisecond)
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
	await("the brew's upstream task id in its record", func() bool {
		r, err := ts.Lookup(ctx, brewID)
		return err == nil && r.UpstreamTask != ""
	})
	await("the count's first progress in its record", func() bool {
		r, err := ts.Lookup(ctx, slowID)
		return err == nil && r.Progress > 0
	})
	held, _ := ts.Lookup(ctx, slowID)
	c.kill(0)
	if err := c.start(0); err != nil {
		t.Fatal(err)
	}

	on1 := openRPC(t, "http://"+c.replicas[1].addr+"/mcp", c.tokens[0])
	res, err := on1.call("tasks/result", map[string]any{"taskId": brewID})
	if err != nil || contentText(res) != `brewed {"tea":"sencha"}` || res["isError"] == true {
		t.Errorf("the brew's result on r1: %v, %v; want the upstream's", res, err)
	}
	res, err = on1.call("tasks/result", map[string]any{"taskId": slowID})
	if err != nil || res["isError"] != true || !strings.Contains(contentText(res), "was lost") {
		t.Errorf("the count's result on r1: %v, %v; want an error saying its replica was lost", res, err)
	}
	got, err := on1.call("tasks/get", map[string]any{"taskId": slowID})
	want := task.LostMessage(held.Instance)
	if err != nil || got["status"] != "failed" || got["statusMessage"] != want {
		t.Errorf("the count on r1: %v, %v; want failed: %q", got, err, want)
	}
	got, err = on1.call("tasks/get", map[string]any{"taskId": brewID})
	if err != nil || got["status"] != "completed" {
		t.Errorf("the brew on r1: %v, %v; want completed", got, err)
	}
	// The restarted r0 (a new instance) tells the same.
	again := openRPC(t, "http://"+c.replicas[0].addr+"/mcp", c.tokens[0])
	listed, err := again.call("tasks/list", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]any{}
	for _, x := range listed["tasks"].([]any) {
		m := x.(map[string]any)
		statuses[m["taskId"].(string)] = m["status"]
	}
	if statuses[brewID] != "completed" || statuses[slowID] != "failed" || len(statuses) != 2 {
		t.Errorf("tasks/list on the restarted r0: %v", statuses)
	}
	// The audit tells what came of each call: both calls' outcome is the
	// lost replica's (instance_lost); the brew's task was adopted and
	// ended completed on r1, the count's was not adopted. The events name
	// the call by its task.
	kinds := func(id string) []string {
		var out []string
		for _, ev := range tableEvents(t, c.dbURL) {
			if ev.CallID == "task:"+id {
				k := string(ev.Kind)
				if ev.Kind == audit.CallErrored || ev.Kind == audit.TaskEnded {
					k += "(" + ev.Reason + ")"
				}
				out = append(out, k)
			}
		}
		return out
	}
	var brewKinds []string
	for deadline := time.Now().Add(20 * time.Second); ; {
		brewKinds = kinds(brewID) // task.ended is written once the record has its outcome
		if slices.Contains(brewKinds, "task.ended(completed)") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"call.requested", "call.errored(" + store.ReasonInstanceLost + ")", "task.adopted", "task.ended(completed)"} {
		if !slices.Contains(brewKinds, want) {
			t.Errorf("the brew's audit events %v lack %s", brewKinds, want)
		}
	}
	countKinds := kinds(slowID)
	if !slices.Contains(countKinds, "call.errored("+store.ReasonInstanceLost+")") || slices.Contains(countKinds, "task.adopted") {
		t.Errorf("the count's audit events %v; want its call lost, and no adoption", countKinds)
	}

	// One outcome each: nothing changes them now.
	if _, err := ts.Finish(ctx, slowID, task.Outcome{Status: task.Completed}); err == nil {
		t.Error("a second outcome was accepted")
	}
}
