package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
)

// httpWatch does for a Streamable HTTP connection what watchedConn does for
// the others, on its HTTP exchanges, as the SDK's connection cannot be
// wrapped: it counts the log lines and progress reports in the event
// streams the server answers with, as the SDK reads them (see arrivals),
// and tells a call's cancel probe when the call was sent and when its
// notifications/cancelled was (see noteWrite).
//
// It also watches a 2026-07-28 session's subscriptions/listen streams, which
// carry its list_changed and resources/updated notifications: go-sdk never
// reopens one that ends, so listenEnded is called when the server ends one
// (not when the client cancels it), saying whether the server had granted
// it anything (in notifications/subscriptions/acknowledged): a stream that
// granted nothing was refused rather than lost, and the server ends it at
// once.
type httpWatch struct {
	next        http.RoundTripper
	arrivals    *arrivals
	listenEnded func(granted bool)
}

func (w *httpWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	probe := probeOf(req.Context())
	kind := rpcOther
	if probe != nil && req.Method == http.MethodPost {
		kind = rpcKindOf(req)
	}
	if kind == rpcCall {
		// Sent once written, not once answered: a server may hold its
		// response headers until the call is done, and the call may be
		// cancelled before then.
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(info httptrace.WroteRequestInfo) {
				if info.Err == nil {
					probe.markSent()
				}
			},
		}))
	}
	resp, err := w.next.RoundTrip(req)
	switch kind {
	case rpcCall:
		if err == nil {
			probe.markSent() // for a transport that does not trace
		}
	case rpcCancelled:
		probe.markAnnounced()
	}
	if err == nil && resp.StatusCode/100 == 2 && isEventStream(resp.Header) {
		rc := &reportCounter{body: resp.Body, a: w.arrivals}
		resp.Body = rc
		if w.listenEnded != nil && req.Method == http.MethodPost && req.Header.Get("Mcp-Method") == "subscriptions/listen" {
			resp.Body = &listenStream{counter: rc, ctx: req.Context(), ended: w.listenEnded}
		}
	}
	return resp, err
}

// listenStream is the body of a subscriptions/listen stream. When a read
// ends it while its request's context is still alive, the server ended it
// (it restarted, say), and ended is called, once.
type listenStream struct {
	counter *reportCounter // reads the stream, and sees the acknowledgement
	ctx     context.Context
	ended   func(granted bool)
	once    sync.Once
}

func (l *listenStream) Read(p []byte) (int, error) {
	n, err := l.counter.Read(p)
	if err != nil && l.ctx.Err() == nil {
		l.once.Do(func() { l.ended(l.counter.granted) })
	}
	return n, err
}

func (l *listenStream) Close() error { return l.counter.Close() }

// rpcKind is what a POST to a Streamable HTTP server carries, as far as
// cancel probes care.
type rpcKind int

const (
	rpcOther     rpcKind = iota
	rpcCall              // a request with an ID
	rpcCancelled         // notifications/cancelled
)

// rpcKindOf reads what a POST carries from a copy of its body.
func rpcKindOf(req *http.Request) rpcKind {
	if req.GetBody == nil {
		return rpcOther
	}
	body, err := req.GetBody()
	if err != nil {
		return rpcOther
	}
	defer body.Close()
	// go-sdk writes id and method before params: the head of the body
	// says what it is, without copying a large call's arguments again.
	data, err := io.ReadAll(io.LimitReader(body, 4<<10))
	if err != nil {
		return rpcOther
	}
	m := scanMessage(data)
	switch {
	case m.hasID && m.method != "":
		return rpcCall
	case !m.hasID && m.method == "notifications/cancelled":
		return rpcCancelled
	}
	return rpcOther
}

func isEventStream(h http.Header) bool {
	t, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && t == "text/event-stream"
}

// maxScannedEvent bounds how much of one event's data reportCounter keeps
// to tell what the event is. Reports are small; a larger event is judged
// by its beginning, which names the method of every JSON-RPC encoder seen
// in practice before any large params.
const maxScannedEvent = 1 << 20

// reportCounter counts the reports in an event stream for arrivals as the
// SDK reads the stream, parsing the events as the SDK does (lines ending
// in "\n", fields "event" and "data", a blank line or the end ending an
// event). A report is counted when its last byte is read, so before the
// SDK can pass it on, and so before any response that follows it. After
// a response, the SDK reads no more events from a call's stream (it drains
// the rest unread), so neither does the counter.
type reportCounter struct {
	body io.ReadCloser
	a    *arrivals

	line    []byte // the current line, when it spans reads
	data    []byte // the current event's data, up to maxScannedEvent
	hasData bool
	foreign bool // the current event is named, and not "message"
	done    bool // a response was read
	granted bool // a notifications/subscriptions/acknowledged granting something was read
}

func (r *reportCounter) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	r.scan(p[:n])
	if err == io.EOF && !r.done {
		if len(r.line) > 0 {
			r.endLine(r.line)
			r.line = r.line[:0]
		}
		r.endEvent()
	}
	return n, err
}

func (r *reportCounter) Close() error { return r.body.Close() }

func (r *reportCounter) scan(b []byte) {
	for len(b) > 0 && !r.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(r.line) < maxScannedEvent {
				r.line = append(r.line, b[:min(len(b), maxScannedEvent-len(r.line))]...)
			}
			return
		}
		line := b[:i]
		if len(r.line) > 0 {
			r.line = append(r.line, line[:min(len(line), max(0, maxScannedEvent-len(r.line)))]...)
			line = r.line
		}
		b = b[i+1:]
		r.endLine(line)
		r.line = r.line[:0]
	}
}

func (r *reportCounter) endLine(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		r.endEvent()
		return
	}
	key, value, _ := bytes.Cut(line, []byte{':'})
	switch string(key) {
	case "event":
		name := string(bytes.TrimSpace(value))
		r.foreign = name != "" && name != "message"
	case "data":
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.hasData = true
		value = bytes.TrimSpace(value)
		r.data = append(r.data, value[:min(len(value), max(0, maxScannedEvent-len(r.data)))]...)
	}
}

func (r *reportCounter) endEvent() {
	if r.hasData && !r.foreign && !r.done {
		m := scanMessage(r.data)
		switch {
		case !m.hasID && (m.method == "notifications/message" || m.method == "notifications/progress"):
			r.a.noteRead()
		case !m.hasID && m.method == "notifications/subscriptions/acknowledged":
			r.granted = grantsAny(r.data)
		case m.hasID && m.method == "":
			r.done = true
		}
	}
	r.data, r.hasData, r.foreign = r.data[:0], false, false
}

// grantsAny reports whether a notifications/subscriptions/acknowledged
// message grants any notification: a list's changes or a resource's
// updates.
func grantsAny(data []byte) bool {
	var ack struct {
		Params struct {
			Notifications map[string]json.RawMessage `json:"notifications"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &ack) != nil {
		return false
	}
	for _, v := range ack.Params.Notifications {
		switch s := strings.TrimSpace(string(v)); s {
		case "", "false", "null", "[]", "{}":
		default:
			return true
		}
	}
	return false
}

// message is what scanMessage finds in a JSON-RPC message.
type message struct {
	method string
	hasID  bool
}

// scanMessage reads the top-level method and id of a JSON-RPC message, as
// far as data goes: it may be the beginning of a longer message.
func scanMessage(data []byte) message {
	var whole struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(data, &whole) == nil {
		return message{method: whole.Method, hasID: len(whole.ID) > 0 && string(whole.ID) != "null"}
	}
	return scanPrefix(data)
}

// scanPrefix is scanMessage for what is not one whole JSON object: the
// beginning of one, key by key, until the data ends.
func scanPrefix(data []byte) message {
	var m message
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return m
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return m
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return m
		}
		switch t {
		case "method":
			_ = json.Unmarshal(raw, &m.method)
		case "id":
			m.hasID = string(raw) != "null"
		}
	}
	return m
}
