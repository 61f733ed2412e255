package stdioconn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// appendMessage appends msg to buf byte for byte as jsonrpc.EncodeMessage
// encodes it: members in the order jsonrpc, id, method, params, result,
// error; absent id, empty method and empty params, result and data left
// out; params, result and data compacted (and so validated); no HTML
// escaping. It writes nothing when it fails.
func appendMessage(buf *bytes.Buffer, msg jsonrpc.Message) error {
	mark := buf.Len()
	if err := appendFields(buf, msg); err != nil {
		buf.Truncate(mark)
		return err
	}
	return nil
}

func appendFields(buf *bytes.Buffer, msg jsonrpc.Message) error {
	buf.WriteString(`{"jsonrpc":"2.0"`)
	switch m := msg.(type) {
	case *jsonrpc.Request:
		appendID(buf, m.ID)
		if m.Method != "" {
			buf.WriteString(`,"method":`)
			appendString(buf, m.Method)
		}
		if err := appendRaw(buf, `,"params":`, m.Params); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	case *jsonrpc.Response:
		appendID(buf, m.ID)
		if err := appendRaw(buf, `,"result":`, m.Result); err != nil {
			return fmt.Errorf("result: %w", err)
		}
		if we := wireError(m.Error); we != nil {
			buf.WriteString(`,"error":{"code":`)
			buf.Write(strconv.AppendInt(buf.AvailableBuffer(), we.Code, 10))
			buf.WriteString(`,"message":`)
			appendString(buf, we.Message)
			if err := appendRaw(buf, `,"data":`, we.Data); err != nil {
				return fmt.Errorf("error data: %w", err)
			}
			buf.WriteByte('}')
		}
	default:
		return fmt.Errorf("message of type %T", msg)
	}
	buf.WriteByte('}')
	return nil
}

// appendID appends the id member unless id is absent (a notification).
func appendID(buf *bytes.Buffer, id jsonrpc.ID) {
	switch v := id.Raw().(type) {
	case int64:
		buf.WriteString(`,"id":`)
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), v, 10))
	case string:
		buf.WriteString(`,"id":`)
		appendString(buf, v)
	}
	// jsonrpc.ID holds nothing else: it is made by jsonrpc.MakeID,
	// jsonrpc2.Int64ID or jsonrpc2.StringID.
}

// appendRaw appends a member holding raw JSON, compacted, unless raw is
// empty.
func appendRaw(buf *bytes.Buffer, key string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	buf.WriteString(key)
	return json.Compact(buf, raw)
}

// appendString appends s as a JSON string, escaped as encoding/json does
// with HTML escaping off.
func appendString(buf *bytes.Buffer, s string) {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	// Control characters, invalid UTF-8, U+2028 and U+2029 have escapes
	// of their own; leave them to encoding/json.
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode ends the value with a newline
}

// wireError returns err as it goes on the wire, as go-sdk converts it: a
// *jsonrpc.Error as it is; any other error with its text as message and the
// code of the first *jsonrpc.Error it wraps, or 0.
func wireError(err error) *jsonrpc.Error {
	if err == nil {
		return nil
	}
	if we, ok := err.(*jsonrpc.Error); ok {
		return we
	}
	we := &jsonrpc.Error{Message: err.Error()}
	var wrapped *jsonrpc.Error
	if errors.As(err, &wrapped) {
		we.Code = wrapped.Code
	}
	return we
}

// AppendMessage appends msg to buf as jsonrpc.EncodeMessage encodes it
// (see appendMessage), for a transport of toolwire's own other than stdio.
func AppendMessage(buf *bytes.Buffer, msg jsonrpc.Message) error { return appendMessage(buf, msg) }
