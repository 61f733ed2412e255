package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

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

// cancelWriteTimeout bounds the write of a cancelled call's announcement
// to a server that does not read.
const cancelWriteTimeout = 5 * time.Second

// callOverStdio sends a tools/call with params on conn and returns its
// result. A call whose ctx ends first is announced to the server, as the
// session announces its own, on a goroutine of its own; the call's cancel
// probe hears of the request and of the announcement as it would from
// the session's writes (see noteWrite).
func callOverStdio(ctx context.Context, conn *stdioconn.Conn, params json.RawMessage) (*mcp.CallToolResult, error) {
	if p := probeOf(ctx); p != nil {
		p.markSent() // the write may fail: then there is nothing to announce, and Close waits no longer for it
	}
	resp, cancelled, err := conn.Request(ctx, "tools/call", params)
	if cancelled != nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWriteTimeout)
		go func() {
			defer cancel()
			noteWrite(wctx, cancelled, conn.Write(wctx, cancelled))
		}()
	} else if p := probeOf(ctx); p != nil {
		p.markAnnounced() // nothing to announce
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

// textResult is the shape of the results decoded here: text content, and
// nothing go-sdk's CallToolResult would keep that this does not.
type textResult struct {
	Meta              map[string]any    `json:"_meta,omitempty"`
	Content           []json.RawMessage `json:"content"`
	StructuredContent any               `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError,omitempty"`
	ResultType        string            `json:"resultType,omitempty"`
}

type textContent struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
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

func decodeTextResult(raw json.RawMessage) (*mcp.CallToolResult, bool) {
	var w textResult
	if !exactKeys(raw, "_meta", "content", "structuredContent", "isError", "resultType") || json.Unmarshal(raw, &w) != nil ||
		(w.ResultType != "" && w.ResultType != "complete") {
		return nil, false
	}
	r := &mcp.CallToolResult{Meta: w.Meta, StructuredContent: w.StructuredContent, IsError: w.IsError, Content: make([]mcp.Content, 0, len(w.Content))}
	for _, item := range w.Content {
		var t textContent
		if !exactKeys(item, "type", "text") || json.Unmarshal(item, &t) != nil || t.Type != "text" || t.Text == nil {
			return nil, false
		}
		r.Content = append(r.Content, &mcp.TextContent{Text: *t.Text})
	}
	return r, true
}

// exactKeys reports whether raw is a JSON object whose members are all
// named in allowed, exactly: encoding/json would also take a member named
// in another case for a field, and go-sdk's decoding would not, so such a
// result goes to go-sdk's.
func exactKeys(raw []byte, allowed ...string) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return false
		}
		if k, _ := t.(string); !slices.Contains(allowed, k) {
			return false
		}
		var value json.RawMessage
		if d.Decode(&value) != nil {
			return false
		}
	}
	return true
}
