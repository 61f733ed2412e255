package stdioconn

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxMessageSize is the largest message a connection reads unless
// told otherwise: go-sdk's default for its own stdio transports.
const DefaultMaxMessageSize = 16 << 20

// ErrMessageTooLarge is returned, wrapped, by Read when a message (with the
// blank space before it) is longer than the connection's maximum size. The
// connection reads nothing after it.
var ErrMessageTooLarge = errors.New("message too large")

// errTrailingData is returned by Read when a message is followed on its
// line by anything but the line's end. go-sdk's transports refuse this
// too.
var errTrailingData = errors.New("data after a message on its line")

// errNotMessage is returned by Read for a line that does not start with
// a JSON object or array, followed on its line by more (a log line a
// server wrote to stdout, say): it holds no message at all.
var errNotMessage = errors.New("a line that is not a JSON-RPC message")

// isLineError reports whether err spoils one line only, so that reading
// can go on at the next.
func isLineError(err error) bool {
	return errors.Is(err, errTrailingData) || errors.Is(err, errNotMessage)
}

const (
	// initialBufferSize is the read buffer a connection starts with, which
	// holds most messages whole.
	initialBufferSize = 16 << 10
	// retainedBufferSize is the largest read buffer kept once the message
	// that needed it has been read: a single large result must not pin its
	// memory for the life of the connection.
	retainedBufferSize = 1 << 20
)

// A framer splits a byte stream into JSON values, reading into a buffer it
// reuses.
//
// go-sdk's transports read a stream of JSON values separated by blank space,
// not strictly of lines: blank lines are skipped, a value may span lines,
// and a value must be followed by a line feed or a carriage return when
// more input is already at hand. The MCP stdio transport says messages are
// delimited by newlines and must not contain embedded ones; the framer is
// as lenient as go-sdk so that a server works with toolwire exactly when it
// works with go-sdk.
type framer struct {
	r     io.Reader
	limit int // bytes per message, blank space before it included; <= 0 for none

	buf        []byte
	start, end int   // buf[start:end] is read and not yet framed
	err        error // from r, returned once buf holds no more data
}

func newFramer(r io.Reader, limit int) *framer {
	return &framer{r: r, limit: limit}
}

// next returns the next value and the depth its objects and arrays nest to.
// The value is only valid until the next call. The error is io.EOF at a
// clean end of input.
//
// The framer only finds where a value ends, by its brackets and strings,
// or at the first byte no value may have (see scanner): whether it is
// well-formed JSON is for the caller to check.
func (f *framer) next() (value []byte, depth int, err error) {
	f.shrink()
	counted := 0 // bytes of this message so far, for the limit
	for {
		for f.start < f.end && isSpace(f.buf[f.start]) {
			f.start++
			counted++
		}
		if f.start < f.end {
			break
		}
		if f.limit > 0 && counted > f.limit {
			return nil, 0, f.tooLarge()
		}
		if err := f.fill(); err != nil {
			return nil, 0, err
		}
	}
	var s scanner
	scanned := 0 // bytes of the value scanned, from f.start
	for {
		n, done := s.scan(f.buf[f.start+scanned : f.end])
		scanned += n
		if done {
			break
		}
		if f.limit > 0 && counted+scanned > f.limit {
			return nil, 0, f.tooLarge()
		}
		if err := f.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, 0, err
		}
	}
	if f.limit > 0 && counted+scanned > f.limit {
		return nil, 0, f.tooLarge()
	}
	value = f.buf[f.start : f.start+scanned]
	f.start += scanned
	// Only what has already been read is checked, as go-sdk does: waiting
	// for the line's end would hold back a message that is complete.
	if f.start < f.end && f.buf[f.start] != '\n' && f.buf[f.start] != '\r' {
		if len(value) == 0 || (value[0] != '{' && value[0] != '[') {
			return nil, 0, errNotMessage
		}
		return nil, 0, errTrailingData
	}
	return value, s.maxDepth, nil
}

// skipLine drops the rest of the current line, through its line feed, so
// that framing starts again on the next line after a malformed one.
func (f *framer) skipLine() {
	for {
		if i := bytes.IndexByte(f.buf[f.start:f.end], '\n'); i >= 0 {
			f.start += i + 1
			return
		}
		f.start = f.end
		if f.fill() != nil {
			return
		}
	}
}

func (f *framer) tooLarge() error {
	return fmt.Errorf("read message: %w: more than %d bytes", ErrMessageTooLarge, f.limit)
}

// fill reads more input after f.end, making room first: it moves the
// unframed bytes to the front of the buffer, and grows the buffer when they
// fill it.
func (f *framer) fill() error {
	if f.start > 0 {
		n := copy(f.buf, f.buf[f.start:f.end])
		f.start, f.end = 0, n
	}
	if f.end == len(f.buf) {
		size := 2 * len(f.buf)
		if size == 0 {
			size = initialBufferSize
		}
		// A message within the limit fits in limit bytes, and what is
		// buffered here is part of one (see next).
		if f.limit > 0 {
			size = min(size, f.limit+initialBufferSize)
		}
		grown := make([]byte, size)
		copy(grown, f.buf[:f.end])
		f.buf = grown
	}
	if f.err != nil {
		return f.err
	}
	// An io.Reader may return no bytes and no error; give up after a few
	// such reads as bufio does.
	for range 100 {
		n, err := f.r.Read(f.buf[f.end:])
		f.end += n
		if err != nil {
			f.err = err
		}
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	f.err = io.ErrNoProgress
	return f.err
}

// shrink drops a buffer grown past retainedBufferSize once what is left in
// it fits a buffer of the initial size.
func (f *framer) shrink() {
	if len(f.buf) <= retainedBufferSize || f.end-f.start > initialBufferSize {
		return
	}
	small := make([]byte, initialBufferSize)
	f.end = copy(small, f.buf[f.start:f.end])
	f.start = 0
	f.buf = small
}

// isSpace reports whether c is blank space between JSON values.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// A scanner finds the end of one JSON value, fed in pieces. It tracks
// strings and brackets only; a value that does not start with a bracket or
// a quote (a number, a literal, or a stray byte) ends at the first blank or
// structural byte after it.
//
// It also ends a value at the first byte that cannot be part of one: a
// control character in a string, or outside strings a byte that no
// number, literal or delimiter has. Such a value is refused as soon as that
// byte arrives, as go-sdk refuses it, instead of waiting for brackets that
// may never close.
type scanner struct {
	started  bool
	scalar   bool
	inString bool
	escaped  bool
	depth    int
	maxDepth int
}

// scan consumes bytes from b and returns how many it consumed and whether
// the value ended with the last of them.
func (s *scanner) scan(b []byte) (int, bool) {
	i := 0
	if !s.started && len(b) > 0 {
		s.started = true
		switch b[0] {
		case '{', '[', '"':
		default:
			s.scalar = true
			// Take at least one byte, so that a stray delimiter is
			// framed (and then refused) rather than read forever.
			i = 1
		}
	}
	if s.scalar {
		for ; i < len(b); i++ {
			if isSpace(b[i]) || structural[b[i]] {
				return i, true
			}
		}
		return i, false
	}
	for i < len(b) {
		if s.inString {
			if s.escaped {
				s.escaped = false
				i++
				continue
			}
			// Most string bytes are neither a quote, a backslash nor a
			// control character.
			for i < len(b) && !stringSpecial[b[i]] {
				i++
			}
			if i == len(b) {
				break
			}
			switch b[i] {
			case '\\':
				s.escaped = true
			case '"':
				s.inString = false
				if s.depth == 0 {
					return i + 1, true
				}
			default: // a control character
				return i + 1, true
			}
			i++
			continue
		}
		for i < len(b) && !valueSpecial[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch b[i] {
		case '"':
			s.inString = true
		case '{', '[':
			s.depth++
			s.maxDepth = max(s.maxDepth, s.depth)
		case '}', ']':
			// The first byte was a bracket or a quote, so the count
			// reaches zero here before it could go below.
			s.depth--
			if s.depth == 0 {
				return i + 1, true
			}
		default: // a byte no JSON value has here
			return i + 1, true
		}
		i++
	}
	return len(b), false
}

var (
	// structural marks the bytes that end a number or literal.
	structural = byteSet(`{}[],:"`)
	// stringSpecial marks the bytes that matter inside a string: its end,
	// escapes, and the control characters a string may not hold.
	stringSpecial = union(byteSet(`"\`), byteRange(0, 0x1f))
	// valueSpecial marks the bytes that matter outside strings: brackets,
	// the start of a string, and every byte that is not blank space, a
	// comma, a colon, or part of a number or of true, false or null.
	valueSpecial = union(byteSet(`"{}[]`), complement(byteSet(" \t\r\n,:0123456789+-.eEtrufalsn")))
)

func byteSet(chars string) (set [256]bool) {
	for i := 0; i < len(chars); i++ {
		set[chars[i]] = true
	}
	return set
}

func byteRange(lo, hi byte) (set [256]bool) {
	for c := int(lo); c <= int(hi); c++ {
		set[c] = true
	}
	return set
}

func union(a, b [256]bool) (set [256]bool) {
	for i := range set {
		set[i] = a[i] || b[i]
	}
	return set
}

func complement(a [256]bool) (set [256]bool) {
	for i := range set {
		set[i] = !a[i]
	}
	return set
}
