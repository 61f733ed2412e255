// Command server is an MCP server that provides every fixture the official
// MCP conformance suite (npm @modelcontextprotocol/conformance) expects from a
// server under test: the test_* tools, the test:// resources and the test_*
// prompts, plus completion, logging and resource subscriptions.
//
// It serves stdio by default, which is how toolwire runs it as an upstream.
// With -http it serves Streamable HTTP on a loopback address at path /mcp:
//
//	server                                # stdio
//	server -http 127.0.0.1:3010           # stateful Streamable HTTP
//	server -http 127.0.0.1:3010 -stateless
//	server -legacy                        # protocol revisions before 2026-07-28 only
//
// scripts/conformance.sh runs the suite against such an endpoint.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPath is where the Streamable HTTP endpoint is mounted.
const mcpPath = "/mcp"

func main() {
	httpAddr := flag.String("http", "", "serve Streamable HTTP at this loopback `host:port` (path "+mcpPath+") instead of stdio")
	stateless := flag.Bool("stateless", false, "with -http: stateless Streamable HTTP (no sessions, so no sampling or elicitation)")
	legacy := flag.Bool("legacy", false, "serve only the protocol revisions before 2026-07-28, as servers written before it do")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	log.SetFlags(0)
	log.SetPrefix("conformance-server: ")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var versions []string
	if *legacy {
		versions = legacyVersions
	}
	server := newServerFor(versions)
	go notifyWatchedResource(ctx, server, 3*time.Second)

	if *httpAddr == "" {
		if *stateless {
			log.Fatal("-stateless needs -http")
		}
		if err := server.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			log.Fatal(err)
		}
		return
	}
	if err := serveHTTP(ctx, *httpAddr, newHandler(server, *stateless)); err != nil {
		log.Fatal(err)
	}
}

// legacyVersions are the protocol revisions before 2026-07-28, which -legacy
// limits the server to.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// newServer returns a server with every conformance fixture registered,
// speaking every revision go-sdk does.
func newServer() *mcp.Server { return newServerFor(nil) }

// newServerFor is newServer speaking the protocol revisions versions (nil:
// every one go-sdk speaks).
func newServerFor(versions []string) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{
		Name:    "toolwire-conformance-fixtures",
		Version: "1.0.0",
	}, &mcp.ServerOptions{
		CompletionHandler:         complete,
		SubscribeHandler:          subscribe,
		UnsubscribeHandler:        unsubscribe,
		SupportedProtocolVersions: versions,
	})
	addTools(server)
	addResources(server)
	addPrompts(server)
	return server
}

// newHandler serves server over Streamable HTTP at mcpPath. go-sdk's
// handler rejects requests that reach a loopback address with a
// non-loopback Host header (DNS rebinding protection).
func newHandler(server *mcp.Server, stateless bool) http.Handler {
	opts := &mcp.StreamableHTTPOptions{
		Stateless:      stateless,
		SessionTimeout: 10 * time.Minute, // forget clients that vanish without DELETE
	}
	if !stateless {
		// test_reconnection closes its response stream mid-call: a client
		// that reconnects with the last event's id gets the result from
		// here. Without a store the result would be lost.
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)
	mux := http.NewServeMux()
	mux.Handle(mcpPath, h)
	return mux
}

// serveHTTP listens on addr, which must be a loopback address, and serves h
// until ctx is done.
func serveHTTP(ctx context.Context, addr string, h http.Handler) error {
	if err := checkLoopback(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// Scripts read this line to learn the port when addr ends in :0.
	log.Printf("listening on http://%s%s", ln.Addr(), mcpPath)

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdownCtx) //nolint:errcheck // best effort on exit
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkLoopback accepts host:port only when host is localhost or a loopback IP.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-http %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-http %q: only loopback addresses (127.0.0.1, [::1], localhost) are allowed", addr)
}
