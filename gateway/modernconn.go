package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/stdioconn"
)

// modernCalls serves a 2026-07-28 request that is one well-formed
// tools/call itself, in front of go-sdk's stateless handler (next), which
// serves every other request, and every request this one would answer
// otherwise than go-sdk does. go-sdk's handler decodes such a request
// about eleven times, each into a fresh 32 KiB buffer (the body twice
// before its session sees it, the message, its _meta three times, its
// name and params, the tool's input schema to look for x-mcp-header);
// here the body is decoded once, its params once, and the client's
// capabilities once.
//
// What go-sdk would do for the request is done here, in its order: the
// checks of its handler and transport (a POST of JSON accepting both
// answers, the version header the one of the _meta, Mcp-Method and
// Mcp-Name naming the call), those of its session (_meta's client info and
// capabilities decoding), an ephemeral ServerSession whose state is what
// the _meta says (connected to a sessionTransport, which carries what the
// call sends on the way, and refuses a request to the client as a
// stateless transport does), the server's middleware and tool handler
// (served.direct), the result's serverInfo and resultType, and an error's
// HTTP status. Any request for which a check fails, and a tool whose
// schema binds arguments to headers, go to go-sdk, which refuses or
// serves them as before. TestModernCallsAnswerAsGoSDKDoes compares the
// two, byte for byte.
type modernCalls struct {
	next      http.Handler
	getServer func(*http.Request) *mcp.Server
	servedBy  func(*mcp.Server) *served // nil: every request goes to next
	maxBody   int64
	taken     atomic.Int64 // the calls served here, not by next

	capsMu sync.Mutex
	caps   map[string]*mcp.ClientCapabilities // decoded capabilities, by their JSON (capabilities)
}

// Bounds of modernCalls' cache of decoded capabilities: a client sends the
// same ones with every request, and a client that sends ever new ones
// costs a bounded map.
const (
	maxCachedCaps   = 256
	maxCachedCapLen = 2048
)

// capabilities returns call.ClientCapabilities(): the client's
// capabilities in the _meta, decoded as go-sdk decodes them, nil when they
// are missing or do not decode. go-sdk re-encodes the value and decodes
// that, into a fresh 32 KiB buffer; the answer is a function of that
// encoding, so it is kept by it.
func (m *modernCalls) capabilities(call *mcp.CallToolRequest) *mcp.ClientCapabilities {
	raw := call.Params.Meta[mcp.MetaKeyClientCapabilities]
	if raw == nil {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil || len(b) > maxCachedCapLen {
		return call.ClientCapabilities()
	}
	key := string(b)
	m.capsMu.Lock()
	caps, ok := m.caps[key]
	m.capsMu.Unlock()
	if ok {
		return caps
	}
	caps = call.ClientCapabilities()
	if caps == nil {
		return nil
	}
	m.capsMu.Lock()
	defer m.capsMu.Unlock()
	if m.caps == nil || len(m.caps) >= maxCachedCaps {
		m.caps = make(map[string]*mcp.ClientCapabilities)
	}
	m.caps[key] = caps
	return caps
}

func (m *modernCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.serve(w, r) {
		m.next.ServeHTTP(w, r)
	}
}

// modernCall is a request modernCalls takes: everything it needs, decoded
// and checked.
type modernCall struct {
	id     jsonrpc.ID
	served *served
	server *mcp.Server
	call   *mcp.CallToolRequest
	state  *mcp.ServerSessionState
}

// serve serves r and reports true, or leaves it as it came (its body
// given back) and reports false.
func (m *modernCalls) serve(w http.ResponseWriter, r *http.Request) bool {
	c := m.take(r)
	if c == nil {
		return false
	}
	t := newSessionTransport("", receivedMethods)
	t.stateless = true
	ss, err := c.server.Connect(r.Context(), t, &mcp.ServerSessionOptions{State: c.state})
	if err != nil {
		return false // go-sdk's handler says so (500)
	}
	defer ss.Close()
	m.taken.Add(1)
	extra := &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header}
	c.call.Session, c.call.Extra = ss, extra
	p := &postAnswer{w: w, whole: prefersJSON(r.Header.Values("Accept")), pending: 1, answered: make(chan struct{})}
	t.hold(p, extra, []jsonrpc.ID{c.id})
	defer t.release(p, extra)
	// The request's context: closing the stream cancels the call, as
	// go-sdk's handler does with PropagateRequestCancellation (and the
	// tracker's cancellation of a stateless request reaches it).
	res, err := c.served.direct(r.Context(), "tools/call", c.call)
	resp := callResponse(c.id, res, err, c.served.modernResult)
	if status := errorStatus(resp.Error); status != 0 {
		// A protocol error of 2026-07-28 is its HTTP status, and the
		// response alone as JSON.
		// (Once the answer is an event stream, the error goes on it.)
		var buf bytes.Buffer
		if stdioconn.AppendMessage(&buf, resp) == nil && p.writeAlone(status, buf.Bytes()) {
			return true
		}
	}
	_ = sessionConn{t}.Write(r.Context(), resp)
	return true
}

// take returns r as a call modernCalls serves, or nil.
func (m *modernCalls) take(r *http.Request) *modernCall {
	version := r.Header.Get(protocolHeader)
	if m.servedBy == nil || r.Method != http.MethodPost || version != Revision2026 || reboundHost(r) ||
		mediaType(r.Header.Get("Content-Type")) != "application/json" || len(r.Header.Values("Last-Event-ID")) > 0 ||
		r.Header.Get("Mcp-Method") != "tools/call" {
		return nil
	}
	if json, stream := accepts(r.Header.Values("Accept")); !json || !stream {
		return nil
	}
	name := r.Header.Get("Mcp-Name")
	if name == "" {
		return nil
	}
	server := m.getServer(r)
	if server == nil {
		return nil
	}
	sv := m.servedBy(server)
	if sv == nil || sv.direct == nil || sv.headerBound(name) {
		return nil
	}
	body, complete := peek(r, m.maxBody)
	if !complete || len(body) == 0 {
		return nil
	}
	msgs, isBatch, err := stdioconn.DecodeBody(body)
	if err != nil || isBatch {
		return nil
	}
	req, ok := msgs[0].(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != "tools/call" || len(req.Params) == 0 {
		return nil
	}
	var params *mcp.CallToolParamsRaw
	if stdioconn.UnmarshalDecoded(req.Params, &params) != nil || params == nil || params.Name != name {
		return nil
	}
	if v, _ := params.Meta[mcp.MetaKeyProtocolVersion].(string); v != version {
		return nil
	}
	call := &mcp.CallToolRequest{Params: params}
	caps := m.capabilities(call) // nil: missing or not capabilities, which go-sdk refuses
	if caps == nil {
		return nil
	}
	var info *mcp.Implementation
	if raw, present := params.Meta[mcp.MetaKeyClientInfo]; present {
		if info = decodeImplementation(raw); info == nil {
			return nil
		}
	}
	level, _ := params.Meta[mcp.MetaKeyLogLevel].(string)
	return &modernCall{
		id: req.ID, served: sv, server: server, call: call,
		state: &mcp.ServerSessionState{
			InitializeParams: &mcp.InitializeParams{ProtocolVersion: version, ClientInfo: info, Capabilities: caps},
			LogLevel:         mcp.LoggingLevel(level),
		},
	}
}

// decodeImplementation decodes a _meta value as go-sdk decodes the
// client's info there, or returns nil where go-sdk refuses it.
func decodeImplementation(raw any) *mcp.Implementation {
	if raw == nil {
		return nil
	}
	if info, ok := plainImplementation(raw); ok {
		return info
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var info *mcp.Implementation
	if stdioconn.Unmarshal(b, &info) != nil {
		return nil
	}
	return info
}

// plainImplementation builds the client's info from raw without encoding
// it again when raw is what clients send, an object of the
// Implementation's string members only: decoding its encoding, as go-sdk
// does, sets exactly those fields to exactly those strings. Anything else
// (icons, another member, a member in another case, a value not a string)
// is left to the encoding and decoding.
func plainImplementation(raw any) (*mcp.Implementation, bool) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, false
	}
	info := &mcp.Implementation{}
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		switch k {
		case "name":
			info.Name = s
		case "title":
			info.Title = s
		case "description":
			info.Description = s
		case "version":
			info.Version = s
		case "websiteUrl":
			info.WebsiteURL = s
		default:
			return nil, false
		}
	}
	return info, true
}

// modernResult encodes a tools/call result as go-sdk's session answers a
// 2026-07-28 request: with the server's info in its _meta unless there is
// one (its resultType is callTool's, withResultType).
func (s *served) modernResult(res mcp.Result) (json.RawMessage, error) {
	m := res.GetMeta()
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m[mcp.MetaKeyServerInfo]; !ok {
		m[mcp.MetaKeyServerInfo] = s.impl
		res.SetMeta(m)
	}
	return marshalResult(res)
}

// resultTemplates are tools/call results whose resultType, a field go-sdk
// keeps to itself, is "complete" and "input_required": go-sdk sets it on a
// 2026-07-28 client's result in its own tools/call handler, and its
// encoding of the result writes it.
var resultTemplates = sync.OnceValues(func() (complete, inputRequired mcp.CallToolResult) {
	_ = complete.UnmarshalJSON([]byte(`{"content":[],"resultType":"complete"}`))
	_ = inputRequired.UnmarshalJSON([]byte(`{"content":[],"resultType":"input_required"}`))
	return complete, inputRequired
})

// withResultType returns res with the resultType go-sdk's tools/call
// handler gives it for a 2026-07-28 client (its
// handleMultiRoundTripResult): "input_required" when it asks for input,
// else "complete". TestWithResultTypeKeepsEveryField fails when go-sdk's
// result gains a field this does not copy.
func withResultType(res *mcp.CallToolResult, inputRequired bool) *mcp.CallToolResult {
	complete, asks := resultTemplates()
	out := complete
	if inputRequired {
		out = asks
	}
	if err := res.GetError(); err != nil {
		out.SetError(err)
	}
	out.Meta, out.Content, out.StructuredContent, out.IsError = res.Meta, res.Content, res.StructuredContent, res.IsError
	out.InputRequests, out.RequestState = res.InputRequests, res.RequestState
	return &out
}

// writeAlone writes data, a response, as the whole answer with status,
// unless something is written already, and reports whether it did.
func (p *postAnswer) writeAlone(status int, data []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended || p.wrote {
		return false
	}
	p.pending = 0
	close(p.answered)
	_ = p.writeWholeLocked(status, data)
	return true
}

// errorStatus is the HTTP status go-sdk gives a 2026-07-28 request's
// protocol error (its extractErrorStatus), or 0 for a response answered
// as any other.
func errorStatus(err error) int {
	var jerr *jsonrpc.Error
	if err == nil || !errors.As(err, &jerr) {
		return 0
	}
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}
