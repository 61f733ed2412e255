package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolwire/toolwire/tool"
)

func TestRunReturnsResultsInInputOrderWhenHandlersFinishInReverse(t *testing.T) {
	const n = 4
	ctx := testContext(t)
	// returned[i] is closed when handler i returns; handler i waits for
	// handler i+1 to have returned, so they finish n-1, n-2, ..., 0.
	var returned [n]chan struct{}
	for i := range returned {
		returned[i] = make(chan struct{})
	}
	var (
		orderMu sync.Mutex
		order   []int
	)
	var tools []*tool.Tool
	for i := range n {
		tools = append(tools, &tool.Tool{Name: fmt.Sprintf("t%d", i), Tier: tool.Read,
			Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
				defer close(returned[i])
				if i+1 < n && !wait(ctx, returned[i+1]) {
					return nil, ctx.Err()
				}
				orderMu.Lock()
				order = append(order, i)
				orderMu.Unlock()
				return tool.TextResult(fmt.Sprintf("result %d", i)), nil
			}})
	}
	ex := tool.NewExecutor(newRegistry(t, nil, tools...), nil)
	var calls []tool.Call
	for i := range n {
		calls = append(calls, tool.Call{Name: fmt.Sprintf("t%d", i)})
	}
	results := ex.Run(ctx, calls)
	if len(results) != n {
		t.Fatalf("got %d results, want %d", len(results), n)
	}
	for i, res := range results {
		wantText(t, res, fmt.Sprintf("result %d", i))
	}
	if fmt.Sprint(order) != "[3 2 1 0]" {
		t.Errorf("handlers finished in order %v, want [3 2 1 0]", order)
	}
}

func TestRunRunsCallsConcurrently(t *testing.T) {
	// Each handler waits for the other to have started: with serial
	// execution neither could, and the deadline would end the wait.
	ctx := testContext(t)
	startedA, startedB := make(chan struct{}), make(chan struct{})
	rendezvous := func(mine chan struct{}, theirs <-chan struct{}) tool.Handler {
		return func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			close(mine)
			if !wait(ctx, theirs) {
				return nil, fmt.Errorf("the other call never started: %w", ctx.Err())
			}
			return tool.TextResult("met"), nil
		}
	}
	ex := tool.NewExecutor(newRegistry(t, nil,
		&tool.Tool{Name: "a", Tier: tool.Read, Handler: rendezvous(startedA, startedB)},
		&tool.Tool{Name: "b", Tier: tool.Read, Handler: rendezvous(startedB, startedA)},
	), nil)
	results := ex.Run(ctx, []tool.Call{{Name: "a"}, {Name: "b"}})
	wantText(t, results[0], "met")
	wantText(t, results[1], "met")
}

func TestRunEmptyBatchReturnsNoResults(t *testing.T) {
	ex := tool.NewExecutor(tool.NewRegistry(nil), nil)
	if got := ex.Run(context.Background(), nil); len(got) != 0 {
		t.Errorf("Run(nil) = %v, want empty", got)
	}
}

func TestRunMixesPhaseOneFailuresAndRunsInOneBatch(t *testing.T) {
	rec := &recorder{}
	ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "t", Tier: tool.Read, Handler: rec.handle,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}), nil)
	results := ex.Run(context.Background(), []tool.Call{
		{Name: "t", Args: json.RawMessage(`{"n":1}`)},
		{Name: "missing"},
		{Name: "t", Args: json.RawMessage(`{"n":"x"}`)},
		{Name: "t", Args: json.RawMessage(`{"n":2}`)},
	})
	if len(results) != 4 {
		t.Fatalf("got %d results, want 4", len(results))
	}
	wantText(t, results[0], "ok")
	wantError(t, results[1], tool.ReasonUnknownTool)
	wantError(t, results[2], tool.ReasonInvalidArgs)
	wantText(t, results[3], "ok")
	if rec.calls() != 2 {
		t.Errorf("handler called %d times, want 2", rec.calls())
	}
}

func TestConfirmerSeesOnlyValidatedArgs(t *testing.T) {
	conf := &confirmRecorder{answer: true}
	rec := &recorder{}
	ex := tool.NewExecutor(newRegistry(t, conf, &tool.Tool{
		Name: "del", Description: "Delete one file.", Tier: tool.Destructive, Handler: rec.handle,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
	}), nil)
	res := ex.Call(context.Background(), "del", json.RawMessage(`{ "path" : "/tmp/evil", "path": "/tmp/x", "n": 12345678901234567890 }`))
	wantText(t, res, "ok")
	seen := conf.seen()
	if len(seen) != 1 {
		t.Fatalf("confirmer called %d times, want 1", len(seen))
	}
	pc := seen[0]
	const wantArgs = `{"n":12345678901234567890,"path":"/tmp/x"}`
	if pc.Name != "del" || pc.Tier != tool.Destructive || pc.Description != "Delete one file." || string(pc.Args) != wantArgs {
		t.Errorf("PendingCall = {Name:%q Tier:%v Description:%q Args:%s}, want {del destructive \"Delete one file.\" %s}",
			pc.Name, pc.Tier, pc.Description, pc.Args, wantArgs)
	}
	if got := string(rec.last(t)); got != string(pc.Args) {
		t.Errorf("handler got %s, confirmer was shown %s: they must be the same bytes", got, pc.Args)
	}
}

func TestConfirmerIsNotAskedAboutInvalidCalls(t *testing.T) {
	conf := &confirmRecorder{answer: true}
	ex := tool.NewExecutor(newRegistry(t, conf, &tool.Tool{Name: "w", Tier: tool.Write, Handler: okHandler,
		InputSchema: json.RawMessage(`{"type":"object","required":["x"]}`)}), nil)
	wantError(t, ex.Call(context.Background(), "w", json.RawMessage(`{}`)), tool.ReasonInvalidArgs)
	wantError(t, ex.Call(context.Background(), "w", json.RawMessage(`[`)), tool.ReasonInvalidArgs)
	if n := len(conf.seen()); n != 0 {
		t.Errorf("confirmer asked %d times about invalid calls", n)
	}
}

func TestConfirmationDecidesWhetherTheHandlerRuns(t *testing.T) {
	type decision struct {
		answer bool
		err    error
		panicV any
	}
	tests := []struct {
		name        string
		decision    decision
		wantRun     bool
		wantMessage []string
	}{
		{"accepted", decision{answer: true}, true, nil},
		{"rejected", decision{answer: false}, false, []string{`"w" was declined`, "do not retry"}},
		{"error", decision{answer: true, err: errors.New("terminal is not interactive")},
			false, []string{"not confirmed", "terminal is not interactive", "do not retry"}},
		{"false and error", decision{answer: false, err: errors.New("user hung up")},
			false, []string{"user hung up"}},
		{"panic", decision{panicV: "prompt exploded"}, false, []string{"confirmer panicked", "prompt exploded"}},
	}
	for _, tier := range []tool.Tier{tool.Write, tool.Destructive} {
		for _, tt := range tests {
			t.Run(tier.String()+"/"+tt.name, func(t *testing.T) {
				conf := &confirmRecorder{answer: tt.decision.answer, err: tt.decision.err, panicV: tt.decision.panicV}
				rec := &recorder{}
				ex := tool.NewExecutor(newRegistry(t, conf, &tool.Tool{Name: "w", Tier: tier, Handler: rec.handle}), nil)
				res := ex.Call(context.Background(), "w", json.RawMessage(`{}`))
				if n := len(conf.seen()); n != 1 {
					t.Fatalf("confirmer asked %d times, want 1", n)
				}
				if tt.wantRun {
					wantText(t, res, "ok")
					if rec.calls() != 1 {
						t.Errorf("handler called %d times, want 1", rec.calls())
					}
					return
				}
				wantError(t, res, tool.ReasonDeclined)
				if rec.calls() != 0 {
					t.Errorf("handler ran %d times after the call was declined", rec.calls())
				}
				for _, want := range tt.wantMessage {
					if !strings.Contains(res.Message, want) {
						t.Errorf("message %q does not contain %q", res.Message, want)
					}
				}
			})
		}
	}
}

func TestConfirmerCalledConcurrentlyWithinABatch(t *testing.T) {
	// Both confirmations must be pending at once for either to answer.
	ctx := testContext(t)
	var asked atomic.Int32
	both := make(chan struct{})
	conf := tool.ConfirmFunc(func(ctx context.Context, _ tool.PendingCall) (bool, error) {
		if asked.Add(1) == 2 {
			close(both)
		}
		return wait(ctx, both), nil
	})
	ex := tool.NewExecutor(newRegistry(t, conf,
		&tool.Tool{Name: "w1", Tier: tool.Write, Handler: okHandler},
		&tool.Tool{Name: "w2", Tier: tool.Write, Handler: okHandler}), nil)
	for _, res := range ex.Run(ctx, []tool.Call{{Name: "w1"}, {Name: "w2"}}) {
		wantText(t, res, "ok")
	}
}

func TestConfirmerApprovalAfterContextEndsIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{}
	conf := tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) {
		cancel() // the caller gave up while the prompt was open
		return true, nil
	})
	ex := tool.NewExecutor(newRegistry(t, conf, &tool.Tool{Name: "w", Tier: tool.Write, Handler: rec.handle}), nil)
	res := ex.Call(ctx, "w", nil)
	// Cancelled, not refused, and said in words rather than as Go's
	// "context canceled".
	wantError(t, res, tool.ReasonCancelled)
	if !strings.Contains(res.Message, "cancelled while waiting for confirmation") || strings.Contains(res.Message, context.Canceled.Error()) {
		t.Errorf("message %q does not say the call was cancelled", res.Message)
	}
	if rec.calls() != 0 {
		t.Error("handler ran after the context ended during confirmation")
	}
}

func TestReadToolsNeverReachTheConfirmer(t *testing.T) {
	conf := &confirmRecorder{answer: false}
	ex := tool.NewExecutor(newRegistry(t, conf,
		&tool.Tool{Name: "r", Tier: tool.Read, Handler: okHandler},
		&tool.Tool{Name: "w", Tier: tool.Write, Handler: okHandler}), nil)
	results := ex.Run(context.Background(), []tool.Call{{Name: "r"}, {Name: "r"}, {Name: "w"}})
	wantText(t, results[0], "ok")
	wantText(t, results[1], "ok")
	wantError(t, results[2], tool.ReasonDeclined)
	seen := conf.seen()
	if len(seen) != 1 || seen[0].Name != "w" {
		t.Errorf("confirmer saw %+v, want only the write call", seen)
	}
}

func TestHandlerPanicBecomesFailedResult(t *testing.T) {
	logger, logs := quietLogger()
	reg := newRegistry(t, nil,
		&tool.Tool{Name: "boom", Tier: tool.Read, Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			panic("kaboom")
		}},
		&tool.Tool{Name: "fine", Tier: tool.Read, Handler: okHandler})
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Logger: logger})
	// Alone (runs on the caller's goroutine) and in a batch (own goroutine).
	res := ex.Call(context.Background(), "boom", nil)
	wantError(t, res, tool.ReasonFailed)
	if !strings.Contains(res.Message, "kaboom") {
		t.Errorf("message %q does not carry the panic value", res.Message)
	}
	results := ex.Run(context.Background(), []tool.Call{{Name: "boom"}, {Name: "fine"}})
	wantError(t, results[0], tool.ReasonFailed)
	wantText(t, results[1], "ok")
	if got := logs.String(); !strings.Contains(got, "tool handler panicked") || !strings.Contains(got, "kaboom") {
		t.Errorf("panic not reported to the logger; log = %q", got)
	}
}

func TestHandlerOutcomesMapToReasons(t *testing.T) {
	tests := []struct {
		name    string
		handler tool.Handler
		reason  tool.Reason
		message string
	}{
		{"nil result and nil error", func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil },
			tool.ReasonFailed, "returned no result"},
		{"plain error", func(context.Context, json.RawMessage) (*tool.Result, error) {
			return nil, errors.New("connection lost")
		}, tool.ReasonFailed, "connection lost"},
		{"error wrapping DeadlineExceeded", func(context.Context, json.RawMessage) (*tool.Result, error) {
			return nil, fmt.Errorf("server slow: %w", context.DeadlineExceeded)
		}, tool.ReasonTimeout, "timed out"},
		{"error wrapping Canceled", func(context.Context, json.RawMessage) (*tool.Result, error) {
			return nil, fmt.Errorf("stopped: %w", context.Canceled)
		}, tool.ReasonCancelled, "cancelled"},
		{"error result and an error: the error wins", func(context.Context, json.RawMessage) (*tool.Result, error) {
			return tool.ErrorResult(tool.ReasonTool, "ignored"), errors.New("protocol error")
		}, tool.ReasonFailed, "protocol error"},
		{"hand-built error result gets tool_error and its text", func(context.Context, json.RawMessage) (*tool.Result, error) {
			return &tool.Result{IsError: true, Content: []tool.Content{&tool.Text{Text: "file\nnot   found"}, &tool.Image{Data: []byte{1}}, &tool.Text{Text: "sorry"}}}, nil
		}, tool.ReasonTool, "file not found sorry"},
		{"error result without any text gets a generic message", func(context.Context, json.RawMessage) (*tool.Result, error) {
			return &tool.Result{IsError: true}, nil
		}, tool.ReasonTool, "the tool reported an error"},
		{"ErrorResult keeps its own reason and message", func(context.Context, json.RawMessage) (*tool.Result, error) {
			return tool.ErrorResult(tool.ReasonTimeout, "upstream timed out"), nil
		}, tool.ReasonTimeout, "upstream timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "t", Tier: tool.Read, Handler: tt.handler}), nil)
			res := ex.Call(context.Background(), "t", nil)
			wantError(t, res, tt.reason)
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q does not contain %q", res.Message, tt.message)
			}
		})
	}
}

func TestHandlerErrorResultMessageIsExactlyItsText(t *testing.T) {
	ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "t", Tier: tool.Read,
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			return &tool.Result{IsError: true, Content: []tool.Content{&tool.Text{Text: "no such file: a.txt"}}}, nil
		}}), nil)
	res := ex.Call(context.Background(), "t", nil)
	if res.Reason != tool.ReasonTool || res.Message != "no such file: a.txt" {
		t.Errorf("Reason, Message = %q, %q; want %q, %q", res.Reason, res.Message, tool.ReasonTool, "no such file: a.txt")
	}
}

func TestCancelledContextBeforeRunSkipsHandler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := &recorder{}
	conf := &confirmRecorder{answer: true}
	ex := tool.NewExecutor(newRegistry(t, conf,
		&tool.Tool{Name: "r", Tier: tool.Read, Handler: rec.handle},
		&tool.Tool{Name: "w", Tier: tool.Write, Handler: rec.handle}), nil)
	for _, res := range ex.Run(ctx, []tool.Call{{Name: "r"}, {Name: "w"}}) {
		wantError(t, res, tool.ReasonCancelled)
		if !strings.Contains(res.Message, "before it started") {
			t.Errorf("message %q does not say the call never started", res.Message)
		}
	}
	if rec.calls() != 0 || len(conf.seen()) != 0 {
		t.Errorf("handler called %d times, confirmer %d times, after cancellation", rec.calls(), len(conf.seen()))
	}
}

func TestExpiredDeadlineBeforeRunIsTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	rec := &recorder{}
	ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "r", Tier: tool.Read, Handler: rec.handle}), nil)
	wantError(t, ex.Call(ctx, "r", nil), tool.ReasonTimeout)
	if rec.calls() != 0 {
		t.Error("handler called with an expired deadline")
	}
}

func TestContextCancelledDuringHandlerIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	started := make(chan struct{})
	ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "slow", Tier: tool.Read,
		Handler: func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}}), nil)
	done := make(chan *tool.Result)
	go func() { done <- ex.Call(ctx, "slow", nil) }()
	<-started
	cancel()
	res := <-done
	wantError(t, res, tool.ReasonCancelled)
	if strings.Contains(res.Message, "before it started") {
		t.Errorf("message %q claims the call never started", res.Message)
	}
}

// deadlineCtx is a context whose deadline passes exactly when the test says
// so, letting a test put "the deadline passed while the handler ran"
// deterministically.
type deadlineCtx struct {
	context.Context
	done   chan struct{}
	passed atomic.Bool
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.done }

func (c *deadlineCtx) Err() error {
	if c.passed.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *deadlineCtx) expire() {
	c.passed.Store(true)
	close(c.done)
}

func TestDeadlineDuringHandlerWithWrappedErrorIsTimeout(t *testing.T) {
	ctx := newDeadlineCtx()
	ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "slow", Tier: tool.Read,
		Handler: func(hctx context.Context, _ json.RawMessage) (*tool.Result, error) {
			ctx.expire() // the deadline passes mid-call
			<-hctx.Done()
			return nil, hctx.Err()
		}}), nil)
	res := ex.Call(ctx, "slow", nil)
	wantError(t, res, tool.ReasonTimeout)
	if strings.Contains(res.Message, "before it started") {
		t.Errorf("message %q claims the call never started", res.Message)
	}
}

func TestDeadlineDuringHandlerWithUnwrappedErrorIsTimeout(t *testing.T) {
	ctx := newDeadlineCtx()
	// The deadline passes while the handler runs, and the handler reports
	// its own unwrapped error, as a transport whose connection was torn
	// down by the deadline would.
	ex := tool.NewExecutor(newRegistry(t, nil, &tool.Tool{Name: "slow", Tier: tool.Read,
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			ctx.expire()
			return nil, errors.New("connection closed")
		}}), nil)
	wantError(t, ex.Call(ctx, "slow", nil), tool.ReasonTimeout)
}
