package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/jsonenc"
	"github.com/toolwire/toolwire/internal/stdioconn"
)

// sessionTransport is the Streamable HTTP transport of one 2025 session:
// what carries the session's messages between go-sdk's ServerSession and
// the client's HTTP requests. It stands where go-sdk's
// StreamableServerTransport stood, answering the same requests the same
// way, but decodes each message once, with toolwire's JSON-RPC codec
// (stdioconn's, which gives go-sdk's messages byte for byte), where
// go-sdk's transport decoded each POST four times into a fresh 32 KiB
// buffer; and it answers a POST whose answer is one response with that
// response as JSON when the client prefers JSON, choosing between JSON and
// an event stream when it knows which the answer is.
//
// A POST of notifications and responses is accepted (202) once go-sdk has
// them. A POST with calls is held open until every call is answered (or
// the client goes, or the session ends): a message the session sends while
// it serves one of those calls goes on that POST's answer, which becomes
// an event stream at the first message that is not the last response; any
// other message goes on the client's GET stream. go-sdk marks the context
// of what a request's handler sends with the request's id under a key of
// its own; toolwire marks it with the request's extra (relatePost), which
// each POST makes anew, and finds the POST by it. There are no event ids,
// and so no resuming (as with go-sdk's transport without an event store).
type sessionTransport struct {
	SessionID string
	methods   map[string]methodRule // what the session's server receives
	// stateless says that the transport carries one 2026-07-28 request
	// (modernconn.go): the server may not send the client requests of
	// its own.
	stateless bool

	// direct, when set, gives how to serve a POST's one tools/call
	// itself, through the server's middleware, instead of handing it to
	// the session (see stateful.directCalls); nil when the call is for the
	// session after all.
	direct func(req *jsonrpc.Request) func(context.Context) (mcp.Result, error)

	connected atomic.Bool
	incoming  chan jsonrpc.Message
	done      chan struct{}
	closing   sync.Once
	// ctx has the values of the context the session was connected with,
	// as the session's handlers have them; it ends when the session does.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	calls     map[jsonrpc.ID]*postAnswer        // calls in flight, by id: the POST that answers each
	posts     map[*mcp.RequestExtra]*postAnswer // the POSTs held open, by the extra of their requests
	listening *eventStream                      // the client's GET stream; nil while none is open
	directs   map[jsonrpc.ID]*directCall        // the calls served directly, in flight
}

func newSessionTransport(id string, methods map[string]methodRule) *sessionTransport {
	return &sessionTransport{
		SessionID: id,
		methods:   methods,
		incoming:  make(chan jsonrpc.Message, 10),
		done:      make(chan struct{}),
		calls:     map[jsonrpc.ID]*postAnswer{},
		posts:     map[*mcp.RequestExtra]*postAnswer{},
		directs:   map[jsonrpc.ID]*directCall{},
		ctx:       context.Background(),
		cancel:    func() {},
	}
}

// Connect gives the session its connection; a transport is connected
// once.
func (t *sessionTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if t.connected.Swap(true) {
		return nil, errors.New("transport already connected")
	}
	t.ctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return sessionConn{t}, nil
}

// sessionConn is the session's side of a sessionTransport.
type sessionConn struct{ t *sessionTransport }

func (c sessionConn) SessionID() string { return c.t.SessionID }

func (c sessionConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case msg := <-c.t.incoming:
		return msg, nil
	case <-c.t.done:
		return nil, io.EOF
	}
}

func (c sessionConn) Close() error {
	c.t.closing.Do(func() {
		close(c.t.done)
		c.t.cancel() // the calls served directly, as go-sdk cancels its handlers'
	})
	return nil
}

// Write sends msg to the client: a response on the POST that carried its
// call, a message sent while serving a call on that call's POST, any other
// on the GET stream. A message that has nowhere to go is refused without
// breaking the session (see rejected), as go-sdk's transport refuses it.
func (c sessionConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	t := c.t
	select {
	case <-t.done:
		return errors.New("session is closed")
	default:
	}
	var buf bytes.Buffer
	if err := stdioconn.AppendMessage(&buf, msg); err != nil {
		return err
	}
	data := buf.Bytes()
	if resp, ok := msg.(*jsonrpc.Response); ok {
		t.mu.Lock()
		p := t.calls[resp.ID]
		delete(t.calls, resp.ID)
		t.mu.Unlock()
		if p == nil {
			return rejectedf("response to %v: its POST is gone", resp.ID.Raw())
		}
		return p.send(data, true)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && t.stateless {
		return rejectedf("stateless servers cannot make requests")
	}
	if extra, _ := ctx.Value(postKey{}).(*mcp.RequestExtra); extra != nil {
		t.mu.Lock()
		p := t.posts[extra]
		t.mu.Unlock()
		if p == nil {
			// Sent for a request that is answered: as go-sdk's transport,
			// not on the GET stream instead.
			return rejectedf("write to closed stream")
		}
		return p.send(data, false)
	}
	t.mu.Lock()
	l := t.listening
	t.mu.Unlock()
	if l == nil {
		return rejectedf("undelivered message: no event stream open")
	}
	return l.send(data)
}

// ServeHTTP serves a POST of messages or a GET for the session's event
// stream; the stateful layer has checked the method, the content type,
// Accept, the body's size and the session's binding.
func (t *sessionTransport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		t.servePOST(w, r)
	case http.MethodGet:
		t.serveGET(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "unsupported method", http.StatusMethodNotAllowed)
	}
}

func (t *sessionTransport) servePOST(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		http.Error(w, "can't send Last-Event-ID for POST request", http.StatusBadRequest)
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if len(body) == 0 {
		http.Error(w, "POST requires a non-empty body", http.StatusBadRequest)
		return
	}
	msgs, isBatch, err := stdioconn.DecodeBody(body)
	if err != nil {
		http.Error(w, fmt.Sprintf("malformed payload: %v", err), http.StatusBadRequest)
		return
	}
	// One extra for every request of this POST: what go-sdk gives the
	// handlers (the caller's token, the headers), and the mark by which
	// what they send finds this POST.
	extra := &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header}
	header := r.Header.Get(protocolHeader)
	version := header
	if version == "" {
		version = "2025-03-26" // as go-sdk takes a request without the header
	}
	var calls []jsonrpc.ID
	for _, msg := range msgs {
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			continue
		}
		if problem := t.check(req); problem != "" {
			http.Error(w, problem, http.StatusBadRequest)
			return
		}
		if refusal := sessionlessRefusal(req, header, version); refusal != nil {
			writeResponse(w, http.StatusBadRequest, &jsonrpc.Response{ID: req.ID, Error: refusal})
			return
		}
		req.Extra = extra
		if req.IsCall() {
			calls = append(calls, req.ID)
		}
		if req.Method == "initialize" {
			w.Header().Set(sessionHeader, t.SessionID)
		}
	}
	if !isBatch && version >= Revision2026 {
		if req, ok := msgs[0].(*jsonrpc.Request); ok {
			if problem := methodHeaderProblem(r.Header, req); problem != "" {
				writeResponse(w, http.StatusBadRequest, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: problem}})
				return
			}
		}
	}
	for _, msg := range msgs {
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "notifications/cancelled" {
			t.cancelDirect(req.Params) // and the session hears of it too
		}
	}
	if len(calls) == 0 {
		if !t.publish(msgs) {
			http.Error(w, "session is closing", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	p := &postAnswer{
		w:        w,
		whole:    !isBatch && prefersJSON(r.Header.Values("Accept")),
		pending:  len(calls),
		answered: make(chan struct{}),
	}
	if dup, ok := t.hold(p, extra, calls); !ok {
		writeResponse(w, http.StatusBadRequest, &jsonrpc.Response{ID: dup, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %v", dup.Raw()),
		}})
		return
	}
	defer t.release(p, extra)
	if !t.startDirect(msgs, isBatch) && !t.publish(msgs) {
		return // the session ended: p.end says so on the answer
	}
	select {
	case <-p.answered:
	case <-r.Context().Done():
	case <-t.done:
	}
}

// readBody reads r's whole body, or answers as go-sdk's transport does
// when it cannot (413 past the body's limit) and reports false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		return body, true
	}
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
	} else {
		http.Error(w, "failed to read body", http.StatusBadRequest)
	}
	return nil, false
}

// sessionlessRefusal is go-sdk's refusal of a request of 2026-07-28's
// form in a session (its stateful transport's checks): a call under a
// version header of 2026-07-28 or later, or any request whose _meta names
// a protocol version, is refused, except server/discover, which a client
// sends to learn what the server speaks and which must then carry the
// same version in its header and its _meta. header is the request's
// version header as it came; version is the same, 2025-03-26 without one.
func sessionlessRefusal(req *jsonrpc.Request, header, version string) *jsonrpc.Error {
	metaVersion := metaProtocolVersion(req.Params)
	if !(req.IsCall() && version >= Revision2026) && metaVersion == "" {
		return nil
	}
	if req.Method != "server/discover" {
		var legacy []string
		for _, v := range protocolVersions {
			if v < Revision2026 {
				legacy = append(legacy, v)
			}
		}
		data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: legacy, Requested: version})
		return &jsonrpc.Error{
			Code:    mcp.CodeUnsupportedProtocolVersion,
			Message: fmt.Sprintf("protocol version %q is not supported by this server", version),
			Data:    data,
		}
	}
	switch {
	case header == "":
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("Mcp-Protocol-Version header is required for requests carrying %q", mcp.MetaKeyProtocolVersion)}
	case metaVersion == "":
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("missing or invalid _meta field %q", mcp.MetaKeyProtocolVersion)}
	case header != metaVersion:
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("Mcp-Protocol-Version header %q does not match request %s %q", header, mcp.MetaKeyProtocolVersion, metaVersion)}
	}
	return nil
}

// metaProtocolVersion is the protocol version params' _meta names, as
// go-sdk reads it ("" when it names none, or params do not decode). Params
// that cannot hold the _meta member, not even with an escape in its name,
// are not decoded.
func metaProtocolVersion(params json.RawMessage) string {
	if len(params) == 0 || !bytes.Contains(params, []byte("_meta")) && !bytes.Contains(params, []byte(`\`)) {
		return ""
	}
	// The one member, not the whole _meta in a map: go-sdk takes the
	// last of a member named twice, and a string only, as this does.
	var p struct {
		Meta struct {
			Version any `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	if stdioconn.UnmarshalDecoded(params, &p) != nil {
		return ""
	}
	v, _ := p.Meta.Version.(string)
	return v
}

// methodHeaderProblem is what go-sdk finds wrong with the Mcp-Method
// header of a request under a version header of 2026-07-28 or later
// (its validateMcpHeaders), or "". In a session only a notification gets
// that far: a call under such a header is refused before
// (sessionlessRefusal).
func methodHeaderProblem(h http.Header, req *jsonrpc.Request) string {
	switch m := h.Get("Mcp-Method"); {
	case m == "":
		return "missing required Mcp-Method header"
	case m != req.Method:
		return fmt.Sprintf("header mismatch: Mcp-Method header value '%s' does not match body value '%s'", m, req.Method)
	}
	return ""
}

// writeResponse answers with resp alone, as JSON, with status.
func writeResponse(w http.ResponseWriter, status int, resp *jsonrpc.Response) {
	var buf bytes.Buffer
	if err := stdioconn.AppendMessage(&buf, resp); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// check says what is wrong with req for the session's server, as go-sdk's
// transport refuses it before the session sees it: a method the server
// does not receive, a call of a notification or the other way round, or
// params missing where they are required.
func (t *sessionTransport) check(req *jsonrpc.Request) string {
	rule, ok := t.methods[req.Method]
	switch {
	case !ok:
		return fmt.Sprintf("JSON RPC not handled: %q unsupported", req.Method)
	case rule.notification && req.IsCall():
		return fmt.Sprintf("invalid request: unexpected id for %q", req.Method)
	case !rule.notification && !req.IsCall():
		return fmt.Sprintf("invalid request: missing id for %q", req.Method)
	case !rule.paramsOptional && len(req.Params) == 0:
		return `invalid request: missing required "params"`
	}
	return ""
}

// methodRule is how a method may arrive.
type methodRule struct {
	notification   bool // it is a notification (no id), not a call
	paramsOptional bool // its params may be missing
}

// receivedMethods are the methods go-sdk's server receives, with go-sdk's
// rules for each (its serverMethodInfos); a server with the gateway's
// tasks receives its task methods too (withTaskMethods). TestSessionRefusesWhatGoSDKRefuses
// holds the two tables together.
var receivedMethods = map[string]methodRule{
	"completion/complete":              {},
	"server/discover":                  {paramsOptional: true},
	"initialize":                       {},
	"ping":                             {paramsOptional: true},
	"prompts/list":                     {paramsOptional: true},
	"prompts/get":                      {},
	"tools/list":                       {paramsOptional: true},
	"tools/call":                       {},
	"resources/list":                   {paramsOptional: true},
	"resources/templates/list":         {paramsOptional: true},
	"resources/read":                   {},
	"logging/setLevel":                 {},
	"resources/subscribe":              {},
	"subscriptions/listen":             {},
	"resources/unsubscribe":            {},
	"notifications/cancelled":          {notification: true, paramsOptional: true},
	"notifications/initialized":        {notification: true, paramsOptional: true},
	"notifications/roots/list_changed": {notification: true, paramsOptional: true},
	"notifications/progress":           {notification: true},
}

// withTaskMethods returns the methods a server with the gateway's tasks
// receives (the 2025 and 2026 task methods, which taskRunner.register
// adds): go-sdk's custom methods take missing params.
func withTaskMethods(methods map[string]methodRule) map[string]methodRule {
	all := maps.Clone(methods)
	for _, set := range []map[string]bool{taskMethods, taskMethods2026} {
		for m := range set {
			all[m] = methodRule{paramsOptional: true}
		}
	}
	return all
}

// startDirect starts serving the POST's one message with t.direct, if it
// is a tools/call that t.direct takes, and reports whether it did.
//
// The call runs on a goroutine of its own, as go-sdk's session runs a
// call, so that the POST ends when its client goes and the session is
// idle while the call runs on (an idle session expires, and its calls
// with it); the goroutine is one of callGoroutines, whose stack an
// earlier call grew. What the session would do for the call is done here:
// its context has the session's values and ends when the session ends or
// the client cancels the call (cancelDirect); its response is written
// whatever became of the call, as go-sdk writes it, with the same
// encoding.
func (t *sessionTransport) startDirect(msgs []jsonrpc.Message, isBatch bool) bool {
	if t.direct == nil || isBatch {
		return false
	}
	req, ok := msgs[0].(*jsonrpc.Request)
	if !ok || req.Method != "tools/call" || !req.IsCall() {
		return false
	}
	run := t.direct(req)
	if run == nil {
		return false
	}
	ctx, cancel := context.WithCancel(t.ctx)
	dc := &directCall{cancel: cancel}
	t.mu.Lock()
	t.directs[req.ID] = dc
	t.mu.Unlock()
	callGoroutines.Go(func() {
		defer cancel()
		res, err := run(ctx)
		// Forgotten before the answer goes: once it has, the client may
		// use the id again, for a call of its own (compared by entry).
		t.mu.Lock()
		if t.directs[req.ID] == dc {
			delete(t.directs, req.ID)
		}
		t.mu.Unlock()
		_ = sessionConn{t}.Write(ctx, callResponse(req.ID, res, err, marshalResult))
	})
	return true
}

// callResponse is the response to the call id that returned res or err,
// as go-sdk's connection makes it, the result encoded by encode.
func callResponse(id jsonrpc.ID, res mcp.Result, err error, encode func(mcp.Result) (json.RawMessage, error)) *jsonrpc.Response {
	resp := &jsonrpc.Response{ID: id}
	switch {
	case err != nil:
		resp.Error = err // AppendMessage words it as go-sdk does
	case res == nil:
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tools/call returned neither a result nor an error"}
	default:
		raw, err := encode(res)
		if err != nil {
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encode the result: " + err.Error()}
		}
		resp.Result = raw
	}
	return resp
}

// marshalResult encodes a result as go-sdk's connection does: without
// HTML escaping, and without the encoder's newline.
func marshalResult(res mcp.Result) (json.RawMessage, error) { return jsonenc.Marshal(res) }

// cancelDirect cancels the call served directly that a
// notifications/cancelled with params names, if there is one in flight.
func (t *sessionTransport) cancelDirect(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if len(params) == 0 || stdioconn.UnmarshalDecoded(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	t.mu.Lock()
	dc := t.directs[id]
	t.mu.Unlock()
	if dc != nil {
		dc.cancel()
	}
}

// directCall is a call served directly, in flight.
type directCall struct{ cancel context.CancelFunc }

// hold registers p as the POST answering calls, unless one of them is
// already in flight (or named twice): then nothing is registered and the
// id is returned.
func (t *sessionTransport) hold(p *postAnswer, extra *mcp.RequestExtra, calls []jsonrpc.ID) (jsonrpc.ID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range calls {
		if _, busy := t.calls[id]; busy {
			return id, false
		}
		for _, earlier := range calls[:i] {
			if earlier == id {
				return id, false
			}
		}
	}
	for _, id := range calls {
		t.calls[id] = p
	}
	t.posts[extra] = p
	return jsonrpc.ID{}, true
}

// release ends p: what it never wrote is written as an empty event
// stream, as go-sdk's transport left it. Its calls not answered yet stay
// in flight under their ids, on an answer that refuses their responses,
// until their responses come: as with go-sdk's transport, a call whose
// client went is still running, and its id is not free.
func (t *sessionTransport) release(p *postAnswer, extra *mcp.RequestExtra) {
	t.mu.Lock()
	delete(t.posts, extra)
	t.mu.Unlock()
	p.end()
}

// publish hands msgs to the session in order, and reports whether it took
// them all before the session ended.
func (t *sessionTransport) publish(msgs []jsonrpc.Message) bool {
	for _, msg := range msgs {
		select {
		case t.incoming <- msg:
		case <-t.done:
			return false
		}
	}
	return true
}

func (t *sessionTransport) serveGET(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		// go-sdk's words: the id's form first, then that nothing is kept.
		eid := r.Header.Get("Last-Event-ID")
		_, idx, ok := strings.Cut(eid, "_")
		if n, err := strconv.Atoi(idx); !ok || strings.Contains(idx, "_") || err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("malformed Last-Event-ID %q", eid), http.StatusBadRequest)
			return
		}
		http.Error(w, "stream replay unsupported", http.StatusBadRequest)
		return
	}
	// Published with its header written: a message sent meanwhile waits
	// for the header (l.mu), as go-sdk's transport sets its stream up
	// before it takes messages.
	l := &eventStream{w: w}
	l.mu.Lock()
	t.mu.Lock()
	if t.listening != nil {
		t.mu.Unlock()
		l.mu.Unlock()
		http.Error(w, "stream ID conflicts with ongoing stream", http.StatusConflict)
		return
	}
	t.listening = l
	t.mu.Unlock()
	l.openLocked()
	l.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.listening == l {
			t.listening = nil
		}
		t.mu.Unlock()
		l.end()
	}()
	select {
	case <-r.Context().Done():
	case <-t.done:
	}
}

// postAnswer is the answer to one POST with calls, written by the session
// while the POST is held.
type postAnswer struct {
	w     http.ResponseWriter
	whole bool // the client prefers JSON and the POST is one call: answer with its response alone if nothing comes first

	mu        sync.Mutex
	streaming bool          // the event stream's header is written
	wrote     bool          // anything is written
	pending   int           // calls not answered yet
	answered  chan struct{} // closed when pending reaches 0
	ended     bool          // the POST is over: nothing more may be written
}

// send writes one message, data, on the answer; response says it answers
// one of the POST's calls.
func (p *postAnswer) send(data []byte, response bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return rejectedf("write to closed stream")
	}
	last := false
	if response {
		p.pending--
		last = p.pending == 0
	}
	if last {
		defer close(p.answered)
	}
	if last && p.whole && !p.streaming {
		return p.writeWholeLocked(http.StatusOK, data)
	}
	if !p.streaming {
		p.streaming, p.wrote = true, true
		streamHeader(p.w)
	}
	return writeEventTo(p.w, data)
}

// writeWholeLocked writes data, one response, as the whole answer: JSON,
// with status. p.mu is held.
func (p *postAnswer) writeWholeLocked(status int, data []byte) error {
	h := p.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	p.w.WriteHeader(status)
	p.wrote = true
	if _, err := p.w.Write(data); err != nil {
		return rejectedf("write the answer: %v", err)
	}
	return nil
}

// end closes the answer to writing; one nothing was written on is an
// event stream with no event.
func (p *postAnswer) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	if !p.wrote {
		streamHeader(p.w)
	}
}

// eventStream is the client's GET stream: messages that belong to no
// request.
type eventStream struct {
	w     http.ResponseWriter
	mu    sync.Mutex
	ended bool
}

// openLocked writes the stream's header and a comment, so that the header goes
// out now through proxies that hold it until there is a body (as go-sdk's
// transport does).
func (l *eventStream) openLocked() {
	streamHeader(l.w)
	_, _ = io.WriteString(l.w, ": ok\n\n")
	_ = http.NewResponseController(l.w).Flush()
}

func (l *eventStream) send(data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return rejectedf("undelivered message: the event stream is closed")
	}
	return writeEventTo(l.w, data)
}

func (l *eventStream) end() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
}

// streamHeader writes an event stream's header.
func streamHeader(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
}

// writeEventTo writes data as one event named "message" and flushes it.
func writeEventTo(w http.ResponseWriter, data []byte) error {
	buf := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return rejectedf("write an event: %v", err)
	}
	_ = http.NewResponseController(w).Flush()
	return nil
}

// postKey marks the context of what a request's handlers do with the
// request's extra (relatePost).
type postKey struct{}

// relatePost is the receiving middleware that marks a call's context
// with its extra, by which sessionConn.Write finds the POST the request
// came on.
func relatePost(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// What a notification's handler sends belongs to no request, as
		// with go-sdk's transport: it goes on the GET stream.
		if extra := req.GetExtra(); extra != nil && !strings.HasPrefix(method, "notifications/") {
			ctx = context.WithValue(ctx, postKey{}, extra)
		}
		return next(ctx, method, req)
	}
}

// rejectedf returns an error that go-sdk's connection takes for a message
// declined, which does not break the session: it wraps go-sdk's own
// sentinel for that (see rejected). Any other error from Write would close
// the session.
func rejectedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", rejected(), fmt.Sprintf(format, args...))
}

// rejected is go-sdk's sentinel for a message a connection declines
// without breaking (jsonrpc2.ErrRejected), which go-sdk does not export:
// it is taken from the error go-sdk's own transport returns for a message
// it declines (a stateless transport asked to send a request).
// TestRejectedIsGoSDKs fails if go-sdk stops wrapping it there.
var rejected = sync.OnceValue(func() error {
	conn, err := (&mcp.StreamableServerTransport{Stateless: true}).Connect(context.Background())
	if err != nil {
		return errDeclined
	}
	defer conn.Close()
	id, _ := jsonrpc.MakeID(float64(1))
	err = conn.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "ping"})
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return errDeclined
})

// errDeclined stands for go-sdk's sentinel if it cannot be had.
var errDeclined = errors.New("message declined")
