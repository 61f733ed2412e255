package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// RelayCapabilities says which requests a server may make of the caller
// while serving a call. A capability is advertised to the server only when
// set, so a server is not led to ask for what no caller would answer. Set
// one when the calls' [tool.Caller] is a [tool.Asker] that can answer it:
// the gateway's callers relay to their own MCP client.
type RelayCapabilities struct {
	Sampling    bool // sampling/createMessage
	Elicitation bool // elicitation/create
}

// router routes what a server sends during a call to that call's caller:
// progress reports by the token the call carries; log lines and
// elicitation and sampling requests, which arrive apart from the call they
// belong to (over stdio, and in the protocol versions before 2026-07-28,
// nothing in them says which call that is), by what the calls in flight
// make certain, dropped or declined when nothing does (see
// [inflight.route]). It also holds each call's result back until the
// reports read before it were relayed (see [arrivals]). Its locks are those
// of its parts; none is held while a caller is reached.
type router struct {
	set *settings

	progress  sync.Map // progress token (string) -> progressTarget
	tasks     sync.Map // task id -> *callRef of the call it runs (tasks.go)
	nextToken atomic.Uint64
	calls     inflight // for routing log lines and requests to callers
	arrivals  arrivals // for keeping reports ahead of results
}

// progressTarget is where one in-flight call's progress reports go.
type progressTarget struct {
	ctx    context.Context
	caller tool.Caller
}

// beginCall counts a tools/call with params as in flight until end is
// called and, when ctx carries a [tool.Caller], gives it a progress token
// whose reports go to that caller. The call is to be made with the
// context returned, which names the call: what the SDK asks on the call's
// behalf (the input requests of a 2026-07-28 server, SEP-2322) reaches
// its caller alone.
func (r *router) beginCall(ctx context.Context, params *mcp.CallToolParams) (_ context.Context, end func()) {
	ref := r.calls.begin(ctx)
	ctx = context.WithValue(ctx, callRefKey{}, ref)
	caller := tool.CallerFrom(ctx)
	if caller == nil {
		return ctx, func() { r.calls.end(ref) }
	}
	token := fmt.Sprintf("toolwire-%d", r.nextToken.Add(1))
	r.progress.Store(token, progressTarget{ctx: ctx, caller: caller})
	params.SetProgressToken(token)
	return ctx, func() {
		r.progress.Delete(token)
		r.calls.end(ref)
	}
}

// track counts a request other than a tool call (a resource read, a
// prompt get, a completion) as in flight until done is called. The server
// may log or ask for input while serving it, just as while serving a
// call, so meanwhile nothing it sends is taken for a concurrent call's: it
// reaches the caller ctx carries (see [tool.WithCaller]) only when this
// request is alone in flight or asks through the request's own context
// (multi round-trip), and otherwise no caller. The request is to be made
// with the context returned.
func (r *router) track(ctx context.Context) (_ context.Context, done func()) {
	ref := r.calls.begin(ctx)
	return context.WithValue(ctx, callRefKey{}, ref), func() { r.calls.end(ref) }
}

// callRefKey is the context key of the call a context was made for.
type callRefKey struct{}

// catchUp returns once the reports read so far were relayed, ctx ends, or
// arrivalsGrace passes.
func (r *router) catchUp(ctx context.Context) { r.arrivals.catchUp(ctx) }

func (r *router) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	defer r.arrivals.noteHandled()
	r.progressed(req.Params)
}

// progressed passes a progress report to the caller of the call its token
// names.
func (r *router) progressed(p *mcp.ProgressNotificationParams) {
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := r.progress.Load(token)
	if !ok {
		return // a report for a call that has ended, or not ours
	}
	t := v.(progressTarget)
	t.caller.Progress(t.ctx, tool.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
}

// followTask routes the requests a 2025-11-25 server makes about the task
// id (they name it in _meta) to the call made with callCtx, until the
// returned func is called.
func (r *router) followTask(id string, callCtx context.Context) (stop func()) {
	ref, ok := callCtx.Value(callRefKey{}).(*callRef)
	if !ok {
		return func() {}
	}
	r.tasks.Store(id, ref)
	return func() { r.tasks.Delete(id) }
}

// taskProgress reports a task's progress to the caller of the call ctx
// names.
func (r *router) taskProgress(ctx context.Context, p tool.Progress) {
	if ref, ok := ctx.Value(callRefKey{}).(*callRef); ok && ref.caller != nil {
		ref.caller.Progress(ref.ctx, p)
	}
}

// onRawNotification takes a notification the server sent on the stream of
// a raw request (raw.go): progress goes by its token as ever.
func (r *router) onRawNotification(n *jsonrpc.Request) {
	if n.Method != "notifications/progress" {
		return
	}
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(n.Params, &p) == nil {
		r.progressed(&p)
	}
}

// forTask returns ctx naming the call that runs the task meta names (a
// 2025-11-25 server's request about a task), or ctx itself.
func (r *router) forTask(ctx context.Context, meta mcp.Meta) context.Context {
	related, ok := meta[relatedTaskKey].(map[string]any)
	if !ok {
		return ctx
	}
	id, _ := related["taskId"].(string)
	v, ok := r.tasks.Load(id)
	if !ok {
		return ctx
	}
	ref := v.(*callRef)
	return context.WithValue(ref.ctx, callRefKey{}, ref)
}

// inflight tracks a server's calls in flight, and the other requests made
// of it (see [router.track]), to route what the server sends outside any
// request to the caller it belongs to.
type inflight struct {
	mu    sync.Mutex
	calls map[*callRef]struct{}
	// last is the most recent call, if it ran alone and no call has
	// started since it ended: a log line it caused may still wait in the
	// SDK's queue after its response has overtaken it.
	last *callRef
}

// callRef is one call in flight. alone stays true while no other call of
// the server overlaps it.
type callRef struct {
	ctx    context.Context
	caller tool.Caller
	alone  bool
	ended  time.Time // when it ended; zero while in flight
}

func (f *inflight) begin(ctx context.Context) *callRef {
	ref := &callRef{ctx: ctx, caller: tool.CallerFrom(ctx), alone: true}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[*callRef]struct{}{}
	}
	for other := range f.calls {
		other.alone = false
		ref.alone = false
	}
	f.calls[ref] = struct{}{}
	f.last = nil
	return ref
}

func (f *inflight) end(ref *callRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, ref)
	if len(f.calls) == 0 && ref.alone {
		ref.ended = time.Now()
		f.last = ref
	} else {
		f.last = nil
	}
}

// route returns the caller that a message arriving with ctx belongs to,
// and a context to reach it with, or nil when that is not certain:
//   - a request the SDK makes on a call's behalf (multi round-trip input
//     requests, from protocol 2026-07-28) carries the call's context, and
//     goes to that call's caller, or to none if it has none;
//   - otherwise, while exactly one call is in flight, a request is that
//     call's, and a log line too if nothing overlapped the call;
//   - a log line (afterwards) may also belong to the call that ended
//     within arrivalsGrace, if it ran alone and nothing has started since.
//
// Anything else could belong to another caller's call, so it goes nowhere.
func (f *inflight) route(ctx context.Context, afterwards bool) (tool.Caller, context.Context) {
	if ref, ok := ctx.Value(callRefKey{}).(*callRef); ok {
		if ref.caller == nil {
			return nil, nil
		}
		return ref.caller, ctx
	}
	if c := tool.CallerFrom(ctx); c != nil {
		return c, ctx
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case len(f.calls) == 1:
		// A request (afterwards false) cannot belong to a call that has
		// ended: the server waits for its answer before it can finish the
		// call. So a request that arrives while one call is in flight is
		// that call's, whatever overlapped it before. A log line may be a
		// late one of a call that has ended, so it needs a call that ran
		// alone throughout.
		for ref := range f.calls {
			if ref.caller != nil && (ref.alone || !afterwards) {
				return ref.caller, ref.ctx
			}
		}
	case len(f.calls) == 0 && afterwards && f.last != nil && f.last.caller != nil &&
		time.Since(f.last.ended) < arrivalsGrace:
		// Only shortly after the call ended: a line sent later is the
		// server's own business, not a late report of that call.
		// The call's own context has ended: keep its values (the caller's
		// session) without its cancellation, for one bounded send.
		return f.last.caller, context.WithoutCancel(f.last.ctx)
	}
	return nil, nil
}

// onLog passes a server's log line to the caller it belongs to, or to the
// local logger.
func (r *router) onLog(ctx context.Context, req *mcp.LoggingMessageRequest) {
	defer r.arrivals.noteHandled()
	p := req.Params
	data, err := json.Marshal(p.Data)
	if err != nil {
		return
	}
	if caller, cctx := r.calls.route(ctx, true); caller != nil {
		if lr, ok := caller.(tool.LogReceiver); ok {
			cctx, cancel := context.WithTimeout(cctx, 5*time.Second)
			defer cancel()
			lr.Log(cctx, tool.LogMessage{Level: string(p.Level), Logger: p.Logger, Data: data})
			return
		}
	}
	r.set.logger.Debug("server log message", "server", r.set.cfg.Name, "level", string(p.Level), "logger", p.Logger, "data", r.set.secrets.String(string(data)))
}

// errNoCaller is wrapped when a server's request cannot be relayed.
var errNoCaller = errors.New("no caller to ask")

// ask relays a server's request to the caller of the call it belongs to,
// decoding the answer into out.
func (r *router) ask(ctx context.Context, kind tool.RequestKind, params, out any) error {
	caller, cctx := r.calls.route(ctx, false)
	asker, ok := caller.(tool.Asker)
	if !ok {
		why := "no call in flight can take it"
		if caller == nil {
			why = "it cannot be matched to a single call in flight"
		}
		return fmt.Errorf("toolwire declined %s from server %q: %s: %w", kind, r.set.cfg.Name, why, errNoCaller)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	answer, err := asker.Ask(cctx, kind, raw)
	if err != nil {
		return fmt.Errorf("%s from server %q: %w", kind, r.set.cfg.Name, err)
	}
	return json.Unmarshal(answer, out)
}

func (r *router) onElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	var res mcp.ElicitResult
	if err := r.ask(r.forTask(ctx, req.Params.Meta), tool.Elicitation, req.Params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (r *router) onSample(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var res mcp.CreateMessageResult
	if err := r.ask(r.forTask(ctx, req.Params.Meta), tool.Sampling, req.Params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// arrivals keeps a call's log lines and progress reports ahead of its
// result. The SDK hands a response to the waiting call at once but queues
// notifications for a handler goroutine, so a report the server sent just
// before its result could otherwise be handled after the call has returned
// (and its caller, for a stateless client, is gone). Counting the reports
// as they are read and as they are handled lets a call wait, on a
// condition, until every report read before its result was handled.
type arrivals struct {
	mu      sync.Mutex
	read    uint64
	handled uint64
	moved   chan struct{} // closed and replaced when handled grows
}

// relayedNotification reports whether the SDK will pass a message to
// onLog or onProgress.
func relayedNotification(m jsonrpc.Message) bool {
	r, ok := m.(*jsonrpc.Request)
	return ok && !r.IsCall() && (r.Method == "notifications/message" || r.Method == "notifications/progress")
}

func (a *arrivals) noteRead() {
	a.mu.Lock()
	a.read++
	a.mu.Unlock()
}

func (a *arrivals) noteHandled() {
	a.mu.Lock()
	// Never count past what was read: a report written off after the grace
	// may still be handled late. Counted, it would let a later report
	// overtake its call's result.
	if a.handled >= a.read {
		a.mu.Unlock()
		return
	}
	a.handled++
	if a.moved != nil {
		close(a.moved)
		a.moved = nil
	}
	a.mu.Unlock()
}

// arrivalsGrace bounds the wait for a report the SDK read but did not
// hand over (one whose parameters it could not decode): after it, such
// reports are written off, so the wait is paid once, not on every call.
const arrivalsGrace = 500 * time.Millisecond

// catchUp waits until every report read so far has been handled, ctx ends,
// or the grace runs out.
func (a *arrivals) catchUp(ctx context.Context) {
	a.mu.Lock()
	target := a.read
	a.mu.Unlock()
	var timeout <-chan time.Time
	for {
		a.mu.Lock()
		if a.handled >= target {
			a.mu.Unlock()
			return
		}
		if a.moved == nil {
			a.moved = make(chan struct{})
		}
		moved := a.moved
		a.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(arrivalsGrace)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return
		case <-timeout:
			a.mu.Lock()
			a.handled = max(a.handled, target)
			a.mu.Unlock()
			return
		}
	}
}

// watchedConn counts the reports it reads for [arrivals] and tells the
// calls' cancel probes of its writes (see noteWrite). Streamable HTTP is
// watched at the HTTP level instead (see httpWatch).
type watchedConn struct {
	mcp.Connection
	a *arrivals
}

func (c *watchedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil && relayedNotification(m) {
		c.a.noteRead()
	}
	return m, err
}

func (c *watchedConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Request); ok && r.IsCall() {
		// Sent once it is being written, not once the write returns: over
		// SSE the POST is answered after the server took the message, and
		// the call may report progress, and be cancelled, before then
		// (httpWatch does the same for Streamable HTTP).
		if p := probeOf(ctx); p != nil {
			p.markSent()
		}
	}
	err := c.Connection.Write(ctx, m)
	noteWrite(ctx, m)
	return err
}
