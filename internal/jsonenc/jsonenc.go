// Package jsonenc encodes JSON as toolwire's wire and records carry it:
// compact, with <, > and & left as they are (encoding/json's Marshal
// escapes them), and without the newline json.Encoder ends a value with.
// Arguments, results and audit text keep their bytes through it: what was
// validated is what is sent, and what is recorded is what was said.
package jsonenc

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes v compactly without escaping HTML.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes()[:b.Len()-1], nil // Encode ends the value with a newline
}
