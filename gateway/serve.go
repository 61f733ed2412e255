package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/toolwire/toolwire/netpolicy"
)

// Exposure is how a gateway's HTTP listener is protected, for
// [CheckExposure].
type Exposure struct {
	// Authenticated says callers present bearer tokens (a verifier is
	// configured).
	Authenticated bool
	// TLS says the listener terminates TLS itself.
	TLS bool
	// AllowUnauthenticated accepts a non-loopback address without
	// authentication: anyone who reaches it may call every tool.
	AllowUnauthenticated bool
	// AllowPlainBearer accepts bearer tokens over plain HTTP on a
	// non-loopback address, for a TLS proxy in front.
	AllowPlainBearer bool
}

var (
	// ErrUnauthenticatedExposure is returned by [CheckExposure] for a
	// non-loopback address without caller authentication.
	ErrUnauthenticatedExposure = errors.New("without caller authentication only loopback addresses are served")
	// ErrPlainBearer is returned by [CheckExposure] for bearer tokens over
	// plain HTTP on a non-loopback address.
	ErrPlainBearer = errors.New("bearer tokens over plain HTTP on a non-loopback address would be sent in the clear")
)

// CheckExposure applies the gateway's two rules for the address addr
// (host:port) it is to listen on, fail-closed: an unauthenticated gateway
// lets anyone who reaches it call every tool, so it is served on loopback
// only; a bearer token sent in the clear can be read and replayed by
// anyone on the path, so an authenticated gateway on another address
// terminates TLS. Each rule yields to its Allow field.
func CheckExposure(addr string, e Exposure) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if netpolicy.IsLoopbackHost(host) {
		return nil
	}
	if !e.Authenticated && !e.AllowUnauthenticated {
		return ErrUnauthenticatedExposure
	}
	if e.Authenticated && !e.TLS && !e.AllowPlainBearer {
		return ErrPlainBearer
	}
	return nil
}

// ResourceURLFor is the URL clients use for /mcp on a listener bound at
// ln for the address addr as given: the address's host with the port
// actually bound (addr may say port 0). A wildcard or empty host names no
// address a client can use: then it is "", and the operator has to say.
func ResourceURLFor(addr string, ln net.Addr, tls bool) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return ""
	}
	_, port, err := net.SplitHostPort(ln.String())
	if err != nil {
		return ""
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/mcp"
}

// ServeOptions configures [Handler.Serve].
type ServeOptions struct {
	// Server bounds the listener's connections (see [ServerOptions]);
	// nil means [DefaultServerOptions].
	Server *ServerOptions
	// DrainGrace is how long calls in progress may run once ctx has
	// ended (see [Handler.Drain]).
	DrainGrace time.Duration
	// Draining, when set, is called when the drain begins.
	Draining func()
	// DrainDelay is how long, once ctx has ended, readiness answers 503
	// while everything is still served as before, before the drain
	// begins: the time a load balancer needs to see it and send new
	// requests elsewhere (its health checks' interval times the failures
	// it waits for). 0: the drain begins at once.
	DrainDelay time.Duration
	// Unready, when set, is called when readiness starts answering 503
	// for the delay (only with a DrainDelay).
	Unready func()
}

// DrainBound is how long a drain may take past its grace: for the
// cancelled calls to return (each upstream is sent notifications/cancelled
// and the call returns without waiting for its answer) and for the
// sessions to close.
const DrainBound = 2 * time.Second

// Serve serves h on ln (with TLS when opts.Server.TLS is set) until ctx
// ends, then (after opts.DrainDelay, while readiness answers 503 and
// everything else is served as before) drains: new sessions and calls are refused, the calls in
// progress get opts.DrainGrace, then are cancelled, and every session is
// closed ([Handler.Drain], bounded by DrainGrace plus [DrainBound]); the
// idle connections are closed within a second after. It returns how many
// calls the drain cancelled, or the listener's error if serving stopped
// by itself. The upstreams are the caller's to close afterwards.
func (h *Handler) Serve(ctx context.Context, ln net.Listener, opts *ServeOptions) (cancelled int, err error) {
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	hs := NewHTTPServer(h, o.Server)
	errc := make(chan error, 1)
	if hs.TLSConfig != nil {
		go func() { errc <- hs.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- hs.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return 0, fmt.Errorf("serving http: %w", err)
	case <-ctx.Done():
	}
	if o.DrainDelay > 0 {
		h.tracker.mu.Lock()
		h.tracker.unready = true
		h.tracker.mu.Unlock()
		if o.Unready != nil {
			o.Unready()
		}
		select {
		case <-time.After(o.DrainDelay):
		case err := <-errc:
			return 0, fmt.Errorf("serving http: %w", err)
		}
	}
	if o.Draining != nil {
		o.Draining()
	}
	dctx, cancel := context.WithTimeout(context.Background(), o.DrainGrace+DrainBound)
	defer cancel()
	cancelled = h.Drain(dctx, o.DrainGrace)
	// Every session is closed, so no event stream holds a connection;
	// what is left are idle keep-alive connections.
	sctx, cancelShutdown := context.WithTimeout(context.Background(), time.Second)
	defer cancelShutdown()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = hs.Close()
	}
	return cancelled, nil
}
