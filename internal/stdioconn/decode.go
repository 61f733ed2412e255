package stdioconn

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	segjson "github.com/segmentio/encoding/json"
)

// jsonrpcVersion is the only value the "jsonrpc" member may have
// (JSON-RPC 2.0, section 4).
const jsonrpcVersion = "2.0"

// maxDepth is how deeply objects and arrays may nest in one message: the
// same bound go-sdk puts on every JSON value it decodes.
const maxDepth = 1000

// parseFlags are the options go-sdk decodes messages with: member names
// match struct tags exactly, so "ID" or "Method" are unknown members.
const parseFlags = segjson.DontMatchCaseInsensitiveStructFields

var (
	// errTooDeep is returned, wrapped, for a value nested more than
	// maxDepth levels deep.
	errTooDeep = fmt.Errorf("json nested deeper than %d levels", maxDepth)

	// errInvalidRequest is returned for a message that is neither a request
	// nor a response with an id. It has the code of JSON-RPC's "Invalid
	// Request", so errors.Is matches it against go-sdk's own sentinel for
	// that code (jsonrpc.Error compares codes).
	errInvalidRequest error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}

	// errEmptyBatch is returned for an empty array or a null, which
	// go-sdk reads as an empty batch (JSON-RPC 2.0, section 6: "an Array
	// with at least one value").
	errEmptyBatch = errors.New("empty batch")
)

// Decode decodes one JSON-RPC message: a *jsonrpc.Request (a call, or a
// notification when it has no id) or a *jsonrpc.Response.
//
// It gives the same message, or an error in the same cases, as
// jsonrpc.DecodeMessage: member names are case-sensitive, unknown members
// are ignored, an "id" of null or absent makes a notification, a numeric id
// becomes an integer id as jsonrpc.MakeID makes it, a "method" member makes a
// request even when its value is "" or null, and bytes after the first value
// are ignored. It parses data in place instead of through a streaming
// decoder, which is where it saves its time and memory.
func Decode(data []byte) (jsonrpc.Message, error) {
	var w wireMessage
	return w.decode(data, false)
}

// wireMessage is the decoding form of every JSON-RPC message. A connection
// reuses one, so decoding allocates only what the message keeps.
type wireMessage struct {
	Version string          `json:"jsonrpc"`
	ID      any             `json:"id,omitempty"`
	Method  methodMember    `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// decode fills w from data and builds the message. depthChecked says that
// the caller has already verified the nesting bound over data.
func (w *wireMessage) decode(data []byte, depthChecked bool) (jsonrpc.Message, error) {
	// Zero first: the decoder would otherwise reuse the byte slices and
	// pointers of the previous message, which that message still owns.
	*w = wireMessage{}
	if err := unmarshal(data, w, depthChecked); err != nil {
		return nil, fmt.Errorf("decode message: %w", err)
	}
	if w.Version != jsonrpcVersion {
		return nil, fmt.Errorf("decode message: jsonrpc version %q, want %q", w.Version, jsonrpcVersion)
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if w.Method.present {
		method, err := w.Method.decode()
		if err != nil {
			return nil, fmt.Errorf("decode message: method: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		// Only a non-nil pointer goes into the interface: a typed nil would
		// make a failed response of a successful one.
		resp.Error = w.Error
	}
	return resp, nil
}

// decodeBatch decodes data, an array of messages, the way go-sdk's
// transports read a JSON-RPC batch (JSON-RPC 2.0, section 6): it must hold
// at least one message and every one must decode.
func decodeBatch(data []byte, depthChecked bool) ([]jsonrpc.Message, error) {
	var raws []json.RawMessage
	if err := unmarshal(data, &raws, depthChecked); err != nil {
		return nil, fmt.Errorf("decode batch: %w", err)
	}
	if len(raws) == 0 {
		return nil, errEmptyBatch
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	var w wireMessage
	for _, raw := range raws {
		// An element nests less deeply than the array around it.
		msg, err := w.decode(raw, true)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// unmarshal decodes the first JSON value of data into v, ignoring what
// follows it, with the nesting bound and the validation of go-sdk's decoder:
// the value must be well-formed as a whole, even in members v has no field
// for.
func unmarshal(data []byte, v any, depthChecked bool) error {
	if !depthChecked && tooDeep(data) {
		return errTooDeep
	}
	rest, err := segjson.Parse(data, v, parseFlags)
	if err != nil {
		return err
	}
	// Parse returns the bytes after the value with leading spaces removed;
	// spaces around the value do not change its validity.
	if !segjson.Valid(data[:len(data)-len(rest)]) {
		return fmt.Errorf("invalid json value")
	}
	return nil
}

// tooDeep reports whether objects and arrays in data nest deeper than
// maxDepth. Like go-sdk's guard, it counts brackets outside strings over all
// of data, trailing bytes included, and a closing bracket never takes the
// count below zero.
func tooDeep(data []byte) bool {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			// Skip the string; a backslash escapes the byte after it.
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > maxDepth {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// methodMember is the "method" member of a message. Its presence, not its
// value, tells a request from a response, so it records both.
type methodMember struct {
	present bool
	name    string
	// raw is the member's JSON when it is not a plain string: escapes,
	// non-ASCII text, null or a value of another type. decode handles it.
	raw []byte
}

// UnmarshalJSON implements json.Unmarshaler; the decoder calls it for any
// value of the member, null included.
func (m *methodMember) UnmarshalJSON(b []byte) error {
	m.present = true
	if s, ok := plainString(b); ok {
		m.name = s
		return nil
	}
	m.raw = append([]byte(nil), b...)
	return nil
}

// decode returns the method name.
func (m *methodMember) decode() (string, error) {
	if m.raw == nil {
		return m.name, nil
	}
	var name string
	if err := unmarshal(m.raw, &name, false); err != nil {
		return "", err
	}
	return name, nil
}

// plainString returns the text of b, a JSON string, when it needs no
// decoding: printable ASCII without escapes.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	inner := b[1 : len(b)-1]
	for _, c := range inner {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(inner), true
}

// DecodeBody decodes an HTTP request's body as go-sdk's Streamable HTTP
// transport reads it: an array (or null) is a batch of at least one
// message, anything else one message. Leading white space is skipped; the
// nesting bound and the validation are Decode's.
func DecodeBody(data []byte) (msgs []jsonrpc.Message, isBatch bool, err error) {
	i := 0
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	if i < len(data) && (data[i] == '[' || data[i] == 'n') {
		msgs, err = decodeBatch(data, false)
		return msgs, true, err
	}
	msg, err := Decode(data)
	if err != nil {
		return nil, false, err
	}
	return []jsonrpc.Message{msg}, false, nil
}

// Unmarshal decodes data into v as go-sdk decodes a message's params:
// member names matched exactly, the nesting bound checked, the value
// validated whole. It reads data in place, without go-sdk's streaming
// decoder and its buffer.
func Unmarshal(data []byte, v any) error { return unmarshal(data, v, false) }

// UnmarshalDecoded decodes data, a value of a message that [Decode] or
// [DecodeBody] returned (its params, say), into v as [Unmarshal] does,
// without checking again what that decode checked of the whole message:
// the nesting bound and that the bytes are valid JSON. A value from
// anywhere else goes to Unmarshal.
func UnmarshalDecoded(data []byte, v any) error {
	_, err := segjson.Parse(data, v, parseFlags)
	return err
}

// UnmarshalKnown decodes data, one JSON value and nothing after it but
// white space, into v as [Unmarshal] does, and fails on an object member
// v's struct has no field for: for a caller that decodes the shape of a
// value it expects and leaves any other to go-sdk.
func UnmarshalKnown(data []byte, v any) error {
	if tooDeep(data) {
		return errTooDeep
	}
	rest, err := segjson.Parse(data, v, parseFlags|segjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("invalid character %q after the value", rest[0])
	}
	if !segjson.Valid(data) {
		return fmt.Errorf("invalid json value")
	}
	return nil
}
