package mcpclient

// The 2026-07-28 tasks extension (SEP-2663). No published server implements
// it yet, and go-sdk's server cannot, so taskLayer serves its methods in
// front of a go-sdk stateless server, which serves everything else.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// taskLayer serves the tasks extension for one tool, "paint": a plain call
// of it is refused with -32021 naming the extension; a call declaring the
// extension gets a task, which says "mixing" once, then asks (as an input
// request) for a color, then completes with "painted <color>", unless it
// is cancelled. It checks what the extension asks of a client: the task's
// id as Mcp-Name and the latest requestState echoed.
type taskLayer struct {
	next http.Handler

	mu        sync.Mutex
	refused   int               // plain calls refused
	polls     int               // tasks/get answered
	color     string            // the answer tasks/update brought
	cancelled []string          // tasks/cancel's ids
	problems  []string          // what a client did wrong
	state     map[string]string // task id -> requestState last given
	stay      bool              // keep every task working
}

func (l *taskLayer) problem(format string, args ...any) {
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func (l *taskLayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		l.next.ServeHTTP(w, r)
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
			Name           string                     `json:"name"`
			TaskID         string                     `json:"taskId"`
			RequestState   string                     `json:"requestState"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
			Meta           struct {
				Caps struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		l.next.ServeHTTP(w, r)
		return
	}
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	result := func(v any) { answer(http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": v}) }
	task := func(id, status, message string, extra map[string]any) map[string]any {
		t := map[string]any{"resultType": "complete", "taskId": id, "status": status, "statusMessage": message,
			"createdAt": "2026-08-01T00:00:00Z", "lastUpdatedAt": "2026-08-01T00:00:00Z", "ttlSeconds": 60, "pollIntervalMilliseconds": 20}
		for k, v := range extra {
			t[k] = v
		}
		return t
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.HasPrefix(m.Method, "tasks/") {
		if got := r.Header.Get("Mcp-Name"); got != m.Params.TaskID {
			l.problem("%s with Mcp-Name %q for task %q", m.Method, got, m.Params.TaskID)
		}
		if want := l.state[m.Params.TaskID]; m.Params.RequestState != want {
			l.problem("%s with requestState %q, want %q", m.Method, m.Params.RequestState, want)
		}
	}
	id := "task-1"
	switch {
	case m.Method == "tools/call" && m.Params.Name == "paint":
		if _, ok := m.Params.Meta.Caps.Extensions[tasksExtension]; !ok {
			l.refused++
			answer(http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{
				"code": codeMissingCapability, "message": "this tool runs as a task",
				"data": map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}}}})
			return
		}
		l.state = map[string]string{id: "s1"}
		t := task(id, "working", "queued", map[string]any{"requestState": "s1"})
		t["resultType"] = "task"
		result(t)
	case m.Method == "tasks/get":
		l.polls++
		switch {
		case l.stay || l.polls == 1:
			l.state[id] = "s2"
			result(task(id, "working", "mixing", map[string]any{"requestState": "s2"}))
		case l.color == "":
			l.state[id] = "s3"
			result(task(id, "input_required", "waiting for a color", map[string]any{"requestState": "s3", "inputRequests": map[string]any{
				"color": map[string]any{"method": "elicitation/create", "params": map[string]any{"message": "Which color?",
					"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}}}}}}))
		default:
			delete(l.state, id) // no requestState on this one: none may follow
			result(task(id, "completed", "done", map[string]any{"result": map[string]any{
				"content": []any{map[string]any{"type": "text", "text": "painted " + l.color}}}}))
		}
	case m.Method == "tasks/update":
		var answer struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		if err := json.Unmarshal(m.Params.InputResponses["color"], &answer); err != nil || answer.Action != "accept" {
			l.problem("tasks/update answered %s", m.Params.InputResponses["color"])
		}
		l.color = fmt.Sprint(answer.Content["color"])
		result(map[string]any{"resultType": "complete"})
	case m.Method == "tasks/cancel":
		l.cancelled = append(l.cancelled, m.Params.TaskID)
		result(map[string]any{"resultType": "complete"})
	default:
		l.mu.Unlock()
		l.next.ServeHTTP(w, r)
		l.mu.Lock()
	}
}

// taskServer serves paint and the custom server's tools, 2026-07-28 style,
// with the tasks extension.
func taskServer(t *testing.T, stay bool) (*taskLayer, string) {
	srv := newCustomServer()
	srv.AddTool(&mcp.Tool{Name: "paint", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("paint runs only as a task")
		})
	l := &taskLayer{next: statelessHandler(srv), stay: stay}
	return l, serveHTTP(t, l)
}

// A tool that a 2026-07-28 server runs only as a task (the extension): the
// plain call is refused, toolwire calls it again declaring the extension,
// polls the task, answers its input request through the call's caller, and
// returns its result; the task's status messages are shown as progress.
func TestATaskOfTheTasksExtension(t *testing.T) {
	t.Parallel()
	l, url := taskServer(t, false)
	reg := confirmingRegistry()
	s := connect(t, httpConfig("up", url), reg, &Options{Relay: RelayCapabilities{Elicitation: true}})
	if p := s.Status().Protocol; p != "2026-07-28" {
		t.Fatalf("negotiated %q", p)
	}
	c := &researchCaller{answer: "unused"}
	painter := &colorCaller{researchCaller: c, color: "blue"}
	ex := tool.NewExecutor(reg, nil)
	for i := range 2 {
		res := ex.Call(tool.WithCaller(boundedCtx(t, waitTime), painter), "up__paint", nil)
		if res.IsError || res.Text() != "painted blue" {
			t.Fatalf("call %d: %q (%s)", i, res.Text(), res.Message)
		}
		l.mu.Lock()
		l.polls, l.color = 0, ""
		l.mu.Unlock()
	}
	progress, asked := c.messages()
	if len(asked) != 2 || asked[0] != "Which color?" {
		t.Errorf("the caller was asked %q, want the task's question each time", asked)
	}
	if got := strings.Join(progress, ","); !strings.HasPrefix(got, "queued,mixing,waiting for a color,done") {
		t.Errorf("progress shown %q, want each status message once", progress)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refused != 1 {
		t.Errorf("%d plain calls were refused, want 1: the second call went straight to a task", l.refused)
	}
	for _, p := range l.problems {
		t.Error(p)
	}
}

// colorCaller answers an elicitation with a color.
type colorCaller struct {
	*researchCaller
	color string
}

func (c *colorCaller) Ask(ctx context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	if _, err := c.researchCaller.Ask(ctx, kind, params); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"color": c.color}})
}

// Cancelling the call of a 2026 task sends tasks/cancel.
func TestCancellingATaskOfTheExtension(t *testing.T) {
	t.Parallel()
	l, url := taskServer(t, true)
	reg := confirmingRegistry()
	connect(t, httpConfig("up", url), reg, nil)
	ctx, cancel := context.WithCancel(boundedCtx(t, waitTime))
	c := &researchCaller{first: make(chan struct{})}
	done := make(chan *tool.Result, 1)
	go func() { done <- tool.NewExecutor(reg, nil).Call(tool.WithCaller(ctx, c), "up__paint", nil) }()
	select {
	case <-c.first:
	case res := <-done:
		t.Fatalf("the call ended before any progress: %+v", res)
	}
	cancel()
	if res := <-done; res.Reason != tool.ReasonCancelled {
		t.Fatalf("the cancelled call ended as %+v", res)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cancelled) != 1 || l.cancelled[0] != "task-1" {
		t.Errorf("tasks/cancel sent for %q, want task-1", l.cancelled)
	}
	for _, p := range l.problems {
		t.Error(p)
	}
}
