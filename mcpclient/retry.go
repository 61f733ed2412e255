package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// A call whose session dies under it (the child crashed, the connection
// dropped) may have run on the server or not; nobody can tell. Sending it
// again is harmless only for a tool that changes nothing and that the
// server itself says gives the same answer when repeated: a read-tier tool
// (the operator's judgement, never lowered by a hint) with idempotentHint.
// Such a call is sent once more on the reconnected session; any other
// call fails as the session did.

type retrySafeKey struct{}

// retrySafe marks h's calls as safe to send again after a lost session.
// adapt wraps the handlers of read-tier tools the server declared
// idempotent.
func retrySafe(h tool.Handler) tool.Handler {
	return func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
		return h(context.WithValue(ctx, retrySafeKey{}, true), args)
	}
}

// mayRetry reports whether a call that failed with err may be sent again:
// its tool is retry-safe, the caller still waits, and err is the session
// being lost, not the server's answer or a timeout.
func mayRetry(ctx context.Context, err error) bool {
	var rounds *inputRoundsError
	if safe, _ := ctx.Value(retrySafeKey{}).(bool); !safe || ctx.Err() != nil || errors.As(err, &rounds) {
		return false // an exchange that failed between its rounds failed on the caller's side
	}
	// A stdio child that died mid-call shows as the end of its output
	// (EOF); a closed or forgotten session as the SDK's errors for those.
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing)
}

// retry waits, within the server's timeout and the caller's context, for
// the connection that replaces lost, notes the second attempt in the
// call's audit trail, and sends the call once more. When no new
// connection comes, the first failure stands.
func (s *Server) retry(ctx context.Context, lost *conn, name string, args json.RawMessage, first error) (*mcp.CallToolResult, error) {
	wctx, cancel := context.WithTimeout(ctx, s.set.timeout)
	defer cancel()
	c, err := s.sup.awaitLive(wctx, lost)
	if err != nil {
		return nil, first
	}
	tool.NoteRetry(ctx, fmt.Sprintf("server %q: the session was lost during the call; sent again (read tier, idempotentHint): %s", s.set.cfg.Name, s.set.secrets.String(first.Error())))
	return s.callOnce(ctx, c, name, args)
}
