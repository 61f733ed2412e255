package stdioconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect returns a Conn reading r and writing w.
func connect(t *testing.T, r io.Reader, w io.Writer, maxSize int) mcp.Connection {
	t.Helper()
	conn, err := (&Transport{Reader: io.NopCloser(r), Writer: nopCloser{w}, MaxMessageSize: maxSize}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestDefaultMaxMessageSizeIsGoSDKs(t *testing.T) {
	if DefaultMaxMessageSize != mcp.DefaultMaxLineLength {
		t.Errorf("DefaultMaxMessageSize = %d, go-sdk's default is %d", DefaultMaxMessageSize, mcp.DefaultMaxLineLength)
	}
}

func TestConnectNeedsBothStreams(t *testing.T) {
	for _, tr := range []*Transport{{Reader: io.NopCloser(strings.NewReader(""))}, {Writer: discardCloser{}}} {
		if _, err := tr.Connect(context.Background()); !errors.Is(err, ErrNoStream) {
			t.Errorf("Connect with Reader %v, Writer %v: error %v, want ErrNoStream", tr.Reader, tr.Writer, err)
		}
	}
}

func TestMaxMessageSize(t *testing.T) {
	small := `{"jsonrpc":"2.0","method":"a"}` // 30 bytes
	for _, tc := range []struct {
		name, in string
		limit    int
		wantMsgs int
		tooLarge bool
	}{
		{"at the limit", small + "\n", 30, 1, false},
		{"one byte over", small + "\n", 29, 0, true},
		{"blank space counts", "\n\n" + small + "\n", 31, 0, true},
		{"each message counted alone", small + "\n" + small + "\n" + small + "\n", 31, 3, false},
		{"second one too large", small + "\n" + `{"jsonrpc":"2.0","method":"` + strings.Repeat("x", 100) + `"}` + "\n", 64, 1, true},
		{"endless blank space", strings.Repeat(" \n", 100), 64, 0, true},
		{"unterminated", `{"jsonrpc":"2.0","method":"` + strings.Repeat("x", 100), 64, 0, true},
		{"no limit", `{"jsonrpc":"2.0","method":"` + strings.Repeat("x", 100_000) + `"}`, -1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := connect(t, strings.NewReader(tc.in), io.Discard, tc.limit)
			for i := range tc.wantMsgs {
				if _, err := conn.Read(context.Background()); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
			_, err := conn.Read(context.Background())
			if got := errors.Is(err, ErrMessageTooLarge); got != tc.tooLarge {
				t.Fatalf("after %d messages: error %v, want ErrMessageTooLarge: %v", tc.wantMsgs, err, tc.tooLarge)
			}
		})
	}
}

// TestReadInPieces feeds messages one byte per read, and one larger than
// the initial buffer, so that framing resumes across reads and the buffer
// moves and grows.
func TestReadInPieces(t *testing.T) {
	big := strings.Repeat("é\\\"{[", 3*initialBufferSize/7)
	var in strings.Builder
	var want []string
	for i, method := range []string{"a", big, "b", "c"} {
		line, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: mustID(float64(i)), Method: method, Params: []byte(`{"x":[1,{"y":"}"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteString("\r\n")
		want = append(want, string(line))
	}
	for name, r := range map[string]io.Reader{
		"one byte":    iotest.OneByteReader(strings.NewReader(in.String())),
		"half":        iotest.HalfReader(strings.NewReader(in.String())),
		"data+EOF":    iotest.DataErrReader(strings.NewReader(in.String())),
		"all at once": strings.NewReader(in.String()),
	} {
		t.Run(name, func(t *testing.T) {
			conn := connect(t, r, io.Discard, 0)
			for i, w := range want {
				msg, err := conn.Read(context.Background())
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				got, _ := jsonrpc.EncodeMessage(msg)
				if string(got) != w {
					t.Fatalf("message %d = %.80s…, want %.80s…", i, got, w)
				}
			}
			if _, err := conn.Read(context.Background()); err != io.EOF {
				t.Fatalf("after the messages: %v, want io.EOF", err)
			}
		})
	}
}

// TestBufferShrinks checks that a connection does not keep the memory of
// one large message.
func TestBufferShrinks(t *testing.T) {
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","method":"` + strings.Repeat("x", 4*retainedBufferSize) + `"}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"small"}` + "\n")
	f := newFramer(&in, -1)
	if _, _, err := f.next(); err != nil {
		t.Fatal(err)
	}
	if len(f.buf) <= retainedBufferSize {
		t.Fatalf("buffer of %d bytes after a message of %d", len(f.buf), 4*retainedBufferSize)
	}
	v, _, err := f.next()
	if err != nil || string(v) != `{"jsonrpc":"2.0","method":"small"}` {
		t.Fatalf("second message %q, %v", v, err)
	}
	if len(f.buf) != initialBufferSize {
		t.Errorf("buffer of %d bytes kept, want %d", len(f.buf), initialBufferSize)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	pr, _ := io.Pipe() // nothing is ever written
	conn := connect(t, pr, io.Discard, 0)
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		readErr <- err
	}()
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; err != io.EOF {
		t.Errorf("Read after Close: %v, want io.EOF", err)
	}
	if _, err := conn.Read(context.Background()); err != io.EOF {
		t.Errorf("second Read after Close: %v, want io.EOF", err)
	}
}

// blockingReader blocks in Read until released, like a terminal's standard
// input that closing does not interrupt.
type blockingReader struct{ release chan struct{} }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.release
	return 0, io.EOF
}

func TestCloseUnblocksReadOfUninterruptibleReader(t *testing.T) {
	r := blockingReader{make(chan struct{})}
	defer close(r.release)
	conn := connect(t, r, io.Discard, 0)
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		readErr <- err
	}()
	conn.Close()
	if err := <-readErr; err != io.EOF {
		t.Errorf("Read after Close: %v, want io.EOF", err)
	}
}

func TestReadContext(t *testing.T) {
	pr, _ := io.Pipe()
	conn := connect(t, pr, io.Discard, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := conn.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled context: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := conn.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Read until the deadline: %v", err)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "m"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Write with an expired context: %v", err)
	}
}

func TestReadErrorIsFinal(t *testing.T) {
	conn := connect(t, strings.NewReader("{bad}\n{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n"), io.Discard, 0)
	_, first := conn.Read(context.Background())
	_, second := conn.Read(context.Background())
	if first == nil || second != first {
		t.Errorf("errors %v, then %v; want the same error twice", first, second)
	}
}

// writeRecorder keeps every Write call's bytes.
type writeRecorder struct {
	mu     sync.Mutex
	writes [][]byte
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// TestConcurrentWrites writes from many goroutines and checks that every
// message went out whole, in one Write, ended by a line feed.
func TestConcurrentWrites(t *testing.T) {
	pr, _ := io.Pipe()
	var rec writeRecorder
	conn := connect(t, pr, &rec, 0)
	const writers, each = 8, 100
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				params := fmt.Sprintf(`{"writer":%d,"i":%d,"pad":%q}`, g, i, strings.Repeat("p", i*37))
				msg := &jsonrpc.Request{ID: mustID(fmt.Sprintf("%d-%d", g, i)), Method: "m", Params: []byte(params)}
				if err := conn.Write(context.Background(), msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(rec.writes) != writers*each {
		t.Fatalf("%d writes for %d messages", len(rec.writes), writers*each)
	}
	seen := map[string]bool{}
	for _, w := range rec.writes {
		line, ok := bytes.CutSuffix(w, []byte("\n"))
		if !ok || bytes.ContainsRune(line, '\n') {
			t.Fatalf("write %q is not one line", w)
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			t.Fatalf("write %q: %v", w, err)
		}
		seen[msg.(*jsonrpc.Request).ID.Raw().(string)] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct messages, want %d", len(seen), writers*each)
	}
}

func TestWriteMatchesGoSDK(t *testing.T) {
	for i, msg := range encodeCorpus() {
		var stock, ours bytes.Buffer
		stockConn, _ := (&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader("")), Writer: nopCloser{&stock}}).Connect(context.Background())
		stockErr := stockConn.Write(context.Background(), msg)
		stockConn.Close()
		oursErr := connect(t, strings.NewReader(""), &ours, 0).Write(context.Background(), msg)
		if (stockErr != nil) != (oursErr != nil) || stock.String() != ours.String() {
			t.Errorf("message %d: wrote %q (%v), go-sdk %q (%v)", i, ours.String(), oursErr, stock.String(), stockErr)
		}
	}
}

func TestWriteAfterClose(t *testing.T) {
	pr, pw := io.Pipe()
	conn, err := (&Transport{Reader: pr, Writer: pw}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "m"}); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// closeCounter counts Close calls and fails them.
type closeCounter struct {
	io.Reader
	mu sync.Mutex
	n  int
}

var errClose = errors.New("close failed")

func (c *closeCounter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return errClose
}

func TestCloseOnceConcurrently(t *testing.T) {
	r := &closeCounter{Reader: strings.NewReader("")}
	conn, err := (&Transport{Reader: r, Writer: discardCloser{}}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := conn.Close(); !errors.Is(err, errClose) {
				t.Errorf("Close: %v, want the reader's error", err)
			}
		})
	}
	wg.Wait()
	if r.n != 1 {
		t.Errorf("reader closed %d times", r.n)
	}
	if conn.SessionID() != "" {
		t.Errorf("SessionID() = %q", conn.SessionID())
	}
}

// TestWriteOneLinePerMessage reads what a Conn writes line by line, as a
// peer does: line feeds inside params and error messages must not split a
// message.
func TestWriteOneLinePerMessage(t *testing.T) {
	pr, pw := io.Pipe()
	conn, err := (&Transport{Reader: io.NopCloser(strings.NewReader("")), Writer: pw}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		conn.Write(context.Background(), &jsonrpc.Request{ID: mustID(float64(1)), Method: "a", Params: []byte("{\n\"x\" : 1\n}")})
		conn.Write(context.Background(), &jsonrpc.Response{ID: mustID(float64(1)), Error: errors.New("line\nbreak")})
		conn.Close()
	}()
	sc := bufio.NewScanner(pr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	want := []string{
		`{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":0,"message":"line\nbreak"}}`,
	}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", lines, want)
	}
}

func mustID(v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		panic(err)
	}
	return id
}
