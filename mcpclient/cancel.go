package mcpclient

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A call whose context ends is announced to the server with
// notifications/cancelled, but the SDK writes that notification on a
// goroutine of its own after the call has returned. A Close that follows at
// once (toolwire call on Ctrl-C or a timeout) would end the session first,
// and the server would never hear of it: a stdio server's handler sees its
// input end instead, and a go-sdk server over Streamable HTTP keeps the call
// running and holds the session's deletion until the call ends by itself
// (the SDK's DELETE gives up after 5 s). So each
// call carries a cancelProbe in its context, which the connection's writes
// report to (see noteWrite), and Close waits, bounded, until every
// cancelled call the server received has been announced.

// cancelGrace bounds how long Close waits for the announcements of
// cancelled calls. Writing one is a line on a pipe or one small POST; a
// server that takes longer is not worth holding up an exit for.
const cancelGrace = 2 * time.Second

// cancelProbe follows one call's messages through the connection.
type cancelProbe struct {
	sent      atomic.Bool   // the request was written
	announced chan struct{} // closed once its notifications/cancelled was written
	once      sync.Once
}

type probeKey struct{}

// withCancelProbe returns ctx carrying a new probe. The SDK writes the
// request with ctx and the notification with a context derived from it
// (without its cancellation), so both writes find the probe.
func withCancelProbe(ctx context.Context) (context.Context, *cancelProbe) {
	p := &cancelProbe{announced: make(chan struct{})}
	return context.WithValue(ctx, probeKey{}, p), p
}

func probeOf(ctx context.Context) *cancelProbe {
	p, _ := ctx.Value(probeKey{}).(*cancelProbe)
	return p
}

func (p *cancelProbe) markSent() { p.sent.Store(true) }

func (p *cancelProbe) markAnnounced() { p.once.Do(func() { close(p.announced) }) }

// noteWrite tells the probe in ctx, if any, that msg was written, when it
// is the notifications/cancelled of its call. A failed notification
// counts as announced too: nothing more will come of it. (A call counts
// as sent once its write begins: see watchedConn.Write.)
func noteWrite(ctx context.Context, msg jsonrpc.Message) {
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "notifications/cancelled" {
		if p := probeOf(ctx); p != nil {
			p.markAnnounced()
		}
	}
}

// cancellations holds a connection's cancelled calls whose announcement
// may not have been written yet.
type cancellations struct {
	mu      sync.Mutex
	pending []*cancelProbe
}

// expect notes that the SDK will announce the call of p as cancelled, if
// the server ever received it.
func (cs *cancellations) expect(p *cancelProbe) {
	if !p.sent.Load() {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	// Drop the ones announced meanwhile, so the list stays short on a
	// connection that lives long.
	live := cs.pending[:0]
	for _, q := range cs.pending {
		select {
		case <-q.announced:
		default:
			live = append(live, q)
		}
	}
	cs.pending = append(live, p)
}

// flush waits until every expected announcement was written, the
// connection is lost (nothing more can be written), or cancelGrace passes.
func (cs *cancellations) flush(lost <-chan struct{}) {
	cs.mu.Lock()
	pending := cs.pending
	cs.pending = nil
	cs.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	timer := time.NewTimer(cancelGrace)
	defer timer.Stop()
	for _, p := range pending {
		select {
		case <-p.announced:
		case <-lost:
			return
		case <-timer.C:
			return
		}
	}
}
