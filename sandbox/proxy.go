package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/toolwire/toolwire/netpolicy"
)

// Proxy is an egress proxy on 127.0.0.1 for one confined server: HTTP
// CONNECT tunnels and plain http:// requests, each dialed through
// netpolicy's guard with the server's allowlist, so that a name is
// checked on the address it is reached at. A server started with
// NetworkProxy and the proxy's port can reach nothing else over TCP (see
// Policy); Env gives it the variables that point HTTP clients here.
type Proxy struct {
	ln      net.Listener
	srv     *http.Server
	dialer  *netpolicy.Dialer
	forward *http.Transport
	refused func(host string, err error)

	mu      sync.Mutex
	tunnels map[net.Conn]struct{} // hijacked connections, closed by Close
	closed  bool
}

// ProxyOptions configures a Proxy.
type ProxyOptions struct {
	// Allow lists the hosts that may be reached, as netpolicy's
	// DialerOptions.Allow does; empty refuses every one.
	Allow []string
	// Refused, when set, hears of every refused destination. It is
	// called from the proxy's goroutines.
	Refused func(host string, err error)
}

// NewProxy starts a proxy on a port of the system's choosing on
// 127.0.0.1. Close stops it.
func NewProxy(opts ProxyOptions) (*Proxy, error) {
	allow := opts.Allow
	if len(allow) == 0 {
		// netpolicy reads an empty allowlist as "no list"; here it
		// means nothing at all.
		allow = []string{"nothing.invalid"}
	}
	d, err := netpolicy.NewDialer(&netpolicy.DialerOptions{Allow: allow})
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	p := &Proxy{ln: ln, dialer: d, refused: opts.Refused, tunnels: map[net.Conn]struct{}{},
		forward: &http.Transport{DialContext: d.DialContext, Proxy: nil, ForceAttemptHTTP2: false, IdleConnTimeout: 30 * time.Second}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }() // ends when Close closes the listener
	return p, nil
}

// Port returns the proxy's TCP port on 127.0.0.1.
func (p *Proxy) Port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

// Env returns the environment variables that send a server's HTTP
// clients (curl, npm, Python's, Go's; Node's from version 24) through
// the proxy, with no exceptions.
func (p *Proxy) Env() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(int(p.Port()))
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u, "ALL_PROXY": u,
		"NO_PROXY": "", "no_proxy": "", "NODE_USE_ENV_PROXY": "1",
	}
}

// Close stops the proxy and ends its tunnels. It is safe to call more
// than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.forward.CloseIdleConnections()
	return err
}

// ServeHTTP tunnels a CONNECT and forwards a request for an absolute
// http:// URL; anything else is refused.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "this proxy forwards http:// URLs and CONNECT tunnels only", http.StatusBadRequest)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	resp, err := p.forward.RoundTrip(out)
	if err != nil {
		p.refuse(w, r.URL.Host, err)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// tunnel dials the CONNECT's destination through the guard and splices
// the two connections.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	upstream, err := p.dialer.DialContext(ctx, "tcp", r.Host)
	if err != nil {
		p.refuse(w, r.Host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	if !p.track(client, upstream) {
		return
	}
	defer p.untrack(client, upstream)
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// What the client sent after its CONNECT is in buf first.
		_, _ = io.Copy(upstream, buf)
		closeWrite(upstream)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, upstream)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
}

// track registers a tunnel's connections for Close; false (with both
// closed) when the proxy is closed already.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.tunnels, c)
	}
}

// refuse answers a destination the guard refused (or could not reach)
// with 403 and the reason.
func (p *Proxy) refuse(w http.ResponseWriter, host string, err error) {
	status := http.StatusBadGateway
	var ee *netpolicy.EgressError
	if errors.As(err, &ee) {
		status = http.StatusForbidden
		if p.refused != nil {
			p.refused(host, err)
		}
	}
	http.Error(w, fmt.Sprintf("egress proxy: %s: %v", host, err), status)
}
