package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/toolwire/toolwire/internal/demo"
)

// shutdownTimeout bounds how long a graceful shutdown waits for open requests
// and streams before the remaining connections are closed forcibly.
const shutdownTimeout = 5 * time.Second

// listenTCP resolves addr and listens on it, refusing addresses that are not
// loopback unless anyHost is set. Listening on the resolved address, rather
// than on addr again, means a host name cannot resolve differently between
// the check and the bind.
func listenTCP(addr string, anyHost bool) (net.Listener, error) {
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("resolving -http address %q: %w", addr, err)
	}
	if !anyHost && (tcpAddr.IP == nil || !tcpAddr.IP.IsLoopback()) {
		return nil, fmt.Errorf("-http address %q is not a loopback address; pass -insecure-any-host to allow it", addr)
	}
	ln, err := net.ListenTCP("tcp", tcpAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on -http address %q: %w", addr, err)
	}
	return ln, nil
}

// serveHTTP serves the demo server at path /mcp on addr until ctx is
// cancelled, then shuts down gracefully within shutdownTimeout.
func serveHTTP(ctx context.Context, addr string, anyHost bool, opts *demo.Options, stderr io.Writer) error {
	ln, err := listenTCP(addr, anyHost)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", demo.HTTPHandler(opts))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	// The line is printed only after binding, so that with port 0 it names
	// the real port and a parent process can wait for it before connecting.
	fmt.Fprintf(stderr, "listening on http://%s/mcp\n", ln.Addr())

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving http: %w", err)
	case <-ctx.Done():
	}
	opts.Logger.Info("shutting down", "reason", context.Cause(ctx))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Long-lived event streams never go idle, so a timeout here is
		// expected while clients are still connected.
		opts.Logger.Warn("graceful shutdown incomplete; closing connections", "error", err)
		if err := srv.Close(); err != nil {
			return fmt.Errorf("closing http server: %w", err)
		}
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving http: %w", err)
	}
	return nil
}
