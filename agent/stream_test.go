package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/agent/agenttest"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// openaiChunk is one streamed chat completion chunk; finish "" sends null.
func openaiChunk(delta map[string]any, finish string) agenttest.Event {
	var fr any
	if finish != "" {
		fr = finish
	}
	return agenttest.Event{Data: jsonString(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fr}},
	})}
}

func anthropicEvent(name string, v map[string]any) agenttest.Event {
	v["type"] = name
	return agenttest.Event{Name: name, Data: jsonString(v)}
}

var anthropicStart = anthropicEvent("message_start", map[string]any{"message": map[string]any{
	"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted", "content": []any{},
	"stop_reason": nil, "usage": map[string]any{"input_tokens": 1, "output_tokens": 0},
}})

func TestReplyCutAtTheTokenLimitIsNotAnAnswer(t *testing.T) {
	cases := map[string]func(t *testing.T, s *scripted) Provider{
		"openai":    func(t *testing.T, s *scripted) Provider { return openaiFor(t, s) },
		"anthropic": func(t *testing.T, s *scripted) Provider { return anthropicFor(t, s) },
	}
	replies := map[string]http.HandlerFunc{
		"openai": agenttest.SSE(
			openaiChunk(map[string]any{"role": "assistant", "content": "The three steps are: one, two"}, ""),
			openaiChunk(map[string]any{}, "length"),
			agenttest.Event{Data: "[DONE]"}),
		"anthropic": agenttest.SSE(anthropicStart,
			anthropicEvent("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
			anthropicEvent("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "The three steps are: one, two"}}),
			anthropicEvent("content_block_stop", map[string]any{"index": 0}),
			anthropicEvent("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "max_tokens"}, "usage": map[string]any{"output_tokens": 5}}),
			anthropicEvent("message_stop", map[string]any{})),
	}
	for name, provider := range cases {
		t.Run(name, func(t *testing.T) {
			s := newScripted(t, replies[name])
			out, err := New(newBench(t, nil).ex, provider(t, s), nil).Run(context.Background(), "list the steps")
			if !errors.Is(err, ErrCut) {
				t.Fatalf("err = %v, want ErrCut", err)
			}
			if out.Text != "The three steps are: one, two" {
				t.Errorf("text = %q", out.Text)
			}
		})
	}
}

func TestToolCallCutAtTheTokenLimitIsReportedAsCut(t *testing.T) {
	ran := false
	save := &tool.Tool{Name: "notes__save", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
		ran = true
		return tool.TextResult("saved"), nil
	}}
	replies := map[string]http.HandlerFunc{
		"openai": agenttest.SSE(
			openaiChunk(map[string]any{"role": "assistant", "content": ""}, ""),
			openaiChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "c1", "type": "function",
				"function": map[string]any{"name": "notes__save", "arguments": `{"text":"a long no`}}}}, ""),
			openaiChunk(map[string]any{}, "length"),
			agenttest.Event{Data: "[DONE]"}),
		"anthropic": agenttest.SSE(anthropicStart,
			anthropicEvent("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": "c1", "name": "notes__save", "input": map[string]any{}}}),
			anthropicEvent("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"text":"a long no`}}),
			anthropicEvent("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "max_tokens"}, "usage": map[string]any{"output_tokens": 5}}),
			anthropicEvent("message_stop", map[string]any{})),
		// As Anthropic sends it (issue 23.11): the cut block is closed
		// with content_block_stop before the stop_reason says it was cut.
		"anthropic-closed": agenttest.SSE(anthropicStart,
			anthropicEvent("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": "c1", "name": "notes__save", "input": map[string]any{}}}),
			anthropicEvent("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"text":"a long no`}}),
			anthropicEvent("content_block_stop", map[string]any{"index": 0}),
			anthropicEvent("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "max_tokens"}, "usage": map[string]any{"output_tokens": 5}}),
			anthropicEvent("message_stop", map[string]any{})),
	}
	for _, name := range []string{"openai", "anthropic", "anthropic-closed"} {
		t.Run(name, func(t *testing.T) {
			ran = false
			b := newBench(t, nil, save)
			var p Provider
			var s *scripted
			if name == "openai" {
				s = newScripted(t, replies[name], openaiReply("ok"))
				p = openaiFor(t, s)
			} else {
				s = newScripted(t, replies[name], anthropicReply("ok"))
				p = anthropicFor(t, s)
			}
			out, err := New(b.ex, p, nil).Run(context.Background(), "save a note")
			if err != nil {
				t.Fatal(err)
			}
			if ran {
				t.Error("the cut call ran")
			}
			if len(out.Steps) != 1 || out.Steps[0].Result.Reason != ToolCutReason {
				t.Fatalf("steps = %+v", out.Steps)
			}
			sent := jsonString(s.Requests()[1]["messages"])
			contains(t, "tool result sent back", sent, "reached its length limit", "not run")
			if strings.Contains(sent, "invalid arguments") {
				t.Errorf("the cut call was reported as invalid arguments:\n%s", sent)
			}
		})
	}
}

func TestStreamEndingWithoutItsTerminatorIsAnError(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		// Text, then the connection ends cleanly: no finish_reason, no [DONE].
		s := newScripted(t, agenttest.SSE(openaiChunk(map[string]any{"role": "assistant", "content": "Half an ans"}, "")))
		_, err := New(newBench(t, nil).ex, openaiFor(t, s), nil).Run(context.Background(), "x")
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("err = %v, want ErrStalled", err)
		}
		contains(t, "error", err.Error(), "ended before its finish_reason", "incomplete")
	})
	t.Run("anthropic", func(t *testing.T) {
		s := newScripted(t, agenttest.SSE(anthropicStart,
			anthropicEvent("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
			anthropicEvent("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "Half an ans"}})))
		_, err := New(newBench(t, nil).ex, anthropicFor(t, s), nil).Run(context.Background(), "x")
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("err = %v, want ErrStalled", err)
		}
		contains(t, "error", err.Error(), "ended before its message_stop event")
	})
}

func TestIdleStreamIsAnError(t *testing.T) {
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", openaiChunk(map[string]any{"role": "assistant", "content": "Thinking"}, "").Data)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then silence, until the client gives up
	})
	p, err := NewOpenAI("m", &OpenAIOptions{BaseURL: s.URL + "/v1", IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	log := &audit.Memory{}
	done := make(chan error, 1)
	go func() {
		_, err := New(newBench(t, nil).ex, p, &Options{Audit: audit.NewLog(log, nil)}).Run(context.Background(), "x")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStalled) || errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrStalled", err)
		}
		contains(t, "error", err.Error(), "sent nothing for 100ms")
	case <-time.After(30 * time.Second):
		t.Fatal("a silent stream was waited on for 30 s")
	}
	if evs := log.Events(); len(evs) != 1 || evs[0].Reason != "stalled" {
		t.Errorf("audit = %+v", evs)
	}
}

func TestAnthropicOverloadedMidStreamIsRetried(t *testing.T) {
	s := newScripted(t,
		agenttest.SSE(anthropicStart,
			agenttest.Event{Name: "error", Data: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}),
		anthropicReply("fine"))
	a := New(newBench(t, nil).ex, anthropicFor(t, s), nil)
	var waits []time.Duration
	a.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	out, err := a.Run(context.Background(), "x")
	if err != nil || out.Text != "fine" {
		t.Fatalf("out = %+v, err = %v", out, err)
	}
	if !slices.Equal(waits, []time.Duration{time.Second}) {
		t.Errorf("waits = %v, want one backoff of 1s", waits)
	}
}

func TestOnWaitTellsOfEachRequestAndRetry(t *testing.T) {
	s := newScripted(t, status(http.StatusTooManyRequests, "slow down", "Retry-After", "2.5"), openaiReply("done"))
	var got []string
	a := New(newBench(t, nil).ex, openaiFor(t, s), &Options{OnWait: func(attempt int, retry time.Duration, err error) {
		got = append(got, fmt.Sprintf("%d %v %v", attempt, retry, errors.Is(err, ErrRateLimited)))
	}})
	a.sleep = func(context.Context, time.Duration) error { return nil }
	if _, err := a.Run(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	want := []string{"1 0s false", "1 2.5s true", "2 0s false"}
	if !slices.Equal(got, want) {
		t.Errorf("OnWait calls = %q, want %q", got, want)
	}
}

func TestEachResultIsReportedWhenItsCallEnds(t *testing.T) {
	// slow__first ends only after fast__second's result was reported:
	// reported at the end of the round, it would wait in vain.
	secondReported := make(chan struct{})
	var seen []string
	var infos sync.Map
	slow := &tool.Tool{Name: "slow__first", Tier: tool.Read, Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
		ci, _ := tool.CallInfoFrom(ctx)
		infos.Store("slow__first", ci)
		select {
		case <-secondReported:
			return tool.TextResult("one"), nil
		case <-time.After(10 * time.Second):
			return tool.ErrorResult(tool.ReasonFailed, "the other result was not reported first"), nil
		}
	}}
	fast := &tool.Tool{Name: "fast__second", Tier: tool.Read, Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
		ci, _ := tool.CallInfoFrom(ctx)
		infos.Store("fast__second", ci)
		return tool.TextResult("two"), nil
	}}
	b := newBench(t, nil, slow, fast)
	s := newScripted(t,
		openaiReply("", ToolCall{ID: "c1", Name: "slow__first", Args: `{}`}, ToolCall{ID: "c2", Name: "fast__second", Args: `{}`}),
		openaiReply("done"))
	a := New(b.ex, openaiFor(t, s), &Options{OnToolResult: func(call ToolCall, res *tool.Result) {
		seen = append(seen, call.Name+"="+res.Text())
		if call.Name == "fast__second" {
			close(secondReported)
		}
	}})
	if _, err := a.Run(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"fast__second=two", "slow__first=one"}; !slices.Equal(seen, want) {
		t.Errorf("results reported = %q, want %q", seen, want)
	}
	for name, id := range map[string]string{"slow__first": "c1", "fast__second": "c2"} {
		ci, _ := infos.Load(name)
		if c, _ := ci.(tool.CallInfo); c.Name != name || c.ID != id {
			t.Errorf("%s ran with call info %+v", name, ci)
		}
	}
}

func TestNobodyToAskIsNotARefusal(t *testing.T) {
	write := textTool("notes__save", "Saves a note.", tool.Write, "saved")
	b := newBench(t, func(context.Context, tool.PendingCall) (bool, error) {
		return false, fmt.Errorf("%w: no terminal", tool.ErrNobodyToAsk)
	}, write)
	s := newScripted(t, openaiReply("", ToolCall{ID: "c1", Name: "notes__save", Args: `{}`}), openaiReply("ok"))
	out, err := New(b.ex, openaiFor(t, s), nil).Run(context.Background(), "save")
	if err != nil {
		t.Fatal(err)
	}
	if r := out.Steps[0].Result; r.Reason != tool.ReasonUnconfirmed {
		t.Errorf("result = %+v, want reason unconfirmed", r)
	}
	sent := openaiToolMessages(t, s.Requests()[1])[0][1]
	contains(t, "tool message", sent, "Nobody was there to confirm", "did not refuse")
	if strings.Contains(sent, "refused this call") || strings.Contains(sent, "declined") {
		t.Errorf("the model was told the user refused: %s", sent)
	}
	if k := b.kinds(); !slices.Contains(k, "confirmation.rejected:unconfirmed") {
		t.Errorf("audit = %v", k)
	}
}
