package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/stdioconn"
)

// A tools/call over stdio goes out on the connection's own path
// (stdioconn.Conn.Request) and its answer is decoded once, with
// encoding/json, when it is a plain result of text: go-sdk's session
// decodes every answer twice (the response, then the result's content),
// each time into a fresh 32 KiB buffer, which was a seventh of what a
// gateway allocated per call and the GC time that goes with it
// (docs/performance.md). Everything else about the call stays as it was:
// the request is go-sdk's, with the _meta and progress token the session
// and the relay put on it; input rounds (inputRounds, outside this) see
// the same result; notifications and the server's requests during the
// call reach the session as before; an answer of any other shape is
// decoded by go-sdk.

// stdioCalls is sending middleware, innermost, that sends a tools/call on
// c's stdio connection itself (see above); any other request, and any on
// another transport, goes to next.
func stdioCalls(c *conn) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" || c.stdio == nil {
				return next(ctx, method, req)
			}
			params, err := json.Marshal(req.GetParams())
			if err != nil {
				return nil, err
			}
			return callOverStdio(ctx, c.stdio, params)
		}
	}
}

// callOverStdio sends a tools/call with params on conn and returns its
// result. A call whose ctx ends first is announced to the server, as the
// session announces its own: on a goroutine, since a server that does not
// read holds the write until the connection closes; the call's cancel
// probe hears of the request and of the announcement as it would from the
// session's writes (see noteWrite), so that Close waits for it.
func callOverStdio(ctx context.Context, conn *stdioconn.Conn, params json.RawMessage) (*mcp.CallToolResult, error) {
	resp, cancelled, err := conn.Request(ctx, "tools/call", params)
	if cancelled != nil {
		if p := probeOf(ctx); p != nil {
			p.markSent()
		}
		wctx := context.WithoutCancel(ctx)
		go func() {
			_ = conn.Write(wctx, cancelled) // announced either way: nothing more comes of it
			noteWrite(wctx, cancelled)
		}()
	}
	if errors.Is(err, stdioconn.ErrClosed) {
		// What the session says of a connection that ended under a call:
		// mayRetry and the supervisor know it.
		return nil, fmt.Errorf("%w: %w", mcp.ErrConnectionClosed, io.EOF)
	}
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return decodeCallResult(resp.Result)
}

// decodeCallResult decodes a tools/call result: a plain result of text in
// one pass, anything else (other content, annotations, input requests, a
// field this does not know) as go-sdk decodes it.
func decodeCallResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	if r, ok := decodeTextResult(raw); ok {
		return r, nil
	}
	var r mcp.CallToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("the tools/call result: %w", err)
	}
	return &r, nil
}

// decodeTextResult decodes raw when it is a result of text content only,
// with no member go-sdk's CallToolResult would read that this does not.
func decodeTextResult(raw json.RawMessage) (*mcp.CallToolResult, bool) {
	if !nestsWithin(raw, maxNesting) {
		return nil, false // go-sdk refuses it
	}
	var res textResult
	if stdioconn.UnmarshalKnown(raw, &res) != nil || (res.ResultType != "" && res.ResultType != "complete") {
		return nil, false
	}
	r := &mcp.CallToolResult{Meta: res.Meta, StructuredContent: res.StructuredContent, IsError: res.IsError, Content: make([]mcp.Content, 0, len(res.Content))}
	for _, item := range res.Content {
		if item == nil || item.Type != "text" || item.Text == nil {
			return nil, false
		}
		r.Content = append(r.Content, &mcp.TextContent{Text: *item.Text})
	}
	return r, true
}

// textResult is a tools/call result of text content only: decoded with
// UnmarshalKnown, any other member (an annotation, another content's
// data) fails it, and the result goes to go-sdk.
type textResult struct {
	Meta              map[string]any `json:"_meta"`
	Content           []*textContent `json:"content"`
	StructuredContent any            `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	ResultType        string         `json:"resultType"`
}

type textContent struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// maxNesting is how deep go-sdk lets a result nest objects and arrays;
// it refuses a deeper one, and so does a call through toolwire.
const maxNesting = 1000

// nestsWithin reports whether the JSON text raw nests objects and arrays
// at most max deep (what is inside strings aside).
func nestsWithin(raw []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, b := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			if depth++; depth > max {
				return false
			}
		case b == '}' || b == ']':
			depth--
		}
	}
	return true
}
