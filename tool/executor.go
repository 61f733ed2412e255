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
	"sync/atomic"
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
	// Mask, when set, masks the secrets it knows in every result Run
	// returns (see [Result.Masked]) and in what a tool's source passes to
	// the caller during a call (progress messages, log lines, requests):
	// set it for an executor whose results go anywhere a secret must not
	// (a terminal, a model, a gateway's clients). Nil returns results as
	// the tools produced them; a caller can still mask one with
	// [Result.Masked]. The audit log masks with its own redactor either way.
	Mask *audit.Secrets
	// Observer sees every step of every call as it happens (see
	// [Observer]). Nil means none.
	Observer Observer
	// Policy decides on calls beyond their tiers (see [Policy]); nil
	// means the tiers alone decide. [Executor.SetPolicy] replaces it.
	Policy Policy
	// Approvals are the lasting approvals consulted before the
	// confirmer is asked (see [Approvals]); nil means none.
	Approvals Approvals
}

// Executor runs calls against a registry: validate, confirm, run, audit.
// It is safe for concurrent use.
type Executor struct {
	reg     *Registry
	audit   *audit.Log
	logArgs bool
	logger  *slog.Logger
	mask    *audit.Secrets
	obs     Observer
	policy  atomic.Pointer[policyBox]
	grants  Approvals
}

// NewExecutor returns an executor for reg. A nil opts means defaults.
func NewExecutor(reg *Registry, opts *ExecutorOptions) *Executor {
	e := &Executor{reg: reg, logger: slog.Default()}
	if opts != nil {
		e.audit = opts.Audit
		e.logArgs = opts.LogArguments
		e.mask = opts.Mask
		e.obs = opts.Observer
		e.SetPolicy(opts.Policy)
		e.grants = opts.Approvals
		if opts.Logger != nil {
			e.logger = opts.Logger
		}
	}
	return e
}

// Mask returns the secrets the executor masks in its results
// ([ExecutorOptions].Mask), or nil: what else serves its callers (a
// gateway's resources and prompts) masks with the same.
func (e *Executor) Mask() *audit.Secrets { return e.mask }

// Registry returns the registry the executor runs calls against.
func (e *Executor) Registry() *Registry { return e.reg }

// Call runs one call. It is Run with a batch of one, whose call ID (on
// its audit events) is the one [WithCallID] put in ctx, if any.
func (e *Executor) Call(ctx context.Context, name string, args json.RawMessage) *Result {
	id, _ := ctx.Value(callIDKey{}).(string)
	return e.Run(ctx, []Call{{ID: id, Name: name, Args: args}})[0]
}

type callIDKey struct{}

// WithCallID returns ctx with id as the call ID [Executor.Call] gives its
// call: how a gateway's task names its call in the audit ("task:" and the
// task's id), so that the task's own events join the call's.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
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
// Each audit event is written when the step it records happens, so the
// events of concurrent calls interleave; each carries the batch's id and
// the call's index in it, which keep the batch's order. The arguments
// audited (with argument logging on) are the validated bytes the tool was
// given, on validation.passed. With a required audit log
// ([audit.LogOptions].Required), a call whose events up to its start
// cannot be written is refused ([ReasonAuditFailed]) instead of run.
func (e *Executor) Run(ctx context.Context, calls []Call) []*Result {
	return e.RunEach(ctx, calls, nil)
}

// RunEach is Run that also tells done of each call's result as soon as
// that call ends, so that a caller can show it before slower calls of the
// batch finish. done, when not nil, is called once per call, from the
// goroutine that ran it: concurrently for calls that run concurrently. It
// gets the result Run returns for that call (masked, with
// [ExecutorOptions].Mask). A call's handler sees [CallInfoFrom] in its
// context.
func (e *Executor) RunEach(ctx context.Context, calls []Call, done func(i int, res *Result)) []*Result {
	results := make([]*Result, len(calls))
	if len(calls) == 0 {
		return results
	}
	if e.mask != nil {
		if c := CallerFrom(ctx); c != nil {
			ctx = WithCaller(ctx, maskCaller(c, e.mask))
		}
	}
	// After the masking caller: the observer's contexts start from ctx.
	b := e.newBatch(ctx, calls)
	// end stores call i's result, masked once, and tells done.
	end := func(i int, res *Result) {
		if e.mask != nil {
			res = res.Masked(e.mask)
		}
		results[i] = res
		if done != nil {
			done(i, res)
		}
	}

	// Phase 1: look up and validate, in order.
	var valid []*pending
	for i := range calls {
		if p, res := b.prepare(i); res != nil {
			end(i, res)
		} else {
			valid = append(valid, p)
		}
	}

	// Phase 2: confirm and run concurrently. One call runs on this
	// goroutine, which spares the common single call a goroutine.
	if len(valid) == 1 {
		end(valid[0].index, b.execute(ctx, valid[0]))
	} else {
		var wg sync.WaitGroup
		for _, p := range valid {
			wg.Add(1)
			go func() {
				defer wg.Done()
				end(p.index, b.execute(ctx, p))
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
	caller string    // who made the calls, when known
	client Client    // through what they arrived, when known
	obs    *observed // nil without an observer
}

// pending is a call that passed phase 1.
type pending struct {
	index int
	tool  *Tool
	args  json.RawMessage // validated, re-encoded
	// upstream is where the handler notes the identity it reached its
	// upstream with (NoteUpstreamIdentity); nil until the handler runs.
	upstream *upstreamNote
	// asked is the policy's Ask decision, when a rule asks for the
	// call to be confirmed.
	asked Decision
	// decoded are the validated arguments as decoded, kept for the
	// policy (nil without one).
	decoded map[string]any
}

// newBatch returns the batch of calls made under ctx.
func (e *Executor) newBatch(ctx context.Context, calls []Call) *batch {
	b := &batch{ex: e, id: newBatchID(), calls: calls, caller: IdentityFrom(ctx), client: ClientFrom(ctx)}
	if e.obs != nil {
		b.obs = &observed{obs: e.obs, base: ctx, ctxs: make([]context.Context, len(calls))}
	}
	return b
}

// event returns an audit event for call i with its common fields filled.
func (b *batch) event(i int, kind audit.Kind, t *Tool) audit.Event {
	ev := audit.Event{Kind: kind, Batch: b.id, Index: i, CallID: b.calls[i].ID, Caller: b.caller, Tool: b.calls[i].Name,
		Protocol: b.client.Protocol, Client: b.client.Name}
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

	// The arguments themselves are audited once validated, as the bytes
	// the tool is given (or, refused, as they came).
	ev := b.event(i, audit.CallRequested, t)
	ev.ArgsBytes = len(c.Args)
	if err := b.record(ev); err != nil {
		// The log will not take the outcome either, but the observer,
		// which saw the call start, is told how it ended.
		res := auditFailed(c.Name, err)
		b.errored(&pending{index: i, tool: t}, res, 0)
		return nil, res
	}

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
	ev.ArgsBytes = len(encoded)
	if b.ex.logArgs {
		ev.Args = encoded
	}
	p := &pending{index: i, tool: t, args: encoded}
	if b.ex.policy.Load() != nil {
		p.decoded = args
	}
	if err := b.record(ev); err != nil {
		return nil, b.errored(p, auditFailed(c.Name, err), 0)
	}
	return p, nil
}

func (b *batch) rejectArgs(i int, t *Tool, res *Result, d time.Duration) {
	ev := b.event(i, audit.ValidationFailed, t)
	ev.Duration = d
	ev.Reason = string(res.Reason)
	ev.Error = res.Message
	if b.ex.logArgs {
		ev.Args = loggable(b.calls[i].Args)
	}
	_ = b.record(ev) // the call ends here either way
}

// record writes ev now. Its error is returned only when the audit is
// required, so that the call it records is refused; otherwise the log
// has reported it and the call goes on.
func (b *batch) record(ev audit.Event) error {
	if b.ex.audit == nil && b.obs == nil {
		return nil
	}
	ev.Time = time.Now()
	b.obs.see(ev)
	if b.ex.audit == nil {
		return nil
	}
	if err := b.ex.audit.Record(ev); err != nil && b.ex.audit.Required() {
		return err
	}
	return nil
}

// auditFailed is the refusal of a call the required audit could not record.
func auditFailed(name string, err error) *Result {
	return ErrorResult(ReasonAuditFailed, fmt.Sprintf("call to %q was refused: the audit log is required and could not record it: %v", name, err))
}

// execute is phase 2 for one call: confirm if needed, then run.
func (b *batch) execute(ctx context.Context, p *pending) *Result {
	ctx = b.obs.context(ctx, p.index)
	ctx = context.WithValue(ctx, callInfoKey{}, CallInfo{Index: p.index, ID: b.calls[p.index].ID, Name: b.calls[p.index].Name})
	t := p.tool
	if err := ctx.Err(); err != nil {
		return b.errored(p, contextResult(err, t.Name), 0)
	}
	confirm := t.Tier.NeedsConfirmation()
	pol := b.ex.Policy()
	if pol != nil {
		var res *Result
		if res, confirm = b.decide(ctx, p, pol); res != nil {
			return res
		}
	}
	if confirm {
		if res := b.confirm(ctx, p); res != nil {
			return res
		}
	}
	p.upstream = &upstreamNote{b: b, p: p}
	ctx = context.WithValue(ctx, upstreamKey{}, p.upstream)
	start := time.Now()
	res, err := b.runHandler(ctx, p)
	d := time.Since(start)
	switch {
	case err != nil:
		return b.errored(p, failure(ctx, t.Name, err), d)
	case res == nil:
		return b.errored(p, ErrorResult(ReasonFailed, fmt.Sprintf("tool %q returned no result", t.Name)), d)
	}
	if pol != nil {
		if w := b.withhold(ctx, p, pol, res); w != res {
			return b.errored(p, w, d)
		}
	}
	switch {
	case res.IsError:
		normalizeError(res)
		return b.errored(p, res, d)
	}
	ev := b.event(p.index, audit.CallExecuted, t)
	ev.Duration = d
	ev.UpstreamIdentity = p.upstream.get()
	b.sizeResult(&ev, res)
	_ = b.record(ev) // the call has run; only the log can report this
	return res
}

// confirm asks the registry's confirmer; it returns the declined result, or
// nil when the call may run.
func (b *batch) confirm(ctx context.Context, p *pending) *Result {
	t := p.tool
	if err := b.record(b.event(p.index, audit.ConfirmationRequested, t)); err != nil {
		return b.errored(p, auditFailed(t.Name, err), 0)
	}
	start := time.Now()
	var key ApprovalKey
	// A call through a gateway without caller authentication has nobody
	// an approval could be bound to: the terminal's own approvals ("")
	// must not cover it.
	if b.ex.grants != nil && (b.caller != "" || b.client == (Client{})) {
		key = b.approvalKey(p)
		if id, err := b.ex.grants.Approved(ctx, key); err == nil && id != "" {
			ev := b.event(p.index, audit.ConfirmationAccepted, t)
			ev.Duration, ev.Reason = time.Since(start), "approval "+id
			if err := b.record(ev); err != nil {
				return b.errored(p, auditFailed(t.Name, err), 0)
			}
			return nil
		}
	}
	var note string
	ok, err := b.ask(context.WithValue(ctx, confirmNoteKey{}, &note), p, key)
	ev := b.event(p.index, audit.ConfirmationAccepted, t)
	ev.Duration = time.Since(start)
	if ok && err == nil {
		ev.Reason = note
		if err := b.record(ev); err != nil {
			return b.errored(p, auditFailed(t.Name, err), 0)
		}
		return nil
	}
	reason, msg := ReasonDeclined, fmt.Sprintf("call to %q was declined; do not retry it", t.Name)
	switch {
	case errors.Is(err, ErrNobodyToAsk):
		reason, msg = ReasonUnconfirmed, fmt.Sprintf("call to %q did not run: %v", t.Name, err)
	case err != nil && ctx.Err() != nil:
		// Ctrl-C at the question: the call was cancelled, not refused.
		reason, msg = ReasonCancelled, fmt.Sprintf("call to %q was cancelled while waiting for confirmation%s", t.Name, cancelCause(ctx))
	case err != nil:
		msg = fmt.Sprintf("call to %q was not confirmed: %v; do not retry it", t.Name, err)
	}
	res := ErrorResult(reason, msg)
	ev.Kind = audit.ConfirmationRejected
	ev.Reason = string(reason)
	ev.Error = msg
	_ = b.record(ev)
	return res
}

// ask calls the confirmer, treating a missing confirmer, a panic and a done
// context as refusals.
func (b *batch) ask(ctx context.Context, p *pending, key ApprovalKey) (ok bool, err error) {
	c := b.ex.reg.confirmer
	if c == nil {
		return false, ErrNeedsConfirmer
	}
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("confirmer panicked: %v", r)
		}
	}()
	ok, err = c.Confirm(ctx, PendingCall{Name: p.tool.Name, Tier: p.tool.Tier, Args: p.args, Description: p.tool.Description, Source: p.tool.Origin.Source,
		Rule: p.asked.Rule, Reason: p.asked.Reason, Key: key})
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
	ev.UpstreamIdentity = p.upstream.get()
	ev.Reason = string(res.Reason)
	ev.Error = res.Message
	b.sizeResult(&ev, res)
	_ = b.record(ev)
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
	var ae *AuthorizationError
	switch {
	case errors.As(err, &ae):
		// The message names no URL (see AuthorizationError); the URL goes
		// to the caller alone, beside it.
		res := ErrorResult(ReasonAuthorization, fmt.Sprintf("tool %q needs the caller's own authorization first: %v", name, err))
		a := ae.Authorization
		res.Authorization = &a
		return res
	case errors.Is(err, ErrUnavailable):
		return ErrorResult(ReasonUnavailable, fmt.Sprintf("tool %q is unavailable: %v", name, err))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ErrorResult(ReasonTimeout, fmt.Sprintf("tool %q timed out: %v", name, err))
	case errors.Is(err, context.Canceled):
		// Go's "context canceled" tells a person nothing more; a cause
		// given by whoever cancelled does.
		return ErrorResult(ReasonCancelled, fmt.Sprintf("tool %q was cancelled%s", name, cancelCause(ctx)))
	case ctx.Err() != nil:
		return ErrorResult(ReasonCancelled, fmt.Sprintf("tool %q was cancelled: %v", name, err))
	}
	return ErrorResult(ReasonFailed, fmt.Sprintf("tool %q failed: %v", name, err))
}

// cancelCause returns ": " and the cause ctx was cancelled with, when the
// canceller gave one (the gateway's drain, a client that went away), or ""
// when there is nothing more to say than that it was cancelled.
func cancelCause(ctx context.Context) string {
	cause := context.Cause(ctx)
	if cause == nil || cause == ctx.Err() || errors.Is(cause, context.DeadlineExceeded) {
		return ""
	}
	return ": " + cause.Error()
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

// observed is what a batch keeps for the executor's observer: a pointer on
// the batch, so that a call without an observer pays for none of it.
type observed struct {
	obs  Observer
	base context.Context   // the batch's context, which each call's starts from
	ctxs []context.Context // per call, from obs.CallStarted; set in phase 1
}

// see hands ev to the observer: a call's first event starts it, and the
// context the observer returns is the one its later steps run under.
func (o *observed) see(ev audit.Event) {
	if o == nil {
		return
	}
	if ev.Kind == audit.CallRequested {
		o.ctxs[ev.Index] = o.obs.CallStarted(o.base, ev)
		return
	}
	o.obs.Step(o.ctxs[ev.Index], ev)
}

// context returns the context call i's later steps run under: the one the
// observer gave it, or ctx without an observer.
func (o *observed) context(ctx context.Context, i int) context.Context {
	if o == nil || o.ctxs[i] == nil {
		return ctx
	}
	return o.ctxs[i]
}
