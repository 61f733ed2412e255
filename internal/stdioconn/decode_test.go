package stdioconn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	segjson "github.com/segmentio/encoding/json"
)

// decodeCorpus is the parity corpus: messages of every kind, the edge
// cases of ids, params and members, and malformed input. Decode must agree
// with jsonrpc.DecodeMessage on each.
var decodeCorpus = []struct {
	name, in string
	wantErr  bool
}{
	// Requests and notifications.
	{"call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, false},
	{"call string id", `{"jsonrpc":"2.0","id":"abc-1","method":"tools/list"}`, false},
	{"call empty string id", `{"jsonrpc":"2.0","id":"","method":"ping"}`, false},
	{"call id zero", `{"jsonrpc":"2.0","id":0,"method":"ping"}`, false},
	{"call negative id", `{"jsonrpc":"2.0","id":-42,"method":"ping"}`, false},
	{"call fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, false},
	{"call exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, false},
	{"call id beyond 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, false},
	{"call id beyond int64", `{"jsonrpc":"2.0","id":1e300,"method":"ping"}`, false},
	{"call id below int64", `{"jsonrpc":"2.0","id":-1e300,"method":"ping"}`, false},
	{"call id beyond float64", `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, true},
	{"call id true", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, true},
	{"call id object", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, true},
	{"call id array", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, true},
	{"id null is a notification", `{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`, false},
	{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"total":3}}`, false},
	{"params absent", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, false},
	{"params null", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":null}`, false},
	{"params array", `{"jsonrpc":"2.0","id":2,"method":"m","params":[1,"two",null]}`, false},
	{"params string", `{"jsonrpc":"2.0","id":2,"method":"m","params":"s"}`, false},
	{"params with blank space", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\",\"params\":{ \"a\" :\t[ 1 , 2 ] }}", false},
	{"method empty", `{"jsonrpc":"2.0","id":3,"method":""}`, false},
	{"method null", `{"jsonrpc":"2.0","id":3,"method":null}`, false},
	{"method number", `{"jsonrpc":"2.0","id":3,"method":7}`, true},
	{"method object", `{"jsonrpc":"2.0","id":3,"method":{"a":1}}`, true},
	{"method escaped", `{"jsonrpc":"2.0","id":3,"method":"tools\/c\u0061ll"}`, false},
	{"method non-ASCII", `{"jsonrpc":"2.0","id":3,"method":"outils/appeler-é"}`, false},
	{"method invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"a\xffb\"}", false},
	{"method with DEL", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"a\x7fb\"}", false},
	{"HTML and separators", "{\"jsonrpc\":\"2.0\",\"id\":\"<&>\",\"method\":\"a<b>&\u2028\",\"params\":{\"s\":\"<x>\u2029\"}}", false},
	{"unknown members", `{"jsonrpc":"2.0","id":4,"method":"m","extra":{"deep":[1,2,{"x":null}]},"_meta":1}`, false},
	{"members in other order", `{"params":{},"method":"m","id":5,"jsonrpc":"2.0"}`, false},
	{"duplicate member", `{"jsonrpc":"2.0","id":1,"id":2,"method":"a","method":"b"}`, false},
	{"members differ in case", `{"jsonrpc":"2.0","ID":1,"Method":"m","Params":{}}`, true},
	{"version in upper case member", `{"JSONRPC":"2.0","id":1,"method":"m"}`, true},
	{"member with a long s", `{"jsonrpc":"2.0","id":1,"method":"m","param\u017f":{}}`, false},
	{"Kelvin sign in member", `{"jsonrpc":"2.0","id":1,"method":"m","\u212a":{}}`, false},
	{"blank space around", " \t\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"} \r\n", false},
	{"trailing bytes after the value", `{"jsonrpc":"2.0","method":"m"}garbage`, false},
	{"second value after the first", `{"jsonrpc":"2.0","method":"m"}{"jsonrpc":"2.0","method":"n"}`, false},

	// Responses.
	{"result", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`, false},
	{"result string id", `{"jsonrpc":"2.0","id":"x","result":{}}`, false},
	{"result null", `{"jsonrpc":"2.0","id":1,"result":null}`, false},
	{"no result and no error", `{"jsonrpc":"2.0","id":1}`, false},
	{"error with data", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid params","data":{"field":"x","why":["a","b"]}}}`, false},
	{"error without data", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found"}}`, false},
	{"error data null", `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":null}}`, false},
	{"error null", `{"jsonrpc":"2.0","id":1,"error":null}`, false},
	{"error and result", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"both"}}`, false},
	{"error code fractional", `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`, true},
	{"error code string", `{"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"m"}}`, true},
	{"error code leading zero", `{"jsonrpc":"2.0","id":1,"error":{"code":01,"message":"m"}}`, true},
	{"error message number", `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":2}}`, true},
	{"error not an object", `{"jsonrpc":"2.0","id":1,"error":"failed"}`, true},
	{"error members differ in case", `{"jsonrpc":"2.0","id":1,"error":{"Code":5,"Message":"m"}}`, false},
	{"response without id", `{"jsonrpc":"2.0","result":{}}`, true},
	{"response id null", `{"jsonrpc":"2.0","id":null,"result":{}}`, true},
	{"response id true", `{"jsonrpc":"2.0","id":true,"result":{}}`, true},

	// Malformed or not a message.
	{"version missing", `{"id":1,"method":"m"}`, true},
	{"version 1.0", `{"jsonrpc":"1.0","id":1,"method":"m"}`, true},
	{"version number", `{"jsonrpc":2.0,"id":1,"method":"m"}`, true},
	{"version null", `{"jsonrpc":null,"id":1,"method":"m"}`, true},
	{"empty object", `{}`, true},
	{"empty input", ``, true},
	{"blank input", " \n ", true},
	{"number", `42`, true},
	{"string", `"jsonrpc"`, true},
	{"null", `null`, true},
	{"true", `true`, true},
	{"array", `[{"jsonrpc":"2.0","method":"m"}]`, true},
	{"truncated", `{"jsonrpc":"2.0","id":1,"method":"m"`, true},
	{"truncated string", `{"jsonrpc":"2.0","id":1,"method":"m`, true},
	{"bad escape", `{"jsonrpc":"2.0","id":1,"method":"\x"}`, true},
	{"control character in string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\nb\"}", true},
	{"missing colon", `{"jsonrpc" "2.0"}`, true},
	{"trailing comma", `{"jsonrpc":"2.0","method":"m",}`, true},
	{"single quotes", `{'jsonrpc':'2.0'}`, true},
	{"malformed unknown member", `{"jsonrpc":"2.0","method":"m","x":[1,}`, true},
	{"malformed params", `{"jsonrpc":"2.0","method":"m","params":{"a":tru}}`, true},
	{"bad number in unknown member", `{"jsonrpc":"2.0","method":"m","x":01}`, true},
	{"bad number in params", `{"jsonrpc":"2.0","method":"m","params":[-]}`, true},
	{"nesting at the bound", `{"jsonrpc":"2.0","method":"m","params":` + nested(999) + `}`, false},
	{"nesting past the bound", `{"jsonrpc":"2.0","method":"m","params":` + nested(1000) + `}`, true},
	{"brackets in strings do not nest", `{"jsonrpc":"2.0","method":"m","params":"` + strings.Repeat("[", 2000) + `"}`, false},
	{"escaped quote in string", `{"jsonrpc":"2.0","method":"m","params":["\"[[[", "\\"]}`, false},
	{"deep trailing bytes", `{"jsonrpc":"2.0","method":"m"}` + strings.Repeat("[", 1001), true},
	{"large params", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"text":"` + strings.Repeat("abcdefgh", 12800) + `"}}`, false},
	{"large result", `{"jsonrpc":"2.0","id":9,"result":{"items":[` + strings.Repeat(`{"k":"v","n":12.5e-3},`, 3000) + `{}]}}`, false},
}

// nested returns n nested arrays around a number.
func nested(n int) string {
	return strings.Repeat("[", n) + "1" + strings.Repeat("]", n)
}

func TestDecodeParity(t *testing.T) {
	for _, tc := range decodeCorpus {
		t.Run(tc.name, func(t *testing.T) {
			_, wantErr := jsonrpc.DecodeMessage([]byte(tc.in))
			if (wantErr != nil) != tc.wantErr {
				t.Fatalf("corpus is wrong: jsonrpc.DecodeMessage error = %v, corpus says error: %v", wantErr, tc.wantErr)
			}
			checkDecodeParity(t, []byte(tc.in))
		})
	}
}

// checkDecodeParity checks that Decode and jsonrpc.DecodeMessage agree on
// data: both fail, with the same JSON-RPC error code if go-sdk's has one,
// or both return equal messages.
func checkDecodeParity(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := jsonrpc.DecodeMessage(bytes.Clone(data))
	got, gotErr := Decode(bytes.Clone(data))
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("Decode(%q):\n got  %v, %v\n want %v, %v", data, describe(got), gotErr, describe(want), wantErr)
	}
	if wantErr != nil {
		for _, code := range []int64{jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest} {
			target := &jsonrpc.Error{Code: code}
			if errors.Is(gotErr, target) != errors.Is(wantErr, target) {
				t.Fatalf("Decode(%q): error %q, go-sdk's %q: they differ in being code %d", data, gotErr, wantErr, code)
			}
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q):\n got  %s\n want %s", data, describe(got), describe(want))
	}
	gotWire, gotErr := jsonrpc.EncodeMessage(got)
	wantWire, wantErr := jsonrpc.EncodeMessage(want)
	if !bytes.Equal(gotWire, wantWire) || (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("Decode(%q) re-encodes to %s (%v), want %s (%v)", data, gotWire, gotErr, wantWire, wantErr)
	}
}

// describe shows a message with its Go types, which the wire form hides
// (an integer id and a string id of the same digits, a nil and an empty
// params).
func describe(msg jsonrpc.Message) string {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		return fmt.Sprintf("request{id %T %#v, method %q, params %q}", m.ID.Raw(), m.ID.Raw(), m.Method, m.Params)
	case *jsonrpc.Response:
		return fmt.Sprintf("response{id %T %#v, result %q, error %#v}", m.ID.Raw(), m.ID.Raw(), m.Result, m.Error)
	}
	return fmt.Sprintf("%#v", msg)
}

func FuzzDecodeParity(f *testing.F) {
	for _, tc := range decodeCorpus {
		// Large seeds make every mutation slow and minimization stall.
		if len(tc.in) <= 4096 {
			f.Add([]byte(tc.in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeParity(t, data)
	})
}

// TestDecodeReusesNothing checks that a message decoded by a connection's
// reused wireMessage does not change when the next one is decoded into it.
func TestDecodeReusesNothing(t *testing.T) {
	var w wireMessage
	first, err := w.decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.decode([]byte(`{"jsonrpc":"2.0","id":2,"method":"b","params":{"y":2}}`), false); err != nil {
		t.Fatal(err)
	}
	req := first.(*jsonrpc.Request)
	if req.Method != "a" || string(req.Params) != `{"x":1}` || req.ID.Raw() != int64(1) {
		t.Errorf("first message changed to %s", describe(first))
	}
}

// encodeCorpus holds messages to encode, with the edge cases of ids,
// strings and raw JSON.
func encodeCorpus() []jsonrpc.Message {
	id := func(v any) jsonrpc.ID {
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			panic(err)
		}
		return id
	}
	return []jsonrpc.Message{
		&jsonrpc.Request{ID: id(float64(1)), Method: "tools/call", Params: []byte(`{"name":"echo"}`)},
		&jsonrpc.Request{Method: "notifications/initialized"},
		&jsonrpc.Request{ID: id("s\"<&>\u2028"), Method: "m\x00\t\xff<é>", Params: []byte(" [ 1 , \"<>\" ] ")},
		&jsonrpc.Request{ID: id(float64(0)), Method: "", Params: []byte(`null`)},
		&jsonrpc.Request{ID: id(float64(-7)), Method: "m", Params: []byte(`{"a":`)},
		&jsonrpc.Request{ID: id(float64(1)), Method: "m", Params: []byte{}},
		&jsonrpc.Response{ID: id(float64(1)), Result: []byte(`{"content":[]}`)},
		&jsonrpc.Response{ID: id("r")},
		&jsonrpc.Response{ID: id(float64(2)), Error: &jsonrpc.Error{Code: -32602, Message: "bad <params>", Data: []byte(` {"x": 1} `)}},
		&jsonrpc.Response{ID: id(float64(2)), Error: &jsonrpc.Error{Code: 3, Message: "m", Data: []byte(`{bad`)}},
		&jsonrpc.Response{ID: id(float64(3)), Error: errors.New("plain failure")},
		&jsonrpc.Response{ID: id(float64(4)), Error: fmt.Errorf("wrapped: %w", &jsonrpc.Error{Code: -32601, Message: "inner"})},
		&jsonrpc.Response{ID: id(float64(5)), Result: []byte(`{}`), Error: (*jsonrpc.Error)(nil)},
		&jsonrpc.Response{ID: id(float64(6)), Result: []byte(`[1,2`)},
	}
}

func TestEncodeParity(t *testing.T) {
	for i, msg := range encodeCorpus() {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkEncodeParity(t, msg) })
	}
}

// checkEncodeParity checks that appendMessage writes what
// jsonrpc.EncodeMessage does, or fails when it does (leaving the buffer
// as it was).
func checkEncodeParity(t *testing.T, msg jsonrpc.Message) {
	t.Helper()
	want, wantErr := jsonrpc.EncodeMessage(msg)
	var buf bytes.Buffer
	buf.WriteString("prefix")
	gotErr := appendMessage(&buf, msg)
	got := bytes.TrimPrefix(buf.Bytes(), []byte("prefix"))
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("appendMessage(%s) error = %v, jsonrpc.EncodeMessage error = %v", describe(msg), gotErr, wantErr)
	}
	if wantErr != nil {
		if len(got) != 0 {
			t.Fatalf("appendMessage(%s) failed but wrote %q", describe(msg), got)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendMessage(%s):\n got  %s\n want %s", describe(msg), got, want)
	}
}

func FuzzEncodeParity(f *testing.F) {
	f.Add(uint8(0), uint8(1), int64(1), "s", "tools/call", []byte(`{"a":1}`), int64(0), "", []byte(nil))
	f.Add(uint8(1), uint8(2), int64(-5), "x\u2028<", "m\xff", []byte(` [ "<&>" ] `), int64(-32602), "msg\n", []byte(`{"d":null}`))
	f.Add(uint8(2), uint8(0), int64(0), "", "", []byte(`{`), int64(7), "e", []byte(`{bad`))
	f.Fuzz(func(t *testing.T, kind, idKind uint8, idNum int64, idStr, text string, raw []byte, code int64, message string, data []byte) {
		var id jsonrpc.ID
		switch idKind % 3 {
		case 1:
			id, _ = jsonrpc.MakeID(float64(idNum))
		case 2:
			id, _ = jsonrpc.MakeID(idStr)
		}
		var msg jsonrpc.Message
		switch kind % 3 {
		case 0:
			msg = &jsonrpc.Request{ID: id, Method: text, Params: raw}
		case 1:
			msg = &jsonrpc.Response{ID: id, Result: raw}
		case 2:
			msg = &jsonrpc.Response{ID: id, Result: raw, Error: &jsonrpc.Error{Code: code, Message: message, Data: data}}
		}
		checkEncodeParity(t, msg)
	})
}

// FuzzValidAgreement checks what Conn relies on to validate each message
// once: encoding/json (with which go-sdk frames messages) and
// segmentio/encoding (with which it decodes them, and so does Decode) agree
// on which input is well-formed JSON.
func FuzzValidAgreement(f *testing.F) {
	for _, tc := range decodeCorpus {
		if len(tc.in) <= 4096 {
			f.Add([]byte(tc.in))
		}
	}
	for _, tc := range streamCorpus {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if std, seg := json.Valid(data), segjson.Valid(data); std != seg {
			t.Errorf("%q: encoding/json says valid: %v, segmentio/encoding: %v", data, std, seg)
		}
	})
}

// TestUnmarshalKnownRefusesWhatItDoesNotKnow: a member the struct has no
// field for, one named in another case, bytes after the value, invalid
// JSON inside a member and nesting past the bound all fail; the shape
// itself decodes.
func TestUnmarshalKnownRefusesWhatItDoesNotKnow(t *testing.T) {
	type shape struct {
		A string `json:"a"`
		B []any  `json:"b"`
	}
	var ok shape
	if err := UnmarshalKnown([]byte(` {"a":"x\u003c","b":[1,2]} `), &ok); err != nil || ok.A != "x<" || len(ok.B) != 2 {
		t.Fatalf("the shape itself: %+v, %v", ok, err)
	}
	for _, raw := range []string{
		`{"a":"x","c":1}`,
		`{"A":"x"}`,
		`{"a":"x"} {}`,
		`{"a":"x"}]`,
		`{"a":"x","b":[1,}`,
		`{"b":[` + strings.Repeat(`[`, maxDepth) + strings.Repeat(`]`, maxDepth) + `]}`,
	} {
		var s shape
		if err := UnmarshalKnown([]byte(raw), &s); err == nil {
			t.Errorf("%.60s: decoded as %+v, want an error", raw, s)
		}
	}
}

// TestUnmarshalDecodedIsUnmarshalForADecodedMessage: the params of a
// message Decode returned decode the same with and without the checks
// Decode made already.
func TestUnmarshalDecodedIsUnmarshalForADecodedMessage(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[1,2,{"y":null}]},"_meta":{"k":"\u003c\ud800"}}}`,
		`{"jsonrpc":"2.0","id":"s","method":"m","params":{"NAME":"case","name":"b","name":"c"}}`,
		`{"jsonrpc":"2.0","method":"n","params":[1,"two",3.5e300,true]}`,
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\",\"params\":{\"s\":\"a\xffb\"}}",
	} {
		msg, err := Decode([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		params := msg.(*jsonrpc.Request).Params
		var want, got any
		var wantS, gotS struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		}
		errWant, errGot := Unmarshal(params, &want), UnmarshalDecoded(params, &got)
		if (errWant != nil) != (errGot != nil) || !reflect.DeepEqual(want, got) {
			t.Errorf("%s: UnmarshalDecoded gave %v (%v), Unmarshal %v (%v)", line, got, errGot, want, errWant)
		}
		errWant, errGot = Unmarshal(params, &wantS), UnmarshalDecoded(params, &gotS)
		if (errWant != nil) != (errGot != nil) || !reflect.DeepEqual(wantS, gotS) {
			t.Errorf("%s: into a struct UnmarshalDecoded gave %+v (%v), Unmarshal %+v (%v)", line, gotS, errGot, wantS, errWant)
		}
	}
}
