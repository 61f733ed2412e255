package stdioconn

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCallStdio measures a tools/call round trip between a go-sdk
// client and server over stdio connections: go-sdk's transports, ours, and
// one of each. The pipe cases run both ends in this process over OS pipes,
// so B/op and allocs/op count client and server; the process cases start
// the server as a child (go-sdk's StdioTransport for the stock case, ours
// for ours), so they count the client only.
//
// The tool is registered with a raw handler, as the gateway registers its
// tools, so that the transports make most of the difference.
func BenchmarkCallStdio(b *testing.B) {
	for _, tc := range []struct {
		name                   string
		clientOurs, serverOurs bool
	}{
		{"pipe/stock", false, false},
		{"pipe/ours", true, true},
		{"pipe/ours-client", true, false},
		{"pipe/ours-server", false, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ct, st := osPipeTransports(b, tc.clientOurs, tc.serverOurs)
			ss, err := newServer(nil).Connect(context.Background(), st, nil)
			if err != nil {
				b.Fatal(err)
			}
			benchmarkCalls(b, ct)
			if err := ss.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("process/stock", func(b *testing.B) {
		benchmarkCalls(b, &mcp.CommandTransport{Command: childCommand(b, "stock-server")})
	})
	b.Run("process/ours", func(b *testing.B) {
		benchmarkCalls(b, &CommandTransport{Command: childCommand(b, "our-server")})
	})
}

// osPipeTransports returns the ends of a connection over two OS pipes,
// as a parent and a child talk over standard input and output.
func osPipeTransports(b *testing.B, clientOurs, serverOurs bool) (client, server mcp.Transport) {
	c2sR, c2sW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	s2cR, s2cW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	end := func(ours bool, r, w *os.File) mcp.Transport {
		if ours {
			return &Transport{Reader: r, Writer: w}
		}
		return &mcp.IOTransport{Reader: r, Writer: w}
	}
	return end(clientOurs, s2cR, c2sW), end(serverOurs, c2sR, s2cW)
}

// benchmarkCalls connects a client over ct and times calls of the raw echo
// tool with 100 bytes of text, then closes the session.
func benchmarkCalls(b *testing.B, ct mcp.Transport) {
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "rawecho", Arguments: echoArgs{Text: strings.Repeat("x", 100)}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatalf("call: %v, %+v", err, res)
		}
	}
	b.StopTimer()
	if err := cs.Close(); err != nil {
		b.Fatal(err)
	}
}

var (
	benchRequest = []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"rawecho","arguments":{"text":"` +
		strings.Repeat("x", 100) + `"},"_meta":{"progressToken":"p-17"}}}`)
	benchResult = []byte(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"` +
		strings.Repeat("x", 100) + `"}],"structuredContent":{"items":[` + strings.Repeat(`{"k":"v","n":1},`, 200) + `{}]}}}`)
)

// BenchmarkDecode compares Decode with jsonrpc.DecodeMessage.
func BenchmarkDecode(b *testing.B) {
	for _, msg := range []struct {
		name string
		data []byte
	}{{"request", benchRequest}, {"result", benchResult}} {
		b.Run(msg.name+"/go-sdk", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msg.data)))
			for b.Loop() {
				if _, err := jsonrpc.DecodeMessage(msg.data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(msg.name+"/ours", func(b *testing.B) {
			var w wireMessage
			b.ReportAllocs()
			b.SetBytes(int64(len(msg.data)))
			for b.Loop() {
				if _, err := w.decode(msg.data, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode compares appendMessage with jsonrpc.EncodeMessage.
func BenchmarkEncode(b *testing.B) {
	msg, err := Decode(benchRequest)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("go-sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonrpc.EncodeMessage(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ours", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := appendMessage(&buf, msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
