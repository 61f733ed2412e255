package mcpclient

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallResultsDecodeAsGoSDKDecodesThem: a tools/call result decoded by
// toolwire (stdiocall.go) is, in all that toolwire reads of it, the
// result go-sdk's session would have made of the same answer, for the plain text results it decodes itself and
// for every other shape a server may send, which it leaves to go-sdk.
func TestCallResultsDecodeAsGoSDKDecodesThem(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"<b>\u2028</b>"}],"isError":true}`,
		`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1.5,"s":["a"]},"_meta":{"k":"v"}}`,
		`{"content":[{"type":"text","text":"done"}],"resultType":"complete"}`,
		`{"content":[]}`,
		`{"content":[{"type":"text","text":""}]}`,
		`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":"t","annotations":{"priority":1}}]}`,
		`{"content":[{"type":"text","Text":"case"}]}`,
		`{"content":[{"type":"text"}]}`,
		`{"Content":[{"type":"text","text":"case"}]}`,
		`{"content":[{"type":"text","text":"a"}],"IsError":true}`,
		`{"content":[{"type":"text","text":"a"}],"isError":false,"extra":1}`,
		`{"content":[{"type":"text","text":"a","text":"b"}]}`,
		`{"content":[{"type":"TEXT","text":"a"}]}`,
		`{"content":[{"type":"text","text":"a"}],"resultType":"input_required","inputRequests":{}}`,
		`{"content":[{"type":"text","text":"a"}],"resultType":"something_new"}`,
		`{"content":null}`, `{"content":[null]}`, `{"content":[1]}`, `{"content":{}}`,
		// Members twice (the last counts, for go-sdk too), and nulls.
		`{"content":[{"type":"text","text":"a"}],"content":[{"type":"text","text":"b"}]}`,
		`{"isError":true,"isError":false,"content":[]}`,
		`{"resultType":"input_required","resultType":"complete","content":[]}`,
		`{"content":[],"_meta":{"a":1},"_meta":{"b":2}}`,
		`{"content":[{"type":"text","text":null}]}`, `{"content":[{"text":null,"type":"text"}]}`,
		`{"content":[],"_meta":null}`, `{"content":[],"structuredContent":null}`, `{"content":[],"isError":null}`,
		`{"structuredContent":[1,2]}`, `{}`, `null`, `[]`, `"x"`, `{"content":[{"type":"text","text":"a"}]} trailing`,
		// Text that is not valid UTF-8, a lone surrogate, a NUL, a
		// number past float64's precision.
		"{\"content\":[{\"type\":\"text\",\"text\":\"a\xff\xfeb\"}]}",
		`{"content":[{"type":"text","text":"\ud800x"}]}`, `{"content":[{"type":"text","text":"a\u0000b"}]}`,
		`{"content":[],"structuredContent":{"n":12345678901234567890}}`,
		// Nested as deep as go-sdk allows, and one deeper (it refuses
		// that), in structuredContent and in _meta; brackets in a string
		// do not count.
		`{"content":[],"structuredContent":` + strings.Repeat(`[`, 999) + strings.Repeat(`]`, 999) + `}`,
		`{"content":[],"structuredContent":` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `}`,
		`{"content":[],"_meta":` + strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000) + `}`,
		`{"content":[{"type":"text","text":"` + strings.Repeat(`[{\"`, 1200) + `"}]}`,
	} {
		theirs, theirErr := goSDKDecode(raw)
		ours, ourErr := decodeCallResult(json.RawMessage(raw))
		if (theirErr != nil) != (ourErr != nil) {
			t.Errorf("%s: decoded with error %v, go-sdk's %v", raw, ourErr, theirErr)
			continue
		}
		if theirErr != nil {
			continue
		}
		// What the rest of toolwire reads of a result: the converted
		// result, its _meta and its input requests. (go-sdk also keeps a
		// 2026 result's resultType, unexported, which nothing reads.)
		a, _ := json.Marshal([]any{convertResult(ours), ours.Meta, ours.InputRequests, ours.RequestState})
		b, _ := json.Marshal([]any{convertResult(theirs), theirs.Meta, theirs.InputRequests, theirs.RequestState})
		if string(a) != string(b) {
			t.Errorf("%s:\ndecoded as %s\ngo-sdk's    %s", raw, a, b)
		}
	}
}

// goSDKDecode decodes raw as go-sdk's session decodes a tools/call result.
func goSDKDecode(raw string) (*mcp.CallToolResult, error) {
	var r mcp.CallToolResult
	err := json.Unmarshal([]byte(raw), &r)
	return &r, err
}

// TestTextResultDecodeIsSmall: the plain text result of a call is decoded
// without the 32 KiB buffer each of go-sdk's decodes takes (two of them
// for a call's answer).
func TestTextResultDecodeIsSmall(t *testing.T) {
	// Not parallel: it reads the process's allocation counter.
	raw := json.RawMessage(`{"content":[{"type":"text","text":"echo: hello"}]}`)
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := decodeCallResult(raw); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 8<<10 {
		t.Errorf("decoding a text result allocates %d bytes; want well under go-sdk's 32 KiB buffer", per)
	}
}

// BenchmarkDecodeTextResult: what decoding a call's plain text answer
// costs the upstream leg.
func BenchmarkDecodeTextResult(b *testing.B) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"echo: hello, world"}],"isError":false}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeCallResult(raw); err != nil {
			b.Fatal(err)
		}
	}
}
