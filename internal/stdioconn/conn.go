package stdioconn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// batchlessVersion is the first MCP version without JSON-RPC batches: a
// server that negotiated it or a later one refuses them, as go-sdk does.
const batchlessVersion = "2025-06-18"

// retainedWriteSize is the largest write buffer kept between messages.
const retainedWriteSize = 1 << 20

// A Conn is an mcp.Connection over newline-delimited JSON-RPC. It reads
// from one goroutine of its own and decodes there; Read takes what that
// goroutine has decoded.
//
// As mcp.Connection requires, Read is called from one goroutine at a time,
// Write may be called concurrently with anything, and Close may be called
// any number of times, concurrently, and unblocks a Read waiting for input.
type Conn struct {
	incoming chan incoming // from readLoop, unbuffered
	done     chan struct{} // closed by Close

	// Owned by the goroutine calling Read.
	queue   []jsonrpc.Message // rest of the batch last read
	readErr error             // the error that ended reading, returned again

	writeMu sync.Mutex // serializes writes, guards wbuf
	w       io.Writer
	wbuf    bytes.Buffer

	mu sync.Mutex // guards what follows
	// batches maps the id of every call of an incoming batch that has not
	// been answered to its batch.
	batches map[jsonrpc.ID]*batch
	// initCalls holds the ids of initialize calls read and not yet
	// answered; the answer tells the version the session negotiated.
	initCalls map[jsonrpc.ID]struct{}
	version   string // protocol version of the first successful answer to initialize

	// own holds the Conn's own calls (see Call) and the client's
	// server/discover probes (see CommandTransport.DiscoverTimeout).
	own ownCalls
	// answers carries the responses the Conn makes up itself to its
	// reader: a server/discover left unanswered.
	answers chan jsonrpc.Message

	closeOnce sync.Once
	closer    func() error
	closeErr  error

	// answerMalformed: a server's Conn answers a message it cannot
	// decode with a parse error and reads on (see Transport).
	answerMalformed bool
	// discoverWait: a client's Conn answers a server/discover the server
	// leaves unanswered (see CommandTransport.DiscoverTimeout); 0 for
	// never.
	discoverWait time.Duration
}

// incoming is what readLoop hands to Read: one message, a batch, or the
// error that ended reading.
type incoming struct {
	msg   jsonrpc.Message
	batch []jsonrpc.Message
	err   error
	// malformed: err is about this message alone, which was framed
	// whole, so reading may go on after it.
	malformed bool
}

// newConn returns a Conn reading r and writing w; closer releases both,
// and any process behind them, when the Conn is closed. It starts the
// reading goroutine, which ends when r fails or the Conn is closed (if r's
// Read never returns, for a reader that Close cannot interrupt, it stays
// blocked there, as go-sdk's does).
func newConn(r io.Reader, w io.Writer, closer func() error, maxMessageSize int, answerMalformed bool, discoverWait time.Duration) *Conn {
	if maxMessageSize == 0 {
		maxMessageSize = DefaultMaxMessageSize
	}
	c := &Conn{
		incoming: make(chan incoming),
		done:     make(chan struct{}),
		answers:  make(chan jsonrpc.Message),
		w:        w,
		closer:   closer,

		answerMalformed: answerMalformed,
		discoverWait:    discoverWait,
	}
	go c.readLoop(newFramer(r, maxMessageSize))
	return c
}

func (c *Conn) readLoop(f *framer) {
	var w wireMessage
	for {
		in := readMessage(f, &w)
		select {
		case c.incoming <- in:
		case <-c.done:
			return
		}
		if in.err != nil && !(in.malformed && c.answerMalformed) {
			return
		}
		if isLineError(in.err) {
			f.skipLine()
		}
	}
}

// readMessage frames and decodes the next message or batch.
func readMessage(f *framer, w *wireMessage) incoming {
	value, depth, err := f.next()
	if err != nil {
		// Data after a value on its line is one bad line; the framer
		// can start again on the next (see Conn.readLoop).
		return incoming{err: err, malformed: isLineError(err)}
	}
	// go-sdk frames messages with encoding/json, which refuses malformed
	// JSON before anything is decoded, and then decodes them with
	// segmentio/encoding, which validates them again. Decoding here
	// validates as the latter; the two agree on what is well-formed
	// (FuzzValidAgreement), so the first pass, the slower, is left out.
	if depth > maxDepth {
		return incoming{err: fmt.Errorf("read message: %w", errTooDeep), malformed: true}
	}
	// An array is a batch; go-sdk also takes null for an (empty) one.
	if value[0] == '[' || value[0] == 'n' {
		batch, err := decodeBatch(value, true)
		return incoming{batch: batch, err: err, malformed: err != nil}
	}
	msg, err := w.decode(value, true)
	return incoming{msg: msg, err: err, malformed: err != nil}
}

// Read returns the next message. It returns io.EOF once the Conn is closed,
// and the error that ended reading (io.EOF at the end of input) if the
// input ended or was malformed.
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		msg := c.queue[0]
		c.queue = c.queue[1:]
		return msg, nil
	}
	if c.readErr != nil {
		return nil, c.readErr
	}
	var in incoming
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
			return nil, io.EOF
		case msg := <-c.answers:
			return msg, nil
		case in = <-c.incoming:
		}
		if in.err != nil && in.malformed && c.answerMalformed {
			// JSON-RPC 2.0, section 5.1: invalid JSON gets a parse error,
			// with a null id since none could be read; the next line is
			// served.
			if err := c.answerParseError(in.err); err != nil {
				c.readErr = err
				return nil, err
			}
			continue
		}
		if in.err == nil && in.batch == nil && c.own.take(in.msg) {
			continue // an answer to the Conn's own call, or one it gave already
		}
		break
	}
	if in.err != nil {
		select {
		case <-c.done:
			// Closing the input is what failed the read.
			in.err = io.EOF
		default:
		}
		c.readErr = in.err
		return nil, in.err
	}
	if in.batch == nil {
		c.noteRequest(in.msg)
		return in.msg, nil
	}
	if err := c.addBatch(in.batch); err != nil {
		c.readErr = err
		return nil, err
	}
	c.queue = in.batch[1:]
	return in.batch[0], nil
}

// noteRequest records the id of an initialize call, whose answer tells the
// protocol version.
func (c *Conn) noteRequest(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "initialize" || !req.IsCall() {
		return
	}
	c.mu.Lock()
	if c.initCalls == nil {
		c.initCalls = make(map[jsonrpc.ID]struct{})
	}
	c.initCalls[req.ID] = struct{}{}
	c.mu.Unlock()
}

// A batch is an incoming JSON-RPC batch whose calls are not all answered.
// Its responses go out together, in the order of the calls, as one array
// (JSON-RPC 2.0, section 6).
type batch struct {
	index     map[jsonrpc.ID]int // of the calls not yet answered
	responses []*jsonrpc.Response
}

// addBatch checks a batch read and starts waiting for the answers to its
// calls.
//
// go-sdk refuses batches once a server session has negotiated 2025-06-18
// or later, where the MCP specification removed them; a Conn cannot be told
// the session's version (go-sdk tells its own transports through an
// unexported method), so it takes it from the answer to initialize. Unlike
// go-sdk it does not wait for answers to the batch's notifications, which
// never come: go-sdk's transport would never send the batch's responses,
// and refuses a batch with two notifications as holding a duplicate id.
func (c *Conn) addBatch(msgs []jsonrpc.Message) error {
	for _, msg := range msgs {
		c.noteRequest(msg)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version >= batchlessVersion {
		return fmt.Errorf("read message: JSON-RPC batch received, but protocol version %s has no batches", c.version)
	}
	var b *batch
	for _, msg := range msgs {
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			continue
		}
		if b == nil {
			b = &batch{index: make(map[jsonrpc.ID]int)}
		}
		if _, dup := b.index[req.ID]; dup {
			return fmt.Errorf("read message: batch has two calls with id %v", req.ID.Raw())
		}
		if _, dup := c.batches[req.ID]; dup {
			return fmt.Errorf("read message: %w: batch call id %v is already in use", errInvalidRequest, req.ID.Raw())
		}
		b.index[req.ID] = len(b.responses)
		b.responses = append(b.responses, nil)
	}
	if b == nil {
		return nil
	}
	if c.batches == nil {
		c.batches = make(map[jsonrpc.ID]*batch)
	}
	for id := range b.index {
		c.batches[id] = b
	}
	return nil
}

// noteResponse looks at a response about to be written. It reports whether
// the response belongs to a batch and, if so, returns the batch's responses
// once this one completes it. It also takes the protocol version from the
// answer to initialize.
func (c *Conn) noteResponse(resp *jsonrpc.Response) (complete []*jsonrpc.Response, inBatch bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.initCalls[resp.ID]; ok {
		delete(c.initCalls, resp.ID)
		if c.version == "" && resp.Error == nil {
			var result struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(resp.Result, &result) == nil {
				c.version = result.ProtocolVersion
			}
		}
	}
	b, ok := c.batches[resp.ID]
	if !ok {
		return nil, false
	}
	delete(c.batches, resp.ID)
	i := b.index[resp.ID]
	delete(b.index, resp.ID)
	b.responses[i] = resp
	if len(b.index) > 0 {
		return nil, true
	}
	return b.responses, true
}

// Write writes msg and a line feed with one call to the writer.
func (c *Conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	defer c.trimWriteBuffer()
	c.wbuf.Reset()
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if responses, inBatch := c.noteResponse(resp); inBatch {
			if responses == nil {
				return nil // the batch goes out with its last response
			}
			if err := appendBatch(&c.wbuf, responses); err != nil {
				return fmt.Errorf("write batch: %w", err)
			}
			return c.flush()
		}
	}
	probe := c.discoverWait > 0 && isDiscoverCall(msg)
	if probe {
		// Before the write: the answer may come back at once.
		c.own.expectDiscover(msg.(*jsonrpc.Request).ID)
	}
	if err := appendMessage(&c.wbuf, msg); err != nil {
		return fmt.Errorf("write message: %w", err)
	}
	err := c.flush()
	if probe && err == nil {
		go c.watchDiscover(msg.(*jsonrpc.Request).ID)
	}
	return err
}

func (c *Conn) answerParseError(cause error) error {
	msg, _ := json.Marshal("parse error: " + cause.Error())
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	defer c.trimWriteBuffer()
	c.wbuf.Reset()
	fmt.Fprintf(&c.wbuf, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":%s}}`, msg)
	return c.flush()
}

func (c *Conn) flush() error {
	c.wbuf.WriteByte('\n')
	_, err := c.w.Write(c.wbuf.Bytes())
	return err
}

func (c *Conn) trimWriteBuffer() {
	if c.wbuf.Cap() > retainedWriteSize {
		c.wbuf = bytes.Buffer{}
	}
}

// appendBatch appends responses as a JSON array the way go-sdk writes a
// batch's responses: encoding/json's defaults, HTML escaping included.
func appendBatch(buf *bytes.Buffer, responses []*jsonrpc.Response) error {
	raws := make([]json.RawMessage, len(responses))
	for i, resp := range responses {
		var one bytes.Buffer
		if err := appendMessage(&one, resp); err != nil {
			return err
		}
		raws[i] = one.Bytes()
	}
	data, err := json.Marshal(raws)
	if err != nil {
		return err
	}
	buf.Write(data)
	return nil
}

// Close stops reading, closes the writer and the reader (or, for a
// command, ends the process; see CommandTransport) and returns the error of
// doing so. Later calls return the same error.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		// done first: a Read waiting for input returns io.EOF at once,
		// not whatever error closing the reader makes it fail with.
		close(c.done)
		c.closeErr = c.closer()
	})
	return c.closeErr
}

// SessionID returns "": a stdio connection has no session id.
func (c *Conn) SessionID() string { return "" }

var _ mcp.Connection = (*Conn)(nil)
