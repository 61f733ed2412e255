package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// A tools/call of a 2026-07-28 client runs as a parked call: the executor
// runs it once, on a goroutine of its own (one of callGoroutines), under a
// context of the gateway's (the limits' call slot when served over HTTP),
// not the request's, since the call outlives the request when it has to
// ask the client something. The request waits on the call through the
// gateway's [Parking]: when the call asks (an approval, an upstream's
// question), the request is answered with the question as an input request
// and a sealed requestState; the client's retry delivers its answer and
// waits again, for the next question or the result. Progress and log lines
// go to whichever request is waiting at the time. The audit log sees one
// call however many rounds it takes.
//
// The call is cancelled when the client closes a request that waits on it
// (go-sdk cancels the request's context when its stream closes, with
// StreamableHTTPOptions.PropagateRequestCancellation) and when a question
// stays unanswered for [Options].ParkTimeout.

// DefaultParkTimeout is how long a parked call waits for its client's
// answer to one question before it is cancelled.
const DefaultParkTimeout = 10 * time.Minute

// ReasonRequestState is the reason audited for a retry refused for its
// requestState (forged, expired, replayed, another caller's or another
// call's).
const ReasonRequestState tool.Reason = "request_state"

// How a parked call was cancelled, in [Event].End (with [CallsCancelled]).
const (
	EndUnanswered = "unanswered"  // a question waited past ParkTimeout
	EndClientGone = "client_gone" // the client closed a request waiting on the call
)

// errClientGone is the cause of a parked call cancelled because its client
// closed the request that waited on it.
var errClientGone = errors.New("the client closed its request while the call waited on it")

// questionKey names the input request of round n. A client answers it
// under the same key.
func questionKey(round int) string { return fmt.Sprintf("q%d", round) }

// parkedCall is the holder's side of one parked call, and the downstream
// its executor call asks and tells.
type parkedCall struct {
	g      *Gateway
	caps   func() *mcp.ClientCapabilities // declared by the request that started the call; decoded when first asked
	holder Holder
	cancel context.CancelCauseFunc // ends the executor call
	ended  func(end string)        // told of a cancellation (the limits' observer); may be nil
}

func (c *parkedCall) capabilities() *mcp.ClientCapabilities { return c.caps() }

// ask parks the call on a question until its answer comes back. A
// question left unanswered for ParkTimeout cancels the whole call: the
// client is gone, or its user is, and nobody else may answer.
func (c *parkedCall) ask(ctx context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	tctx, stop := context.WithTimeoutCause(ctx, c.g.parkTimeout, c.g.unanswered)
	defer stop()
	answer, err := c.holder.Ask(tctx, Question{Kind: kind, Params: params})
	if err != nil && tctx.Err() != nil {
		if ctx.Err() == nil && context.Cause(tctx) == c.g.unanswered {
			// Told first: once cancelled, the call may end and record its
			// outcome before this goroutine runs again.
			c.report(EndUnanswered)
			c.cancel(c.g.unanswered)
		}
		return nil, context.Cause(tctx) // why: unanswered, the client gone, the drain
	}
	return answer, err
}

func (c *parkedCall) progress(_ context.Context, p tool.Progress) { c.holder.Note(Note{Progress: &p}) }

func (c *parkedCall) log(_ context.Context, m tool.LogMessage) { c.holder.Note(Note{Log: &m}) }

func (c *parkedCall) report(end string) {
	if c.ended != nil {
		c.ended(end)
	}
}

// callModern serves a tools/call of a 2026-07-28 request: a new call, or a
// retry that answers the question of a parked one.
func (g *Gateway) callModern(ctx context.Context, req *mcp.CallToolRequest, name string, rewrite func(string) string) (*mcp.CallToolResult, error) {
	p := req.Params
	if p.RequestState == "" {
		return g.startParked(ctx, req, name, rewrite)
	}
	st, err := g.sealer.open(p.RequestState, principalOf(req), p.Name, p.Arguments, time.Now())
	if err != nil {
		return g.refuseRetry(ctx, req, err)
	}
	answer, ok := p.InputResponses[questionKey(st.Round)]
	if !ok || answer == nil {
		return g.refuseRetry(ctx, req, fmt.Errorf("inputResponses has no %q, the answer to the question the call waits on", questionKey(st.Round)))
	}
	raw, err := json.Marshal(answer)
	if err != nil {
		return nil, fmt.Errorf("inputResponses[%q]: %w", questionKey(st.Round), err)
	}
	return g.await(ctx, req, st.ID, g.sealer.parkKey(st.ID, principalOf(req), p.Name), st.Round, raw)
}

// startParked starts the executor call of a 2026-07-28 request and waits
// for its first question or its result.
func (g *Gateway) startParked(ctx context.Context, req *mcp.CallToolRequest, name string, rewrite func(string) string) (*mcp.CallToolResult, error) {
	base, release, ended := context.WithoutCancel(ctx), func() {}, func(string) {}
	if l := leaseFrom(ctx); l != nil && l.take() {
		base, release, ended = l.ctx, l.done, l.ended
	}
	// The lease's context comes from outside the handler: the caller's
	// identity and client, which the audit log records, are carried over.
	callCtx, cancel := context.WithCancelCause(carryCaller(base, ctx))
	id := rand.Text()
	key := g.sealer.parkKey(id, principalOf(req), req.Params.Name)
	c := &parkedCall{g: g, caps: sync.OnceValue(func() *mcp.ClientCapabilities { return capabilitiesOf(req) }), cancel: cancel, ended: ended}
	// A client's request cancels the call only by closing while it waits.
	holder, err := g.parking.Park(ctx, key, func(cause error) {
		c.report(EndClientGone) // first, as in ask
		cancel(cause)
	})
	if err != nil {
		cancel(nil)
		release()
		return nil, fmt.Errorf("parking the call: %w", err)
	}
	c.holder = holder
	callCtx = tool.WithCaller(withDownstream(callCtx, c), relay{c})
	args := req.Params.Arguments
	// On a goroutine of the pool's, whose stack an earlier call grew.
	callGoroutines.Go(func() {
		res := g.run(callCtx, name, args)
		// The slot is free before the client hears of the result, so that
		// the call it makes next is not refused for this one.
		cancel(nil)
		release()
		holder.Finish(toMCP(res.Truncated(g.opts.MaxResultBytes), rewrite))
	})
	return g.await(ctx, req, id, key, 0, nil)
}

// await delivers answer (none for round 0) to round of the parked call
// id, parked under key, and waits for the call's next step, passing its
// progress and log lines to this request meanwhile: a question becomes
// this request's input request, the result its result.
func (g *Gateway) await(ctx context.Context, req *mcp.CallToolRequest, id, key string, round int, answer json.RawMessage) (*mcp.CallToolResult, error) {
	step, err := g.parking.Resume(ctx, key, round, answer, notesTo(ctx, req))
	switch {
	case err != nil && ctx.Err() != nil:
		// The client closed the request (its stream): nobody is left to
		// answer the call, which is cancelled with its upstream call.
		_ = g.parking.Cancel(context.WithoutCancel(ctx), key, errClientGone.Error())
		return nil, ctx.Err()
	case errors.Is(err, ErrRoundAnswered):
		return g.refuseRetry(ctx, req, errStateReplayed)
	case errors.Is(err, ErrNotParked):
		return g.refuseRetry(ctx, req, errStateUnknown)
	case errors.Is(err, ErrHolderLost):
		return g.refuseRetry(ctx, req, errStateLost)
	case err != nil:
		return nil, err
	}
	if step.Question == nil {
		if step.Result == nil {
			return nil, fmt.Errorf("the parked call ended without a result")
		}
		return step.Result, nil
	}
	ir, err := inputRequest(*step.Question)
	if err != nil {
		return nil, err
	}
	state := g.sealer.seal(sealedState{
		ID: id, Round: step.Round, Principal: principalOf(req), Tool: req.Params.Name,
		Args: argsDigest(req.Params.Arguments), Expires: time.Now().Add(g.parkTimeout).UnixMilli(),
	})
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{questionKey(step.Round): ir}, RequestState: state}, nil
}

// inputRequest is q as go-sdk's input request of its kind.
func inputRequest(q Question) (mcp.InputRequest, error) {
	switch q.Kind {
	case tool.Elicitation:
		var p mcp.ElicitParams
		if err := json.Unmarshal(q.Params, &p); err != nil {
			return nil, fmt.Errorf("elicitation/create: %w", err)
		}
		return &p, nil
	case tool.Sampling:
		var p mcp.CreateMessageWithToolsParams
		if err := json.Unmarshal(q.Params, &p); err != nil {
			return nil, fmt.Errorf("sampling/createMessage: %w", err)
		}
		return &p, nil
	}
	return nil, fmt.Errorf("a parked call asked a question of kind %q", q.Kind)
}

// notesTo returns the function that passes a parked call's notes to the
// request req: progress under the request's own token (none when it asked
// for none), log lines filtered by the level in its _meta.
func notesTo(ctx context.Context, req *mcp.CallToolRequest) func(Note) {
	token := req.Params.GetProgressToken()
	return func(n Note) {
		if n.Progress != nil && token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: n.Progress.Progress, Total: n.Progress.Total, Message: n.Progress.Message,
			})
		}
		if n.Log != nil {
			sendLog(ctx, req.Session, *n.Log)
		}
	}
}

// refuseRetry refuses a retry whose requestState or answer cannot continue
// a parked call: audited as a refused call of the caller, and answered with
// an invalid-params error saying why.
func (g *Gateway) refuseRetry(ctx context.Context, req *mcp.CallToolRequest, why error) (*mcp.CallToolResult, error) {
	msg := fmt.Sprintf("call to %q refused: %v", req.Params.Name, why)
	g.refuse(ctx, req.Params.Name, req.Params.Arguments, ReasonRequestState, msg)
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// carryCaller returns to with the caller's identity, principal and
// client from from.
func carryCaller(to, from context.Context) context.Context {
	if who := tool.IdentityFrom(from); who != "" {
		to = tool.WithIdentity(to, who)
	}
	if p, ok := tool.PrincipalFrom(from); ok {
		to = tool.WithPrincipal(to, p)
	}
	if c := tool.ClientFrom(from); c != (tool.Client{}) {
		to = tool.WithClient(to, c)
	}
	return to
}

// principalOf is who a request's requestState is bound to: the
// authenticated caller (see callerName: its subject, with its credential's
// kind and issuer), or nobody without authentication.
func principalOf(req mcp.Request) string {
	if extra := req.GetExtra(); extra != nil {
		return callerName(extra.TokenInfo)
	}
	return ""
}
