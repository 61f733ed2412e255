package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolHeader is the Streamable HTTP transport's version header, which
// a client sends with every request after the first (2025) or with every
// request (2026-07-28).
const protocolHeader = "Mcp-Protocol-Version"

// dispatcher serves every revision on one endpoint, in front of two
// Streamable HTTP handlers over the same per-role servers: toolwire's
// session layer for the 2025 revisions, which open sessions, and go-sdk's
// stateless handler for 2026-07-28, which has none. The spec leaves it to a
// server that speaks both to tell them apart by how the client opens
// (basic/versioning, "Compatibility Matrix"); the signals, most reliable
// first:
//
//  1. an Mcp-Session-Id: a 2025 session's request (only the stateful
//     handler mints one, and a 2026 client never has one);
//  2. an MCP-Protocol-Version of 2026-07-28 or later, which a 2026 client
//     sends on every request: stateless, which also answers a GET or
//     DELETE from one (405);
//  3. any other GET or DELETE: stateful (it answers one without a session);
//  4. a POST without the header: a look at its body. A _meta protocol
//     version of 2026-07-28 or later goes stateless, which refuses the
//     missing header as the spec says (400); anything else, an initialize
//     above all, is a 2025 client opening a session.
//
// The look at the body is bounded by the handlers' own body limit and the
// body is given back whole, so what the handler then reads, and refuses
// (413), is what the client sent.
type dispatcher struct {
	stateful, stateless http.Handler
	maxBody             int64 // < 0: no limit
}

func (d *dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.modern(r) {
		d.stateless.ServeHTTP(w, r)
		return
	}
	d.stateful.ServeHTTP(w, r)
}

// modern reports whether r is a 2026-07-28 (or later) request, restoring
// its body when it had to read it.
func (d *dispatcher) modern(r *http.Request) bool {
	if r.Header.Get(sessionHeader) != "" {
		return false
	}
	if v := r.Header.Get(protocolHeader); v != "" {
		return modern(v)
	}
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return false
	}
	body, complete := peek(r, d.maxBody)
	if !complete {
		return false // too large to be anything but refused (413) where it goes
	}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false // a batch, or not JSON: the 2025 handler answers it
	}
	v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return modern(v)
}

// peek reads r's body up to limit bytes (limit < 0: all of it) and puts
// back a body that reads the same bytes, then the rest. complete says
// whether what it returns is the whole body.
//
// The layers on a request's way (tasks, the dispatcher, the stateless
// tracker) each peek at the same body, so a body an earlier peek put back,
// and that nothing has read since, is not read again when what that peek
// read answers this one: it read the whole body, or under the same limit.
func peek(r *http.Request, limit int64) (body []byte, complete bool) {
	if p, ok := r.Body.(*replayed); ok && p.front != nil && p.front.Len() == len(p.body) {
		switch {
		case p.whole && limit >= 0 && int64(len(p.body)) > limit:
			return p.body[:limit+1], false // as much as a first peek would read
		case p.whole:
			return p.body, true
		case p.limit == limit:
			return p.body, false
		}
	}
	src := io.Reader(r.Body)
	if limit >= 0 {
		src = io.LimitReader(r.Body, limit+1)
	}
	body, err := io.ReadAll(src)
	whole := err == nil && (limit < 0 || int64(len(body)) <= limit)
	front := bytes.NewReader(body)
	p := &replayed{Reader: io.MultiReader(front, r.Body), Closer: r.Body}
	if err == nil {
		p.body, p.front, p.limit, p.whole = body, front, limit, whole
	}
	r.Body = p
	return body, whole
}

// replayed is a request body read again from its start.
type replayed struct {
	io.Reader
	io.Closer

	// Set by a peek that read without error: the bytes it read, front
	// reading them ahead of the rest, the limit it read under, and whether
	// they are the whole body.
	body  []byte
	front *bytes.Reader
	limit int64
	whole bool
}
