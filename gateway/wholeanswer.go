package gateway

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// A POST whose answer is one JSON-RPC response and nothing before it is
// answered with that response as application/json, when the client
// accepts it, instead of as an event stream of one event: go-sdk's
// stateless handler, which serves 2026-07-28 requests, answers every POST
// with an event stream (the 2025 sessions' own transport, sessionconn.go,
// decides for itself), and a stream costs both
// ends more than a body (chunked framing, a flush per event, the client's
// event reader). Nothing the client could see earlier is held back: the
// first message that is not the final response (progress, a log line, an
// elicitation, a listen's notification), or a flush with nothing written
// (a handler that wants the stream open), turns the answer into the event
// stream it would have been, with what was held written first. Only the
// final response waits, from when it is written until the handler
// returns, which go-sdk does at once.

// wholeAnswers serves each request with h, answering a POST with JSON
// where it can (see above); a request that is not a POST, or whose
// client does not prefer JSON (prefersJSON), goes to h as it came.
func wholeAnswers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !prefersJSON(r.Header.Values("Accept")) {
			h.ServeHTTP(w, r)
			return
		}
		ww := &wholeWriter{w: w}
		h.ServeHTTP(ww, r)
		ww.finish()
	})
}

// prefersJSON reports whether Accept values prefer JSON to an event
// stream: JSON has the higher quality (q), or the same and is named first.
// Both SDKs' clients send "application/json, text/event-stream"; a client
// that names the stream first (as the conformance suite's stream tests
// do) or gives JSON a lower q gets the stream.
func prefersJSON(values []string) bool {
	jsonQ, streamQ := -1.0, -1.0
	jsonAt, streamAt := -1, -1
	i := 0
	for _, v := range values {
		for raw := range strings.SplitSeq(v, ",") {
			i++
			base, params, _ := strings.Cut(strings.TrimSpace(raw), ";")
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				if k, val, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil && f >= 0 && f <= 1 {
						q = f
					}
				}
			}
			var isJSON, isStream bool
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				isJSON = true
			case "text/event-stream", "text/*":
				isStream = true
			case "*/*":
				isJSON, isStream = true, true
			}
			if isJSON && (q > jsonQ) {
				jsonQ, jsonAt = q, i
			}
			if isStream && (q > streamQ) {
				streamQ, streamAt = q, i
			}
		}
	}
	switch {
	case jsonQ <= 0:
		return false
	case jsonQ != streamQ:
		return jsonQ > streamQ
	default:
		return jsonAt <= streamAt
	}
}

// The states of a wholeWriter.
const (
	wholeUndecided = iota // nothing written yet
	wholeHolding          // an event stream begun: its header held, and the response if written
	wholeStreaming        // the event stream passed on, as it would have been
	wholePassing          // not an event stream (an error, a 202): passed on as it is
)

// wholeWriter holds an event stream's header, and its one response, until
// it knows whether the answer is that response alone.
type wholeWriter struct {
	w      http.ResponseWriter
	state  int
	status int
	held   []byte // the response event as written (data is the JSON within)
	data   []byte
}

func (ww *wholeWriter) Header() http.Header { return ww.w.Header() }

// Unwrap gives http.ResponseController the writer underneath (deadlines).
func (ww *wholeWriter) Unwrap() http.ResponseWriter { return ww.w }

func (ww *wholeWriter) WriteHeader(code int) {
	switch ww.state {
	case wholeUndecided:
		if code == http.StatusOK && mediaType(ww.w.Header().Get("Content-Type")) == "text/event-stream" {
			ww.state, ww.status = wholeHolding, code
			return
		}
		ww.state = wholePassing
		ww.w.WriteHeader(code)
	case wholeHolding:
		// A second status: net/http would ignore it too.
	default:
		ww.w.WriteHeader(code)
	}
}

func (ww *wholeWriter) Write(p []byte) (int, error) {
	if ww.state == wholeUndecided {
		ww.WriteHeader(http.StatusOK)
	}
	if ww.state != wholeHolding {
		return ww.w.Write(p)
	}
	if ww.held == nil {
		if data, ok := responseEvent(p); ok {
			ww.held = append([]byte(nil), p...)
			ww.data = ww.held[len(ww.held)-len(data)-2 : len(ww.held)-2]
			return len(p), nil
		}
	}
	if err := ww.stream(); err != nil {
		return 0, err
	}
	return ww.w.Write(p)
}

// Flush passes a flush on, except while the response is held: it goes out
// whole when the handler returns. A flush before anything is written asks
// for the stream to be open: it is.
func (ww *wholeWriter) Flush() {
	if ww.state == wholeUndecided {
		ww.WriteHeader(http.StatusOK)
	}
	if ww.state == wholeHolding {
		if ww.held != nil || ww.stream() != nil {
			return
		}
	}
	if f, ok := ww.w.(http.Flusher); ok {
		f.Flush()
	}
}

// stream turns a held answer into the event stream it was, writing the
// header and what was held.
func (ww *wholeWriter) stream() error {
	ww.state = wholeStreaming
	ww.w.WriteHeader(ww.status)
	if ww.held == nil {
		return nil
	}
	held := ww.held
	ww.held, ww.data = nil, nil
	_, err := ww.w.Write(held)
	return err
}

// finish writes what is still held when the handler has returned: the
// response alone as JSON, or an event stream's header with nothing after
// it, as it would have gone.
func (ww *wholeWriter) finish() {
	if ww.state != wholeHolding {
		return
	}
	ww.state = wholeStreaming
	if ww.held == nil {
		ww.w.WriteHeader(ww.status)
		return
	}
	h := ww.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(ww.data)))
	h.Del("Connection") // go-sdk's keep-alive for the stream
	ww.w.WriteHeader(ww.status)
	_, _ = ww.w.Write(ww.data)
	ww.held, ww.data = nil, nil
}

// responseEvent reports whether p is exactly one server-sent event named
// "message" whose data is a JSON-RPC response, and returns the data. It
// knows responses by the form go-sdk encodes every message in (its fields
// in a fixed order: jsonrpc, id, then method for a request or result or
// error for a response); anything else is not taken for a response, and
// is streamed as it came.
func responseEvent(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("event: message\ndata: "))
	if !ok {
		return nil, false
	}
	data, ok := bytes.CutSuffix(rest, []byte("\n\n"))
	if !ok || bytes.IndexByte(data, '\n') >= 0 {
		return nil, false
	}
	return data, isResponse(data)
}

// isResponse reports whether a go-sdk-encoded JSON-RPC message is a
// response (see responseEvent).
func isResponse(msg []byte) bool {
	rest, ok := bytes.CutPrefix(msg, []byte(`{"jsonrpc":"2.0",`))
	if !ok {
		return false
	}
	if id, ok := bytes.CutPrefix(rest, []byte(`"id":`)); ok {
		n := idLength(id)
		if n == 0 {
			return false
		}
		rest, ok = bytes.CutPrefix(id[n:], []byte(","))
		if !ok {
			return false
		}
	}
	return bytes.HasPrefix(rest, []byte(`"result":`)) || bytes.HasPrefix(rest, []byte(`"error":`))
}

// idLength returns the length of the JSON-RPC id (a string or a number)
// at the start of b, or 0.
func idLength(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	if b[0] == '"' {
		for i := 1; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return 0
	}
	i := 0
	for i < len(b) && (b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || b[i] >= '0' && b[i] <= '9') {
		i++
	}
	return i
}
