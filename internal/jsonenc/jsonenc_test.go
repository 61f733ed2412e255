package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// Marshal is encoding/json's Marshal but for the HTML escapes: the same
// bytes once <, > and & are written as they are, and nothing after the
// value.
func TestMarshalIsEncodingJSONWithoutTheHTMLEscapes(t *testing.T) {
	for _, v := range []any{
		"<a href=\"x\">&amp;</a>",
		map[string]any{"b": []any{1.5, nil, true}, "a": "\u2028\x01\xff"},
		struct {
			X string `json:"x,omitempty"`
			Y int    `json:"y"`
		}{Y: 3},
		json.RawMessage(`{"k": [1, 2]}`),
		"",
	} {
		got, err := Marshal(v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for esc, plain := range map[string]string{`\u003c`: "<", `\u003e`: ">", `\u0026`: "&"} {
			want = bytes.ReplaceAll(want, []byte(esc), []byte(plain))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%#v: %s, want %s", v, got, want)
		}
	}
}

// What encoding/json refuses is an error, with nothing returned.
func TestMarshalRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, v := range []any{math.NaN(), make(chan int), map[string]any{"f": func() {}}} {
		if got, err := Marshal(v); err == nil || got != nil {
			t.Errorf("%T: %q, %v; want an error and nothing", v, got, err)
		}
	}
}
