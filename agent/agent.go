package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// DefaultMaxToolRounds is how many rounds of tool calls one task may take
// unless [Options].MaxToolRounds says otherwise.
const DefaultMaxToolRounds = 10

// Retry bounds for rate limits, unless [Options] says otherwise.
const (
	DefaultMaxRetries   = 3
	DefaultMaxRetryWait = time.Minute
)

// ErrRoundLimit is returned by [Conversation.Send] when the model still
// asks for tools after the maximum number of tool rounds. The calls it
// asked for last are not run.
var ErrRoundLimit = errors.New("tool round limit reached")

// ErrCut is returned by [Conversation.Send] when the model's reply ended
// at its token limit without calling a tool: its text (in the [Outcome])
// is not a finished answer.
var ErrCut = errors.New("reply cut at the token limit")

// ToolCutReason is the reason of the result a call gets when the reply's
// token limit ended it while the model was writing it ([ToolCall].Cut).
// The call is not run; the model is told why, and may write it again.
const ToolCutReason tool.Reason = "cut_off"

// Options configures an [Agent]. A nil *Options, and each zero field, means
// the default.
type Options struct {
	// System is the system prompt.
	System string
	// MaxToolRounds bounds the rounds of tool calls per message sent
	// (default [DefaultMaxToolRounds]). A round is one model reply with
	// tool calls, run as one concurrent batch.
	MaxToolRounds int
	// ResultBudget bounds the bytes of text the model is shown of one
	// result (default [DefaultResultBudget]); see [ToolResult].
	ResultBudget int
	// ImageBudget bounds the bytes of images the model is shown of one
	// result (default [DefaultImageBudget]); negative means no images.
	ImageBudget int
	// ToolBudget bounds the estimated tokens (see [EstimateTokens]) of
	// the tool definitions sent with each request (default
	// [DefaultToolBudget]). Over it, the model is given the [FindTools]
	// meta-tool and sees only the tools it loads.
	ToolBudget int
	// MaxRetries bounds the retries of a rate-limited request (default
	// [DefaultMaxRetries]); negative means none.
	MaxRetries int
	// MaxRetryWait bounds one wait before a retry (default
	// [DefaultMaxRetryWait]). An endpoint that asks for a longer wait
	// gets no retry, so a run never waits more than MaxRetries times
	// MaxRetryWait in all.
	MaxRetryWait time.Duration
	// Audit receives an event for every failed request to the model
	// (kind llm.failed), retried or not. Tool calls are audited by the
	// executor. Nil means no audit.
	Audit *audit.Log

	// OnText receives the model's text as it streams.
	OnText func(delta string)
	// OnToolCall is told of each call of a round before the round runs,
	// in order; t is the registered tool, or nil for an unknown tool and
	// for the find_tools meta-tool.
	OnToolCall func(call ToolCall, t *tool.Tool)
	// OnToolResult is told of each call's whole result as soon as that
	// call ends, so in the order the calls end; calls to it are never
	// concurrent.
	OnToolResult func(call ToolCall, res *tool.Result)
	// OnWait is told when a wait starts: with retry 0 when request
	// attempt (from 1) is sent to the model, and with the wait and the
	// failure when a retry of a rate limit or an overload is put off by
	// retry, starting now. Calls come from the goroutine calling Send.
	OnWait func(attempt int, retry time.Duration, err error)
}

// Agent runs the tool loop: it sends a conversation and the registry's
// tools to a model, runs the calls the model asks for through the
// executor, and sends back the results until the model answers without
// calling a tool. An Agent is safe for concurrent use; each
// [Conversation] is not.
type Agent struct {
	ex       *tool.Executor
	provider Provider
	opts     Options
	sleep    func(ctx context.Context, d time.Duration) error // waits before a retry; replaced in tests
}

// New returns an agent calling tools through ex and the model through p.
func New(ex *tool.Executor, p Provider, opts *Options) *Agent {
	a := &Agent{ex: ex, provider: p, sleep: sleepCtx}
	if opts != nil {
		a.opts = *opts
	}
	o := &a.opts
	if o.MaxToolRounds <= 0 {
		o.MaxToolRounds = DefaultMaxToolRounds
	}
	if o.ResultBudget <= 0 {
		o.ResultBudget = DefaultResultBudget
	}
	if o.ImageBudget == 0 {
		o.ImageBudget = DefaultImageBudget
	}
	if o.ToolBudget <= 0 {
		o.ToolBudget = DefaultToolBudget
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = DefaultMaxRetryWait
	}
	return a
}

// Run performs one task: it is Send on a new conversation.
func (a *Agent) Run(ctx context.Context, task string) (*Outcome, error) {
	return a.NewConversation().Send(ctx, task)
}

// Outcome is what one message sent to the agent led to.
type Outcome struct {
	// Text is the model's last text: its answer, when Send succeeded.
	Text string
	// Rounds is how many rounds of tool calls ran.
	Rounds int
	// Steps are the tool calls, in the order the model asked for them.
	Steps []Step
}

// Step is one tool call and its result.
type Step struct {
	// Round is the round the call ran in, from 1.
	Round int
	// Call is the call as the model wrote it.
	Call ToolCall
	// Result is the whole result, as the executor returned it.
	Result *tool.Result
	// Sent is what the model was shown of it, within the budgets.
	Sent ToolResult
}

// Conversation is a dialogue with the model that keeps its history from
// one message to the next. It is not safe for concurrent use.
type Conversation struct {
	a        *Agent
	messages []Message
	tools    toolSet
}

// NewConversation starts an empty conversation.
func (a *Agent) NewConversation() *Conversation {
	return &Conversation{a: a, tools: toolSet{budget: a.opts.ToolBudget}}
}

// Messages returns the conversation so far.
func (c *Conversation) Messages() []Message {
	return append([]Message(nil), c.messages...)
}

// Send adds the user's text to the conversation and runs the tool loop
// until the model answers without calling a tool.
//
// The returned Outcome is never nil: after an error it holds the steps
// taken so far. Send fails with [ErrRoundLimit] when the model still calls
// tools after the last round, with [ErrCut] when the answer was cut at the
// model's token limit (a call the limit cut gets a [ToolCutReason] result
// and the loop goes on), with ctx's error when ctx ends (the model
// request and the tool calls in flight are cancelled), and with a
// [*ProviderError] when the model cannot be reached or keeps refusing.
// The conversation stays usable after any of these: every tool call in
// its history has a result.
func (c *Conversation) Send(ctx context.Context, text string) (*Outcome, error) {
	c.messages = append(c.messages, Message{Role: User, Text: text})
	out := &Outcome{}
	reg := c.a.ex.Registry()
	for {
		defs, meta := c.tools.defs(reg)
		resp, err := c.complete(ctx, &Request{System: c.a.opts.System, Messages: c.messages, Tools: defs, OnText: c.a.opts.OnText})
		if err != nil {
			return out, err
		}
		c.messages = append(c.messages, Message{Role: Assistant, Text: resp.Text, Calls: resp.Calls})
		out.Text = resp.Text
		if len(resp.Calls) == 0 {
			if resp.Cut {
				return out, fmt.Errorf("%w: the model's reply ended at its length limit, so the answer is incomplete", ErrCut)
			}
			return out, nil
		}
		if out.Rounds >= c.a.opts.MaxToolRounds {
			c.messages = append(c.messages, Message{Role: ToolResults, Results: notRun(resp.Calls, c.a.opts.MaxToolRounds)})
			return out, fmt.Errorf("%w: the model still called tools after %d rounds", ErrRoundLimit, c.a.opts.MaxToolRounds)
		}
		out.Rounds++
		metaTool := ""
		if meta {
			metaTool = metaName(reg)
		}
		steps := c.runRound(ctx, out.Rounds, resp.Calls, metaTool)
		results := make([]ToolResult, len(steps))
		for i, s := range steps {
			results[i] = s.Sent
		}
		out.Steps = append(out.Steps, steps...)
		c.messages = append(c.messages, Message{Role: ToolResults, Results: results})
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
}

// runRound runs one reply's calls: the meta-tool's here, the others as one
// concurrent batch through the executor (which validates, confirms, runs
// and audits each, unknown tools and malformed arguments included).
func (c *Conversation) runRound(ctx context.Context, round int, calls []ToolCall, metaTool string) []Step {
	reg := c.a.ex.Registry()
	steps := make([]Step, len(calls))
	var batch []tool.Call
	var where []int
	isMeta := func(call ToolCall) bool { return metaTool != "" && call.Name == metaTool }
	var mu sync.Mutex // OnToolResult is called from the calls' goroutines
	finish := func(i int) {
		if isMeta(steps[i].Call) && !steps[i].Result.IsError {
			steps[i].Sent = ToolResult{CallID: steps[i].Call.ID, Name: metaTool, Parts: []Part{{Text: steps[i].Result.Text()}}}
		} else {
			steps[i].Sent = compact(steps[i].Call, steps[i].Result, c.a.opts.ResultBudget, c.a.opts.ImageBudget)
		}
		if c.a.opts.OnToolResult != nil {
			mu.Lock()
			defer mu.Unlock()
			c.a.opts.OnToolResult(steps[i].Call, steps[i].Result)
		}
	}
	for i, call := range calls {
		steps[i] = Step{Round: round, Call: call}
		var t *tool.Tool
		if call.Cut {
			t, _ = reg.Lookup(call.Name)
		} else if !isMeta(call) {
			t, _ = reg.Lookup(call.Name)
			batch = append(batch, tool.Call{ID: call.ID, Name: call.Name, Args: json.RawMessage(call.Args)})
			where = append(where, i)
		}
		if c.a.opts.OnToolCall != nil {
			c.a.opts.OnToolCall(call, t)
		}
	}
	for i, call := range calls {
		switch {
		case call.Cut:
			steps[i].Result = tool.ErrorResult(ToolCutReason, fmt.Sprintf(
				"your reply reached its length limit while you were writing this call to %q, so its arguments are incomplete and it was not run; call it again, with shorter arguments if they were long", call.Name))
		case isMeta(call):
			text, names, ok := findTools(reg, call.Args)
			res := tool.TextResult(text)
			if !ok {
				res = tool.ErrorResult(tool.ReasonInvalidArgs, text)
			}
			c.tools.load(names...)
			steps[i].Result = res
		default:
			continue
		}
		finish(i)
	}
	c.a.ex.RunEach(ctx, batch, func(j int, res *tool.Result) {
		i := where[j]
		steps[i].Result = res
		finish(i)
	})
	for i := range steps {
		if !isMeta(calls[i]) && !calls[i].Cut && steps[i].Result.Reason != tool.ReasonUnknownTool {
			// A tool the model called directly stays in view when the
			// meta-tool is in use.
			c.tools.load(calls[i].Name)
		}
	}
	return steps
}

// notRun answers calls that the round limit kept from running.
func notRun(calls []ToolCall, rounds int) []ToolResult {
	out := make([]ToolResult, len(calls))
	for i, call := range calls {
		out[i] = ToolResult{CallID: call.ID, Name: call.Name, IsError: true, Parts: []Part{{
			Text: fmt.Sprintf("error (not run): the limit of %d tool rounds was reached", rounds),
		}}}
	}
	return out
}

// complete sends one request, retrying a rate limit within the bounds of
// the options, and audits every failure.
func (c *Conversation) complete(ctx context.Context, req *Request) (*Response, error) {
	for attempt := 1; ; attempt++ {
		if c.a.opts.OnWait != nil {
			c.a.opts.OnWait(attempt, 0, nil)
		}
		resp, err := c.a.provider.Complete(ctx, req)
		if err == nil {
			return resp, nil
		}
		ev := audit.Event{Kind: audit.LLMFailed, Attempt: attempt, Error: err.Error(), Reason: "failed"}
		var pe *ProviderError
		switch {
		case ctx.Err() != nil:
			ev.Reason, ev.Error = "cancelled", "the request to the model was cancelled"
			c.a.opts.Audit.Record(ev)
			return nil, ctx.Err()
		case !errors.As(err, &pe):
			c.a.opts.Audit.Record(ev)
			return nil, err
		}
		ev.Source, ev.Reason, ev.Error = pe.Provider, pe.reason(), pe.Message
		wait, why := c.a.retryWait(pe, attempt)
		if why == "" {
			ev.Backoff = wait
			c.a.opts.Audit.Record(ev)
			if c.a.opts.OnWait != nil {
				c.a.opts.OnWait(attempt, wait, pe)
			}
			if err := c.a.sleep(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}
		c.a.opts.Audit.Record(ev)
		if pe.retryable() {
			final := *pe
			final.Message += "; " + why
			return nil, &final
		}
		return nil, pe
	}
}

// retryWait says how long to wait before retrying after attempt failed
// with pe, or, when there is no retry, why not.
func (a *Agent) retryWait(pe *ProviderError, attempt int) (time.Duration, string) {
	if !pe.retryable() {
		return 0, "not retryable"
	}
	if attempt > a.opts.MaxRetries {
		return 0, fmt.Sprintf("gave up after %d attempts", attempt)
	}
	if pe.HasRetryAfter {
		if pe.RetryAfter > a.opts.MaxRetryWait {
			return 0, fmt.Sprintf("it asks to wait %v, longer than the %v allowed", pe.RetryAfter, a.opts.MaxRetryWait)
		}
		return pe.RetryAfter, ""
	}
	return min(time.Second<<(attempt-1), a.opts.MaxRetryWait), ""
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
