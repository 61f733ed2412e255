package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/stdioconn"
	"github.com/toolwire/toolwire/internal/version"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/oauth"
)

// conn is one connection to a server: an MCP session and, over stdio, the
// child process behind it. A server's dialer makes a new conn for every
// (re)connect.
type conn struct {
	session  *mcp.ClientSession
	protocol string    // the revision negotiated
	made     time.Time // when the handshake was done
	// The raw path (raw.go): over stdio the connection's own calls, over
	// Streamable HTTP a POST of toolwire's; nil where there is none.
	stdio  *stdioconn.Conn
	http   *rawHTTP
	tasks  taskTools    // which tools need a task (tasks.go)
	pid    atomic.Int64 // the child's pid once started, read by killers on other goroutines
	stderr *stderrLog   // nil over HTTP
	// release kills what is left of a confined stdio server's processes
	// and removes its pids cgroup (for root); nil when there is none. It
	// is safe to call more than once, and from any goroutine.
	release func()

	lost     chan struct{} // closed when the session has ended or is deemed lost
	lostOnce sync.Once
	lostWhy  error // why, set once before lost is closed
	// end cancels the context the transport was started with, which lives
	// as long as the connection (the SSE transport's event stream is bound
	// to it).
	end      context.CancelFunc
	failures atomic.Int32 // consecutive transport failures of calls
	cancels  cancellations

	// relay routes what arrives on this connection to the calls made on
	// it: the server's router for its shared connection, a router of its
	// own for each caller's session (see callerSessions).
	relay *router
	// listOnly marks the shared connection of a server reached with each
	// caller's identity: its credential is the operator's, so it carries
	// listings and notifications only, and every other request on it is
	// refused, in the SDK's session and on the raw path alike.
	listOnly bool
	// caller is the handler of the caller whose session this is; nil for
	// a shared connection.
	caller *oauth.CallerHandler
}

// Protocol revisions toolwire's client tells apart.
const (
	// protocol2026 is the first revision without sessions (SEP-2567):
	// server/discover instead of initialize (SEP-2575), the request's own
	// _meta instead of a session's state, multi round-trip requests
	// instead of requests during a call (SEP-2322).
	protocol2026 = "2026-07-28"
	// protocolLegacy is the newest revision before it, offered straight
	// away (with initialize) to a server known to speak no later one.
	protocolLegacy = "2025-11-25"
)

// stateless reports whether version is 2026-07-28 or later.
func stateless(version string) bool { return version >= protocol2026 }

// dialer makes a server's connections: it resolves the configuration's
// placeholders once, builds the transport (with the HTTP pool and the
// OAuth handler that every connection of the server shares), and performs
// the MCP handshake with the handlers of the server's other parts.
type dialer struct {
	set    *settings
	shared endpoint // the server's own connection (the supervisor's)

	expandMu sync.Mutex     // held while placeholders resolve
	expanded *config.Server // cfg with placeholders resolved, once

	poolOnce sync.Once
	pool     *http.Transport // for remote servers; see pooledTransport

	oauthOnce sync.Once
	oauth     auth.OAuthHandler // made once from Options.OAuth; nil for none
	oauthErr  error

	// logLevel is the level the server's catalog keeps, stamped into each
	// request of a 2026-07-28 session (see stampLogLevel).
	logLevel func() mcp.LoggingLevel

	eraMu  sync.Mutex
	legacy bool // a connection negotiated a revision before 2026-07-28
}

// ErrProtocolMismatch is wrapped by the error of a connection to a server
// that does not speak the revision its configuration's protocol names.
var ErrProtocolMismatch = errors.New("the server does not speak the configured MCP revision")

// offer returns the revision the next connection offers: the one the
// configuration pins, if it does; else none (go-sdk's
// latest, with server/discover and a fallback to initialize) until a
// connection has shown that the server speaks only an older revision;
// then that revision's initialize at once, as the MCP specification
// advises a client to remember a server's era (basic/versioning, the
// compatibility matrix) rather than probe it on every reconnect.
func (d *dialer) offer() string {
	if p := d.set.cfg.Protocol; p != "" {
		return p // the configuration pins it
	}
	d.eraMu.Lock()
	defer d.eraMu.Unlock()
	if d.legacy {
		return protocolLegacy
	}
	return ""
}

// remember notes the revision a connection negotiated.
func (d *dialer) remember(version string) {
	d.eraMu.Lock()
	defer d.eraMu.Unlock()
	d.legacy = !stateless(version)
}

// expand resolves the configuration's placeholders the first time, at the
// transport boundary; reconnects reuse the values, which live only in this
// process's memory.
func (d *dialer) expand() (config.Server, error) {
	// A lock of its own: resolving an ${input:} may wait on a person at a
	// terminal, and Status, calls and Close must not wait with it.
	d.expandMu.Lock()
	defer d.expandMu.Unlock()
	if d.expanded != nil {
		return *d.expanded, nil
	}
	expanded, secretValues, err := config.ExpandServer(d.set.cfg, config.Resolver{LookupEnv: d.set.opts.LookupEnv, Input: d.set.opts.Input})
	if err != nil {
		return config.Server{}, err
	}
	secretValues, warnings := configuredSecrets(d.set.cfg, expanded, secretValues)
	d.set.secrets.Add(secretValues...)
	for _, w := range warnings {
		d.set.logger.Warn(w)
	}
	d.expanded = &expanded
	return expanded, nil
}

// endpoint is what sets one kind of a server's connections apart from
// another: the client's handlers, the router that counts and routes what
// arrives on it, the OAuth handler its requests carry, and whether it may
// only list. The supervisor's connection is the server's shared endpoint;
// each caller's session of a server reached with the callers' own
// identities is an endpoint of its own (callers.go).
type endpoint struct {
	handlers mcp.ClientOptions
	relay    *router
	// caller, if set, is the OAuth handler of the one caller the
	// connection serves, in place of the server's shared handler.
	caller *oauth.CallerHandler
	// listOnly refuses every request but listings and notifications (see
	// conn.listOnly).
	listOnly bool
}

// dial starts the server's transport and performs the MCP handshake for
// the server's shared connection (see dialAs).
func (d *dialer) dial(ctx, life context.Context, cfg config.Server, connected func()) (*conn, error) {
	return d.dialAs(ctx, life, cfg, &d.shared, connected)
}

// dialAs starts the server's transport and performs the MCP handshake for
// a connection of endpoint ep, bounded by the server's timeout within ctx.
// The connection lives until life ends or it is closed. connected is
// called once the transport is up (for stdio: once the child exists),
// before the handshake. Every connection of the server offers the revision
// the server was last found to speak (see offer).
func (d *dialer) dialAs(ctx, life context.Context, cfg config.Server, ep *endpoint, connected func()) (*conn, error) {
	c := &conn{lost: make(chan struct{}), relay: ep.relay, listOnly: ep.listOnly, caller: ep.caller}
	connCtx, end := context.WithCancel(life)
	c.end = end
	transport, err := d.transport(connCtx, c, cfg, ep, connected)
	if err != nil {
		end()
		return nil, err
	}
	opts := ep.handlers
	// Roots only for a server configured with some (see roots.go); none
	// otherwise, as go-sdk would declare them by default.
	opts.Capabilities = &mcp.ClientCapabilities{}
	roots := rootsOf(cfg)
	if len(roots) > 0 {
		opts.Capabilities.RootsV2 = &mcp.RootCapabilities{}
	}
	// toolwire answers a 2026-07-28 server's input requests itself (see
	// inputRounds): innermost, where go-sdk's own loop would be.
	opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolwire", Version: version.String()}, &opts)
	// A tools/call over stdio is sent and decoded by toolwire (see
	// stdiocall.go): innermost, inside the input rounds.
	client.AddSendingMiddleware(stdioCalls(c))
	client.AddSendingMiddleware(d.inputRounds(c))
	client.AddRoots(roots...)
	if err := registerTaskMethods(client); err != nil {
		end()
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	if ep.listOnly {
		// First, so that nothing else sees a request it refuses.
		client.AddSendingMiddleware(listingOnly(cfg.Name))
	}
	if d.set.opts.Middleware != nil {
		client.AddSendingMiddleware(d.set.opts.Middleware(cfg.Name)...)
	}
	client.AddSendingMiddleware(d.stampLogLevel)
	client.AddReceivingMiddleware(relaxTitledMultiSelect)

	cctx, cancel := context.WithTimeout(ctx, d.set.timeout)
	defer cancel()
	// A stdio server that has not started within the timeout is killed at
	// once: the SDK's cleanup of a failed handshake would otherwise close
	// stdin and wait for a child that may never read it. Disarmed (first,
	// as defers run last-in first-out) when Connect returns.
	// The transport's own context is cut the same way until then.
	disarm := context.AfterFunc(cctx, func() {
		c.killChild()
		end()
	})
	defer disarm()
	session, err := client.Connect(cctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: d.offer()})
	if err != nil {
		c.killChild()
		if c.release != nil {
			c.release() // the server's pids cgroup, for root
		}
		end()
		return nil, d.connectError(ctx, cctx, c, err)
	}
	c.session, c.made = session, time.Now()
	c.protocol = session.InitializeResult().ProtocolVersion
	if p := d.set.cfg.Protocol; p != "" && c.protocol != p {
		// go-sdk falls back from 2026-07-28 by itself, and a server may
		// answer an initialize with another revision: a pinned revision
		// is that one or none.
		_ = c.close()
		return nil, &ConnectError{Server: d.set.cfg.Name, msg: fmt.Sprintf("server %q: it speaks MCP %s, and its protocol is set to %s", d.set.cfg.Name, c.protocol, p), err: ErrProtocolMismatch}
	}
	d.remember(c.protocol)
	go func() {
		err := session.Wait()
		if err == nil {
			err = errors.New("session ended")
		}
		c.markLost(err)
	}()
	return c, nil
}

// transport builds the SDK transport for one connection of endpoint ep.
func (d *dialer) transport(ctx context.Context, c *conn, cfg config.Server, ep *endpoint, connected func()) (mcp.Transport, error) {
	arrivals := &ep.relay.arrivals
	if ep.caller != nil && cfg.Transport != config.TransportHTTP {
		// Only go-sdk's Streamable HTTP transport takes an OAuth handler.
		return nil, fmt.Errorf("server %q: a caller's own session needs the http transport, not %s", cfg.Name, cfg.Transport)
	}
	switch cfg.Transport {
	case config.TransportStdio:
		cmd, err := d.command(ctx, c, cfg)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
		}
		c.stderr = &stderrLog{server: cfg.Name, logger: d.set.logger, secrets: d.set.secrets}
		cmd.Stderr = c.stderr
		isolate(cmd)
		// A server that ignores server/discover is answered for after a
		// short wait (see stdioconn.CommandTransport.DiscoverTimeout).
		return &startedTransport{ctx: ctx, arrivals: arrivals, inner: &stdioconn.CommandTransport{Command: cmd, TerminateDuration: terminateGrace}, started: func(conn mcp.Connection) {
			c.pid.Store(int64(cmd.Process.Pid))
			c.stdio, _ = conn.(*stdioconn.Conn)
			connected()
		}}, nil
	case config.TransportHTTP, config.TransportSSE:
		httpClient, err := d.httpClient(cfg)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
		}
		if cfg.Transport == config.TransportSSE {
			return &startedTransport{ctx: ctx, arrivals: arrivals, started: func(mcp.Connection) { connected() },
				inner: &mcp.SSEClientTransport{Endpoint: cfg.URL, HTTPClient: httpClient}}, nil
		}
		// Not the Streamable HTTP connection: the SDK updates it through an
		// unexported method, which a wrapper would hide. Its HTTP
		// exchanges are watched instead.
		// A subscriptions/listen stream that ends is never reopened by the
		// SDK, and list_changed would go unheard: the connection counts as
		// lost, and reconnecting lists again and listens anew.
		httpClient.Transport = &httpWatch{next: httpClient.Transport, arrivals: arrivals, listenEnded: func(granted bool) {
			if granted {
				c.markLost(errListenEnded)
				return
			}
			d.set.logger.Warn("the server granted none of the notifications asked for (subscriptions/listen)", "server", cfg.Name)
		}}
		st := &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: httpClient, MaxRetries: 2}
		switch {
		case ep.caller != nil:
			// The caller's session carries the caller's upstream token
			// and nothing of the operator's.
			st.OAuthHandler = ep.caller
		case d.set.opts.OAuth != nil:
			h, err := d.oauthHandler(cfg)
			if err != nil {
				return nil, fmt.Errorf("server %q: oauth: %w", cfg.Name, err)
			}
			if h != nil {
				st.OAuthHandler = h
			}
		}
		c.http = &rawHTTP{client: httpClient, url: cfg.URL, oauth: st.OAuthHandler}
		return &startedTransport{ctx: ctx, inner: st, started: func(mcp.Connection) { connected() }}, nil
	default:
		return nil, fmt.Errorf("server %q: unknown transport %q (want stdio, http or sse)", cfg.Name, cfg.Transport)
	}
}

// errListenEnded is why a 2026-07-28 connection whose notification stream
// ended is replaced.
var errListenEnded = errors.New("the server ended its notification stream (subscriptions/listen)")

// stampLogLevel is sending middleware that puts the log level the catalog
// keeps into each request's _meta on a 2026-07-28 session, where a level
// travels with every request (logging/setLevel is gone) and a server logs
// nothing for a request that names none.
func (d *dialer) stampLogLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		level := d.logLevel()
		if level == "" || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		cs, ok := req.GetSession().(*mcp.ClientSession)
		if !ok || cs.InitializeResult() == nil || !stateless(cs.InitializeResult().ProtocolVersion) {
			return next(ctx, method, req)
		}
		if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
			meta := p.GetMeta()
			if meta == nil {
				meta = map[string]any{}
			}
			meta[mcp.MetaKeyLogLevel] = level
			p.SetMeta(meta)
		}
		return next(ctx, method, req)
	}
}

// list returns the server's whole tool listing, page by page.
func (c *conn) list(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// markLost records that the session is over and why, waking the
// supervisor. The first cause wins.
func (c *conn) markLost(why error) {
	c.lostOnce.Do(func() {
		c.lostWhy = why
		close(c.lost)
	})
}

// lostCause returns why the connection was lost; call it only after lost is
// closed.
func (c *conn) lostCause() error { return c.lostWhy }

// noteFailure counts a failed call. A closed connection or a session the
// server no longer knows is lost at once; other transport failures count
// until threshold in a row. Errors the server itself answered with (a
// JSON-RPC error), a multi round-trip exchange that failed between its
// rounds and contexts ending are not the transport's fault.
func (c *conn) noteFailure(err error, threshold int) {
	var rounds *inputRoundsError
	switch {
	case errors.As(err, &rounds):
		// First: what it wraps is the caller's failure (its own closed
		// session, say), not this connection's.
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing):
		c.markLost(err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), isWireError(err):
	case c.caller != nil && needsLogin(err):
		// The caller must authorize (again): their session is sound, and
		// their next call after authorizing goes through it.
	default:
		if n := int(c.failures.Add(1)); n >= threshold {
			c.markLost(fmt.Errorf("%d calls in a row failed in the transport, the last with: %w", n, err))
		}
	}
}

func (c *conn) noteSuccess() { c.failures.Store(0) }

// close ends the session and whatever is left of the child's process group.
func (c *conn) close() error {
	err := c.session.Close()
	c.killChild()
	if c.release != nil {
		c.release()
	}
	c.end()
	c.markLost(errors.New("closed"))
	return err
}

// killChild ends the stdio child's whole process group, if it was started.
func (c *conn) killChild() { killGroup(int(c.pid.Load())) }

// PID returns the stdio child's pid, or 0.
func (c *conn) PID() int { return int(c.pid.Load()) }

// startedTransport starts its inner transport with a context of the
// connection's lifetime rather than the handshake's (which ends as soon as
// the connection is up), and reports when it has connected (for stdio: when
// the child process exists). With arrivals, its connection is watched (see
// watchedConn).
type startedTransport struct {
	ctx      context.Context
	inner    mcp.Transport
	started  func(inner mcp.Connection)
	arrivals *arrivals // counts the reports read; nil: the connection is not wrapped
}

func (t *startedTransport) Connect(context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(t.ctx)
	if err != nil {
		return nil, err
	}
	t.started(conn)
	if t.arrivals == nil {
		return conn, nil
	}
	return &watchedConn{Connection: conn, a: t.arrivals}, nil
}

// inheritedEnv names the variables a stdio server inherits from toolwire's
// own environment. Everything else (API keys above all) stays out unless the
// configuration passes it in env: a server is untrusted code.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ",
	"SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "PROGRAMFILES", "TEMP", "TMP"}

func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if _, overridden := extra[k]; overridden {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// httpClient returns the client for a remote server's requests (see
// netpolicy): the remote-URL rule on the first request and on every
// redirect hop, no redirect from https to http, at most 10 redirects, and
// the configured headers and bearer token sent to the server's own origin
// only, and dropped (with the session ID) from the first hop that leaves
// it. With an egress policy, every connection is dialed to an address
// checked against the server's own host and the allowed ones.
func (d *dialer) httpClient(cfg config.Server) (*http.Client, error) {
	var base http.RoundTripper = d.pooledTransport()
	var timeout time.Duration
	if hc := d.set.opts.HTTPClient; hc != nil {
		timeout = hc.Timeout
		if hc.Transport != nil {
			base = hc.Transport
		}
	}
	if d.set.opts.Egress != nil {
		guarded, err := d.egressTransport(cfg, base)
		if err != nil {
			return nil, err
		}
		base = guarded
	}
	headers := maps.Clone(cfg.Headers)
	if cfg.BearerToken != "" {
		if headers == nil {
			headers = map[string]string{}
		}
		headers["Authorization"] = "Bearer " + cfg.BearerToken
	}
	secret := []string{"Mcp-Session-Id"}
	if len(headers) > 0 {
		ht, err := netpolicy.NewHeaderTransport(cfg.URL, headers, base)
		if err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
		base = ht
		secret = append(secret, slices.Collect(maps.Keys(headers))...)
	}
	if d.set.opts.WrapTransport != nil {
		base = d.set.opts.WrapTransport(base)
	}
	client := netpolicy.NewClient(&netpolicy.ClientOptions{Transport: base, SecretHeaders: secret})
	client.Timeout = timeout
	return client, nil
}

// idleConnsPerHost is how many idle connections to one server are kept for
// reuse. Go's default, 2, makes concurrent calls open and close a socket
// each, thousands a second, piling up in TIME_WAIT.
const idleConnsPerHost = 64

// pooledTransport is Go's default transport with a pool fit for concurrent
// calls to one server, made once per server so that reconnects share it
// rather than each leaving a pool of idle sockets behind.
func (d *dialer) pooledTransport() *http.Transport {
	d.poolOnce.Do(func() {
		d.pool = http.DefaultTransport.(*http.Transport).Clone()
		d.pool.MaxIdleConnsPerHost = idleConnsPerHost
	})
	return d.pool
}

// egressTransport returns base with its dialing guarded: the server's own
// host and the policy's hosts are allowed, on the address the guard
// resolved and checked. Proxies are not used, as the guard would check the
// proxy rather than the server.
func (d *dialer) egressTransport(cfg config.Server, base http.RoundTripper) (http.RoundTripper, error) {
	u, err := netpolicy.CheckURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	return guarded(base, &netpolicy.DialerOptions{Allow: append([]string{u.Hostname()}, d.set.opts.Egress.AllowHosts...)})
}

// guarded returns base dialing through an egress guard with opts. Proxies
// are not used, as the guard would check the proxy rather than the server.
func guarded(base http.RoundTripper, opts *netpolicy.DialerOptions) (http.RoundTripper, error) {
	d, err := netpolicy.NewDialer(opts)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("egress: the HTTP client's transport is a %T; the guard needs an *http.Transport to dial through", base)
	}
	t = t.Clone()
	t.Proxy, t.DialContext, t.DialTLSContext = nil, d.DialContext, nil
	return t, nil
}

// connectError explains a failed connection: which server, which command or
// URL (as configured, so placeholders stay unexpanded), the cause and, for a
// stdio server, what it printed on stderr.
func (d *dialer) connectError(parent, ctx context.Context, c *conn, err error) error {
	cfg := d.set.cfg
	target := cfg.URL
	if cfg.Transport == config.TransportStdio {
		target = strings.Join(append([]string{cfg.Command}, cfg.Args...), " ")
	}
	cause := d.set.secrets.String(err.Error())
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		cause = fmt.Sprintf("no answer within %s", d.set.timeout)
	}
	msg := fmt.Sprintf("server %q: connect %s: %s", cfg.Name, target, cause)
	if c.stderr != nil {
		if tail := c.stderr.Tail(10); tail != "" {
			msg += "; stderr:\n" + tail
		}
	}
	return &ConnectError{Server: cfg.Name, msg: msg, err: err}
}
