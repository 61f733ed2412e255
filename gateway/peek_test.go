package gateway

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

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
