// Package childhttp is how the bench's HTTP children serve: on a port of
// their own on 127.0.0.1, announced on stdout, until their stdin ends. It
// is a package of its own, importing only the standard library, so that
// a child binary built apart (benchproxy, whose memory the bench measures)
// links nothing of the bench's.
package childhttp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// Serve serves h on 127.0.0.1:0, prints "LISTEN http://ADDR/mcp" for the
// bench to read, and serves until stdin ends (the bench closes it to stop
// the child), then shuts down within 2 s.
func Serve(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("LISTEN http://%s/mcp\n", ln.Addr())
	stdinDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinDone)
	}()
	select {
	case err := <-errc:
		return err
	case <-stdinDone:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
