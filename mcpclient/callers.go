package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/tool"
)

// A server whose configuration says oauth.identity: caller is reached with
// the identity of each of the gateway's callers (see docs/oauth.md). Two
// kinds of connection serve it:
//
//   - the supervisor's, with the server's shared OAuth handler (the
//     operator's: Options.OAuth), which lists (tools, resources, templates,
//     prompts) and hears notifications, and nothing else: it is
//     listing-only (conn.listOnly), so a call that reached it would be
//     refused before anything is sent;
//   - one session per caller (callerSessions), whose transport's OAuth
//     handler is that caller's (oauth.Callers.Handler), made on the
//     caller's first call and kept while it is used. Every tools/call,
//     resources/read, prompts/get, completion/complete and subscription
//     goes through the session of the caller in the call's context
//     (tool.PrincipalFrom), and a call without one fails: nothing falls
//     back to the shared connection.

// ErrNoCaller is wrapped by the error of a call to a server reached with
// each caller's own identity when the call's context carries no caller
// ([tool.WithPrincipal]), or one the server cannot reach the upstream as.
// Nothing is sent upstream.
var ErrNoCaller = errors.New("no caller whose identity the server is reached with")

// ErrListingOnly is wrapped by the error of a request other than a listing
// or a notification made on the shared connection of a server reached with
// each caller's own identity. Nothing is sent.
var ErrListingOnly = errors.New("the shared connection of a server reached with each caller's identity only lists")

// CallersFunc returns the per-caller upstream credentials of a server
// whose oauth settings say identity: caller. client is the HTTP client
// every OAuth request must go with, as for [OAuthFunc].
type CallersFunc func(cfg config.Server, client *http.Client) (*oauth.Callers, error)

// CallerSessionPolicy bounds a server's sessions of callers (identity:
// caller): a session unused for Idle is closed, and at most Max are kept,
// the least recently used idle one closed to make room. Zero fields take
// the defaults.
type CallerSessionPolicy struct {
	Idle time.Duration // default DefaultCallerIdle
	Max  int           // default DefaultMaxCallerSessions
}

// The defaults of [CallerSessionPolicy].
const (
	DefaultCallerIdle        = 10 * time.Minute
	DefaultMaxCallerSessions = 256
)

func (p CallerSessionPolicy) withDefaults() CallerSessionPolicy {
	if p.Idle <= 0 {
		p.Idle = DefaultCallerIdle
	}
	if p.Max <= 0 {
		p.Max = DefaultMaxCallerSessions
	}
	return p
}

// listingMethods are what the shared connection of a per-caller server
// may send: the handshake, listings, the log level and notifications (a
// subscriptions/listen stream for list changes only: see listingOnly).
var listingMethods = map[string]bool{
	"initialize": true, "server/discover": true, "ping": true,
	"tools/list": true, "resources/list": true, "resources/templates/list": true, "prompts/list": true,
	"logging/setLevel": true, "subscriptions/listen": true,
}

// listingOnly is the sending middleware of a per-caller server's shared
// connection: it refuses, before it is sent, every request but those of
// listingMethods and notifications, and a subscriptions/listen that asks
// for a resource's updates (a subscription, which is a caller's).
func listingOnly(server string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ok := listingMethods[method] || len(method) > len("notifications/") && method[:len("notifications/")] == "notifications/"
			if p, isListen := req.GetParams().(*mcp.SubscriptionsListenParams); isListen && p != nil && p.Notifications != nil && len(p.Notifications.ResourceSubscriptions) > 0 {
				ok = false
			}
			if !ok {
				return nil, fmt.Errorf("server %q: %w", server, listOnlyError(method))
			}
			return next(ctx, method, req)
		}
	}
}

func listOnlyError(method string) error {
	return fmt.Errorf("%s refused: %w", method, ErrListingOnly)
}

// callerSessions is a per-caller server's pool of its callers' sessions,
// keyed by caller: made on a caller's first request (one creation per
// caller at a time, which that caller's concurrent requests wait for),
// closed when unused for the policy's Idle, when the pool is full and the
// session is the least recently used idle one, when its connection is
// lost, when the caller logs out, and when the server closes. Each
// session has its own transport, whose OAuth handler is the caller's, and
// its own router, so that what the upstream sends on it reaches that
// caller's calls alone. One lock guards the pool; nothing is dialed,
// closed or sent while it is held.
type callerSessions struct {
	set      *settings
	dial     *dialer
	callers  atomic.Pointer[oauth.Callers] // set by prepare, when the server starts
	policy   CallerSessionPolicy
	handlers func(*router) mcp.ClientOptions // a session's client handlers, for its router
	level    func() mcp.LoggingLevel         // the catalog's log level

	life  context.Context // ends when the pool closes; every session lives within it
	stop  context.CancelFunc
	dials sync.WaitGroup // creations in progress

	mu      sync.Mutex
	entries map[oauth.Caller]*callerSession
	seq     uint64      // use counter, for LRU order
	timer   *time.Timer // the next idle sweep; nil when none is due
	closed  bool
}

// callerSession is one caller's session in the pool.
type callerSession struct {
	caller  oauth.Caller
	handler *oauth.CallerHandler
	relay   *router
	ready   chan struct{} // closed once creation ended; then conn or err is set

	// Set before ready is closed, then read-only.
	conn *conn
	err  error

	// Under the pool's lock.
	busy int       // requests in flight
	used time.Time // when the last one ended (or the session was made)
	seq  uint64    // the pool's counter at that time

	shutOnce sync.Once
}

// newCallerSessions returns the pool of a per-caller server, without its
// credentials yet (see prepare).
func newCallerSessions(set *settings, d *dialer, handlers func(*router) mcp.ClientOptions, level func() mcp.LoggingLevel) *callerSessions {
	p := &callerSessions{set: set, dial: d, policy: set.opts.CallerSessions.withDefaults(),
		handlers: handlers, level: level, entries: map[oauth.Caller]*callerSession{}}
	p.life, p.stop = context.WithCancel(context.Background())
	return p
}

// prepare makes the server's per-caller credentials (Options.Callers),
// once its configuration is expanded: before the server starts, so that a
// gateway finds them (its callback, a caller's logout) from the first.
func (p *callerSessions) prepare() error {
	name := p.set.cfg.Name
	if p.set.opts.Callers == nil {
		return fmt.Errorf("server %q: oauth.identity is caller, and no per-caller credentials are configured (mcpclient.Options.Callers)", name)
	}
	if p.set.cfg.Transport != config.TransportHTTP {
		return fmt.Errorf("server %q: oauth.identity caller needs the http (Streamable HTTP) transport, not %s", name, p.set.cfg.Transport)
	}
	expanded, err := p.dial.expand()
	if err != nil {
		return err
	}
	client, err := p.dial.oauthClient(expanded)
	if err != nil {
		return fmt.Errorf("server %q: oauth: %w", name, err)
	}
	callers, err := p.set.opts.Callers(expanded, client)
	if err != nil {
		return fmt.Errorf("server %q: per-caller credentials: %w", name, err)
	}
	if callers == nil {
		return fmt.Errorf("server %q: oauth.identity is caller, and Options.Callers made no per-caller credentials", name)
	}
	p.callers.Store(callers)
	return nil
}

// callerOf returns the caller ctx carries as the oauth package names
// callers, or an error wrapping ErrNoCaller: a call without a caller fails
// rather than fall back to a shared credential.
func (p *callerSessions) callerOf(ctx context.Context, callers *oauth.Callers) (oauth.Caller, tool.Principal, error) {
	name := p.set.cfg.Name
	pr, ok := tool.PrincipalFrom(ctx)
	if !ok {
		return oauth.Caller{}, pr, fmt.Errorf("server %q is reached only with each caller's own identity, and this request has no caller: %w", name, ErrNoCaller)
	}
	c := oauth.Caller{Issuer: pr.Issuer, Subject: pr.Subject}
	if callers.Mode() == oauth.CallerExchange {
		switch {
		case pr.Issuer == "":
			// A static token of the gateway's means nothing to an
			// authorization server: it is never sent there.
			return c, pr, fmt.Errorf("server %q: caller %s is known by a gateway token, and token exchange needs a caller's JWT: %w", name, c, ErrNoCaller)
		case pr.Token.IsZero():
			return c, pr, fmt.Errorf("server %q: caller %s: no token to exchange: %w", name, c, ErrNoCaller)
		}
	}
	return c, pr, nil
}

// acquire returns the connection of the caller in ctx, made first if the
// caller has none, counted busy until release is called. It notes the
// identity the request reaches the upstream with for the call's audit.
// A caller who must authorize first gets an error wrapping
// *oauth.CallerLoginError, and the next request tries again.
func (p *callerSessions) acquire(ctx context.Context) (_ *conn, release func(), err error) {
	callers := p.callers.Load()
	if callers == nil {
		return nil, nil, &maskedError{msg: fmt.Sprintf("server %q has not started", p.set.cfg.Name), err: tool.ErrUnavailable}
	}
	caller, pr, err := p.callerOf(ctx, callers)
	if err != nil {
		return nil, nil, err
	}
	e, create, err := p.entry(callers, caller)
	if err != nil {
		return nil, nil, err
	}
	release = func() { p.release(e) }
	tool.NoteUpstreamIdentity(ctx, e.handler.Identity())
	if callers.Mode() == oauth.CallerExchange {
		// The token the caller presents now is the one to exchange from
		// here on; the handler refuses another caller's.
		if err := e.handler.Present(caller, oauth.SubjectToken{Token: pr.Token.Reveal(), Expiry: pr.Expiry}); err != nil {
			release()
			return nil, nil, err
		}
	}
	if create {
		// The creation is shared by the caller's requests: it does not end
		// with this one's context, only with the server's timeout or the
		// pool's life. Nor does it take that context's values: those of a
		// request the gateway serves would make go-sdk's client announce
		// that request's revision in the handshake.
		go p.create(context.Background(), e)
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		release()
		return nil, nil, e.err
	}
	return e.conn, release, nil
}

// existing returns the ready session of the caller in ctx, counted busy
// until release is called, or nil when the caller has none: for what
// concerns their session alone (withdrawing a subscription), which needs
// no token and makes no session.
func (p *callerSessions) existing(ctx context.Context) (_ *conn, release func()) {
	pr, ok := tool.PrincipalFrom(ctx)
	if !ok {
		return nil, nil
	}
	caller := oauth.Caller{Issuer: pr.Issuer, Subject: pr.Subject}
	p.mu.Lock()
	e := p.entries[caller]
	if e == nil || e.conn == nil || e.failed() {
		p.mu.Unlock()
		return nil, nil
	}
	e.busy++
	p.mu.Unlock()
	return e.conn, func() { p.release(e) }
}

// entry returns caller's entry, counted busy, and whether the caller must
// create its session; a new entry may first evict the least recently used
// idle session when the pool is full.
func (p *callerSessions) entry(callers *oauth.Callers, caller oauth.Caller) (_ *callerSession, create bool, _ error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, &maskedError{msg: fmt.Sprintf("server %q is closed", p.set.cfg.Name), err: tool.ErrUnavailable}
	}
	if e := p.entries[caller]; e != nil {
		if !e.failed() {
			e.busy++
			p.mu.Unlock()
			return e, false, nil
		}
		delete(p.entries, caller) // lost: its watch closes it
	}
	var evicted *callerSession
	if len(p.entries) >= p.policy.Max {
		if evicted = p.leastRecentIdle(); evicted == nil {
			p.mu.Unlock()
			return nil, false, &maskedError{msg: fmt.Sprintf("server %q: all %d callers' sessions it keeps are in use; retry shortly", p.set.cfg.Name, p.policy.Max), err: tool.ErrUnavailable}
		}
		delete(p.entries, evicted.caller)
	}
	e := &callerSession{caller: caller, handler: callers.Handler(caller), relay: &router{set: p.set}, ready: make(chan struct{}), busy: 1}
	p.entries[caller] = e
	p.dials.Add(1) // under the lock: close, which waits for the creations, sees it
	p.mu.Unlock()
	if evicted != nil {
		evicted.shut()
	}
	return e, true, nil
}

// failed reports whether e's creation failed or its connection was lost;
// call it with the pool's lock held.
func (e *callerSession) failed() bool {
	select {
	case <-e.ready:
	default:
		return false // being made
	}
	if e.err != nil {
		return true
	}
	select {
	case <-e.conn.lost:
		return true
	default:
		return false
	}
}

// leastRecentIdle returns the idle ready session used least recently, or
// nil; call it with the lock held.
func (p *callerSessions) leastRecentIdle() *callerSession {
	var lru *callerSession
	for _, e := range p.entries {
		if e.busy > 0 || e.conn == nil {
			continue // in use, or being made
		}
		if lru == nil || e.seq < lru.seq {
			lru = e
		}
	}
	return lru
}

// create makes e's session: a connection of the caller's endpoint, with
// the catalog's log level applied. It closes e.ready once done.
func (p *callerSessions) create(ctx context.Context, e *callerSession) {
	defer p.dials.Done()
	c, err := p.connect(ctx, e)
	p.mu.Lock()
	e.conn, e.err = c, err
	e.used, p.seq = time.Now(), p.seq+1
	e.seq = p.seq
	closed := p.closed
	if err != nil && p.entries[e.caller] == e {
		delete(p.entries, e.caller) // the next request tries again
	}
	close(e.ready)
	p.mu.Unlock()
	if err != nil {
		return
	}
	if closed {
		e.shut()
		return
	}
	go p.watch(e)
	p.release(nil) // arms the idle sweep
}

// connect dials the caller's session.
func (p *callerSessions) connect(ctx context.Context, e *callerSession) (*conn, error) {
	expanded, err := p.dial.expand()
	if err != nil {
		return nil, err
	}
	ep := &endpoint{handlers: p.handlers(e.relay), relay: e.relay, caller: e.handler}
	c, err := p.dial.dialAs(ctx, p.life, expanded, ep, func() {})
	if err != nil {
		return nil, err
	}
	if level := p.level(); level != "" && !stateless(c.protocol) {
		cctx, cancel := context.WithTimeout(ctx, p.set.timeout)
		err := c.session.SetLoggingLevel(cctx, &mcp.SetLoggingLevelParams{Level: level})
		cancel()
		if err != nil && cctx.Err() == nil {
			p.set.logger.Warn("could not set the log level of a caller's session", "server", p.set.cfg.Name, "caller", e.caller.String(), "error", p.set.secrets.String(err.Error()))
		}
	}
	return c, nil
}

// watch drops e from the pool once its connection is lost (or closed).
func (p *callerSessions) watch(e *callerSession) {
	<-e.conn.lost
	p.mu.Lock()
	if p.entries[e.caller] == e {
		delete(p.entries, e.caller)
	}
	p.mu.Unlock()
	e.shut()
}

// release ends one request of e (nil for none) and arms the idle sweep
// for the earliest session to expire, if it is not armed.
func (p *callerSessions) release(e *callerSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e != nil {
		e.busy--
		e.used, p.seq = time.Now(), p.seq+1
		e.seq = p.seq
	}
	if p.timer == nil && !p.closed {
		p.timer = time.AfterFunc(p.policy.Idle, p.sweep)
	}
}

// sweep closes the sessions idle for the policy's Idle or longer, and arms
// itself for the next to expire.
func (p *callerSessions) sweep() {
	now := time.Now()
	var expired []*callerSession
	p.mu.Lock()
	p.timer = nil
	if p.closed {
		p.mu.Unlock()
		return
	}
	next := time.Duration(-1)
	for caller, e := range p.entries {
		if e.busy > 0 || e.conn == nil {
			continue // in use, or being made (its release re-arms)
		}
		left := p.policy.Idle - now.Sub(e.used)
		if left <= 0 {
			delete(p.entries, caller)
			expired = append(expired, e)
			continue
		}
		if next < 0 || left < next {
			next = left
		}
	}
	if next >= 0 {
		p.timer = time.AfterFunc(next, p.sweep)
	}
	p.mu.Unlock()
	for _, e := range expired {
		e.shut()
	}
}

// shut closes e's connection once: the cancellations of its calls are
// announced first (see cancellations), as for the shared connection.
func (e *callerSession) shut() {
	e.shutOnce.Do(func() {
		<-e.ready
		if e.conn == nil {
			return
		}
		e.conn.cancels.flush(e.conn.lost)
		_ = e.conn.close()
	})
}

// forget closes caller's session, if there is one (the caller logged out).
func (p *callerSessions) forget(caller oauth.Caller) {
	p.mu.Lock()
	e := p.entries[caller]
	delete(p.entries, caller)
	p.mu.Unlock()
	if e != nil {
		e.shut()
	}
}

// each returns the ready sessions' connections.
func (p *callerSessions) each() []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var conns []*conn
	for _, e := range p.entries {
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	return conns
}

// size returns how many callers' sessions the pool holds (made or being
// made).
func (p *callerSessions) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// close closes every session and ends the creations in progress; later
// requests fail as unavailable. It is safe to call more than once.
func (p *callerSessions) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	entries := p.entries
	p.entries = map[oauth.Caller]*callerSession{}
	p.mu.Unlock()
	p.stop()
	p.dials.Wait()
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.shut()
		}()
	}
	wg.Wait()
}

// authorizationOf returns err as the executor's *tool.AuthorizationError
// when it wraps an *oauth.CallerLoginError (the caller must authorize
// first), so that the URL reaches the caller beside the result rather than
// in a message; otherwise err itself.
func authorizationOf(err error) error {
	var le *oauth.CallerLoginError
	var done *tool.AuthorizationError
	if !errors.As(err, &le) || errors.As(err, &done) {
		return err
	}
	return &tool.AuthorizationError{
		Authorization: tool.Authorization{URL: le.URL, ID: le.ID, Expires: le.Expires, Source: le.Server, Confirm: le.Confirm, AwaitsCode: le.AwaitsCode},
		Err:           err,
	}
}

// Callers returns the per-caller upstream credentials of a server reached
// with each caller's identity (oauth.identity: caller) once it has
// started, or nil: what a gateway mounts the callback of callers' logins
// for ([oauth.NewCallback]) and begins a caller's authorization with.
func (s *Server) Callers() *oauth.Callers {
	if s.pool == nil {
		return nil
	}
	return s.pool.callers.Load()
}

// LogoutCaller ends caller's own authorization at the server (identity:
// caller): their session is closed, then their upstream tokens are
// forgotten and revoked where the authorization server offers revocation
// ([oauth.Callers.Logout]). Their next call authorizes anew. It fails for
// a server reached with a shared identity.
func (s *Server) LogoutCaller(ctx context.Context, caller oauth.Caller) error {
	callers := s.Callers()
	if callers == nil {
		return fmt.Errorf("server %q is not reached with each caller's own identity (oauth.identity: caller), or has not started", s.set.cfg.Name)
	}
	s.pool.forget(caller)
	return callers.Logout(ctx, caller)
}
