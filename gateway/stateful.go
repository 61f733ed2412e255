package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/stdioconn"
	"github.com/toolwire/toolwire/netpolicy"
)

// stateful serves the sessions of the 2025 revisions, in place of go-sdk's
// stateful StreamableHTTPHandler (whose sessions live in one process's
// memory), on go-sdk's public API: a session is a sessionTransport (the
// layer's own, sessionconn.go) with its SessionID, connected to its
// role's server with Server.Connect, and every request of the session is
// served by that transport.
//
// With a [SessionStore], what a session is (its caller, the credential
// and role it is bound to, the negotiated revision, the client's
// initialize parameters, its log level and subscriptions) is put in the
// store when its initialize succeeds, before the client hears of the
// session, and updated when the client changes its level or
// subscriptions. A request naming a session this replica holds no copy of
// is served by a copy rebuilt from the record: connected with the
// record's state, its level set and its subscriptions made again by
// requests the layer serves its own copy (which pass the gateway's
// middleware, so this replica's upstreams are asked too). Each request
// touches the record, which restarts its idle timeout and says its
// revision: a copy behind the record is brought up to date before the
// request is served. DELETE deletes the record, and every replica drops
// its copy when the store says so. A copy idle on this replica is dropped
// (the record goes on) unless it carries the client's event stream while
// the session lives elsewhere; the record itself expires by the store's
// clock, and a request for an expired session is not found.
//
// Without a store, every session lives here alone, as with go-sdk's
// handler.
type stateful struct {
	getServer   func(*http.Request) *mcp.Server
	servedBy    func(*mcp.Server) *served // the sync state of a server getServer gave; nil: none
	tr          *tracker
	store       SessionStore // nil: this process only
	relay       Relay        // nil: one process; else the answers to a copy's requests find it
	replyKey    []byte       // of the mac in the ids of a copy's requests (replies.go)
	maxBody     int64        // < 0: no limit
	logger      func() *slog.Logger
	methods     map[string]methodRule // what the sessions' servers receive
	syncKey     string                // marks the requests the layer serves its own copies
	stopWatch   func()
	stopReplies func()
	syncs       atomic.Int64

	mu         sync.Mutex
	held       map[string]*held
	rebuilding map[string]chan struct{}
}

// held is one session this replica serves: opened here, or a copy.
type held struct {
	id   string
	cred credential
	t    *sessionTransport
	ss   *mcp.ServerSession
	ts   *session // the tracker's

	syncMu sync.Mutex // one bringing-up-to-date at a time

	// Guarded by stateful.mu.
	revision int64    // of the record this copy is as of
	level    string   // the log level set on the copy
	subs     []string // the served URIs the copy is subscribed to, sorted
	streams  int      // event streams (GET) open on the copy
}

// syncHeader marks a request the layer serves its own copy, with a key of
// the process's that no client can know.
const syncHeader = "X-Toolwire-Session-Sync"

func newStateful(getServer func(*http.Request) *mcp.Server, tr *tracker, store SessionStore, relay Relay, maxBody int64, logger func() *slog.Logger) *stateful {
	h := &stateful{
		getServer: getServer, tr: tr, store: store, maxBody: maxBody, logger: logger,
		methods: receivedMethods, syncKey: rand.Text(), held: map[string]*held{}, rebuilding: map[string]chan struct{}{},
	}
	tr.exempt = h.isSync
	if store != nil {
		tr.expiring = h.expiring
		h.stopWatch = store.WatchDeleted(func(id string) { go h.deleted(id) })
		if relay != nil {
			h.relay = relay
			h.stopReplies = relay.Handle(relayReply, h.serveReply)
		}
	}
	return h
}

func (h *stateful) close() {
	if h.stopWatch != nil {
		h.stopWatch()
	}
	if h.stopReplies != nil {
		h.stopReplies()
	}
}

// transport returns a new session's transport, and what to connect: in a
// fleet, the ids of the requests it sends are the fleet's (see
// fleetTransport).
func (h *stateful) transport(id string) (*sessionTransport, mcp.Transport) {
	t := newSessionTransport(id, h.methods)
	if h.relay == nil {
		return t, t
	}
	return t, &fleetTransport{sessionTransport: t, prefix: func() string { return replyPrefix(h.relay.Instance()) }, key: h.replyKey}
}

// isSync reports whether req is one the layer serves its own copy.
func (h *stateful) isSync(req mcp.Request) bool {
	extra := req.GetExtra()
	return extra != nil && extra.Header != nil && extra.Header.Get(syncHeader) == h.syncKey
}

// idle is the records' idle timeout: the sessions'.
func (h *stateful) idle() time.Duration {
	h.tr.mu.Lock()
	defer h.tr.mu.Unlock()
	return h.tr.limits.SessionIdleTimeout
}

func (h *stateful) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// What go-sdk's handler checks before it looks at sessions: DNS
	// rebinding (a loopback listener asked for another host), the body's
	// size, the version header.
	if reboundHost(r) {
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
		return
	}
	if r.Body != nil && h.maxBody > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, h.maxBody)
	}
	version := r.Header.Get(protocolHeader)
	if version != "" && !slices.Contains(protocolVersions, version) && !modern(version) {
		http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+strings.Join(protocolVersions, ",")+")", http.StatusBadRequest)
		return
	}
	sid := r.Header.Get(sessionHeader)
	switch r.Method {
	case http.MethodPost:
		if mediaType(r.Header.Get("Content-Type")) != "application/json" {
			http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
			return
		}
		if json, stream := accepts(r.Header.Values("Accept")); !json || !stream {
			http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
			return
		}
		if sid == "" {
			// Batches went with 2025-06-18 (go-sdk refuses them by the
			// version its handler puts in the request's context, which
			// only it can). Without a session, the header is all there
			// is to go by; in a session, its revision decides (below).
			if version >= "2025-06-18" && h.batch(w, r, version) {
				return
			}
			h.open(w, r)
			return
		}
	case http.MethodGet:
		if _, stream := accepts(r.Header.Values("Accept")); !stream {
			http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
			return
		}
		if sid == "" {
			http.Error(w, "Bad Request: GET requires an Mcp-Session-Id header", http.StatusBadRequest)
			return
		}
	case http.MethodDelete:
		if sid == "" {
			http.Error(w, "Bad Request: DELETE requires an Mcp-Session-Id header", http.StatusBadRequest)
			return
		}
		h.delete(w, r, sid)
		return
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.Method == http.MethodPost && h.relay != nil {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		holder, err := answerFor(body, h.relay.Instance(), sid, h.replyKey)
		if err != nil {
			if _, ok := h.binding(w, r, sid); ok {
				http.Error(w, "Bad Request: "+err.Error(), http.StatusBadRequest)
			}
			return
		}
		if holder != "" {
			if _, ok := h.binding(w, r, sid); ok {
				h.passReply(w, r, sid, holder, body)
			}
			return
		}
	}
	hs := h.find(w, r, sid)
	if hs == nil {
		return
	}
	// What a session may send is its negotiated revision's, whatever
	// the request's header claims (an older revision, or none: go-sdk's
	// transport would then take the batch as 2025-03-26's).
	if r.Method == http.MethodPost {
		if rev := hs.protocol(); rev >= "2025-06-18" && h.batch(w, r, rev) {
			return
		}
	}
	if h.store != nil {
		rev, err := h.store.Touch(r.Context(), sid, h.idle())
		switch {
		case errors.Is(err, ErrSessionNotFound):
			h.drop(hs, EndExpired) // deleted or expired meanwhile, elsewhere
			http.Error(w, "session not found", http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, "Service Unavailable: the session store cannot be reached; retry", http.StatusServiceUnavailable)
			return
		}
		h.mu.Lock()
		behind := hs.revision != rev
		h.mu.Unlock()
		if behind {
			h.sync(r, hs)
		}
	}
	if r.Method == http.MethodGet {
		h.mu.Lock()
		hs.streams++
		h.mu.Unlock()
		h.tr.arm(hs.ts)
		defer func() {
			h.mu.Lock()
			hs.streams--
			h.mu.Unlock()
		}()
		hs.t.ServeHTTP(w, r)
		return
	}
	h.tr.busy(hs.ts)
	defer h.tr.idle(hs.ts)
	if h.store != nil {
		defer h.keepAlive(sid)()
	}
	hs.t.ServeHTTP(w, r)
}

// directCalls returns how the session ss of server serves a tools/call
// without go-sdk's session decoding it again (sessionTransport.direct):
// the call's params decoded once, as go-sdk decodes them, and the request
// go-sdk would make of them run through the server's middleware and its
// tool's handler (served.direct). A call go-sdk would treat otherwise
// goes to the session: one before the session's initialize, and params
// that do not decode or are null (go-sdk's refusals). (A request of
// 2026-07-28's form never gets here: the transport refuses it,
// sessionlessRefusal.) nil when the server is none of the gateway's.
func (h *stateful) directCalls(server *mcp.Server, ss *mcp.ServerSession) func(*jsonrpc.Request) func(context.Context) (mcp.Result, error) {
	if h.servedBy == nil {
		return nil
	}
	sv := h.servedBy(server)
	if sv == nil || sv.direct == nil {
		return nil
	}
	return func(req *jsonrpc.Request) func(context.Context) (mcp.Result, error) {
		if ss.InitializeParams() == nil || len(req.Params) == 0 {
			return nil
		}
		var params *mcp.CallToolParamsRaw
		if stdioconn.UnmarshalDecoded(req.Params, &params) != nil || params == nil {
			return nil
		}
		extra, _ := req.Extra.(*mcp.RequestExtra)
		call := &mcp.CallToolRequest{Session: ss, Params: params, Extra: extra}
		return func(ctx context.Context) (mcp.Result, error) { return sv.direct(ctx, "tools/call", call) }
	}
}

// protocol is the revision the session negotiated at its initialize (a
// copy's record keeps the negotiated one as its initialize's).
func (hs *held) protocol() string {
	if ip := hs.ss.InitializeParams(); ip != nil {
		return negotiated(ip.ProtocolVersion)
	}
	return ""
}

// batch answers a JSON-RPC batch with 400, naming the revision rev that
// has none, and reports whether it did. A body that is not a batch of
// messages is left for the transport to refuse as it does (malformed,
// empty). It reads the body a byte at a time up to its first byte that is
// not white space (the body is buffered by net/http), so that a request,
// which is not a batch, costs no buffer of its own; the bytes read are put
// back.
func (h *stateful) batch(w http.ResponseWriter, r *http.Request, rev string) bool {
	body := r.Body
	var lead []byte
	var b [1]byte
	var err error
	for {
		var n int
		n, err = body.Read(b[:])
		if n == 1 {
			lead = append(lead, b[0])
			if b[0] != ' ' && b[0] != '\t' && b[0] != '\r' && b[0] != '\n' {
				break
			}
			continue
		}
		if err != nil {
			break
		}
	}
	if len(lead) == 0 || lead[len(lead)-1] != '[' {
		// Not a batch: the transport reads the body again from its
		// start (and an error where it happened).
		rest := io.Reader(body)
		if err != nil {
			rest = errReader{err}
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(lead), rest), body}
		return false
	}
	all, err := io.ReadAll(body)
	all = append(lead, all...)
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(all), errReader{err}), body}
	var msgs []json.RawMessage
	if err != nil || json.Unmarshal(all, &msgs) != nil || len(msgs) == 0 {
		return false
	}
	http.Error(w, fmt.Sprintf("JSON-RPC batching is not supported in 2025-06-18 and later (revision: %s)", rev), http.StatusBadRequest)
	return true
}

// errReader returns its error (io.EOF when nil): what was left of a body
// after it was read, so that a read that failed (too large) fails again
// where the transport reads it.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// open serves a request without a session: the initialize that opens
// one (anything else is refused by the session, which is then closed).
func (h *stateful) open(w http.ResponseWriter, r *http.Request) {
	key, subject := callerKey(r)
	s, limit := h.tr.admit(key, subject)
	if limit != "" {
		h.tr.refuseSession(w, key, subject, limit)
		return
	}
	server := h.getServer(r)
	if server == nil {
		h.tr.release(s, EndClosed)
		http.Error(w, "no server available", http.StatusBadRequest)
		return
	}
	t, conn := h.transport(rand.Text())
	// The tracker's state goes into the context of the session: go-sdk
	// keeps this context's values for every request the session handles.
	ss, err := server.Connect(context.WithValue(r.Context(), trackedKey{}, s), conn, nil)
	if err != nil {
		h.tr.release(s, EndClosed)
		h.logger().Error("gateway: connect a session", "error", err)
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return
	}
	t.direct = h.directCalls(server, ss)
	hs := &held{id: t.SessionID, cred: credentialOf(auth.TokenInfoFromContext(r.Context())), t: t, ss: ss, ts: s}
	h.register(hs)
	t.ServeHTTP(w, r)
	if !h.tr.bound(s) { // not an initialize, or it failed (or was not stored)
		_ = ss.Close()
		h.tr.release(s, EndClosed)
		return
	}
	h.tr.idle(s) // the end of this first request (admit counted it)
}

func (h *stateful) register(hs *held) {
	h.mu.Lock()
	h.held[hs.id] = hs
	h.mu.Unlock()
	// Lives as long as the session: Wait returns when it closes. The one
	// goroutine a session keeps waiting for its end, for the layer and
	// the tracker both (tracker.bind leaves the release to it).
	go func() {
		_ = hs.ss.Wait()
		h.tr.release(hs.ts, EndClosed)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.held[hs.id] == hs {
			delete(h.held, hs.id)
		}
	}()
}

// find returns the session sid for a request to it, holding or
// rebuilding a copy, or answers the request and returns nil: the session
// is not found, or the request's credential is not the one it is bound to.
func (h *stateful) find(w http.ResponseWriter, r *http.Request, sid string) *held {
	cur := credentialOf(auth.TokenInfoFromContext(r.Context()))
	h.mu.Lock()
	hs := h.held[sid]
	h.mu.Unlock()
	if hs != nil {
		if !h.allowed(w, r, sid, cur, hs.cred) {
			return nil
		}
		return hs
	}
	if h.store == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return nil
	}
	rec, err := h.store.Get(r.Context(), sid)
	if !h.recordFound(w, err) || !h.allowed(w, r, sid, cur, credential{rec.Credential, rec.Role}) {
		return nil
	}
	hs, err = h.rebuild(r, rec)
	if err != nil {
		if !errors.Is(err, errDrainingCopy) {
			h.logger().Warn("gateway: rebuild a session from its record", "error", err)
		}
		http.Error(w, "Service Unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return nil
	}
	return hs
}

// recordFound answers a request whose session's record could not be had
// and reports whether it could.
func (h *stateful) recordFound(w http.ResponseWriter, err error) bool {
	switch {
	case errors.Is(err, ErrSessionNotFound):
		http.Error(w, "session not found", http.StatusNotFound)
		return false
	case err != nil:
		http.Error(w, "Service Unavailable: the session store cannot be reached; retry", http.StatusServiceUnavailable)
		return false
	}
	return true
}

// allowed applies the session's binding to a request showing cur, and
// answers the request when it breaks it (ending the session when that is
// what it takes).
func (h *stateful) allowed(w http.ResponseWriter, r *http.Request, sid string, cur, bound credential) bool {
	msg, end := bindingProblem(cur, bound)
	if msg == "" {
		return true
	}
	if !end {
		http.Error(w, msg, http.StatusForbidden)
		return false
	}
	h.endEverywhere(r.Context(), sid)
	http.Error(w, msg, http.StatusNotFound)
	return false
}

// endIf ends session sid, everywhere, when the credential it is bound to
// satisfies cond.
func (h *stateful) endIf(ctx context.Context, sid string, cond func(credential) bool) {
	if sid == "" {
		return
	}
	h.mu.Lock()
	hs := h.held[sid]
	h.mu.Unlock()
	switch {
	case hs != nil:
		if !cond(hs.cred) {
			return
		}
	case h.store != nil:
		rec, err := h.store.Get(ctx, sid)
		if err != nil || !cond(credential{rec.Credential, rec.Role}) {
			return
		}
	default:
		return
	}
	h.endEverywhere(ctx, sid)
}

// endEverywhere ends session sid on every replica: its record goes (and
// the others are told), and this replica's copy ends, its calls cancelled.
func (h *stateful) endEverywhere(ctx context.Context, sid string) {
	if h.store != nil {
		if err := h.store.Delete(ctx, sid); err != nil {
			h.logger().Warn("gateway: delete an ended session's record", "error", err)
		}
	}
	h.mu.Lock()
	hs := h.held[sid]
	h.mu.Unlock()
	if hs != nil {
		h.drop(hs, EndClosed)
	}
}

// drop ends this replica's copy hs: it is forgotten, its calls are
// cancelled and it is closed.
func (h *stateful) drop(hs *held, why string) {
	// Forgotten at once, not when the close below is done: the request
	// that comes next is answered as for a session that is gone.
	h.mu.Lock()
	if h.held[hs.id] == hs {
		delete(h.held, hs.id)
	}
	h.mu.Unlock()
	h.tr.end(hs.ts, why)
	if why == EndDeleted { // end leaves the close to the DELETE's handler
		go func() { _ = hs.ss.Close() }()
	}
}

// deleted is told of a session deleted by any replica ("": some may have
// been missed): its copy here, if any, ends.
func (h *stateful) deleted(id string) {
	if id != "" {
		h.mu.Lock()
		hs := h.held[id]
		h.mu.Unlock()
		if hs != nil {
			h.drop(hs, EndDeleted)
		}
		return
	}
	h.mu.Lock()
	all := make([]*held, 0, len(h.held))
	for _, hs := range h.held {
		all = append(all, hs)
	}
	h.mu.Unlock()
	for _, hs := range all {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := h.store.Get(ctx, hs.id)
		cancel()
		if errors.Is(err, ErrSessionNotFound) {
			h.drop(hs, EndDeleted)
		}
	}
}

// binding applies session sid's binding to r without rebuilding a copy of
// the session (from this replica's copy, or the record), answering r when
// it breaks it; it returns this replica's copy, if any.
func (h *stateful) binding(w http.ResponseWriter, r *http.Request, sid string) (*held, bool) {
	cur := credentialOf(auth.TokenInfoFromContext(r.Context()))
	h.mu.Lock()
	hs := h.held[sid]
	h.mu.Unlock()
	var bound credential
	switch {
	case hs != nil:
		bound = hs.cred
	case h.store == nil:
		http.Error(w, "session not found", http.StatusNotFound)
		return nil, false
	default:
		rec, err := h.store.Get(r.Context(), sid)
		if !h.recordFound(w, err) {
			return nil, false
		}
		bound = credential{rec.Credential, rec.Role}
	}
	return hs, h.allowed(w, r, sid, cur, bound)
}

// delete serves DELETE: the session ends everywhere, its calls cancelled.
func (h *stateful) delete(w http.ResponseWriter, r *http.Request, sid string) {
	hs, ok := h.binding(w, r, sid)
	if !ok {
		return
	}
	if h.store != nil {
		if err := h.store.Delete(r.Context(), sid); err != nil {
			http.Error(w, "Service Unavailable: the session store cannot be reached; retry", http.StatusServiceUnavailable)
			return
		}
	}
	if hs != nil {
		// Cancel first: go-sdk's Close waits for the calls in flight to
		// return.
		h.tr.end(hs.ts, EndDeleted)
		_ = hs.ss.Close()
	}
	w.WriteHeader(http.StatusNoContent)
}

// loopbackAddr reports whether host[:port] names a loopback address (or
// localhost), as go-sdk's DNS rebinding check does.
func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	return netpolicy.IsLoopbackHost(host)
}

func mediaType(v string) string {
	t, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return t
}

// accepts reports whether Accept values take JSON and an event stream.
func accepts(values []string) (json, stream bool) {
	for _, v := range values {
		for raw := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				json = true
			case "text/event-stream", "text/*":
				stream = true
			case "*/*":
				json, stream = true, true
			}
		}
	}
	return json, stream
}
