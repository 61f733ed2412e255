package mcpclient

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/tool"
)

// A 2026-07-28 server asks its client for input in its answer (multi
// round-trip requests, SEP-2322): a tools/call, prompts/get or
// resources/read is answered with input requests, and the client sends
// the request again with the answers. go-sdk's client runs that loop
// itself, but checks each elicitation's schema on the way, as it checks an
// elicitation/create request, and refuses what the specification allows
// and its check does not (a titled multi-select written with "type":
// "string" beside its anyOf, see untypeTitledItems). Its loop is turned
// off on toolwire's connections and inputRounds runs it instead: the same
// bounds, the input requests relayed to the call's caller (relay.ask,
// with the request's context, which names the call) with the schema
// relaxed as on the 2025 path, and roots from the configuration.

// Bounds of the loop, go-sdk's own: rounds in all, and rounds answered
// with no input request at all (the server shedding load).
const (
	maxInputRounds    = 10
	maxSheddingRounds = 3
)

// inputRounds is sending middleware, innermost (next sends the request),
// that answers a server's input requests and sends the request again
// until the server answers it (see above).
func (d *dialer) inputRounds(c *conn) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" && method != "prompts/get" && method != "resources/read" {
				return next(ctx, method, req)
			}
			shed := 0
			for round := 1; ; round++ {
				res, err := next(ctx, method, req)
				if err != nil {
					return res, err
				}
				asks, state, ok := inputRequestsOf(res)
				if !ok {
					return res, nil
				}
				if len(asks) == 0 {
					if shed++; shed >= maxSheddingRounds {
						return nil, roundsError("the server shed the request %d times", shed)
					}
				}
				if round >= maxInputRounds {
					return nil, roundsError("the server still asked for input after %d rounds", round)
				}
				answers, err := d.answerInputs(ctx, c, asks)
				if err != nil {
					return nil, err
				}
				if req, err = withAnswers(req, answers, state); err != nil {
					return nil, err
				}
			}
		}
	}
}

// inputRoundsError is a multi round-trip exchange that failed between its
// rounds: an input request nobody could answer (the call's caller cannot,
// or toolwire did not declare that kind), or a server that kept asking.
// The transport carried every round, so it does not count toward the
// failures that make a connection lost (see conn.noteFailure): else a
// caller whose client cannot answer would, a few calls in a row, make
// a sound server reconnect under every other caller.
type inputRoundsError struct{ err error }

func roundsError(format string, args ...any) error {
	return &inputRoundsError{err: fmt.Errorf(format, args...)}
}

func (e *inputRoundsError) Error() string { return "multi round-trip: " + e.err.Error() }
func (e *inputRoundsError) Unwrap() error { return e.err }

// inputRequestsOf returns what res asks for, and the state to send back;
// ok is false for a result that asks for nothing (a nil map).
func inputRequestsOf(res mcp.Result) (asks mcp.InputRequestMap, state string, ok bool) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return r.InputRequests, r.RequestState, r.InputRequests != nil
	case *mcp.GetPromptResult:
		return r.InputRequests, r.RequestState, r.InputRequests != nil
	case *mcp.ReadResourceResult:
		return r.InputRequests, r.RequestState, r.InputRequests != nil
	}
	return nil, "", false
}

// answerInputs answers every input request at once (a caller may be asked
// several things by one round), or fails with the first failure.
func (d *dialer) answerInputs(ctx context.Context, c *conn, asks mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = make(mcp.InputResponseMap, len(asks))
		errs    = map[string]error{}
	)
	for key, ask := range asks {
		wg.Go(func() {
			a, err := d.answerInput(ctx, c, ask)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[key] = err
				cancel()
				return
			}
			answers[key] = a
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		key := slices.Sorted(maps.Keys(errs))[0]
		return nil, roundsError("input request %q: %w", key, errs[key])
	}
	return answers, nil
}

// answerInput answers one input request: elicitation and sampling through
// the call's caller (if the server was told toolwire relays them), roots
// from the configuration.
func (d *dialer) answerInput(ctx context.Context, c *conn, ask mcp.InputRequest) (mcp.InputResponse, error) {
	relay := d.set.opts.Relay
	switch p := ask.(type) {
	case *mcp.ElicitParams:
		if !relay.Elicitation {
			return nil, fmt.Errorf("server %q asked for elicitation, which toolwire did not declare", d.set.cfg.Name)
		}
		q := *p
		if q.RequestedSchema != nil {
			q.RequestedSchema = untypeTitledItems(q.RequestedSchema)
		}
		var res mcp.ElicitResult
		return &res, c.relay.ask(ctx, tool.Elicitation, &q, &res)
	case *mcp.CreateMessageParams:
		if !relay.Sampling {
			return nil, fmt.Errorf("server %q asked for sampling, which toolwire did not declare", d.set.cfg.Name)
		}
		var res mcp.CreateMessageResult
		return &res, c.relay.ask(ctx, tool.Sampling, p, &res)
	case *mcp.CreateMessageWithToolsParams:
		if !relay.Sampling {
			return nil, fmt.Errorf("server %q asked for sampling, which toolwire did not declare", d.set.cfg.Name)
		}
		var res mcp.CreateMessageWithToolsResult
		return &res, c.relay.ask(ctx, tool.Sampling, p, &res)
	case *mcp.ListRootsParams:
		cfg, err := d.expand()
		if err != nil {
			return nil, err
		}
		return &mcp.ListRootsResult{Roots: rootsOf(cfg)}, nil
	}
	return nil, fmt.Errorf("server %q asked for input of a kind toolwire does not know (%T)", d.set.cfg.Name, ask)
}

// withAnswers returns req again, its params a copy carrying answers and
// state (the params of the request first sent are not changed).
func withAnswers(req mcp.Request, answers mcp.InputResponseMap, state string) (mcp.Request, error) {
	cs, _ := req.GetSession().(*mcp.ClientSession)
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParams:
		q := *p
		q.InputResponses, q.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.CallToolParams]{Session: cs, Params: &q}, nil
	case *mcp.CallToolParamsRaw:
		q := *p
		q.InputResponses, q.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.CallToolParamsRaw]{Session: cs, Params: &q}, nil
	case *mcp.GetPromptParams:
		q := *p
		q.InputResponses, q.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.GetPromptParams]{Session: cs, Params: &q}, nil
	case *mcp.ReadResourceParams:
		q := *p
		q.InputResponses, q.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.ReadResourceParams]{Session: cs, Params: &q}, nil
	}
	return nil, roundsError("cannot send %T again", req.GetParams())
}
