// Package agenttest provides scripted LLM endpoints for tests: an httptest
// server that answers each request with the next step of a script (a
// streamed OpenAI chat completion, a streamed Anthropic message, an error
// status) and keeps every request body it received, so a test can assert
// what the agent sent back.
//
//	srv := agenttest.NewServer(t,
//		agenttest.OpenAIReply("", agenttest.Call{ID: "c1", Name: "demo__echo", Args: `{"text":"hi"}`}),
//		agenttest.OpenAIReply("Done."),
//	)
//	// point the provider at srv.URL + "/v1", run, then inspect srv.Requests()
package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Server is a scripted endpoint. Its handlers run on the server's
// goroutines; Requests and Keys may be called at any time.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:port.
	URL string

	t     testing.TB
	steps []http.HandlerFunc

	mu     sync.Mutex
	got    []map[string]any
	keys   []string
	models http.HandlerFunc
	listed []string // the credential of each GET of the model list
}

// SetModels makes h answer the model list (GET …/models), which the CLI
// asks for to check the key before it starts anything. By default the
// list is answered with no models. Those requests are not steps of the
// script; ModelKeys returns their credentials.
func (s *Server) SetModels(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = h
}

// ModelKeys returns the credential each GET of the model list carried.
func (s *Server) ModelKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.listed...)
}

// NewServer starts a server answering request i with steps[i]. A request
// beyond the script fails the test and gets a 500. The server is closed
// when the test ends.
func NewServer(t testing.TB, steps ...http.HandlerFunc) *Server {
	t.Helper()
	s := &Server{t: t, steps: steps}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		s.mu.Lock()
		h := s.models
		s.listed = append(s.listed, credential(r))
		s.mu.Unlock()
		if h == nil {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[]}`)
			return
		}
		h(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		s.t.Errorf("request to %s is not JSON: %v\n%s", r.URL.Path, err, body)
	}
	key := credential(r)
	s.mu.Lock()
	i := len(s.got)
	s.got = append(s.got, req)
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	if i >= len(s.steps) {
		s.t.Errorf("request %d: the script has only %d steps", i+1, len(s.steps))
		http.Error(w, `{"error":{"message":"script exhausted"}}`, http.StatusInternalServerError)
		return
	}
	s.steps[i](w, r)
}

func credential(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return r.Header.Get("Authorization")
}

// Requests returns the request bodies received so far, decoded.
func (s *Server) Requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.got...)
}

// Keys returns the credential each request carried: its X-Api-Key header,
// or else its Authorization header.
func (s *Server) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// Call is a tool call a scripted reply makes.
type Call struct {
	ID, Name string
	// Args is the arguments' JSON text, sent as it is (it may be
	// malformed on purpose).
	Args string
}

// Event is one server-sent event: an optional event name and its data.
type Event struct {
	Name string
	Data string
}

// SSE answers with a text/event-stream body of events.
func SSE(events ...Event) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			if ev.Name != "" {
				fmt.Fprintf(w, "event: %s\n", ev.Name)
			}
			fmt.Fprintf(w, "data: %s\n\n", ev.Data)
		}
	}
}

// OpenAIReply streams a chat completion: the text in two pieces, then each
// call with its arguments split across two chunks, then [DONE].
func OpenAIReply(text string, calls ...Call) http.HandlerFunc {
	var evs []Event
	chunk := func(delta map[string]any, finish any) {
		evs = append(evs, Event{Data: mustJSON(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if text != "" {
		half := len(text) / 2
		chunk(map[string]any{"content": text[:half]}, nil)
		chunk(map[string]any{"content": text[half:]}, nil)
	}
	for i, c := range calls {
		half := len(c.Args) / 2
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args[:half]},
		}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "function": map[string]any{"arguments": c.Args[half:]},
		}}}, nil)
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	evs = append(evs, Event{Data: "[DONE]"})
	return SSE(evs...)
}

// AnthropicReply streams a message: the text as one block in two deltas,
// then a tool_use block per call with its input in two input_json_delta
// pieces.
func AnthropicReply(text string, calls ...Call) http.HandlerFunc {
	var evs []Event
	add := func(name string, v map[string]any) {
		v["type"] = name
		evs = append(evs, Event{Name: name, Data: mustJSON(v)})
	}
	add("message_start", map[string]any{"message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted", "content": []any{},
		"stop_reason": nil, "usage": map[string]any{"input_tokens": 1, "output_tokens": 0},
	}})
	index := 0
	if text != "" {
		half := len(text) / 2
		add("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "text_delta", "text": text[:half]}})
		add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "text_delta", "text": text[half:]}})
		add("content_block_stop", map[string]any{"index": index})
		index++
	}
	for _, c := range calls {
		half := len(c.Args) / 2
		add("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.Args[:half]}})
		add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.Args[half:]}})
		add("content_block_stop", map[string]any{"index": index})
		index++
	}
	stop := "end_turn"
	if len(calls) > 0 {
		stop = "tool_use"
	}
	add("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	add("message_stop", map[string]any{})
	return SSE(evs...)
}

// Status answers with an HTTP error status and a JSON error body in the
// shape both APIs use, with extra headers given as name, value pairs.
func Status(code int, msg string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"error","message":%s}}`, mustJSON(msg))
	}
}

// Messages returns a request's messages.
func Messages(req map[string]any) []map[string]any {
	raw, _ := req["messages"].([]any)
	out := make([]map[string]any, len(raw))
	for i, m := range raw {
		out[i], _ = m.(map[string]any)
	}
	return out
}

// ToolNames returns the names of the tools a request offered, in either
// API's shape.
func ToolNames(req map[string]any) []string {
	var names []string
	tools, _ := req["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		if fn, ok := m["function"].(map[string]any); ok {
			names = append(names, fmt.Sprint(fn["name"]))
		} else {
			names = append(names, fmt.Sprint(m["name"]))
		}
	}
	return names
}

// OpenAIToolResults returns the tool messages of an OpenAI request as
// pairs of call id and content, in order.
func OpenAIToolResults(req map[string]any) [][2]string {
	var out [][2]string
	for _, m := range Messages(req) {
		if m["role"] == "tool" {
			out = append(out, [2]string{fmt.Sprint(m["tool_call_id"]), fmt.Sprint(m["content"])})
		}
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
