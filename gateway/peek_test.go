package gateway

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPeekAgainReadsTheBodyOnce checks that the layers peeking at one
// request share one read of its body, and that whoever reads the body
// after them reads all of it, once.
func TestPeekAgainReadsTheBodyOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body     string
		limit    int64
		complete bool
	}{
		{`{"method":"tools/call"}`, 64, true},
		{`{"method":"tools/call"}`, -1, true},
		{`{"method":"tools/call"}`, 4, false},
		{``, 4, true},
	} {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(tc.body))
		first, complete := peek(r, tc.limit)
		if complete != tc.complete {
			t.Errorf("%q limit %d: complete %v, want %v", tc.body, tc.limit, complete, tc.complete)
		}
		second, complete2 := peek(r, tc.limit)
		if string(second) != string(first) || complete2 != complete {
			t.Errorf("%q limit %d: peeked again %q %v, want %q %v", tc.body, tc.limit, second, complete2, first, complete)
		}
		if len(first) > 0 && &second[0] != &first[0] {
			t.Errorf("%q limit %d: peeking again read the body again", tc.body, tc.limit)
		}
		all, err := io.ReadAll(r.Body)
		if err != nil || string(all) != tc.body {
			t.Errorf("%q limit %d: body read after the peeks %q, %v", tc.body, tc.limit, all, err)
		}
	}
}

// TestPeekAfterAPartialReadReadsAgain checks that a peek does not answer
// from what an earlier peek read once something has read part of it.
func TestPeekAfterAPartialReadReadsAgain(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(`{"id":1}`))
	if body, _ := peek(r, -1); string(body) != `{"id":1}` {
		t.Fatalf("peek: %q", body)
	}
	var b [3]byte
	if _, err := io.ReadFull(r.Body, b[:]); err != nil {
		t.Fatal(err)
	}
	if body, complete := peek(r, -1); string(body) != `d":1}` || !complete {
		t.Errorf("peek after reading 3 bytes: %q %v, want the rest", body, complete)
	}
	// A different limit reads again too.
	r = httptest.NewRequest("POST", "/mcp", strings.NewReader(`{"id":1}`))
	peek(r, 2)
	if body, complete := peek(r, -1); string(body) != `{"id":1}` || !complete {
		t.Errorf("peek with another limit: %q %v", body, complete)
	}
}

// TestPeekReusesAWholeUnreadBody: a second peek of a body the first read
// whole, and nothing read since, returns the same bytes without a copy;
// once the body has been read from, a peek reads what is left; and the
// handler behind still reads the whole body.
func TestPeekReusesAWholeUnreadBody(t *testing.T) {
	t.Parallel()
	const body = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	r := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
	first, complete := peek(r, 1<<10)
	if !complete || string(first) != body {
		t.Fatalf("first peek: %q, %v", first, complete)
	}
	second, complete := peek(r, 1<<10)
	if !complete || string(second) != body || &second[0] != &first[0] {
		t.Errorf("second peek: %q, %v, copied %v; want the first's bytes, not a copy", second, complete, &second[0] != &first[0])
	}
	if short, complete := peek(r, 5); complete || string(short) != body[:6] {
		t.Errorf("a peek under a smaller limit: %q, %v; want the first 6 bytes, incomplete", short, complete)
	}
	head := make([]byte, 3)
	if _, err := io.ReadFull(r.Body, head); err != nil {
		t.Fatal(err)
	}
	rest, complete := peek(r, 1<<10)
	if !complete || string(rest) != body[3:] {
		t.Errorf("a peek after 3 bytes were read: %q, %v; want the rest", rest, complete)
	}
	all, err := io.ReadAll(r.Body)
	if err != nil || !bytes.Equal(all, []byte(body[3:])) {
		t.Errorf("the body behind the peeks: %q, %v", all, err)
	}
}
