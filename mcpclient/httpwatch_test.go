package mcpclient

import (
	"io"
	"strings"
	"testing"
)

// chunked reads from s n bytes at a time, as a network body might.
type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.s))
	copy(p, c.s[:k])
	c.s = c.s[k:]
	return k, nil
}

// The counter finds the reports of an event stream however its bytes are
// split across reads, parsing events as the SDK does, and stops at the
// response (the SDK reads no further events of a call's stream).
func TestReportCounterCountsTheReportsTheSDKPassesOn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		stream string
		want   uint64
	}{
		{"progress and log", "" +
			"id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\",\"progress\":1}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n", 2},
		{"CRLF line ends and a named message event", "" +
			"event: message\r\ndata: {\"method\":\"notifications/progress\",\"jsonrpc\":\"2.0\"}\r\n\r\n", 1},
		{"data split over lines", "" +
			"data: {\"jsonrpc\":\"2.0\",\n" +
			"data: \"method\":\"notifications/message\"}\n\n", 1},
		{"the last event ends with the stream", "" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}", 1},
		{"comments, retry and priming events are not reports", "" +
			": keep-alive\nretry: 100\nid: 0\ndata:\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n", 1},
		{"an event of another name is not passed on", "" +
			"event: ping\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n", 0},
		{"a request of the server's is not a report", "" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\"}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"notifications/message\"}\n\n", 0},
		{"other notifications are not reports", "" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n", 0},
		{"nothing after the response counts", "" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n", 1},
		{"a report larger than what is kept is judged by its beginning", "" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"" + strings.Repeat("x", maxScannedEvent+10) + "\"}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n", 2},
		{"not JSON", "data: notifications/progress\n\n", 0},
	}
	for _, tc := range cases {
		for _, n := range []int{1, 2, 3, 7, 64, 1 << 20} {
			if len(tc.stream) > 1<<16 && n < 64 {
				continue // a megabyte a byte at a time shows nothing more
			}
			a := &arrivals{}
			r := &reportCounter{body: io.NopCloser(&chunked{s: tc.stream, n: n}), a: a}
			got, err := io.ReadAll(r)
			if err != nil || string(got) != tc.stream {
				t.Fatalf("%s, %d bytes a read: the counter changed what was read (err %v)", tc.name, n, err)
			}
			if a.read != tc.want {
				t.Errorf("%s, %d bytes a read: counted %d reports, want %d", tc.name, n, a.read, tc.want)
			}
		}
	}
}

func TestScanMessage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		data string
		want message
	}{
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, message{method: "notifications/progress"}},
		{`{"params":{"method":"inner","id":1},"method":"notifications/message"}`, message{method: "notifications/message"}},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, message{method: "tools/call", hasID: true}},
		{`{"jsonrpc":"2.0","id":"a","result":{}}`, message{hasID: true}},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications/message"}`, message{method: "notifications/message"}},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"cut off`, message{method: "notifications/message"}},
		{`[{"jsonrpc":"2.0","method":"notifications/message"}]`, message{}},
		{`nonsense`, message{}},
		{``, message{}},
	}
	for _, tc := range cases {
		if got := scanMessage([]byte(tc.data)); got != tc.want {
			t.Errorf("scanMessage(%s) = %+v, want %+v", tc.data, got, tc.want)
		}
	}
}
