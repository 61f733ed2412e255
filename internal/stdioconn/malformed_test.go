package stdioconn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// syncBuffer is a writer safe to read while the Conn writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func nopClose() error { return nil }

func TestMalformedLineGetsAParseErrorAndReadingGoesOn(t *testing.T) {
	in := "this is not json\n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"
	var out syncBuffer
	c := newConn(strings.NewReader(in), &out, nopClose, 0, true, 0)
	defer c.Close()
	msg, err := c.Read(context.Background())
	if err != nil {
		t.Fatalf("Read after a malformed line: %v", err)
	}
	if req, ok := msg.(*jsonrpc.Request); !ok || req.Method != "ping" {
		t.Errorf("read %#v, want the ping after the malformed line", msg)
	}
	got := out.String()
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: `) || !strings.HasSuffix(got, "}}\n") {
		t.Errorf("answer to the malformed line = %q", got)
	}
	// The line holds no message: the error does not speak of data after one.
	if !strings.Contains(got, "not a JSON-RPC message") || strings.Contains(got, "after a message") {
		t.Errorf("answer to a line with no message = %q", got)
	}
	if _, err := c.Read(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("Read at the end = %v, want io.EOF", err)
	}
}

func TestMalformedLineEndsAClientConn(t *testing.T) {
	var out syncBuffer
	c := newConn(strings.NewReader("this is not json\n"+`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), &out, nopClose, 0, false, 0)
	defer c.Close()
	if _, err := c.Read(context.Background()); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("Read = %v, want the decode error", err)
	}
	if out.String() != "" {
		t.Errorf("a client answered a malformed message: %q", out.String())
	}
}
