package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// In a fleet, the replica serving a 2025 session's call may ask its
// client something during the call (an approval, an upstream's
// elicitation or sampling request: a request of the server's on the
// call's stream), and the client posts its answer as a request of its own
// to the gateway, which a load balancer may send to any replica. So the
// requests a replica's copy of a session sends carry ids that name the
// replica ("tw<instance>-<n>-<mac>", unique in the fleet, where go-sdk
// counts from 1 in every copy), and a POST that holds only answers naming
// another replica is passed, over the [Relay], to the copy that asked.
//
// The id is the client's to send back, and so is everything in it: the
// mac (an HMAC of the id and the session's id under a key the replicas
// share, derived from the requestState key) is what makes it the fleet's.
// An answer is passed on only when its id is one a replica of this fleet
// sent on this session; any other id that looks like one is refused
// before it reaches the relay (or the store): the instance it names is
// not trusted to exist.

// replyIDContext separates the reply ids' key from the requestState key
// it is derived from.
const replyIDContext = "toolwire session reply ids v1"

// replyKeyOf derives the key of the reply ids' MACs from s's key.
func replyKeyOf(s *sealer) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(replyIDContext))
	return m.Sum(nil)
}

// replyMAC is the mac of the request id base ("tw<instance>-<n>") sent
// on session.
func replyMAC(key []byte, session, base string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(session))
	m.Write([]byte{0})
	m.Write([]byte(base))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// replyID returns the wire id of the n-th request a replica's copy of
// session sends; prefix is [replyPrefix]'s.
func replyID(key []byte, session, prefix string, n int64) string {
	base := fmt.Sprintf("%s%d", prefix, n)
	return base + "-" + replyMAC(key, session, base)
}

// replyInstance returns the instance a reply id names, and whether the id
// is one a replica sent on session (its mac holds).
func replyInstance(key []byte, session, id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "tw")
	if !ok {
		return "", false
	}
	instance, rest, ok := strings.Cut(rest, "-")
	if !ok || instance == "" {
		return "", false
	}
	n, mac, ok := strings.Cut(rest, "-")
	if !ok || n == "" {
		return "", false
	}
	want := replyMAC(key, session, "tw"+instance+"-"+n)
	return instance, hmac.Equal([]byte(mac), []byte(want))
}

// replyPrefix starts the ids of the requests a replica's copies send.
func replyPrefix(instance string) string { return "tw" + instance + "-" }

// relayReply is the relay's method of answers passed to their replica.
const relayReply = "session.reply"

// fleetTransport is a session's transport in a fleet: the layer's, with
// the ids of the server's requests made the fleet's.
type fleetTransport struct {
	*sessionTransport
	// prefix returns the replica's [replyPrefix], asked for each request:
	// a replica taken for lost goes on as a new instance.
	prefix func() string
	key    []byte // of the ids' macs
}

func (t *fleetTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.sessionTransport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &fleetConn{Connection: c, prefix: t.prefix, key: t.key, session: t.SessionID, ours: map[string]jsonrpc.ID{}, theirs: map[any]string{}}, nil
}

// fleetConn renames the ids of the requests the server sends, and names
// the answers back.
type fleetConn struct {
	mcp.Connection
	prefix  func() string
	key     []byte
	session string
	next    atomic.Int64

	mu     sync.Mutex
	ours   map[string]jsonrpc.ID // the wire's id → go-sdk's
	theirs map[any]string        // go-sdk's id → the wire's, for a cancellation
}

func (c *fleetConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			wire := replyID(c.key, c.session, c.prefix(), c.next.Add(1))
			id, err := jsonrpc.MakeID(wire)
			if err != nil {
				return err
			}
			c.mu.Lock()
			c.ours[wire], c.theirs[m.ID.Raw()] = m.ID, wire
			c.mu.Unlock()
			renamed := *m
			renamed.ID = id
			msg = &renamed
		} else if m.Method == "notifications/cancelled" {
			msg = c.cancelled(m)
		}
	}
	return c.Connection.Write(ctx, msg)
}

// cancelled names, in the server's cancellation of a request of its own,
// the request as the client knows it.
func (c *fleetConn) cancelled(m *jsonrpc.Request) jsonrpc.Message {
	var p map[string]any
	if json.Unmarshal(m.Params, &p) != nil {
		return m
	}
	id, err := jsonrpc.MakeID(p["requestId"])
	if err != nil {
		return m
	}
	c.mu.Lock()
	wire, ok := c.theirs[id.Raw()]
	c.mu.Unlock()
	if !ok {
		return m
	}
	p["requestId"] = wire
	raw, err := json.Marshal(p)
	if err != nil {
		return m
	}
	renamed := *m
	renamed.Params = raw
	return &renamed
}

func (c *fleetConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Response); ok && err == nil {
		if wire, ok := r.ID.Raw().(string); ok {
			c.mu.Lock()
			id, known := c.ours[wire]
			delete(c.ours, wire)
			if known {
				delete(c.theirs, id.Raw())
			}
			c.mu.Unlock()
			if known {
				renamed := *r
				renamed.ID = id
				return &renamed, nil
			}
		}
	}
	return msg, err
}

// errForeignAnswer refuses a POST of answers whose ids no replica of the
// fleet sent on its session.
var errForeignAnswer = errors.New("the answer's id names no request this gateway sent on this session")

// answerFor returns the replica whose request a POST to session answers:
// the body is one answer, or a batch of answers only, whose ids name
// another replica of the fleet than self. "" means the POST is this
// replica's to serve. An answer whose id looks like a fleet's reply id
// (it starts with "tw") but is not one sent on session is an error
// wrapping errForeignAnswer.
func answerFor(body []byte, self, session string, key []byte) (string, error) {
	var msgs []json.RawMessage
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		if json.Unmarshal(t, &msgs) != nil {
			return "", nil
		}
	} else {
		msgs = []json.RawMessage{body}
	}
	holder := ""
	for _, raw := range msgs {
		var m struct {
			ID     any              `json:"id"`
			Method *json.RawMessage `json:"method"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Method != nil {
			return "", nil // a request or a notification: this replica's
		}
		id, ok := m.ID.(string)
		if !ok || !strings.HasPrefix(id, "tw") {
			return "", nil
		}
		instance, sent := replyInstance(key, session, id)
		switch {
		case !sent:
			return "", fmt.Errorf("%w (id %.40q)", errForeignAnswer, id)
		case instance == self || (holder != "" && holder != instance):
			return "", nil
		}
		holder = instance
	}
	return holder, nil
}

// replyWire is an answer passed to the replica that asked.
type replyWire struct {
	Session string `json:"session"`
	Body    []byte `json:"body"`
}

// passReply passes the answers of a POST to session sid to the replica
// that asked, and says so to the client (202, as for answers served here).
func (h *stateful) passReply(w http.ResponseWriter, r *http.Request, sid, holder string, body []byte) {
	req, _ := json.Marshal(replyWire{Session: sid, Body: body})
	if _, err := h.relay.Call(r.Context(), holder, relayReply, req, nil); err != nil {
		status := http.StatusServiceUnavailable
		if replicaLost(err) {
			status = http.StatusNotFound // what asked is gone with its replica
		}
		http.Error(w, "the answer could not reach the replica that asked: "+err.Error(), status)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// serveReply serves answers passed from another replica to this replica's
// copy of their session.
func (h *stateful) serveReply(ctx context.Context, body []byte, _ func([]byte)) ([]byte, error) {
	var rep replyWire
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, err
	}
	h.mu.Lock()
	hs := h.held[rep.Session]
	h.mu.Unlock()
	if hs == nil {
		return nil, notHeld("this replica holds no copy of the session any more")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(rep.Body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionHeader, rep.Session)
	rec := newRecorder()
	hs.t.ServeHTTP(rec, req)
	if rec.code/100 != 2 {
		return nil, fmt.Errorf("%d %s", rec.code, strings.TrimSpace(rec.body.String()))
	}
	return nil, nil
}
