package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// Limits bound what callers may hold of an HTTP gateway. A zero field sets
// no limit, so the zero value serves as go-sdk does; [DefaultLimits] are
// the limits "toolwire serve" applies unless told otherwise.
//
// A caller is the authenticated party when the gateway verifies tokens
// (its subject, with its credential's kind and issuer: a static token's
// "bob" and a JWT's "bob" are two callers), else the client's IP
// address. A 2026-07-28 client has no session: its
// calls count against the per-caller limits only (a call in progress
// holds its slot across the rounds of its multi round-trip exchange), and
// its open subscriptions/listen streams, which stay open as long as the
// client wants its notifications, against MaxListensPerCaller.
type Limits struct {
	// SessionIdleTimeout ends a session that has had no request in
	// progress for this long. Its in-flight calls (if any: a call whose
	// request is gone) are cancelled. A client that comes back gets 404
	// and starts a new session, as the transport specifies.
	SessionIdleTimeout time.Duration
	// MaxSessions caps the open sessions in total; one more is refused
	// with 503 and Retry-After.
	MaxSessions int
	// MaxSessionsPerCaller caps one caller's open sessions; one more is
	// refused with 429 and Retry-After.
	MaxSessionsPerCaller int
	// MaxCallsPerSession and MaxCallsPerCaller cap the tool calls in
	// progress at once. A call past either is refused at once with an
	// isError result naming the limit: never queued, so a burst or a
	// batch cannot fan out into more upstream calls than the limits allow.
	MaxCallsPerSession int
	MaxCallsPerCaller  int
	// CallRate is the calls per second each caller may start, as a token
	// bucket holding CallBurst calls (0: the rate rounded up, at least 1).
	// A call past it is refused like one past a concurrency limit.
	CallRate  float64
	CallBurst int
	// MaxListensPerCaller caps one caller's open subscriptions/listen
	// streams (2026-07-28); one more is refused with an error naming the
	// limit.
	MaxListensPerCaller int
	// MaxListenResources caps the resources one subscriptions/listen
	// may name (2026-07-28); a listen naming more is refused with an
	// error naming the limit. Each resource it names is also counted as
	// a resources/subscribe is, against the call rate and the limits of
	// calls in progress, since each may be a request to an upstream.
	MaxListenResources int
	// RetryAfter is what a refused session is told to wait; 0 means 1 s.
	RetryAfter time.Duration
}

// DefaultLimits are the limits "toolwire serve --http" applies by default
// (docs/operations.md gives the reasons).
var DefaultLimits = Limits{
	SessionIdleTimeout:   30 * time.Minute,
	MaxSessions:          1000,
	MaxSessionsPerCaller: 100,
	MaxCallsPerSession:   64,
	MaxCallsPerCaller:    128,
	CallRate:             100,
	CallBurst:            200,
	MaxListensPerCaller:  64,
	MaxListenResources:   64,
	RetryAfter:           time.Second,
}

// The limits a refusal names, in [Event].Limit, the audit event's Reason
// and the refusal's text.
const (
	LimitSessions          = "max_sessions"
	LimitSessionsPerCaller = "max_sessions_per_caller"
	LimitCallsPerSession   = "max_calls_per_session"
	LimitCallsPerCaller    = "max_calls_per_caller"
	LimitCallRate          = "call_rate"
	LimitListensPerCaller  = "max_listens_per_caller"
	LimitListenResources   = "max_listen_resources"
	LimitDraining          = "draining" // the gateway is shutting down
	// LimitRateUnchecked refuses a call whose caller's rate could not be
	// checked against a fleet's [CallLimiter] (its store is unreachable):
	// failing closed.
	LimitRateUnchecked = "rate_unchecked"
)

// EventKind says what an [Event] reports.
type EventKind string

// The events of [HTTPOptions].Observe.
const (
	SessionOpened  EventKind = "session.opened"
	SessionClosed  EventKind = "session.closed"  // End says why
	SessionRefused EventKind = "session.refused" // Limit says which
	CallRefused    EventKind = "call.refused"    // Limit says which; Tool names the tool
	CallsCancelled EventKind = "calls.cancelled" // Calls in flight cancelled by a session's end, the drain, or a parked call's client; End says which
)

// How a session ended, in [Event].End.
const (
	EndDeleted = "deleted" // the client sent DELETE
	EndExpired = "expired" // SessionIdleTimeout passed
	EndDrained = "drained" // the gateway shut down
	EndClosed  = "closed"  // anything else: the session failed to initialize, or its connection ended
	// EndDropped: a replica of a fleet dropped its copy of a session that
	// goes on (its record lives in the [SessionStore]); the next request
	// of the session on this replica rebuilds it.
	EndDropped = "dropped"
	// EndClientCancelled: a 2025 client of a stateless gateway cancelled
	// its call with notifications/cancelled.
	EndClientCancelled = "client_cancelled"
)

// Event is one thing the HTTP gateway's limits and lifecycle did, for
// metrics and logs. Caller is the caller's key (see [Limits]); it may be an
// IP address, so a metric should not use it as a label unbounded.
type Event struct {
	Kind   EventKind
	Caller string
	Limit  string
	End    string
	Tool   string
	Calls  int
}

// callerKey returns who a request is from for the limits (see
// callerName), and the authenticated subject ("" without one).
func callerKey(r *http.Request) (key, subject string) {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil && ti.UserID != "" {
		return callerName(ti), ti.UserID
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host, ""
}

// tracker enforces [Limits] and owns every session's in-flight calls, so a
// session's end and the gateway's drain can cancel them: go-sdk's session
// Close waits for calls in flight without cancelling them. It also owns
// the open subscriptions/listen streams of 2026-07-28 clients, which the
// drain ends.
type tracker struct {
	limits  Limits
	observe func(Event)
	audit   *audit.Log // for refused sessions
	// refuse audits a refused call ([Gateway.refuse]); nil audits none.
	refuse func(ctx context.Context, name string, args json.RawMessage, reason tool.Reason, msg string) *tool.Result
	// limiter, when set, decides the call rate for the fleet instead of
	// each caller's bucket here.
	limiter CallLimiter
	// expiring, when set, is asked what to do when a session's idle
	// timer fires (see [stateful.expiring]): end it (with the reason it
	// returns), or check again after again. Nil ends it as expired.
	expiring func(s *session) (end string, again time.Duration)
	// exempt says whether a request is the session layer's own (one that
	// brings a session's copy up to date), which no limit counts.
	exempt func(req mcp.Request) bool

	mu       sync.Mutex
	open     int                 // sessions admitted, bound or still initializing
	sessions map[string]*session // bound sessions by MCP session id
	callers  map[string]*callerState
	calls    map[*inflight]struct{}
	listens  map[*inflight]struct{}
	// stateless are the 2025 calls served statelessly, by statelessRef;
	// early, the cancellations of such calls that came before them.
	stateless map[string][]*session
	early     recentSet
	draining  bool
	unready   bool          // readiness answers 503 while everything is still served (the drain's delay)
	drained   chan struct{} // closed once draining and no call is in flight
}

type callerState struct {
	sessions int
	calls    int
	retries  int // 2026-07-28 retries in progress (see startRetry)
	listens  int
	lim      *rate.Limiter
}

// session is the tracker's view of one MCP session (for a request without
// a session, 2026-07-28 or a stateless gateway's, of that one request).
type session struct {
	caller, subject string
	counted         bool // holds a slot of MaxSessions: opened on this replica
	stateful        bool // a 2025 session (opened here, or a copy of one opened elsewhere)

	// client is who a 2025 client served statelessly said it was, at its
	// initialize (see tracker.wrapRequests).
	client tool.Client

	// Guarded by tracker.mu.
	id       string
	ss       *mcp.ServerSession
	calls    map[*inflight]struct{}
	active   int // requests of the session in progress
	timer    *time.Timer
	ending   string // why the session is ending; "" while it is not
	released bool
	// cancelled, when set, cancels the session's calls as they start: a
	// stateless request whose notifications/cancelled came first.
	cancelled error
}

type inflight struct {
	s      *session
	cancel context.CancelCauseFunc
}

func newTracker(l Limits, observe func(Event), log *audit.Log) *tracker {
	if observe == nil {
		observe = func(Event) {}
	}
	return &tracker{
		limits: l, observe: observe, audit: log,
		sessions: map[string]*session{}, callers: map[string]*callerState{},
		calls: map[*inflight]struct{}{}, listens: map[*inflight]struct{}{},
		stateless: map[string][]*session{},
		early:     newRecentSet(earlyCancelTTL, maxEarlyCancels, maxEarlyCancelsPerCaller),
	}
}

type trackedKey struct{}

func trackedFrom(ctx context.Context) *session {
	s, _ := ctx.Value(trackedKey{}).(*session)
	return s
}

// wrapRequests tracks each request around next, go-sdk's stateless
// handler: with no session, each request is counted for itself, against
// its caller's limits. It runs after authentication, so the caller is
// known. maxBody bounds what it reads of a 2025 request (< 0: no limit).
//
// A 2025 client served statelessly (--stateless) cancels a call with a
// notifications/cancelled of its own, a request that go-sdk's stateless
// handler serves in a session of its own, where the call it names is
// unknown. The tracker keeps such clients' calls in progress by caller,
// address and request id, and cancels the one a notifications/cancelled
// names (see cancelStateless). A cancellation that comes before its call
// (the two requests raced) is kept for earlyCancelTTL, a bounded number
// of them per caller and in all, and cancels the call as it starts. (A
// 2026-07-28 client cancels by closing its request's stream.)
//
// Such a client names itself only in its initialize; its later requests
// name nothing (a 2024-11-05 or 2025-03-26 client not even its
// revision). The answer to its initialize gives it what it said as its
// Mcp-Session-Id (see clientToken), which go-sdk's stateless handler
// neither sets nor reads, and which the client sends back with every
// later request: the audit of its calls names it (see withClient) with
// nothing kept here. It is only what the client said of itself, as
// clientInfo always is.
func (t *tracker) wrapRequests(next http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, subject := callerKey(r)
		s := &session{caller: key, subject: subject}
		if r.Method == http.MethodPost && !modern(r.Header.Get(protocolHeader)) {
			if body, complete := peek(r, maxBody); complete {
				id, kind, c := legacyMessage(body)
				switch kind {
				case legacyCancel:
					t.cancelStateless(statelessRef(r, key, id), key)
				case legacyCall:
					ref := statelessRef(r, key, id)
					t.mu.Lock()
					t.stateless[ref] = append(t.stateless[ref], s)
					early := len(t.stateless[ref]) == 1 && t.early.take(ref, time.Now())
					if early {
						s.cancelled = errClientCancelled
					}
					t.mu.Unlock()
					defer t.forgetStateless(ref, s)
					if early {
						t.observe(Event{Kind: CallsCancelled, Caller: key, End: EndClientCancelled, Calls: 1})
					}
				case legacyInitialize:
					w.Header().Set(sessionHeader, clientToken(c))
				}
			}
			s.client = clientFromToken(r.Header.Get(sessionHeader))
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), trackedKey{}, s)))
	})
}

// Bounds of the cancellations of 2025 calls served statelessly that came
// before their call, which the tracker keeps for them.
const (
	earlyCancelTTL           = 5 * time.Second
	maxEarlyCancels          = 4096
	maxEarlyCancelsPerCaller = 64
)

// clientTokenPrefix starts the Mcp-Session-Id a stateless gateway gives a
// 2025 client (see wrapRequests): version 1 of clientToken.
const clientTokenPrefix = "twc1."

// clientToken is c as a header's value: clientTokenPrefix, then the
// base64url of its JSON. Nothing in it is secret or trusted: the client
// said it all.
func clientToken(c tool.Client) string {
	b, _ := json.Marshal(struct {
		P string `json:"p,omitempty"`
		N string `json:"n,omitempty"`
	}{c.Protocol, c.Name})
	return clientTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// clientFromToken reads what clientToken wrote, bounded as the audit
// keeps a client: a revision the gateway serves, a name of at most
// maxClientName runes. Anything else (another session id, a value too
// long or malformed) is no client.
func clientFromToken(v string) tool.Client {
	enc, ok := strings.CutPrefix(v, clientTokenPrefix)
	if !ok || len(enc) > 4*maxClientName*4/3+64 {
		return tool.Client{}
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	var c struct {
		P string `json:"p"`
		N string `json:"n"`
	}
	if err != nil || json.Unmarshal(b, &c) != nil {
		return tool.Client{}
	}
	if !servedLegacy(c.P) {
		c.P = ""
	}
	return tool.Client{Protocol: c.P, Name: clientName(c.N, "")}
}

// errClientCancelled is the cause of a call its client cancelled with
// notifications/cancelled.
var errClientCancelled = errors.New("the client cancelled the request")

// What legacyMessage found in a 2025 message.
const (
	legacyOther = iota
	legacyCall
	legacyCancel
	legacyInitialize
)

// legacyMessage reads a 2025 message: a tools/call and its JSON-RPC id, a
// notifications/cancelled and the requestId it names, or an initialize
// and the client it names (its revision only if the gateway serves it,
// else go-sdk answers another); legacyOther for anything else (a batch,
// an id that is none, included).
func legacyMessage(body []byte) (id string, kind int, c tool.Client) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			RequestID       json.RawMessage `json:"requestId"`
			ProtocolVersion string          `json:"protocolVersion"`
			ClientInfo      struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"clientInfo"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return "", legacyOther, c
	}
	switch msg.Method {
	case "tools/call":
		if id = canonicalID(msg.ID); id != "" {
			kind = legacyCall
		}
	case "notifications/cancelled":
		if id = canonicalID(msg.Params.RequestID); id != "" {
			kind = legacyCancel
		}
	case "initialize":
		if v := msg.Params.ProtocolVersion; servedLegacy(v) {
			c.Protocol = v
		}
		c.Name = clientName(msg.Params.ClientInfo.Name, msg.Params.ClientInfo.Version)
		kind = legacyInitialize
	}
	return id, kind, c
}

// canonicalID is a JSON-RPC id as one spelling: 3, 3.0 and "3" differ as
// JSON-RPC says; "" when raw is no id (absent, null, another type).
func canonicalID(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	switch id := v.(type) {
	case string:
		return "s" + id
	case float64:
		return "n" + strconv.FormatFloat(id, 'g', -1, 64)
	}
	return ""
}

// statelessRef names a 2025 stateless request by caller, the client's
// address and its id: all a notifications/cancelled has to find it by.
func statelessRef(r *http.Request, caller, id string) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return caller + "\x00" + host + "\x00" + id
}

// cancelStateless cancels the call ref names, when exactly one is in
// progress: two clients of one caller at one address may use the same
// ids, and then which one cancelled cannot be told (none is cancelled).
// When none is, the cancellation is kept a moment for the call, which may
// still come (see wrapRequests).
func (t *tracker) cancelStateless(ref, caller string) {
	t.mu.Lock()
	var n int
	switch ss := t.stateless[ref]; len(ss) {
	case 0:
		t.early.put(ref, caller, time.Now())
	case 1:
		ss[0].cancelled = errClientCancelled
		n = t.cancelLocked(ss[0].calls, errClientCancelled)
	}
	t.mu.Unlock()
	if n > 0 {
		t.observe(Event{Kind: CallsCancelled, Caller: caller, End: EndClientCancelled, Calls: n})
	}
}

// forgetStateless drops s from the requests ref names, once it is served.
func (t *tracker) forgetStateless(ref string, s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ss := slices.DeleteFunc(t.stateless[ref], func(x *session) bool { return x == s })
	if len(ss) == 0 {
		delete(t.stateless, ref)
	} else {
		t.stateless[ref] = ss
	}
}

// admit reserves a session slot for a caller, or names the limit that
// refuses it.
func (t *tracker) admit(key, subject string) (*session, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.draining:
		return nil, LimitDraining
	case t.limits.MaxSessions > 0 && t.open >= t.limits.MaxSessions:
		return nil, LimitSessions
	}
	c := t.caller(key)
	if t.limits.MaxSessionsPerCaller > 0 && c.sessions >= t.limits.MaxSessionsPerCaller {
		return nil, LimitSessionsPerCaller
	}
	t.open++
	c.sessions++
	return &session{caller: key, subject: subject, counted: true, stateful: true, active: 1, calls: map[*inflight]struct{}{}}, ""
}

// adopt returns the tracker's state of a copy of a session opened on
// another replica, which this one serves now. It holds no session slot:
// the replica that opened it counted it.
func (t *tracker) adopt(key, subject string) *session {
	return &session{caller: key, subject: subject, stateful: true, calls: map[*inflight]struct{}{}}
}

// caller returns key's state, making it. Callers with nothing open and a
// full bucket are forgotten here, so the map stays as large as the callers
// that hold something (a full bucket is what a new caller would get).
func (t *tracker) caller(key string) *callerState {
	if c, ok := t.callers[key]; ok {
		return c
	}
	if len(t.callers) >= 64 {
		now := time.Now()
		for k, c := range t.callers {
			if c.sessions == 0 && c.calls == 0 && c.retries == 0 && c.listens == 0 && (c.lim == nil || c.lim.TokensAt(now) >= float64(c.lim.Burst())) {
				delete(t.callers, k)
			}
		}
	}
	c := &callerState{}
	if t.limits.CallRate > 0 && t.limiter == nil {
		c.lim = rate.NewLimiter(rate.Limit(t.limits.CallRate), callBurst(t.limits))
	}
	t.callers[key] = c
	return c
}

func (t *tracker) refuseSession(w http.ResponseWriter, key, subject, limit string) {
	status, msg := http.StatusServiceUnavailable, "the gateway is at its limit of sessions ("+LimitSessions+"); retry later"
	switch limit {
	case LimitSessionsPerCaller:
		status, msg = http.StatusTooManyRequests, "this caller is at its limit of sessions ("+LimitSessionsPerCaller+"); close one or retry later"
	case LimitDraining:
		msg = "the gateway is shutting down (" + LimitDraining + ")"
	}
	retry := t.limits.RetryAfter
	if retry <= 0 {
		retry = time.Second
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	http.Error(w, msg, status)
	t.record(audit.Event{Kind: audit.SessionRefused, Caller: subject, Reason: limit, Error: msg})
	t.observe(Event{Kind: SessionRefused, Caller: key, Limit: limit})
}

// bind records the go-sdk session an admitted session became, once its
// initialize succeeded (or a copy, once rebuilt).
func (t *tracker) bind(s *session, ss *mcp.ServerSession) {
	t.mu.Lock()
	if s.ss != nil || !s.stateful {
		t.mu.Unlock()
		return
	}
	s.ss, s.id = ss, ss.ID()
	t.sessions[s.id] = s
	t.mu.Unlock()
	if s.counted {
		t.observe(Event{Kind: SessionOpened, Caller: s.caller})
	}
	// Its slot is released when the session ends by the session layer,
	// which waits for every session's end (stateful.register): one
	// goroutine a session instead of two.
}

// bound reports whether s is a session that opened (its initialize
// succeeded, and was stored where there is a store).
func (t *tracker) bound(s *session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return s.ss != nil
}

// isDraining reports whether the gateway is draining.
func (t *tracker) isDraining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.draining
}

// arm starts s's idle timer unless a request of s is in progress or it
// runs already: a copy of a session that only serves an event stream
// would otherwise never be looked at.
func (t *tracker) arm(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.active > 0 || s.timer != nil || s.ending != "" || s.released || t.limits.SessionIdleTimeout <= 0 {
		return
	}
	s.timer = time.AfterFunc(t.limits.SessionIdleTimeout, func() { t.expire(s) })
}

func (t *tracker) busy(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.active++
	if s.timer != nil {
		s.timer.Stop()
	}
}

// idle notes the end of a request of s, starting its idle timer when it
// was the last.
func (t *tracker) idle(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.active > 0 {
		s.active--
	}
	if s.active > 0 || s.ending != "" || s.released || t.limits.SessionIdleTimeout <= 0 {
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(t.limits.SessionIdleTimeout, func() { t.expire(s) })
		return
	}
	s.timer.Reset(t.limits.SessionIdleTimeout)
}

func (t *tracker) expire(s *session) {
	t.mu.Lock()
	idle := s.active == 0 && s.ending == "" && !s.released
	t.mu.Unlock()
	if !idle {
		return
	}
	end := EndExpired
	if t.expiring != nil {
		var again time.Duration
		if end, again = t.expiring(s); end == "" {
			t.mu.Lock()
			if s.active == 0 && s.ending == "" && !s.released && s.timer != nil {
				s.timer.Reset(again)
			}
			t.mu.Unlock()
			return
		}
	}
	t.mu.Lock()
	idle = s.active == 0
	t.mu.Unlock()
	if idle {
		t.end(s, end)
	}
}

// errSessionEnded and errDraining are the causes of calls cancelled by a
// session's end and by the drain.
var (
	errSessionEnded = errors.New("the session ended")
	errDraining     = errors.New("the gateway is shutting down")
)

// end ends s: new calls are refused, calls in flight are cancelled (their
// upstreams are told), and, unless the client's DELETE is about to close
// it through go-sdk, the session is closed.
func (t *tracker) end(s *session, why string) {
	t.mu.Lock()
	if s.ending != "" {
		t.mu.Unlock()
		return
	}
	s.ending = why
	if s.timer != nil {
		s.timer.Stop()
	}
	n := t.cancelLocked(s.calls, errSessionEnded)
	ss := s.ss
	t.mu.Unlock()
	if n > 0 {
		t.observe(Event{Kind: CallsCancelled, Caller: s.caller, End: why, Calls: n})
	}
	if why != EndDeleted && ss != nil {
		go func() { _ = ss.Close() }() // Close waits for the cancelled calls to return
	}
}

func (t *tracker) cancelLocked(calls map[*inflight]struct{}, cause error) int {
	for c := range calls {
		c.cancel(cause)
	}
	return len(calls)
}

// release frees s's slot; it runs once, when go-sdk's session is gone.
func (t *tracker) release(s *session, why string) {
	t.mu.Lock()
	if s.released || !s.stateful {
		t.mu.Unlock()
		return
	}
	s.released = true
	if s.ending != "" {
		why = s.ending
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.counted {
		t.open--
		if c := t.callers[s.caller]; c != nil {
			c.sessions--
		}
	}
	if s.id != "" && t.sessions[s.id] == s {
		delete(t.sessions, s.id)
	}
	bound := s.ss != nil && s.counted
	t.mu.Unlock()
	if bound {
		t.observe(Event{Kind: SessionClosed, Caller: s.caller, End: why})
	}
}

// startCall admits a tool call of s, returning its context (cancelled when
// the session ends or the gateway drains) and the function that ends it,
// or the limit that refuses it.
func (t *tracker) startCall(ctx context.Context, s *session) (context.Context, func(), string) {
	t.mu.Lock()
	switch {
	case t.draining:
		t.mu.Unlock()
		return nil, nil, LimitDraining
	case s.ending != "":
		t.mu.Unlock()
		return nil, nil, LimitDraining // the session is ending: no new work
	case t.limits.MaxCallsPerSession > 0 && len(s.calls) >= t.limits.MaxCallsPerSession:
		t.mu.Unlock()
		return nil, nil, LimitCallsPerSession
	}
	c := t.caller(s.caller)
	if t.limits.MaxCallsPerCaller > 0 && c.calls >= t.limits.MaxCallsPerCaller {
		t.mu.Unlock()
		return nil, nil, LimitCallsPerCaller
	}
	if c.lim != nil && !c.lim.Allow() {
		t.mu.Unlock()
		return nil, nil, LimitCallRate
	}
	perSecond, burst := t.limits.CallRate, t.limits.CallBurst
	ctx, cancel := context.WithCancelCause(ctx)
	call := &inflight{s: s, cancel: cancel}
	if s.calls == nil {
		s.calls = map[*inflight]struct{}{}
	}
	s.calls[call] = struct{}{}
	t.calls[call] = struct{}{}
	c.calls++
	if s.cancelled != nil {
		cancel(s.cancelled) // its client cancelled it before it started
	}
	t.mu.Unlock()
	done := func() {
		cancel(nil)
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(s.calls, call)
		delete(t.calls, call)
		if c := t.callers[s.caller]; c != nil {
			c.calls--
		}
		t.closeDrainedLocked()
	}
	// The fleet's bucket is asked with the call's slot held (so that the
	// concurrency limits cannot be overrun meanwhile), outside the lock:
	// it is a round trip to the store.
	if limit := t.fleetRate(ctx, s.caller, perSecond, burst); limit != "" {
		done()
		return nil, nil, limit
	}
	return ctx, done, ""
}

// fleetRate asks the fleet's [CallLimiter], if any, for one call of
// caller at perSecond (burst <= 0: the rate rounded up), and names the
// limit that refuses it ("" when none does). It is a round trip to the
// store: call it outside t.mu.
func (t *tracker) fleetRate(ctx context.Context, caller string, perSecond float64, burst int) string {
	if t.limiter == nil || perSecond <= 0 {
		return ""
	}
	if burst <= 0 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	ok, err := t.limiter.Allow(ctx, caller, perSecond, burst)
	switch {
	case err != nil:
		return LimitRateUnchecked
	case !ok:
		return LimitCallRate
	}
	return ""
}

// startRetry admits a 2026-07-28 retry (a tools/call carrying a
// requestState) of s, before its state is opened, and returns the
// function that ends it, or the limit that refuses it. A retry draws on
// its caller's call rate like a new call. It takes no call slot: the call
// it answers holds one already, and a caller at MaxCallsPerCaller must
// still be able to answer its calls' questions. Its retries in progress
// are bounded by MaxCallsPerCaller instead, since each call has at most one
// request waiting on it. The drain does not refuse a retry: it starts no
// work, and answers or collects a call the drain waits for.
func (t *tracker) startRetry(ctx context.Context, s *session) (func(), string) {
	t.mu.Lock()
	c := t.caller(s.caller)
	switch {
	case s.ending != "":
		t.mu.Unlock()
		return nil, LimitDraining
	case t.limits.MaxCallsPerCaller > 0 && c.retries >= t.limits.MaxCallsPerCaller:
		t.mu.Unlock()
		return nil, LimitCallsPerCaller
	case c.lim != nil && !c.lim.Allow():
		t.mu.Unlock()
		return nil, LimitCallRate
	}
	c.retries++
	perSecond, burst := t.limits.CallRate, t.limits.CallBurst
	t.mu.Unlock()
	done := func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if c := t.callers[s.caller]; c != nil {
			c.retries--
		}
	}
	if limit := t.fleetRate(ctx, s.caller, perSecond, burst); limit != "" {
		done()
		return nil, limit
	}
	return done, ""
}

// startListen admits a subscriptions/listen stream of s, returning its
// context (cancelled when the gateway drains) and the function that ends
// it, or the limit that refuses it.
func (t *tracker) startListen(ctx context.Context, s *session) (context.Context, func(), string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		return nil, nil, LimitDraining
	}
	c := t.caller(s.caller)
	if t.limits.MaxListensPerCaller > 0 && c.listens >= t.limits.MaxListensPerCaller {
		return nil, nil, LimitListensPerCaller
	}
	ctx, cancel := context.WithCancelCause(ctx)
	l := &inflight{s: s, cancel: cancel}
	t.listens[l] = struct{}{}
	c.listens++
	return ctx, func() {
		cancel(nil)
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.listens, l)
		if c := t.callers[s.caller]; c != nil {
			c.listens--
		}
	}, ""
}

// lease hands a tools/call's slot from the limits' middleware to the
// handler of a 2026-07-28 call, whose executor call outlives the request
// when it is parked (see [Gateway.startParked]): the handler that takes it
// ends it when the call ends; one left untaken (the call was refused
// before it started) ends with the request.
type lease struct {
	ctx   context.Context // the call's, cancelled by the drain
	done  func()          // frees the slot
	ended func(end string)
	taken atomic.Bool
}

type leaseKey struct{}

func withLease(ctx context.Context, l *lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

func leaseFrom(ctx context.Context) *lease {
	l, _ := ctx.Value(leaseKey{}).(*lease)
	return l
}

// take claims the lease, once.
func (l *lease) take() bool { return l.taken.CompareAndSwap(false, true) }

func (l *lease) releaseUnlessTaken() {
	if l.take() {
		l.done()
	}
}

// closeDrainedLocked closes drained, once, when draining has begun and no
// call is in flight. t.mu is held.
func (t *tracker) closeDrainedLocked() {
	if t.drained == nil || len(t.calls) > 0 {
		return
	}
	select {
	case <-t.drained:
	default:
		close(t.drained)
	}
}

// refusal is the isError result of a call refused by limit.
func refusal(limit, name string) *mcp.CallToolResult {
	msg := refusalText(limit, fmt.Sprintf("call to %q", name))
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// refusalText says why what (a call, a request) was refused by limit and
// what to do.
func refusalText(limit, what string) string {
	switch limit {
	case LimitCallsPerSession:
		return fmt.Sprintf("%s refused: this session is at its limit of calls in progress (%s); retry when one has finished", what, limit)
	case LimitCallsPerCaller:
		return fmt.Sprintf("%s refused: this caller is at its limit of calls in progress (%s); retry when one has finished", what, limit)
	case LimitCallRate:
		return fmt.Sprintf("%s refused: this caller is over its rate of calls (%s); retry shortly", what, limit)
	case LimitListensPerCaller:
		return fmt.Sprintf("%s refused: this caller is at its limit of open subscriptions/listen streams (%s); close one first", what, limit)
	case LimitRateUnchecked:
		return fmt.Sprintf("%s refused: this caller's rate of calls could not be checked with the fleet's store (%s); retry shortly", what, limit)
	}
	return fmt.Sprintf("%s refused: the gateway is shutting down or the session is ending (%s); do not retry on this session", what, limit)
}

// middleware binds sessions when they initialize and runs every tool call
// under the limits, with a context the tracker can cancel.
func (t *tracker) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s := trackedFrom(ctx)
		if s == nil || (t.exempt != nil && t.exempt(req)) {
			return next(ctx, method, req)
		}
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && err == nil {
				t.bind(s, ss)
			}
			return res, err
		case "tools/call":
			p, _ := req.GetParams().(*mcp.CallToolParamsRaw)
			name := ""
			if p != nil {
				name = p.Name
			}
			isModern := modern(revisionOf(req))
			if isModern && p != nil && p.RequestState != "" {
				// A retry answering a parked call, which holds its slot
				// from its first request to its result. The retry is
				// counted before anything reads its state: a forged one
				// costs its caller, and the audit log sees no more of
				// them than the caller's rate allows.
				done, limit := t.startRetry(ctx, s)
				if limit != "" {
					t.observe(Event{Kind: CallRefused, Caller: s.caller, Limit: limit, Tool: name})
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: refusalText(limit, fmt.Sprintf("retry of the call to %q", name))}
				}
				defer done()
				return next(ctx, method, req)
			}
			base := ctx
			if isModern {
				// The call may outlive this request (see [lease]).
				base = context.WithoutCancel(ctx)
			}
			callCtx, done, limit := t.startCall(base, s)
			if limit != "" {
				res := refusal(limit, name)
				t.refuseCall(ctx, s, name, limit, res.Content[0].(*mcp.TextContent).Text)
				return res, nil
			}
			if isModern {
				l := &lease{ctx: callCtx, done: done, ended: func(end string) {
					t.observe(Event{Kind: CallsCancelled, Caller: s.caller, End: end, Tool: name, Calls: 1})
				}}
				defer l.releaseUnlessTaken()
				return next(withLease(ctx, l), method, req)
			}
			defer done()
			return next(callCtx, method, req)
		case "subscriptions/listen":
			if p, ok := req.GetParams().(*mcp.SubscriptionsListenParams); ok && p != nil && p.Notifications != nil {
				if n, most := len(p.Notifications.ResourceSubscriptions), t.limits.MaxListenResources; most > 0 && n > most {
					t.observe(Event{Kind: CallRefused, Caller: s.caller, Limit: LimitListenResources})
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
						"subscriptions/listen refused: notifications.resourceSubscriptions names %d resources, more than the %d one listen may name (%s); listen to fewer, or open another listen",
						n, most, LimitListenResources)}
				}
			}
			listenCtx, done, limit := t.startListen(ctx, s)
			if limit != "" {
				t.observe(Event{Kind: CallRefused, Caller: s.caller, Limit: limit})
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: refusalText(limit, fmt.Sprintf("request %q", method))}
			}
			defer done()
			// go-sdk subscribes to each resource the listen names by
			// calling the subscribe handler itself, past this
			// middleware: the handler asks the gate (see admitSubscribe).
			gate := func(ctx context.Context) (context.Context, func(), error) {
				subCtx, done, limit := t.startCall(ctx, s)
				if limit != "" {
					t.observe(Event{Kind: CallRefused, Caller: s.caller, Limit: limit})
					return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: refusalText(limit, fmt.Sprintf("request %q (a resource it names)", method))}
				}
				return subCtx, done, nil
			}
			return next(context.WithValue(listenCtx, subscribeGateKey{}, gate), method, req)
		case "resources/read", "prompts/get", "completion/complete", "resources/subscribe":
			// Not calls, but each is a request to an upstream: the same
			// limits hold, so that no method fans out past them.
			reqCtx, done, limit := t.startCall(ctx, s)
			if limit != "" {
				t.observe(Event{Kind: CallRefused, Caller: s.caller, Limit: limit})
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: refusalText(limit, fmt.Sprintf("request %q", method))}
			}
			defer done()
			return next(reqCtx, method, req)
		}
		return next(ctx, method, req)
	}
}

// subscribeGateKey carries, in a subscriptions/listen's context, the
// function that admits each subscription the listen makes.
type subscribeGateKey struct{}

// admitSubscribe counts a subscription made for a subscriptions/listen
// against its caller's limits, as a resources/subscribe request is
// counted: it returns the context to subscribe with and the function that
// ends it, or the refusal. Outside a listen (a resources/subscribe the
// middleware counted already) it admits at once.
func admitSubscribe(ctx context.Context) (context.Context, func(), error) {
	if gate, ok := ctx.Value(subscribeGateKey{}).(func(context.Context) (context.Context, func(), error)); ok {
		return gate(ctx)
	}
	return ctx, func() {}, nil
}

// refuseCall audits a refused call the one way the gateway audits every
// refusal ([Gateway.refuse]: call.requested, then call.refused, with the
// caller), and reports it.
func (t *tracker) refuseCall(ctx context.Context, s *session, name, limit, msg string) {
	if t.refuse != nil {
		if s.subject != "" {
			ctx = tool.WithIdentity(ctx, s.subject)
		}
		t.refuse(ctx, name, nil, tool.Reason(limit), msg)
	}
	t.observe(Event{Kind: CallRefused, Caller: s.caller, Limit: limit, Tool: name})
}

func (t *tracker) record(ev audit.Event) {
	if t.audit == nil {
		return
	}
	ev.Time = time.Now()
	t.audit.Record(ev)
}

// drain refuses new sessions and calls, lets the calls in flight run for
// up to grace, then cancels the rest (their upstreams are told) and waits,
// until ctx ends, for them to return. It then closes every session, which
// ends their event streams. It returns how many calls it cancelled.
func (t *tracker) drain(ctx context.Context, grace time.Duration) int {
	t.mu.Lock()
	if t.drained == nil {
		t.drained = make(chan struct{})
	}
	t.draining = true
	done := t.drained
	t.closeDrainedLocked()
	t.mu.Unlock()

	timer := time.NewTimer(grace)
	defer timer.Stop()
	cancelled := 0
	select {
	case <-done:
	case <-ctx.Done():
	case <-timer.C:
		t.mu.Lock()
		cancelled = t.cancelLocked(t.calls, errDraining)
		t.mu.Unlock()
		if cancelled > 0 {
			t.observe(Event{Kind: CallsCancelled, End: EndDrained, Calls: cancelled})
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
	}

	t.mu.Lock()
	t.cancelLocked(t.listens, errDraining) // their event streams end
	var open []*session
	for _, s := range t.sessions {
		if s.ending == "" {
			s.ending = EndDrained
		}
		open = append(open, s)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range open {
		wg.Go(func() { _ = s.ss.Close() })
	}
	closed := make(chan struct{})
	go func() { wg.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return cancelled
}
