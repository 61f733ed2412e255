// Command demoserver runs the toolwire demo MCP server, either over standard
// input and output (the default) or over Streamable HTTP with -http.
//
// Usage:
//
//	demoserver                        # serve MCP over stdio
//	demoserver -sdk-stdio             # the same with go-sdk's own stdio transport
//	demoserver -http 127.0.0.1:8080   # serve MCP at http://127.0.0.1:8080/mcp
//
// The HTTP address must be a loopback address unless -insecure-any-host is
// given, because the demo server has no authentication.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/internal/version"
)

// errUsage marks errors in the command line, which run has already
// reported together with the usage text.
var errUsage = errors.New("usage error")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "demoserver:", err)
		os.Exit(1)
	}
}

// run parses args and serves until ctx is cancelled or serving fails. Logs
// and the listening address go to stderr, because stdout carries the
// protocol in stdio mode.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("demoserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve Streamable HTTP at `addr` (path /mcp) instead of stdio")
	anyHost := fs.Bool("insecure-any-host", false, "allow -http to listen on a non-loopback address")
	sdkStdio := fs.Bool("sdk-stdio", false, "serve stdio with go-sdk's mcp.StdioTransport instead of toolwire's connection (for benchmarks)")
	notesFile := fs.String("notes", "", "keep notes in this JSON `file` between runs (default $DEMO_NOTES_FILE; none: in memory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	opts := &demo.Options{Logger: logger, NotesFile: firstNonEmpty(*notesFile, os.Getenv("DEMO_NOTES_FILE")), SDKStdio: *sdkStdio}
	if *sdkStdio && *httpAddr != "" {
		fmt.Fprintln(stderr, "-sdk-stdio goes with stdio, not -http")
		fs.Usage()
		return fmt.Errorf("%w: -sdk-stdio with -http", errUsage)
	}
	if *httpAddr == "" {
		logger.Info("serving MCP over stdio", "server", demo.Name, "version", version.String())
		err := demo.ServeStdio(ctx, opts)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Stopping on a signal is the normal way to end the server.
			return nil
		}
		return err
	}
	return serveHTTP(ctx, *httpAddr, *anyHost, opts, stderr)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
