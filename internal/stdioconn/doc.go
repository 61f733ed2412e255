// Package stdioconn is an MCP stdio transport for go-sdk that reads, frames
// and decodes messages cheaply, and otherwise behaves as go-sdk's own.
//
// go-sdk's stdio transports decode every message through a new streaming
// JSON decoder with a 32 KiB buffer, twice or more per message; most of a
// tool call's memory and much of its time go there. A Conn reads into one
// buffer it reuses, parses each message in place once, with the same parser
// and options as go-sdk (so the same input gives the same message or an
// error), and writes each message with one Write from a reused buffer.
//
// Two things go beyond go-sdk's: a client's Conn answers a server/discover
// request (MCP 2026-07-28's first) that the server leaves unanswered, so
// that the client falls back to initialize instead of waiting for its
// deadline (see CommandTransport.DiscoverTimeout); and [Conn.Call] sends a
// request of the transport's own on the connection, whose answer the
// session reading the Conn never sees (a task-augmented tools/call, whose
// fields go-sdk's types lack, say).
//
// It is built on go-sdk's public API only: mcp.Transport, mcp.Connection and
// the jsonrpc package's message types.
//
// A client starting a server:
//
//	cmd := exec.Command("server", "--stdio")
//	t := &stdioconn.CommandTransport{Command: cmd}
//	session, err := mcp.NewClient(impl, nil).Connect(ctx, t, nil)
//
// A server on its own standard input and output:
//
//	t := &stdioconn.Transport{Reader: os.Stdin, Writer: os.Stdout}
//	err := server.Run(ctx, t)
package stdioconn
