package stdioconn

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// streamCorpus holds byte streams as a peer might write them: framing,
// blank space, batches and malformed input. A Conn must read the same
// messages from each as go-sdk's transport, and fail where it fails.
var streamCorpus = []struct{ name, in string }{
	{"one per line", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n"},
	{"no final line feed", `{"jsonrpc":"2.0","id":1,"method":"a"}`},
	{"CRLF", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\r\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\r\n"},
	{"CR alone separates", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\r{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n"},
	{"blank lines", "\n\n  \n{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\n\t\n{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n\n"},
	{"indented line", "   {\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n"},
	{"message across lines", "{\"jsonrpc\":\"2.0\",\n \"method\":\"a\",\n \"params\":{\n  \"x\":1}}\n"},
	{"space after message", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"} \n"},
	{"tab after message", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\t\n"},
	{"two on a line", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}{\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n"},
	{"two on a line with space", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"} {\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n"},
	{"garbage after message", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}x\n"},
	{"braces in strings", "{\"jsonrpc\":\"2.0\",\"method\":\"a}\",\"params\":[\"]\\\"}{\"]}\n"},
	{"good then malformed", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\":}\n{\"jsonrpc\":\"2.0\",\"method\":\"c\"}\n"},
	{"good then truncated", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\""},
	{"good then invalid version", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"1.0\",\"method\":\"b\"}\n"},
	{"unbalanced closer", "{\"jsonrpc\":\"2.0\",\"method\":\"a\"]\n"},
	{"stray closer", "}\n{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n"},
	{"number", "42\n"},
	{"number then message", "42 {\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n"},
	{"string", "\"hello\"\n"},
	{"literal", "true\n"},
	{"null", "null\n"},
	{"bare word", "hello\n"},
	{"response without id", "{\"jsonrpc\":\"2.0\",\"result\":{}}\n"},
	{"id true", "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"a\"}\n"},
	{"control character", "{\"jsonrpc\":\"2.0\",\"method\":\"a\tb\"}\n"},
	{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"method\":\"a\xc3\x28\"}\n"},
	{"deep params", "{\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":" + nested(1000) + "}\n"},
	{"empty batch", "[]\n"},
	{"batch", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}]\n{\"jsonrpc\":\"2.0\",\"method\":\"c\"}\n"},
	{"batch with a notification", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"method\":\"b\"}]\n"},
	{"batch of responses", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"error\":{\"code\":1,\"message\":\"m\"}}]\n"},
	{"batch with a bad message", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},{\"jsonrpc\":\"2.0\"}]\n"},
	{"batch with a number", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},3]\n"},
	{"batch with duplicate ids", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"b\"}]\n"},
	{"batch ids reused across batches", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}]\n[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"b\"}]\n"},
	{"nested batch", "[[{\"jsonrpc\":\"2.0\",\"method\":\"a\"}]]\n"},
}

// transcript reads conn until it fails and returns what it read: each
// message as jsonrpc.EncodeMessage gives it (with the id's Go type, which
// the wire form hides), then "EOF" or "error".
func transcript(t *testing.T, conn mcp.Connection) []string {
	t.Helper()
	var out []string
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		msg, err := conn.Read(ctx)
		cancel()
		switch {
		case errors.Is(err, io.EOF):
			return append(out, "EOF")
		case errors.Is(err, context.DeadlineExceeded):
			t.Fatal("Read did not return")
		case err != nil:
			return append(out, "error")
		}
		out = append(out, describe(msg))
	}
	t.Fatal("more than 100 messages")
	return nil
}

// readBoth reads in with go-sdk's transport and with a Conn.
func readBoth(t *testing.T, in string) (stock, ours []string) {
	t.Helper()
	read := func(tr mcp.Transport) []string {
		conn, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return transcript(t, conn)
	}
	stock = read(&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(in)), Writer: discardCloser{}})
	ours = read(&Transport{Reader: io.NopCloser(strings.NewReader(in)), Writer: discardCloser{}})
	return stock, ours
}

// knownDivergence reports whether go-sdk's transcript ends where a Conn
// deliberately differs: go-sdk waits for answers to a batch's
// notifications and so takes two notifications in a batch for a duplicate
// id (see Conn.addBatch).
func knownDivergence(in string, stock []string) bool {
	if len(stock) == 0 || stock[len(stock)-1] != "error" {
		return false
	}
	conn, _ := (&mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(in)), Writer: discardCloser{}}).Connect(context.Background())
	defer conn.Close()
	for {
		_, err := conn.Read(context.Background())
		if err != nil {
			return strings.Contains(err.Error(), "duplicate message ID {<nil>}") ||
				strings.Contains(err.Error(), "previously seen request <nil>")
		}
	}
}

func TestStreamParity(t *testing.T) {
	for _, tc := range streamCorpus {
		t.Run(tc.name, func(t *testing.T) {
			stock, ours := readBoth(t, tc.in)
			if !slices.Equal(stock, ours) {
				t.Errorf("read %q:\n got  %q\n want %q (go-sdk)", tc.in, ours, stock)
			}
		})
	}
}

func FuzzStreamParity(f *testing.F) {
	for _, tc := range streamCorpus {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// go-sdk reads 512 bytes at first, and checks what follows a
		// message only if it has already read it: beyond that, where the
		// reads end decides, which a Conn cannot match byte for byte.
		if len(in) > 500 {
			t.Skip()
		}
		stock, ours := readBoth(t, string(in))
		if slices.Equal(stock, ours) || knownDivergence(string(in), stock) {
			return
		}
		t.Errorf("read %q:\n got  %q\n want %q (go-sdk)", in, ours, stock)
	})
}

// TestBatchWithNotifications pins the deliberate difference from go-sdk:
// a batch's notifications are not waited for, so the answers to its calls
// go out, and two notifications in one batch are not a duplicate id.
func TestBatchWithNotifications(t *testing.T) {
	in := `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n1"},{"jsonrpc":"2.0","method":"n2"},{"jsonrpc":"2.0","id":2,"method":"b"}]` + "\n"
	var out strings.Builder
	conn, err := (&Transport{Reader: io.NopCloser(strings.NewReader(in)), Writer: nopCloser{&out}}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := transcript(t, conn)
	if len(got) != 5 || got[4] != "EOF" {
		t.Fatalf("read %q", got)
	}
	ctx := context.Background()
	one, _ := jsonrpc.MakeID(float64(1))
	two, _ := jsonrpc.MakeID(float64(2))
	if err := conn.Write(ctx, &jsonrpc.Response{ID: two, Result: []byte(`"b"`)}); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("wrote %q before the batch was answered", out.String())
	}
	if err := conn.Write(ctx, &jsonrpc.Response{ID: one, Result: []byte(`"<a>"`)}); err != nil {
		t.Fatal(err)
	}
	// In the order of the calls, escaped as go-sdk writes a batch.
	want := `[{"jsonrpc":"2.0","id":1,"result":"\u003ca\u003e"},{"jsonrpc":"2.0","id":2,"result":"b"}]` + "\n"
	if out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}

// TestBatchRefusedAfterInitialize checks that a server connection refuses
// batches once the session has negotiated a version without them, as
// go-sdk's does, and accepts them before.
func TestBatchRefusedAfterInitialize(t *testing.T) {
	for _, tc := range []struct {
		version string
		refused bool
	}{
		{"2025-03-26", false},
		{"2025-06-18", true},
		{"2025-11-25", true},
	} {
		t.Run(tc.version, func(t *testing.T) {
			pr, pw := io.Pipe()
			conn, err := (&Transport{Reader: pr, Writer: discardCloser{}}).Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			go pw.Write([]byte(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{}}` + "\n"))
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			result := []byte(`{"protocolVersion":"` + tc.version + `","capabilities":{}}`)
			if err := conn.Write(ctx, &jsonrpc.Response{ID: msg.(*jsonrpc.Request).ID, Result: result}); err != nil {
				t.Fatal(err)
			}
			go pw.Write([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n"))
			_, err = conn.Read(ctx)
			if refused := err != nil; refused != tc.refused {
				t.Errorf("batch after initialize with %s: error %v, want refused: %v", tc.version, err, tc.refused)
			}
		})
	}
}

// discardCloser is a writer that drops everything.
type discardCloser struct{}

func (discardCloser) Write(p []byte) (int, error) { return len(p), nil }
func (discardCloser) Close() error                { return nil }

// nopCloser adds a Close that does nothing to a writer.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// TestMalformedFailsAtOnce checks that a malformed message that never
// closes its brackets (a log line on standard output, say) fails Read as
// soon as its bad byte arrives, as go-sdk's transport fails, rather than
// leaving Read waiting for more input.
func TestMalformedFailsAtOnce(t *testing.T) {
	for _, in := range []string{
		"{level: info, msg: starting\n",
		"{\"msg\":\"unterminated\n",
		"[INFO starting up\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":'x'\n",
	} {
		for _, tr := range []struct {
			name string
			new  func(io.ReadCloser) mcp.Transport
		}{
			{"go-sdk", func(r io.ReadCloser) mcp.Transport { return &mcp.IOTransport{Reader: r, Writer: discardCloser{}} }},
			{"ours", func(r io.ReadCloser) mcp.Transport { return &Transport{Reader: r, Writer: discardCloser{}} }},
		} {
			pr, pw := io.Pipe()
			go pw.Write([]byte(in)) // and never more, nor a close
			conn, err := tr.new(pr).Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = conn.Read(ctx)
			cancel()
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: read %q: %v, want a read error", tr.name, in, err)
			}
			conn.Close()
			pw.Close()
		}
	}
}
