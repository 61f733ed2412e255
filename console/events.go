package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// The topics of the console's event stream: what changed. A page lists
// the topics it shows and fetches itself again when one of them changes.
const (
	topicServers   = "servers"
	topicTools     = "tools"
	topicSessions  = "sessions"
	topicApprovals = "approvals"
	topicAudit     = "audit"
	topicLimits    = "limits"
)

// hub hands the topics that changed to every open event stream. A stream
// that is slow to write does not hold the others up: what it has not sent
// yet is a set of topics, so a burst of changes costs it one event per
// topic.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{} // capacity 1
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

// notify tells every stream that topic changed; it never blocks.
func (h *hub) notify(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.mu.Lock()
		s.pending[topic] = true
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (h *hub) subscribe() (*subscriber, func()) {
	s := &subscriber{pending: map[string]bool{}, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}
}

// take returns the topics pending, sorted, and forgets them.
func (s *subscriber) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t := range s.pending {
		out = append(out, t)
	}
	clear(s.pending)
	slices.Sort(out)
	return out
}

// heartbeat is how often an idle stream writes a comment, so that a proxy
// does not close it and the browser notices a console that went away.
const heartbeat = 20 * time.Second

// serveEvents streams the topics that change as server-sent events
// ("event: change", the topic as data) until the client goes, the
// operator's session ends or the console closes (done). The session was
// checked by the caller; it is checked again at each heartbeat, so a
// signed-out session's stream ends within one.
func (c *Console) serveEvents(done context.Context, w http.ResponseWriter, r *http.Request, alive func() bool) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "Internal Server Error: streaming unsupported", http.StatusInternalServerError)
		return
	}
	// The server's write deadline, if any, would cut the stream.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	sub, unsubscribe := c.hub.subscribe()
	defer unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// retry: how long the browser waits before it reconnects.
	fmt.Fprint(w, "retry: 3000\n: toolwire console\n\n")
	flusher.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done.Done():
			return
		case <-tick.C:
			if !alive() {
				return
			}
			fmt.Fprint(w, ": ping\n\n")
		case <-sub.wake:
			if !alive() {
				return
			}
			for _, t := range sub.take() {
				fmt.Fprintf(w, "event: change\ndata: %s\n\n", t)
			}
		}
		flusher.Flush()
	}
}
