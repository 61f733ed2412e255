package tool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/toolwire/toolwire/audit"
)

// Call is one requested tool call.
type Call struct {
	// ID is the caller's own id for the call (an LLM's tool-call id, say);
	// it is carried into the audit log. It may be empty.
	ID string
	// Name is the registered tool name.
	Name string
	// Args holds the arguments as a JSON object. Empty or null means none.
	Args json.RawMessage
}

// ExecutorOptions configures an [Executor]. The zero value is usable.
type ExecutorOptions struct {
	// Audit receives an event for every step of every call. Nil means no
	// audit.
	Audit *audit.Log
	// LogArguments puts argument and result bytes into audit events. Off by
	// default: arguments and results often hold personal data, so only
	// their sizes are recorded.
	LogArguments bool
	// Logger reports handler panics. Nil means slog.Default().
	Logger *slog.Logger
}

// Executor runs calls against a registry: validate, confirm, run, audit.
// It is safe for concurrent use.
type Executor struct {
	reg     *Registry
	audit   *audit.Log
	logArgs bool
	logger  *slog.Logger
}

// NewExecutor returns an executor for reg. A nil opts means defaults.
func NewExecutor(reg *Registry, opts *ExecutorOptions) *Executor {
	e := &Executor{reg: reg, logger: slog.Default()}
	if opts != nil {
		e.audit = opts.Audit
		e.logArgs = opts.LogArguments
		if opts.Logger != nil {
			e.logger = opts.Logger
		}
	}
	return e
}

// Registry returns the registry the executor runs calls against.
func (e *Executor) Registry() *Registry { return e.reg }

// Call runs one call. It is Run with a batch of one.
func (e *Executor) Call(ctx context.Context, name string, args json.RawMessage) *Result {
	return e.Run(ctx, []Call{{Name: name, Args: args}})[0]
}

// Run executes a batch of calls and returns one result per call, in input
// order. It never returns a nil result.
//
// Phase 1 runs in input order: each call's tool is looked up and its
// arguments are parsed and validated against the tool's input schema. A call
// that fails here gets an error result and nothing is sent to its tool.
//
// Phase 2 runs the valid calls concurrently under ctx: a call whose tier
// needs confirmation is first shown to the registry's confirmer (with the
// validated arguments only), and runs only if approved.
//
// Audit events are written in input order: all of one call's events come
// before the next call's, even though calls run concurrently.
func (e *Executor) Run(ctx context.Context, calls []Call) []*Result {
	return e.RunEach(ctx, calls, nil)
}

// RunEach is Run that also tells done of each call's result as soon as
// that call ends, so that a caller can show it before slower calls of the
// batch finish. done, when not nil, is called once per call, from the
// goroutine that ran it: concurrently for calls that run concurrently.
// A call's handler sees [CallInfoFrom] in its context.
func (e *Executor) RunEach(ctx context.Context, calls []Call, done func(i int, res *Result)) []*Result {
	if done == nil {
		done = func(int, *Result) {}
	}
	results := make([]*Result, len(calls))
	if len(calls) == 0 {
		return results
	}
	b := &batch{ex: e, id: newBatchID(), calls: calls, caller: IdentityFrom(ctx), log: newOrderedLog(e.audit, len(calls))}

	// Phase 1: look up and validate, in order.
	var valid []*pending
	for i := range calls {
		if p, res := b.prepare(i); res != nil {
			results[i] = res
			b.log.finish(i)
			done(i, res)
		} else {
			valid = append(valid, p)
		}
	}

	// Phase 2: confirm and run concurrently. One call runs on this
	// goroutine, which spares the common single call a goroutine.
	if len(valid) == 1 {
		results[valid[0].index] = b.execute(ctx, valid[0])
		done(valid[0].index, results[valid[0].index])
	} else {
		var wg sync.WaitGroup
		for _, p := range valid {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[p.index] = b.execute(ctx, p)
				done(p.index, results[p.index])
			}()
		}
		wg.Wait()
	}
	return results
}

// batch is the state of one Run.
type batch struct {
	ex     *Executor
	id     string
	calls  []Call
	caller string // who made the calls, when known
	log    *orderedLog
}

// pending is a call that passed phase 1.
type pending struct {
	index int
	tool  *Tool
	args  json.RawMessage // validated, re-encoded
}

// event returns an audit event for call i with its common fields filled.
func (b *batch) event(i int, kind audit.Kind, t *Tool) audit.Event {
	ev := audit.Event{Kind: kind, Batch: b.id, Index: i, CallID: b.calls[i].ID, Caller: b.caller, Tool: b.calls[i].Name}
	if t != nil {
		ev.Source, ev.Original, ev.Tier = t.Origin.Source, t.Origin.Name, t.Tier.String()
	}
	return ev
}

// prepare is phase 1 for call i: it returns the pending call, or the error
// result that ends it.
func (b *batch) prepare(i int) (*pending, *Result) {
	c := b.calls[i]
	t, ok := b.ex.reg.Lookup(c.Name)

	ev := b.event(i, audit.CallRequested, t)
	ev.ArgsBytes = len(c.Args)
	if b.ex.logArgs {
		ev.Args = loggable(c.Args)
	}
	b.log.record(i, ev)

	if !ok {
		res := ErrorResult(ReasonUnknownTool, fmt.Sprintf("unknown tool %q", c.Name))
		b.rejectArgs(i, nil, res, 0)
		return nil, res
	}

	start := time.Now()
	args, err := parseArgs(c.Args)
	if err != nil {
		res := invalidArgs(c.Name, []Violation{{Path: "", Message: err.Error()}})
		b.rejectArgs(i, t, res, time.Since(start))
		return nil, res
	}
	if err := t.schema.Validate(args); err != nil {
		res := invalidArgs(c.Name, violations(err))
		b.rejectArgs(i, t, res, time.Since(start))
		return nil, res
	}
	encoded, err := encodeArgs(args)
	if err != nil {
		res := invalidArgs(c.Name, []Violation{{Path: "", Message: err.Error()}})
		b.rejectArgs(i, t, res, time.Since(start))
		return nil, res
	}
	ev = b.event(i, audit.ValidationPassed, t)
	ev.Duration = time.Since(start)
	b.log.record(i, ev)
	return &pending{index: i, tool: t, args: encoded}, nil
}

func (b *batch) rejectArgs(i int, t *Tool, res *Result, d time.Duration) {
	ev := b.event(i, audit.ValidationFailed, t)
	ev.Duration = d
	ev.Reason = string(res.Reason)
	ev.Error = res.Message
	b.log.record(i, ev)
}

// execute is phase 2 for one call: confirm if needed, then run.
func (b *batch) execute(ctx context.Context, p *pending) *Result {
	defer b.log.finish(p.index)
	ctx = context.WithValue(ctx, callInfoKey{}, CallInfo{Index: p.index, ID: b.calls[p.index].ID, Name: b.calls[p.index].Name})
	t := p.tool
	if err := ctx.Err(); err != nil {
		return b.errored(p, contextResult(err, t.Name), 0)
	}
	if t.Tier.NeedsConfirmation() {
		if res := b.confirm(ctx, p); res != nil {
			return res
		}
	}
	start := time.Now()
	res, err := b.runHandler(ctx, p)
	d := time.Since(start)
	switch {
	case err != nil:
		return b.errored(p, failure(ctx, t.Name, err), d)
	case res == nil:
		return b.errored(p, ErrorResult(ReasonFailed, fmt.Sprintf("tool %q returned no result", t.Name)), d)
	case res.IsError:
		normalizeError(res)
		return b.errored(p, res, d)
	}
	ev := b.event(p.index, audit.CallExecuted, t)
	ev.Duration = d
	b.sizeResult(&ev, res)
	b.log.record(p.index, ev)
	return res
}

// confirm asks the registry's confirmer; it returns the declined result, or
// nil when the call may run.
func (b *batch) confirm(ctx context.Context, p *pending) *Result {
	t := p.tool
	b.log.record(p.index, b.event(p.index, audit.ConfirmationRequested, t))
	start := time.Now()
	ok, err := b.ask(ctx, p)
	ev := b.event(p.index, audit.ConfirmationAccepted, t)
	ev.Duration = time.Since(start)
	if ok && err == nil {
		b.log.record(p.index, ev)
		return nil
	}
	reason, msg := ReasonDeclined, fmt.Sprintf("call to %q was declined; do not retry it", t.Name)
	switch {
	case errors.Is(err, ErrNobodyToAsk):
		reason, msg = ReasonUnconfirmed, fmt.Sprintf("call to %q did not run: %v", t.Name, err)
	case err != nil && ctx.Err() != nil:
		// Ctrl-C at the question: the call was cancelled, not refused.
		reason, msg = ReasonCancelled, fmt.Sprintf("call to %q was cancelled while waiting for confirmation", t.Name)
	case err != nil:
		msg = fmt.Sprintf("call to %q was not confirmed: %v; do not retry it", t.Name, err)
	}
	res := ErrorResult(reason, msg)
	ev.Kind = audit.ConfirmationRejected
	ev.Reason = string(reason)
	ev.Error = msg
	b.log.record(p.index, ev)
	return res
}

// ask calls the confirmer, treating a missing confirmer, a panic and a done
// context as refusals.
func (b *batch) ask(ctx context.Context, p *pending) (ok bool, err error) {
	c := b.ex.reg.confirmer
	if c == nil {
		return false, ErrNeedsConfirmer
	}
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("confirmer panicked: %v", r)
		}
	}()
	ok, err = c.Confirm(ctx, PendingCall{Name: p.tool.Name, Tier: p.tool.Tier, Args: p.args, Description: p.tool.Description})
	if err == nil && ctx.Err() != nil {
		return false, ctx.Err()
	}
	return ok, err
}

// runHandler runs the tool's handler, turning a panic into an error so one
// broken tool cannot take the process down.
func (b *batch) runHandler(ctx context.Context, p *pending) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			b.ex.logger.Error("tool handler panicked", "tool", p.tool.Name, "panic", r, "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return p.tool.Handler(ctx, p.args)
}

func (b *batch) errored(p *pending, res *Result, d time.Duration) *Result {
	ev := b.event(p.index, audit.CallErrored, p.tool)
	ev.Duration = d
	ev.Reason = string(res.Reason)
	ev.Error = res.Message
	b.sizeResult(&ev, res)
	b.log.record(p.index, ev)
	return res
}

func (b *batch) sizeResult(ev *audit.Event, res *Result) {
	if b.ex.audit == nil {
		return
	}
	if !b.ex.logArgs {
		ev.ResultBytes = res.size()
		return
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return
	}
	ev.ResultBytes = len(raw)
	ev.Result = raw
}

// failure turns a handler error into an error result, telling a caller's
// cancellation and a timeout apart from other failures.
func failure(ctx context.Context, name string, err error) *Result {
	switch {
	case errors.Is(err, ErrUnavailable):
		return ErrorResult(ReasonUnavailable, fmt.Sprintf("tool %q is unavailable: %v", name, err))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ErrorResult(ReasonTimeout, fmt.Sprintf("tool %q timed out: %v", name, err))
	case errors.Is(err, context.Canceled):
		// Go's "context canceled" tells a person nothing more.
		return ErrorResult(ReasonCancelled, fmt.Sprintf("tool %q was cancelled", name))
	case ctx.Err() != nil:
		return ErrorResult(ReasonCancelled, fmt.Sprintf("tool %q was cancelled: %v", name, err))
	}
	return ErrorResult(ReasonFailed, fmt.Sprintf("tool %q failed: %v", name, err))
}

func contextResult(err error, name string) *Result {
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrorResult(ReasonTimeout, fmt.Sprintf("tool %q timed out before it started", name))
	}
	return ErrorResult(ReasonCancelled, fmt.Sprintf("tool %q was cancelled before it started", name))
}

// normalizeError fills the reason and message of an error result a handler
// built by hand.
func normalizeError(res *Result) {
	if res.Reason == "" {
		res.Reason = ReasonTool
	}
	if res.Message == "" {
		res.Message = oneLine(res.Text())
		if res.Message == "" {
			res.Message = "the tool reported an error"
		}
	}
}

// loggable returns raw as it may go into an audit event: valid JSON as it
// is, anything else as a JSON string, so that malformed arguments are still
// recorded and still pass through redaction.
func loggable(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || json.Valid(raw) {
		return raw
	}
	quoted, _ := json.Marshal(string(raw))
	return quoted
}

func newBatchID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// orderedLog writes audit events in input order while calls run
// concurrently. Events of the call at the cursor (every call before it has
// finished) are written at once; a later call's events wait in its buffer
// until the cursor reaches it.
type orderedLog struct {
	log *audit.Log

	mu     sync.Mutex
	cursor int
	done   []bool
	held   [][]audit.Event
}

func newOrderedLog(log *audit.Log, n int) *orderedLog {
	if log == nil {
		return &orderedLog{}
	}
	return &orderedLog{log: log, done: make([]bool, n), held: make([][]audit.Event, n)}
}

func (o *orderedLog) record(i int, ev audit.Event) {
	if o.log == nil {
		return
	}
	ev.Time = time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if i == o.cursor {
		o.log.Record(ev)
		return
	}
	o.held[i] = append(o.held[i], ev)
}

// finish marks call i as done and writes whatever the cursor passes.
func (o *orderedLog) finish(i int) {
	if o.log == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done[i] = true
	for o.cursor < len(o.done) && o.done[o.cursor] {
		o.cursor++
		if o.cursor < len(o.done) {
			for _, ev := range o.held[o.cursor] {
				o.log.Record(ev)
			}
			o.held[o.cursor] = nil
		}
	}
}
