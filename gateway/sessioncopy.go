package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A replica's copies of the sessions other replicas opened, and the
// records they come from (see [stateful]): a copy is rebuilt from its
// record, brought up to date when the record moved on, and kept in step by
// requests the layer serves the copy itself; the record is put when a
// session opens and updated when its client changes what it is.

// errDrainingCopy refuses to rebuild a session on a draining replica.
var errDrainingCopy = errors.New("the gateway is shutting down (" + LimitDraining + ")")

// rebuild makes this replica's copy of the session rec, once however
// many of its requests arrive at once.
func (h *stateful) rebuild(r *http.Request, rec *SessionRecord) (*held, error) {
	for {
		h.mu.Lock()
		if hs := h.held[rec.ID]; hs != nil {
			h.mu.Unlock()
			return hs, nil
		}
		wait := h.rebuilding[rec.ID]
		if wait == nil {
			break // h.mu held
		}
		h.mu.Unlock()
		select {
		case <-wait:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	done := make(chan struct{})
	h.rebuilding[rec.ID] = done
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.rebuilding, rec.ID)
		h.mu.Unlock()
		close(done)
	}()
	if h.tr.isDraining() {
		return nil, errDrainingCopy
	}
	ip := &mcp.InitializeParams{ProtocolVersion: rec.Protocol}
	if len(rec.Capabilities) > 0 {
		if err := json.Unmarshal(rec.Capabilities, &ip.Capabilities); err != nil {
			return nil, fmt.Errorf("session %s: its record's capabilities: %w", rec.ID, err)
		}
	}
	if len(rec.ClientInfo) > 0 {
		if err := json.Unmarshal(rec.ClientInfo, &ip.ClientInfo); err != nil {
			return nil, fmt.Errorf("session %s: its record's client info: %w", rec.ID, err)
		}
	}
	server := h.getServer(r)
	if server == nil {
		return nil, errors.New("no server available")
	}
	s := h.tr.adopt(rec.Caller, rec.Subject)
	t, conn := h.transport(rec.ID)
	ss, err := server.Connect(context.WithValue(r.Context(), trackedKey{}, s), conn, &mcp.ServerSessionOptions{
		State: &mcp.ServerSessionState{InitializeParams: ip, NegotiatedProtocolVersion: rec.Protocol},
	})
	if err != nil {
		return nil, fmt.Errorf("session %s: connect its copy: %w", rec.ID, err)
	}
	t.direct = h.directCalls(server, ss)
	hs := &held{id: rec.ID, cred: credential{rec.Credential, rec.Role}, t: t, ss: ss, ts: s}
	h.tr.bind(s, ss)
	h.register(hs)
	h.apply(r, hs, rec)
	return hs, nil
}

// sync brings the copy hs up to date with its record.
func (h *stateful) sync(r *http.Request, hs *held) {
	rec, err := h.store.Get(r.Context(), hs.id)
	if err != nil {
		h.logger().Warn("gateway: read a session's record to bring its copy up to date", "error", err)
		return
	}
	h.apply(r, hs, rec)
}

// apply makes the copy hs what rec says (its log level, its
// subscriptions), by requests served to the copy itself.
func (h *stateful) apply(r *http.Request, hs *held, rec *SessionRecord) {
	hs.syncMu.Lock()
	defer hs.syncMu.Unlock()
	h.mu.Lock()
	level, subs, rev := hs.level, slices.Clone(hs.subs), hs.revision
	h.mu.Unlock()
	if rev >= rec.Revision {
		return
	}
	if rec.LogLevel != "" && rec.LogLevel != level {
		if err := h.ask(r, hs, "logging/setLevel", map[string]any{"level": rec.LogLevel}); err != nil {
			h.logger().Warn("gateway: set a session copy's log level", "session", hs.id, "error", err)
		} else {
			level = rec.LogLevel
		}
	}
	for _, uri := range rec.Subscriptions {
		if slices.Contains(subs, uri) {
			continue
		}
		if err := h.ask(r, hs, "resources/subscribe", map[string]any{"uri": uri}); err != nil {
			h.logger().Warn("gateway: subscribe a session copy again", "session", hs.id, "uri", uri, "error", err)
			continue
		}
		subs = append(subs, uri)
	}
	for _, uri := range slices.Clone(subs) {
		if slices.Contains(rec.Subscriptions, uri) {
			continue
		}
		if err := h.ask(r, hs, "resources/unsubscribe", map[string]any{"uri": uri}); err != nil {
			h.logger().Warn("gateway: unsubscribe a session copy", "session", hs.id, "uri", uri, "error", err)
			continue
		}
		subs = slices.DeleteFunc(subs, func(u string) bool { return u == uri })
	}
	slices.Sort(subs)
	h.mu.Lock()
	hs.level, hs.subs, hs.revision = level, subs, rec.Revision
	h.mu.Unlock()
}

// ask serves the copy hs a request of the layer's own, as a client's
// would be served, and returns the error it was answered with.
func (h *stateful) ask(r *http.Request, hs *held, method string, params any) error {
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": fmt.Sprintf("toolwire-sync-%d", h.syncs.Add(1)), "method": method, "params": params,
	})
	if err != nil {
		return err
	}
	req := r.Clone(r.Context())
	req.Method = http.MethodPost
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Del("Last-Event-ID")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(syncHeader, h.syncKey)
	rec := newRecorder()
	hs.t.ServeHTTP(rec, req)
	if rec.code/100 != 2 {
		return fmt.Errorf("%s: %d %s", method, rec.code, strings.TrimSpace(rec.body.String()))
	}
	for line := range strings.SplitSeq(rec.body.String(), "\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:")
		if !ok {
			data = line
		}
		var msg struct {
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &msg) == nil && msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
	}
	return nil
}

// record is receiving middleware of the role servers with a store: the
// session's record is put when its initialize succeeds, before the client
// learns of the session (so its next request, on any replica, finds it),
// and updated when the client sets its level or changes its
// subscriptions. A session whose record cannot be put is not opened.
func (h *stateful) record(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		default:
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if ss == nil || ss.ID() == "" || h.isSync(req) {
			return next(ctx, method, req)
		}
		h.mu.Lock()
		hs := h.held[ss.ID()]
		h.mu.Unlock()
		res, err := next(ctx, method, req)
		if err != nil || hs == nil {
			return res, err
		}
		if method == "initialize" {
			if err := h.put(ctx, hs, res); err != nil {
				h.logger().Warn("gateway: store a new session's record", "error", err)
				return nil, fmt.Errorf("the session could not be stored for the gateway's replicas: %w", err)
			}
			return res, nil
		}
		var change func(*SessionRecord)
		switch p := req.GetParams().(type) {
		case *mcp.SetLoggingLevelParams:
			level := string(p.Level)
			change = func(rec *SessionRecord) { rec.LogLevel = level }
			h.mu.Lock()
			hs.level = level
			h.mu.Unlock()
		case *mcp.SubscribeParams:
			change = func(rec *SessionRecord) {
				if !slices.Contains(rec.Subscriptions, p.URI) {
					rec.Subscriptions = append(rec.Subscriptions, p.URI)
				}
			}
			h.mu.Lock()
			if !slices.Contains(hs.subs, p.URI) {
				hs.subs = append(hs.subs, p.URI)
				slices.Sort(hs.subs)
			}
			h.mu.Unlock()
		case *mcp.UnsubscribeParams:
			change = func(rec *SessionRecord) {
				rec.Subscriptions = slices.DeleteFunc(rec.Subscriptions, func(u string) bool { return u == p.URI })
			}
			h.mu.Lock()
			hs.subs = slices.DeleteFunc(hs.subs, func(u string) bool { return u == p.URI })
			h.mu.Unlock()
		default:
			return res, nil
		}
		rev, err := h.store.Update(ctx, hs.id, change)
		if err != nil {
			return nil, fmt.Errorf("the session's change could not be stored for the gateway's replicas: %w", err)
		}
		h.mu.Lock()
		if hs.revision == rev-1 { // nothing else changed it meanwhile
			hs.revision = rev
		}
		h.mu.Unlock()
		return res, nil
	}
}

// put stores the record of a session whose initialize succeeded.
func (h *stateful) put(ctx context.Context, hs *held, res mcp.Result) error {
	s := hs.ts
	ip := hs.ss.InitializeParams()
	rec := &SessionRecord{
		ID: hs.id, Caller: s.caller, Subject: s.subject, Credential: hs.cred.token, Role: hs.cred.role,
	}
	if ir, ok := res.(*mcp.InitializeResult); ok {
		rec.Protocol = ir.ProtocolVersion
	}
	if ip != nil {
		if rec.Protocol == "" {
			rec.Protocol = ip.ProtocolVersion
		}
		var err error
		if ip.Capabilities != nil {
			if rec.Capabilities, err = json.Marshal(ip.Capabilities); err != nil {
				return err
			}
		}
		if ip.ClientInfo != nil {
			if rec.ClientInfo, err = json.Marshal(ip.ClientInfo); err != nil {
				return err
			}
		}
	}
	if err := h.store.Put(ctx, rec, h.idle()); err != nil {
		return err
	}
	h.mu.Lock()
	hs.revision = 1
	h.mu.Unlock()
	return nil
}

// expiring decides what becomes of a session idle on this replica (the
// tracker's idle timer fired): one whose record is gone has expired; a
// copy that carries the client's event stream while the session goes on
// elsewhere stays, and is looked at again after another idle period; any
// other is dropped, the session going on in its record.
func (h *stateful) expiring(s *session) (string, time.Duration) {
	h.mu.Lock()
	hs := h.held[s.id]
	streams := 0
	if hs != nil {
		streams = hs.streams
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.store.Get(ctx, s.id)
	switch {
	case errors.Is(err, ErrSessionNotFound):
		return EndExpired, 0
	case err == nil && streams > 0:
		return "", h.idle()
	}
	return EndDropped, 0
}

// recorder is the response to a request the layer serves a copy itself:
// kept in memory, read when the transport is done with it.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, code: http.StatusOK} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

func (r *recorder) WriteHeader(code int) { r.code = code }

// Flush is what the transport calls after each event: nothing to send.
func (r *recorder) Flush() {}

// keepAlive keeps session sid's record from expiring while a request of
// it is served, and returns what ends that, at the request's end. The
// copy's idle timer (the tracker's) does not run while a request is in
// flight and restarts at its end; the record's is restarted by the touch
// at the request's start. So that both follow one rule (a session is
// idle from the end of its last request), the record is touched every
// half idle timeout while the request lasts, and again at its end when it
// lasted more than a tenth of the timeout (a short request's start touch
// is as good). Without an idle timeout there is nothing to do.
func (h *stateful) keepAlive(sid string) (stop func()) {
	idle := h.idle()
	if idle <= 0 {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	touch := func() {
		ctx, cancel := context.WithTimeout(context.Background(), touchWait)
		defer cancel()
		if _, err := h.store.Touch(ctx, sid, idle); err != nil && !errors.Is(err, ErrSessionNotFound) {
			h.logger().Warn("gateway: keep a session's record alive during a long request", "err", err)
		}
	}
	wg.Go(func() {
		t := time.NewTicker(idle / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				touch()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if time.Since(start) > idle/10 {
			touch()
		}
	}
}

// touchWait bounds a touch of a session's record made outside a request.
const touchWait = 10 * time.Second
