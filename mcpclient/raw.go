package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/version"
)

// A raw request is one toolwire sends on a server's connection beside the
// SDK's session, for what go-sdk's types cannot say (a tools/call with a
// "task", a tool's "execution" in a listing; see tasks.go): over stdio
// through the connection's own calls (stdioconn.Conn.Call), whose answers
// the session never sees; over Streamable HTTP as a POST of its own with
// the session's headers. A legacy SSE connection has no raw path.

// errNoRawPath is returned for a raw request on a connection that has no
// raw path.
var errNoRawPath = errors.New("this transport cannot carry a request go-sdk cannot express (stdio and Streamable HTTP can)")

// rawHTTP is what a raw request over Streamable HTTP needs: the session's
// HTTP client (its header and redirect rules, its egress guard), its
// endpoint and its OAuth handler.
type rawHTTP struct {
	client *http.Client
	url    string
	oauth  auth.OAuthHandler // nil for none
	next   atomic.Uint64
}

// rawCall sends method with params on c as a raw request and returns the
// result, or the server's error as a *jsonrpc.Error. name is the request's
// Mcp-Name (the tool, the task) on a 2026-07-28 HTTP connection. Over HTTP,
// the notifications the server sends on the request's own stream go to
// note.
func (c *conn) rawCall(ctx context.Context, method, name string, params map[string]any, note func(*jsonrpc.Request)) (json.RawMessage, error) {
	if c.listOnly && method != "tools/list" {
		return nil, listOnlyError(method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	switch {
	case c.stdio != nil:
		resp, err := c.stdio.Call(ctx, method, raw)
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case c.http != nil:
		return c.http.call(ctx, c, method, name, raw, note)
	}
	return nil, errNoRawPath
}

// call POSTs one request and reads its response, as JSON or from the
// event stream the server answers with.
func (h *rawHTTP) call(ctx context.Context, c *conn, method, name string, params json.RawMessage, note func(*jsonrpc.Request)) (json.RawMessage, error) {
	id := fmt.Sprintf("toolwire-raw-%d", h.next.Add(1))
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", c.protocol)
	if sid := c.session.ID(); sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if stateless(c.protocol) {
		// SEP-2243's routing headers, which the server checks against
		// the body.
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	if h.oauth != nil {
		ts, err := h.oauth.TokenSource(ctx)
		if err != nil {
			return nil, fmt.Errorf("oauth: %w", err)
		}
		if ts != nil {
			tok, err := ts.Token()
			if err != nil {
				return nil, fmt.Errorf("oauth: %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode/100 != 2 {
		// A JSON-RPC error may come with an HTTP error status (2026-07-28
		// maps some codes to 400 and 404).
		if mediaType == "application/json" {
			if r, err := decodeRawResponse(io.LimitReader(resp.Body, maxRawMessage)); err == nil && r.Error != nil {
				return nil, r.Error
			}
		}
		return nil, fmt.Errorf("%s: HTTP %s", method, resp.Status)
	}
	var r *jsonrpc.Response
	switch mediaType {
	case "application/json":
		r, err = decodeRawResponse(io.LimitReader(resp.Body, maxRawMessage))
	case "text/event-stream":
		r, err = readRawEvents(resp.Body, id, note)
	default:
		err = fmt.Errorf("%s: unexpected content type %q", method, mediaType)
	}
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return nil, r.Error
	}
	return r.Result, nil
}

// maxRawMessage bounds one message of a raw request's answer.
const maxRawMessage = 16 << 20

func decodeRawResponse(r io.Reader) (*jsonrpc.Response, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, err
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return nil, fmt.Errorf("want a response, got %T", msg)
	}
	return resp, nil
}

// readRawEvents reads an event stream until the response with id, passing
// the notifications before it to note.
func readRawEvents(body io.Reader, id string, note func(*jsonrpc.Request)) (*jsonrpc.Response, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxRawMessage)
	var data bytes.Buffer
	flush := func() (*jsonrpc.Response, bool) {
		defer data.Reset()
		if data.Len() == 0 {
			return nil, false
		}
		msg, err := jsonrpc.DecodeMessage(data.Bytes())
		if err != nil {
			return nil, false
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID.Raw() == id {
				return m, true
			}
		case *jsonrpc.Request:
			if !m.IsCall() && note != nil {
				note(m)
			}
		}
		return nil, false
	}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			if r, ok := flush(); ok {
				return r, nil
			}
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(v, " "))
		}
	}
	if r, ok := flush(); ok {
		return r, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the event stream ended without the response")
}

// requestMeta returns the _meta a raw request carries on a 2026-07-28
// connection, where each request says who sends it and what it can do
// (SEP-2575), as go-sdk's own requests do, with extensions added to the
// capabilities; on an older connection, nothing.
func (d *dialer) requestMeta(c *conn, extensions ...string) map[string]any {
	if !stateless(c.protocol) {
		return map[string]any{}
	}
	caps := map[string]any{}
	if d.shared.handlers.ElicitationHandler != nil {
		caps["elicitation"] = map[string]any{"form": map[string]any{}}
	}
	if d.shared.handlers.CreateMessageHandler != nil {
		caps["sampling"] = map[string]any{}
	}
	if len(d.set.cfg.Roots) > 0 {
		caps["roots"] = map[string]any{}
	}
	if len(extensions) > 0 {
		ext := map[string]any{}
		for _, e := range extensions {
			ext[e] = map[string]any{}
		}
		caps["extensions"] = ext
	}
	meta := map[string]any{
		mcp.MetaKeyProtocolVersion:    c.protocol,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "toolwire", "version": version.String()},
		mcp.MetaKeyClientCapabilities: caps,
	}
	if level := d.logLevel(); level != "" {
		meta[mcp.MetaKeyLogLevel] = level
	}
	return meta
}
