package stdioconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// methodDiscover is MCP 2026-07-28's first request (SEP-2575).
const methodDiscover = "server/discover"

// ErrClosed is returned by [Conn.Call] when the Conn is closed before the
// answer comes.
var ErrClosed = errors.New("connection closed")

// ownCalls are the requests a Conn makes on its own behalf, whose answers
// its reader must keep from the session reading the Conn: the calls of
// [Conn.Call], and the server/discover requests it watches for the client
// (see CommandTransport.DiscoverTimeout).
type ownCalls struct {
	// entries counts what the maps below hold, so that reading a message
	// while they are empty, nearly always, takes no lock.
	entries atomic.Int32

	mu    sync.Mutex
	next  uint64
	calls map[jsonrpc.ID]chan *jsonrpc.Response // Call's, waiting
	// probes are the client's server/discover requests not yet answered;
	// each channel is closed when the answer is read.
	probes map[jsonrpc.ID]chan struct{}
	// drop are ids whose answers nobody waits for any more: a Call that
	// gave up, or a server/discover the Conn answered itself.
	drop map[jsonrpc.ID]struct{}
}

// take reports whether msg is an answer the Conn keeps to itself, and if
// so delivers it. It also notes the answer to a watched server/discover,
// which goes on to the reader.
func (o *ownCalls) take(msg jsonrpc.Message) bool {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || o.entries.Load() == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.calls[resp.ID]; ok {
		delete(o.calls, resp.ID)
		o.entries.Add(-1)
		ch <- resp // buffered
		return true
	}
	if _, ok := o.drop[resp.ID]; ok {
		delete(o.drop, resp.ID)
		o.entries.Add(-1)
		return true
	}
	if answered, ok := o.probes[resp.ID]; ok {
		delete(o.probes, resp.ID)
		o.entries.Add(-1)
		close(answered)
	}
	return false
}

// Call sends a request of the Conn's own on the connection and returns the
// peer's response, which the Conn's reader keeps from whoever reads the
// Conn: a transport may ask something its session's API cannot express
// (a request with fields the SDK's types lack, say) on the same
// connection. Its ids are strings ("stdioconn-1", ...), which go-sdk never
// uses (it numbers its calls). The returned error is the connection's or
// ctx's; an error the peer answered with is in the response. A response
// that comes after ctx ended is dropped.
//
// Answers are read only while the Conn is being read, as an MCP session
// does all the time.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Response, error) {
	resp, _, err := c.call(ctx, method, params)
	return resp, err
}

// Request is [Conn.Call] for a request whose end the peer must hear of:
// when ctx ends before the answer, it also returns the
// notifications/cancelled that names the request, for the caller to
// write as a session announces its own calls (on a goroutine where it
// must not wait: a write to a peer that does not read blocks until the
// Conn closes).
func (c *Conn) Request(ctx context.Context, method string, params json.RawMessage) (resp *jsonrpc.Response, cancelled *jsonrpc.Request, err error) {
	resp, id, err := c.call(ctx, method, params)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		raw, merr := json.Marshal(map[string]any{"requestId": id.Raw(), "reason": ctx.Err().Error()})
		if merr == nil {
			cancelled = &jsonrpc.Request{Method: "notifications/cancelled", Params: raw}
		}
	}
	return resp, cancelled, err
}

func (c *Conn) call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Response, jsonrpc.ID, error) {
	o := &c.own
	o.mu.Lock()
	o.next++
	id, err := jsonrpc.MakeID(fmt.Sprintf("stdioconn-%d", o.next))
	if err != nil {
		o.mu.Unlock()
		return nil, jsonrpc.ID{}, err
	}
	if o.calls == nil {
		o.calls = make(map[jsonrpc.ID]chan *jsonrpc.Response)
	}
	answer := make(chan *jsonrpc.Response, 1)
	o.calls[id] = answer
	o.entries.Add(1)
	o.mu.Unlock()
	giveUp := func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, waiting := o.calls[id]; waiting {
			delete(o.calls, id)
			o.dropLater(id)
		}
	}
	if err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: params}); err != nil {
		giveUp()
		return nil, id, err
	}
	select {
	case resp := <-answer:
		return resp, id, nil
	case <-ctx.Done():
		giveUp()
		return nil, id, ctx.Err()
	case <-c.done:
		giveUp()
		return nil, id, ErrClosed
	}
}

func isDiscoverCall(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.IsCall() && req.Method == methodDiscover
}

// expectDiscover starts watching the answer to the server/discover request
// id, which is about to be written.
func (o *ownCalls) expectDiscover(id jsonrpc.ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.probes == nil {
		o.probes = make(map[jsonrpc.ID]chan struct{})
	}
	o.probes[id] = make(chan struct{})
	o.entries.Add(1)
}

// dropLater moves id, whose entry the caller has just removed, to the
// answers to drop. o.mu is held.
func (o *ownCalls) dropLater(id jsonrpc.ID) {
	if o.drop == nil {
		o.drop = make(map[jsonrpc.ID]struct{})
	}
	o.drop[id] = struct{}{}
}

// watchDiscover answers the server/discover request id with "method not
// found" if the server does not (see CommandTransport.DiscoverTimeout):
// within discoverWait of answering a ping written behind it. The server
// reads its input in order, so once it has answered the ping it has read
// the request: a server that means to answer it does so promptly, however
// long it took to start. A server that has answered neither is taken for
// one still starting (a go run, a first npx or uvx download, a JVM), never
// for one that does not know the method, however long that takes: were
// the Conn to answer for it, the client's initialize would follow the
// discover the server, once started, answers (and the initialize would
// then be refused as a second handshake). The watch ends with the Conn,
// which the client closes when its own deadline for the handshake passes.
func (c *Conn) watchDiscover(id jsonrpc.ID) {
	c.own.mu.Lock()
	answered := c.own.probes[id]
	c.own.mu.Unlock()
	if answered == nil {
		return // answered already
	}
	alive := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if _, err := c.Call(ctx, "ping", nil); err == nil {
			close(alive)
		}
	}()
	select {
	case <-answered:
		return
	case <-c.done:
		return
	case <-alive:
	}
	window := time.NewTimer(c.discoverWait)
	defer window.Stop()
	select {
	case <-answered:
		return
	case <-c.done:
		return
	case <-window.C:
	}
	o := &c.own
	o.mu.Lock()
	if _, pending := o.probes[id]; !pending {
		o.mu.Unlock()
		return
	}
	delete(o.probes, id)
	o.dropLater(id)
	o.mu.Unlock()
	answer := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code:    jsonrpc.CodeMethodNotFound,
		Message: fmt.Sprintf("%s: the server did not answer; taken as not supported", methodDiscover),
	}}
	select {
	case c.answers <- answer:
	case <-c.done:
	}
}
