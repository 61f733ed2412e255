// Package demo implements the small MCP server that toolwire's quick start
// and end-to-end tests talk to. It is built only on the official MCP Go SDK
// and exercises the parts of the protocol a client must handle: text,
// structured, image, audio and resource results, tool errors, progress
// notifications and cancellation.
package demo

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/stdioconn"
	"github.com/toolwire/toolwire/internal/version"
)

// Name identifies the demo server in the MCP handshake; its version is
// toolwire's (internal/version).
const Name = "toolwire-demo"

// Options configures a demo server. A nil *Options is valid and selects the
// defaults.
type Options struct {
	// Logger receives the server's diagnostic logs. If nil, nothing is
	// logged.
	Logger *slog.Logger
	// NotesFile, when set, keeps the notes in this JSON file between runs:
	// they are read at start and written after every change. A stdio
	// server starts anew for every client, so without it each
	// "toolwire call" would see an empty store.
	NotesFile string
	// SDKStdio makes ServeStdio use go-sdk's mcp.StdioTransport instead of
	// toolwire's connection, so that a benchmark can measure a stock
	// go-sdk server.
	SDKStdio bool
}

// logger returns the configured logger, or one that discards everything.
func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// sdkLogger returns the logger to hand to the SDK, which treats nil as
// "do not log".
func (o *Options) sdkLogger() *slog.Logger {
	if o == nil {
		return nil
	}
	return o.Logger
}

// NewServer returns a new demo server with all demo tools registered. Each
// call returns a server with its own, initially empty, notes and counters.
func NewServer(opts *Options) *mcp.Server {
	srv, _ := newServer(opts)
	return srv
}

// newServer is NewServer, also returning the server's state.
func newServer(opts *Options) (*mcp.Server, *state) {
	srv := mcp.NewServer(
		&mcp.Implementation{Name: Name, Version: version.String()},
		&mcp.ServerOptions{Logger: opts.sdkLogger()},
	)
	st := newState()
	if opts != nil && opts.NotesFile != "" {
		st.notesFile = opts.NotesFile
		if err := st.loadNotes(); err != nil {
			// A demo keeps going with no notes rather than refusing to start.
			opts.logger().Warn("notes not loaded; starting with none", "error", err)
		}
	}
	registerTools(srv, st, opts.logger())
	return srv, st
}

// ServeStdio runs a new demo server over standard input and output until the
// client disconnects or ctx is cancelled. It returns nil when the client
// disconnects and ctx.Err() when ctx is cancelled.
func ServeStdio(ctx context.Context, opts *Options) error {
	srv, st := newServer(opts)
	// Server.Run closes the session when ctx ends, which waits for in-flight
	// calls without cancelling them; a call parked in wait_for_cancel would
	// otherwise keep the process alive after SIGINT.
	stop := context.AfterFunc(ctx, st.stopAll)
	defer stop()
	if opts != nil && opts.SDKStdio {
		return srv.Run(ctx, &mcp.StdioTransport{})
	}
	// toolwire's own newline-JSON connection, as toolwire serve --stdio
	// uses: the benchmarks measure the demo server as a fast peer.
	return srv.Run(ctx, &stdioconn.Transport{Reader: os.Stdin, Writer: os.Stdout})
}

// sessionIDHeader is the Streamable HTTP header that names a session.
const sessionIDHeader = "Mcp-Session-Id"

// HTTPHandler returns an http.Handler serving one demo server over the
// Streamable HTTP transport. All sessions share that server, and therefore
// its notes and counters.
//
// Deleting a session cancels the tool calls still running in it, so that
// the deletion cannot wait forever on a call like wait_for_cancel.
func HTTPHandler(opts *Options) http.Handler {
	srv, st := newServer(opts)
	h := mcp.NewStreamableHTTPHandler(
		func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: opts.sdkLogger()},
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			if id := r.Header.Get(sessionIDHeader); id != "" {
				st.endSession(id)
			}
		}
		h.ServeHTTP(w, r)
	})
}
