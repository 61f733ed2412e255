package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// refuse audits a call the gateway refuses before it reaches the executor
// (a tool the caller's role is not offered; a limit), with the caller and
// why, and returns the result the caller is told. It is the one path for
// such refusals, so that each is recorded like the executor's own
// ([tool.Executor.Refuse]: call.requested, then call.refused). name is the
// tool as the caller asked for it ("" when refused before it was read),
// args its raw arguments (nil when not read). The caller is the identity
// in ctx ([tool.WithIdentity]), else the authenticated subject of the
// request's bearer token, so HTTP middleware and MCP handlers alike can
// call it with the context they have.
func (g *Gateway) refuse(ctx context.Context, name string, args json.RawMessage, reason tool.Reason, msg string) *tool.Result {
	if tool.IdentityFrom(ctx) == "" {
		if ti := auth.TokenInfoFromContext(ctx); ti != nil && ti.UserID != "" {
			ctx = tool.WithIdentity(ctx, ti.UserID)
		}
	}
	return g.ex.Refuse(ctx, tool.Call{Name: name, Args: args}, reason, msg)
}

// withCaller returns ctx carrying the authenticated subject of req, when
// it has one, as the identity its calls and refusals are audited with,
// and as the principal an upstream reached with each caller's own
// identity is reached as (see [IssuerKey]).
func withCaller(ctx context.Context, req mcp.Request) context.Context {
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
		return withPrincipal(tool.WithIdentity(ctx, extra.TokenInfo.UserID), req)
	}
	return ctx
}

// guard is receiving middleware of every served server. A tools/call of a
// tool the server does not offer (one the caller's role may not see, or
// none at all) is refused here rather than by the SDK, so that it is
// audited with the caller; the caller gets what the SDK would answer, an
// invalid-params error naming the tool (MCP: an unknown tool is a
// protocol error).
func (s *served) guard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if !ok {
			return next(ctx, method, req)
		}
		s.mu.Lock()
		_, offered := s.offered[p.Name]
		s.mu.Unlock()
		if offered {
			return next(ctx, method, req)
		}
		msg := fmt.Sprintf("unknown tool %q", p.Name)
		s.g.refuse(withCaller(ctx, req), p.Name, p.Arguments, tool.ReasonUnknownTool, msg+": not offered to this caller")
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	}
}
