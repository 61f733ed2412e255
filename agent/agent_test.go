package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

func openaiFor(t *testing.T, s *scripted) *OpenAI {
	t.Helper()
	p, err := NewOpenAI("scripted-model", &OpenAIOptions{BaseURL: s.URL + "/v1", APIKey: "sk-test", APIKeyEnv: "TEST_OPENAI_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCallsOfOneReplyRunConcurrentlyAndReturnInOrder(t *testing.T) {
	// Each tool waits until the other has started: run one after the other,
	// the first would wait in vain.
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	waiter := func(name, text string) *tool.Tool {
		return &tool.Tool{Name: name, Tier: tool.Read, Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			started.Done()
			select {
			case <-both:
				return tool.TextResult(text), nil
			case <-time.After(30 * time.Second):
				return tool.ErrorResult(tool.ReasonFailed, "the other call never started: calls ran one at a time"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
	}
	b := newBench(t, nil, waiter("slow__first", "one"), waiter("slow__second", "two"))
	s := newScripted(t,
		openaiReply("Working on it. ", ToolCall{ID: "c1", Name: "slow__first", Args: `{}`}, ToolCall{ID: "c2", Name: "slow__second", Args: `{}`}),
		openaiReply("Both done."),
	)
	var streamed strings.Builder
	a := New(b.ex, openaiFor(t, s), &Options{OnText: func(d string) { streamed.WriteString(d) }})
	out, err := a.Run(context.Background(), "run both")
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "Both done." || out.Rounds != 1 || len(out.Steps) != 2 {
		t.Fatalf("outcome = %+v", out)
	}
	if got := streamed.String(); got != "Working on it. Both done." {
		t.Errorf("streamed text = %q", got)
	}
	reqs := s.Requests()
	got := openaiToolMessages(t, reqs[1])
	want := [][2]string{{"c1", "one"}, {"c2", "two"}}
	if !slices.Equal(got, want) {
		t.Errorf("tool messages sent back = %v, want %v", got, want)
	}
	// The assistant turn is replayed with both calls, before the results.
	msgs := messagesOf(t, reqs[1])
	if msgs[0]["role"] != "user" || msgs[1]["role"] != "assistant" || len(msgs[1]["tool_calls"].([]any)) != 2 {
		t.Errorf("history sent back = %v", msgs)
	}
	if k := s.Keys()[0]; k != "Bearer sk-test" {
		t.Errorf("authorization = %q", k)
	}
}

func TestValidationErrorGoesBackAndTheModelCorrectsIt(t *testing.T) {
	b := newBench(t, nil, addTool)
	s := newScripted(t,
		openaiReply("", ToolCall{ID: "c1", Name: "calc__add", Args: `{"a":1,"b":"two"}`}),
		openaiReply("", ToolCall{ID: "c2", Name: "calc__add", Args: `{"a":1,"b":2}`}),
		openaiReply("1 + 2 = 3"),
	)
	out, err := New(b.ex, openaiFor(t, s), nil).Run(context.Background(), "add 1 and two")
	if err != nil {
		t.Fatal(err)
	}
	if out.Rounds != 2 || out.Steps[0].Result.Reason != tool.ReasonInvalidArgs || out.Steps[1].Result.Text() != "3" {
		t.Fatalf("steps = %+v", out.Steps)
	}
	reqs := s.Requests()
	first := openaiToolMessages(t, reqs[1])
	if len(first) != 1 || first[0][0] != "c1" {
		t.Fatalf("first results = %v", first)
	}
	contains(t, "the invalid call's result", first[0][1], "invalid arguments", "/b", "correct the arguments")
	second := openaiToolMessages(t, reqs[2])
	if len(second) != 2 || second[1] != [2]string{"c2", "3"} {
		t.Errorf("second results = %v", second)
	}
	want := []string{
		"call.requested", "validation.failed:invalid_arguments",
		"call.requested", "validation.passed", "call.executed",
	}
	if got := b.kinds(); !slices.Equal(got, want) {
		t.Errorf("audit = %v, want %v", got, want)
	}
}

func TestUnknownToolAndMalformedArgumentsAreResultsAndAudited(t *testing.T) {
	b := newBench(t, nil, addTool)
	s := newScripted(t,
		openaiReply("", ToolCall{ID: "c1", Name: "calc__nope", Args: `{}`}, ToolCall{ID: "c2", Name: "calc__add", Args: `{"a":1,`}),
		openaiReply("I could not."),
	)
	out, err := New(b.ex, openaiFor(t, s), nil).Run(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if out.Steps[0].Result.Reason != tool.ReasonUnknownTool || out.Steps[1].Result.Reason != tool.ReasonInvalidArgs {
		t.Fatalf("reasons = %s, %s", out.Steps[0].Result.Reason, out.Steps[1].Result.Reason)
	}
	got := openaiToolMessages(t, s.Requests()[1])
	contains(t, "unknown tool result", got[0][1], "unknown tool", `"calc__nope"`)
	contains(t, "malformed arguments result", got[1][1], "invalid arguments")
	// The malformed arguments are replayed as the model wrote them.
	calls := messagesOf(t, s.Requests()[1])[1]["tool_calls"].([]any)
	if args := calls[1].(map[string]any)["function"].(map[string]any)["arguments"]; args != `{"a":1,` {
		t.Errorf("replayed arguments = %v", args)
	}
	want := []string{"call.requested", "validation.failed:unknown_tool", "call.requested", "validation.failed:invalid_arguments"}
	if got := b.kinds(); !slices.Equal(got, want) {
		t.Errorf("audit = %v, want %v", got, want)
	}
}

func TestDeclinedConfirmationTellsTheModelNotToRetry(t *testing.T) {
	var asked []string
	confirm := func(_ context.Context, c tool.PendingCall) (bool, error) {
		asked = append(asked, c.Name+" "+string(c.Args))
		return false, nil
	}
	ran := false
	del := &tool.Tool{Name: "files__delete", Tier: tool.Destructive, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
		ran = true
		return tool.TextResult("deleted"), nil
	}}
	b := newBench(t, confirm, del)
	s := newScripted(t,
		openaiReply("", ToolCall{ID: "c1", Name: "files__delete", Args: `{"path":"/tmp/x"}`}),
		openaiReply("Understood, I left it alone."),
	)
	out, err := New(b.ex, openaiFor(t, s), nil).Run(context.Background(), "delete /tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	if ran || len(asked) != 1 || out.Steps[0].Result.Reason != tool.ReasonDeclined {
		t.Fatalf("ran=%v asked=%v result=%+v", ran, asked, out.Steps[0].Result)
	}
	got := openaiToolMessages(t, s.Requests()[1])
	contains(t, "declined result", got[0][1], "declined", "do not call it again")
}

func TestRoundLimitStopsTheLoop(t *testing.T) {
	b := newBench(t, nil, textTool("loop__again", "", tool.Read, "again"))
	again := openaiReply("", ToolCall{ID: "c", Name: "loop__again", Args: `{}`})
	s := newScripted(t, again, again, again, again)
	a := New(b.ex, openaiFor(t, s), &Options{MaxToolRounds: 2})
	conv := a.NewConversation()
	out, err := conv.Send(context.Background(), "loop")
	if !errors.Is(err, ErrRoundLimit) {
		t.Fatalf("err = %v, want ErrRoundLimit", err)
	}
	if out.Rounds != 2 || len(out.Steps) != 2 {
		t.Errorf("rounds = %d, steps = %d, want 2 and 2", out.Rounds, len(out.Steps))
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("model asked %d times, want 3 (2 rounds, then the reply that hit the limit)", n)
	}
	// The last calls are answered in the history, so the conversation can
	// go on.
	msgs := conv.Messages()
	last := msgs[len(msgs)-1]
	if last.Role != ToolResults || len(last.Results) != 1 || !strings.Contains(last.Results[0].Parts[0].Text, "limit of 2 tool rounds") {
		t.Errorf("last message = %+v", last)
	}
	if len(b.kinds()) != 2*3 {
		t.Errorf("audit = %v, want two executed calls", b.kinds())
	}
}

func TestLargeResultIsCompactedForTheModelOnly(t *testing.T) {
	big := strings.Repeat("0123456789", 10_000) // 100 kB
	b := newBench(t, nil, textTool("data__dump", "", tool.Read, "HEAD"+big+"TAIL"))
	s := newScripted(t, openaiReply("", ToolCall{ID: "c1", Name: "data__dump", Args: `{}`}), openaiReply("ok"))
	out, err := New(b.ex, openaiFor(t, s), &Options{ResultBudget: 2000}).Run(context.Background(), "dump")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Steps[0].Result.Text()); n != len(big)+8 {
		t.Errorf("library result has %d bytes, want all %d", n, len(big)+8)
	}
	sent := openaiToolMessages(t, s.Requests()[1])[0][1]
	if len(sent) > 2300 {
		t.Errorf("model was sent %d bytes, want about the 2000-byte budget", len(sent))
	}
	contains(t, "compacted result", sent, "HEAD", "TAIL", "result compacted", "the caller keeps the whole result")
}

func TestFindToolsLoadsMatchesFromALargeToolSet(t *testing.T) {
	var tools []*tool.Tool
	for i := range 500 {
		tools = append(tools, textTool(fmt.Sprintf("svc%03d__op", i), fmt.Sprintf("Operation number %d on inventory records, with options and filters.", i), tool.Read, "x"))
	}
	tools = append(tools, textTool("weather__forecast", "Forecast the weather for a city.", tool.Read, "sunny"))
	b := newBench(t, nil, tools...)
	s := newScripted(t,
		openaiReply("", ToolCall{ID: "f1", Name: FindTools, Args: `{"query":"weather forecast","limit":3}`}),
		openaiReply("", ToolCall{ID: "c1", Name: "weather__forecast", Args: `{}`}),
		openaiReply("Sunny."),
	)
	out, err := New(b.ex, openaiFor(t, s), nil).Run(context.Background(), "weather in Oslo?")
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "Sunny." || out.Steps[1].Result.Text() != "sunny" {
		t.Fatalf("outcome = %+v", out)
	}
	reqs := s.Requests()
	if got := toolNames(reqs[0]); !slices.Equal(got, []string{FindTools}) {
		t.Errorf("first request offered %v, want only find_tools", got)
	}
	found := openaiToolMessages(t, reqs[1])[0][1]
	contains(t, "find_tools result", found, "weather__forecast (read): Forecast the weather")
	if got := toolNames(reqs[1]); len(got) > 4 || !slices.Contains(got, "weather__forecast") || got[0] != FindTools {
		t.Errorf("second request offered %v, want find_tools and at most 3 matches including weather__forecast", got)
	}
	// find_tools is answered by the agent, not the executor.
	if got := b.kinds(); !slices.Equal(got, []string{"call.requested", "validation.passed", "call.executed"}) {
		t.Errorf("audit = %v", got)
	}
}

func TestToolsUnderTheBudgetAreAllSent(t *testing.T) {
	b := newBench(t, nil, addTool, textTool("x__y", "", tool.Read, ""))
	s := newScripted(t, openaiReply("hi"))
	if _, err := New(b.ex, openaiFor(t, s), nil).Run(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(s.Requests()[0]); !slices.Equal(got, []string{"calc__add", "x__y"}) {
		t.Errorf("tools = %v", got)
	}
}

func TestCancelDuringTheModelRequestCancelsIt(t *testing.T) {
	arrived := make(chan struct{})
	abandoned := make(chan struct{})
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(abandoned)
	})
	b := newBench(t, nil, addTool)
	log := &audit.Memory{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err := New(b.ex, openaiFor(t, s), &Options{Audit: audit.NewLog(log, nil)}).Run(ctx, "x")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	<-abandoned // the server saw the request go away
	evs := log.Events()
	if len(evs) != 1 || evs[0].Kind != audit.LLMFailed || evs[0].Reason != "cancelled" {
		t.Errorf("audit = %+v", evs)
	}
}

func TestCancelDuringAToolCallCancelsIt(t *testing.T) {
	running := make(chan struct{})
	block := &tool.Tool{Name: "slow__wait", Tier: tool.Read, Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
		close(running)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	b := newBench(t, nil, block)
	s := newScripted(t, openaiReply("", ToolCall{ID: "c1", Name: "slow__wait", Args: `{}`}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-running; cancel() }()
	out, err := New(b.ex, openaiFor(t, s), nil).Run(ctx, "x")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if out.Steps[0].Result.Reason != tool.ReasonCancelled {
		t.Errorf("result = %+v", out.Steps[0].Result)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("model asked %d times after the cancel, want 1 in all", n)
	}
}

func TestUnauthorizedNamesTheKeyVariable(t *testing.T) {
	s := newScripted(t, status(http.StatusUnauthorized, "Incorrect API key provided"))
	b := newBench(t, nil, addTool)
	log := &audit.Memory{}
	_, err := New(b.ex, openaiFor(t, s), &Options{Audit: audit.NewLog(log, nil)}).Run(context.Background(), "x")
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	contains(t, "error", err.Error(), "401 Unauthorized", "Incorrect API key provided", "TEST_OPENAI_KEY")
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: a bad key is not retried", n)
	}
	evs := log.Events()
	if len(evs) != 1 || evs[0].Kind != audit.LLMFailed || evs[0].Reason != "unauthorized" || evs[0].Source != "openai" {
		t.Errorf("audit = %+v", evs)
	}

	// Without a key, the message says the variable is unset.
	p, err := NewOpenAI("m", &OpenAIOptions{BaseURL: s.URL, APIKeyEnv: "TEST_OPENAI_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	pe := p.ep.statusError(401, nil, "", nil)
	contains(t, "no-key error", pe.Error(), "no key was sent: set TEST_OPENAI_KEY")
}

func TestRateLimitIsRetriedHonouringRetryAfter(t *testing.T) {
	s := newScripted(t,
		status(http.StatusTooManyRequests, "slow down", "Retry-After", "7"),
		status(http.StatusTooManyRequests, "slow down", "Retry-After-Ms", "250"),
		openaiReply("done"),
	)
	b := newBench(t, nil, addTool)
	log := &audit.Memory{}
	a := New(b.ex, openaiFor(t, s), &Options{Audit: audit.NewLog(log, nil)})
	var waits []time.Duration
	a.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	out, err := a.Run(context.Background(), "x")
	if err != nil || out.Text != "done" {
		t.Fatalf("out = %+v, err = %v", out, err)
	}
	if !slices.Equal(waits, []time.Duration{7 * time.Second, 250 * time.Millisecond}) {
		t.Errorf("waits = %v, want [7s 250ms]", waits)
	}
	evs := log.Events()
	if len(evs) != 2 {
		t.Fatalf("audit = %+v, want two llm.failed events", evs)
	}
	for i, want := range []time.Duration{7 * time.Second, 250 * time.Millisecond} {
		if evs[i].Kind != audit.LLMFailed || evs[i].Reason != "rate_limited" || evs[i].Attempt != i+1 || evs[i].Backoff != want {
			t.Errorf("event %d = %+v", i, evs[i])
		}
	}
}

func TestRateLimitRetriesAreBounded(t *testing.T) {
	limited := status(http.StatusTooManyRequests, "slow down")
	t.Run("attempts", func(t *testing.T) {
		s := newScripted(t, limited, limited, limited)
		a := New(newBench(t, nil).ex, openaiFor(t, s), &Options{MaxRetries: 2})
		var waits []time.Duration
		a.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
		_, err := a.Run(context.Background(), "x")
		if !errors.Is(err, ErrRateLimited) {
			t.Fatalf("err = %v, want ErrRateLimited", err)
		}
		contains(t, "error", err.Error(), "429", "gave up after 3 attempts")
		if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second}) {
			t.Errorf("waits = %v, want exponential backoff [1s 2s]", waits)
		}
	})
	t.Run("wait too long", func(t *testing.T) {
		s := newScripted(t, status(http.StatusTooManyRequests, "slow down", "Retry-After", "3600"))
		a := New(newBench(t, nil).ex, openaiFor(t, s), &Options{MaxRetryWait: time.Minute})
		a.sleep = func(context.Context, time.Duration) error { t.Error("waited for a retry beyond the bound"); return nil }
		_, err := a.Run(context.Background(), "x")
		if !errors.Is(err, ErrRateLimited) {
			t.Fatalf("err = %v, want ErrRateLimited", err)
		}
		contains(t, "error", err.Error(), "asks to wait 1h0m0s, longer than the 1m0s allowed")
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		s := newScripted(t, limited)
		ctx, cancel := context.WithCancel(context.Background())
		a := New(newBench(t, nil).ex, openaiFor(t, s), nil)
		a.sleep = func(ctx context.Context, d time.Duration) error { cancel(); return sleepCtx(ctx, d) }
		if _, err := a.Run(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func TestUnreachableEndpointIsExplained(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	p, err := NewOpenAI("m", &OpenAIOptions{BaseURL: "http://" + addr + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	log := &audit.Memory{}
	_, err = New(newBench(t, nil).ex, p, &Options{Audit: audit.NewLog(log, nil)}).Run(context.Background(), "x")
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	contains(t, "error", err.Error(), "cannot reach http://"+addr+"/v1", "connection refused")
	if evs := log.Events(); len(evs) != 1 || evs[0].Reason != "unreachable" {
		t.Errorf("audit = %+v", evs)
	}
}

func TestConversationKeepsHistoryAcrossMessages(t *testing.T) {
	s := newScripted(t, openaiReply("Hello."), openaiReply("You said hi."))
	a := New(newBench(t, nil).ex, openaiFor(t, s), &Options{System: "Be brief."})
	conv := a.NewConversation()
	for _, text := range []string{"hi", "what did I say?"} {
		if _, err := conv.Send(context.Background(), text); err != nil {
			t.Fatal(err)
		}
	}
	msgs := messagesOf(t, s.Requests()[1])
	var roles []string
	for _, m := range msgs {
		roles = append(roles, fmt.Sprint(m["role"]))
	}
	if !slices.Equal(roles, []string{"system", "user", "assistant", "user"}) || msgs[2]["content"] != "Hello." {
		t.Errorf("second request's messages = %v", msgs)
	}
}

// A server error is retried as a rate limit is, with the same backoff
// and bound (issue 23.12); one that says the request can never work is
// not.
func TestServerErrorsAreRetriedWithBackoff(t *testing.T) {
	s := newScripted(t,
		status(http.StatusInternalServerError, "oops"),
		status(http.StatusBadGateway, "upstream died"),
		status(http.StatusGatewayTimeout, "upstream slow"),
		openaiReply("done"),
	)
	a := New(newBench(t, nil).ex, openaiFor(t, s), nil)
	var waits []time.Duration
	a.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	out, err := a.Run(context.Background(), "x")
	if err != nil || out.Text != "done" {
		t.Fatalf("out = %+v, err = %v", out, err)
	}
	if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Errorf("waits = %v, want [1s 2s 4s]", waits)
	}

	failing := status(http.StatusInternalServerError, "oops")
	s = newScripted(t, failing, failing, failing)
	a = New(newBench(t, nil).ex, openaiFor(t, s), &Options{MaxRetries: 2})
	a.sleep = func(context.Context, time.Duration) error { return nil }
	_, err = a.Run(context.Background(), "x")
	if !errors.Is(err, ErrRequest) {
		t.Fatalf("err = %v, want ErrRequest", err)
	}
	contains(t, "error", err.Error(), "500", "gave up after 3 attempts")

	s = newScripted(t, status(http.StatusNotImplemented, "no such thing"))
	a = New(newBench(t, nil).ex, openaiFor(t, s), nil)
	a.sleep = func(context.Context, time.Duration) error { t.Error("a 501 was retried"); return nil }
	if _, err := a.Run(context.Background(), "x"); !errors.Is(err, ErrRequest) {
		t.Fatalf("err = %v, want ErrRequest", err)
	}
}
