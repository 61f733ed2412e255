package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolwire/toolwire/agent/agenttest"
)

// TestParallelCallsNumberedZeroStaySeparate: Ollama's OpenAI-compatible
// stream gives every parallel tool call index 0; a new id under the same
// index starts a new call instead of gluing the arguments together.
func TestParallelCallsNumberedZeroStaySeparate(t *testing.T) {
	chunk := func(delta map[string]any, finish any) agenttest.Event {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "ollama",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		return agenttest.Event{Data: string(b)}
	}
	call := func(id, args string) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function", "function": map[string]any{"name": "calc__add", "arguments": args},
		}}}
	}
	b := newBench(t, nil, addTool)
	s := newScripted(t,
		agenttest.SSE(chunk(map[string]any{"role": "assistant", "content": ""}, nil),
			chunk(call("call_1", `{"a":1,"b":2}`), nil),
			chunk(call("call_2", `{"a":3,"b":4}`), nil),
			chunk(map[string]any{}, "tool_calls"), agenttest.Event{Data: "[DONE]"}),
		openaiReply("3 and 7."),
	)
	out, err := New(b.ex, openaiFor(t, s), nil).Run(context.Background(), "add twice")
	if err != nil {
		t.Fatal(err)
	}
	got := openaiToolMessages(t, s.Requests()[1])
	if len(got) != 2 || got[0][0] != "call_1" || got[0][1] != "3" || got[1][0] != "call_2" || got[1][1] != "7" {
		t.Errorf("tool results sent back = %v; want call_1 -> 3 and call_2 -> 7", got)
	}
	if out.Text != "3 and 7." {
		t.Errorf("answer = %q", out.Text)
	}
}
