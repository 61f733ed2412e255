package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/tool"
)

// DefaultTimeout bounds connecting, listing and each call when the server's
// configuration sets no timeout.
const DefaultTimeout = 60 * time.Second

// terminateGrace is how long closing a stdio server waits after closing its
// stdin before SIGTERM, and again before SIGKILL.
const terminateGrace = 2 * time.Second

// Options configures [Connect] and [NewManager]. The zero value is usable.
type Options struct {
	// Logger receives the server's stderr lines (at debug level),
	// adaptation warnings and lifecycle changes. Nil means slog.Default().
	Logger *slog.Logger
	// LookupEnv resolves ${VAR} placeholders in the server's configuration.
	// Nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Input answers a ${input:ID} placeholder (VS Code's inputs), typically
	// by asking on a terminal. Nil refuses such placeholders with an error
	// saying which input is needed. It may be called from several servers'
	// starts at once.
	Input func(id string, in config.Input) (string, error)
	// HTTPClient carries Streamable HTTP and SSE requests. Nil means a
	// plain client.
	HTTPClient *http.Client
	// Secrets, when set, learns the server's configured secrets (every
	// value expanded from a placeholder, the bearer token, and env and
	// header values named as credentials; see docs/security.md), so that
	// the audit log, error messages and whatever else masks with it mask
	// them. A credential too short to mask is reported as a warning.
	Secrets *audit.Secrets
	// Audit receives lifecycle events: server started, failed, degraded,
	// reconnected, stopped, tools changed. Nil means none.
	Audit *audit.Log
	// Reconnect bounds how a lost session is re-established.
	Reconnect ReconnectPolicy
	// Pins, when set, checks every server's tool definitions against the
	// fingerprints approved for them, at connect and at every re-listing;
	// PinMode says what a new or changed definition does (see package
	// pins). Nil means no pinning.
	Pins    *pins.Store
	PinMode pins.Mode
	// MaxDescription caps a tool's description, in characters; a longer
	// one is cut with a marker. 0 means config.DefaultMaxDescription.
	MaxDescription int
	// MaxTools is how many tools a server may list before a warning and an
	// audit event report it. 0 means config.DefaultMaxTools.
	MaxTools int
	// Egress, when set, guards the connections of remote servers: each may
	// reach its own URL's host and the hosts Egress allows, checked on the
	// resolved address when dialing. Nil means no guard.
	Egress *EgressPolicy
	// OAuth, when set, authorizes remote (Streamable HTTP) servers that
	// require OAuth 2.1: it is called once per server for its handler. A
	// server that needs a person to log in fails with an error wrapping
	// [oauth.ErrLoginRequired] (or an *oauth.PendingError carrying the URL, for a
	// handler that defers to the application) and is not retried; other
	// servers are unaffected.
	OAuth OAuthFunc
	// Relay says which requests a server may make of the calls' callers.
	// The zero value advertises none.
	Relay RelayCapabilities
	// Middleware, when set, returns sending middleware for the client of
	// the server named server: telemetry starts a span per request there
	// and carries its trace context in the request's _meta.
	Middleware func(server string) []mcp.Middleware
	// WrapTransport, when set, wraps the transport of every HTTP server's
	// client, inside the redirect and header rules: telemetry adds the
	// traceparent header of each request's context there.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// StateChanges, when set, receives a snapshot of a server after each
	// change of its state. Sends never block: when the channel is full the
	// snapshot is dropped, so give it room (or read it promptly).
	StateChanges chan<- Status
}

// EgressPolicy lists what remote servers may reach besides their own
// URL's host (see [netpolicy.DialerOptions]).
type EgressPolicy struct {
	// AllowHosts are exact names, IP addresses, or "*.example.com".
	AllowHosts []string
}

// ReconnectPolicy says how a server whose session is lost reconnects: up to
// MaxAttempts tries, waiting Initial, then twice as long each time up to
// Max, each wait shortened by a random jitter of up to half so that many
// clients do not retry in step. Zero fields take the defaults.
type ReconnectPolicy struct {
	MaxAttempts int           // default 8
	Initial     time.Duration // default 500ms
	Max         time.Duration // default 30s
	// FailureThreshold is how many consecutive transport failures of calls
	// count as a lost session even while the session looks open. Default 3.
	FailureThreshold int
}

func (p ReconnectPolicy) withDefaults() ReconnectPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 8
	}
	if p.Initial <= 0 {
		p.Initial = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	if p.FailureThreshold <= 0 {
		p.FailureThreshold = 3
	}
	return p
}

// Server is one MCP server whose tools are in a registry, supervised: when
// its session is lost it reconnects by itself, and when it announces a
// changed tool list the registry follows.
//
// A Server's registered tools always call through the live session. While
// the server is reconnecting they stay registered but fail fast with an
// error wrapping [tool.ErrUnavailable]; once the server has failed for good
// they are deregistered.
type Server struct {
	cfg     config.Server
	reg     *tool.Registry
	src     *tool.Source // the server's names in reg
	opts    Options      // with defaults filled in
	logger  *slog.Logger
	secrets *audit.Secrets
	timeout time.Duration
	policy  ReconnectPolicy

	progress  sync.Map // progress token (string) -> progressTarget
	nextToken atomic.Uint64
	calls     inflight      // for routing log lines and requests to callers
	arrivals  arrivals      // for keeping reports ahead of results
	watchers  watchers      // of resources, templates and prompts
	relist    chan struct{} // list_changed arrived; capacity 1

	stopCtx context.Context // ends when Close is called
	stop    context.CancelFunc
	done    chan struct{} // closed when the supervisor has returned

	expandMu sync.Mutex // held while placeholders resolve, apart from mu

	mu       sync.Mutex
	state    State
	since    time.Time
	lastErr  error
	attempt  int
	expanded *config.Server // cfg with placeholders resolved, once; guarded by expandMu
	conn     *conn          // the live connection; nil unless Ready
	tools    []*tool.Tool   // registered, in listing order
	skipped  []Skipped
	warnings []string
	pin      pinning // the latest listing's definitions and pin outcome (pins.go)

	supervising bool // a supervisor goroutine was started; it closes done

	poolOnce sync.Once
	pool     *http.Transport // for remote servers; see pooledTransport

	oauthOnce sync.Once
	oauth     auth.OAuthHandler // made once from Options.OAuth; nil for none
	oauthErr  error

	logLevel   mcp.LoggingLevel // asked for by SetLogLevel; "" for none
	subscribed map[string]bool  // resource URIs asked for by Subscribe

	closeOnce sync.Once
	closeErr  error
}

// progressTarget is where one in-flight call's progress reports go.
type progressTarget struct {
	ctx    context.Context
	caller tool.Caller
}

// newServer returns a server in the Configured state.
func newServer(cfg config.Server, reg *tool.Registry, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Secrets == nil {
		o.Secrets = audit.NewSecrets()
	}
	o.Reconnect = o.Reconnect.withDefaults()
	s := &Server{
		cfg: cfg, reg: reg, src: reg.NewSource(), opts: o, logger: o.Logger, secrets: o.Secrets,
		timeout: cfg.Timeout, policy: o.Reconnect,
		relist: make(chan struct{}, 1),
		done:   make(chan struct{}),
		state:  Configured, since: time.Now(),
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	return s
}

// Connect connects the server described by cfg, lists its tools (following
// pagination), adapts them and registers them in reg, all or nothing, then
// keeps supervising it until [Server.Close]. The server's timeout bounds the
// connection, within ctx; ctx does not bound the supervision.
//
// It fails, leaving nothing registered and no process running, when the
// server cannot be started or reached (the error names the server, the
// command or URL, and for stdio the tail of the server's stderr), when the
// listing fails, when a tool resolves to write or destructive and reg has no
// confirmer (wrapping [tool.ErrNeedsConfirmer] and naming the tools), when
// pinning in enforce mode cannot check the tools (wrapping
// [ErrPinsUnavailable]), or when registration fails. A tool whose input
// schema does not compile is only skipped (see [Server.Skipped]), and one
// that pinning quarantines only left out (see [Server.Quarantined]).
func Connect(ctx context.Context, cfg config.Server, reg *tool.Registry, opts *Options) (*Server, error) {
	s := newServer(cfg, reg, opts)
	if err := s.start(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// start makes the first connection and, on success, starts the supervisor.
// On failure the server is Failed with the reason recorded.
func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state != Configured {
		return fmt.Errorf("server %q: already started (%s)", s.cfg.Name, state)
	}
	if _, err := parseTiers(s.cfg); err != nil {
		err = fmt.Errorf("server %q: %w", s.cfg.Name, err)
		s.fail("configure", err)
		return err
	}
	if s.opts.Pins != nil && !s.opts.PinMode.Valid() {
		// As in package pins, a mode never set is not taken to mean off.
		err := fmt.Errorf("server %q: pins: no valid pin mode set (%s); want off, warn or enforce", s.cfg.Name, s.opts.PinMode)
		s.fail("configure", err)
		return err
	}
	ctx, cancel := contextOf(ctx, s.stopCtx) // Close aborts a start in progress
	defer cancel()
	c, err := s.establish(ctx, false)
	if err != nil {
		return err
	}
	// Close calls stop before it reads supervising, so checking stopCtx
	// here, under the lock, means either Close waits for the supervisor or
	// no supervisor starts.
	s.mu.Lock()
	closed := s.stopCtx.Err() != nil
	s.supervising = !closed
	s.mu.Unlock()
	if closed {
		_ = c.close()
		return errClosed
	}
	s.record(audit.Event{Kind: audit.ServerStarted, Transport: s.cfg.Transport, Tools: s.toolCount()})
	go s.supervise(c)
	return nil
}

// errClosed is why a start or reconnect that raced with Close gave up.
var errClosed = errors.New("server closed")

// establish connects, lists, adapts and registers, moving through
// Connecting, Initializing and Discovering to Ready. On a reconnect
// (again), the server's previous tools are swapped for the new ones in one
// step. A failure leaves the server in the phase where it failed for the
// caller to move on from, except that a first start moves to Failed.
func (s *Server) establish(ctx context.Context, again bool) (*conn, error) {
	phase := "connect"
	fail := func(err error) (*conn, error) {
		if !again {
			s.fail(phase, err)
		}
		return nil, err
	}
	expanded, err := s.expand()
	if err != nil {
		return fail(err)
	}
	s.moveTo(Connecting, nil)
	c, err := s.dial(ctx, expanded, func() { s.moveTo(Initializing, nil) })
	if err != nil {
		return fail(err)
	}
	phase = "discover"
	s.moveTo(Discovering, nil)
	d, err := s.discover(ctx, c)
	if err == nil {
		err = s.activate(c, d)
	}
	if err != nil {
		_ = c.close()
		return fail(err)
	}
	s.restoreSession(ctx)
	for _, sk := range d.skipped {
		s.logger.Warn("tool left out", "server", s.cfg.Name, "tool", sk.Name, "reason", sk.Reason)
	}
	for _, w := range d.warnings {
		s.logger.Warn(w)
	}
	return c, nil
}

// expand resolves the configuration's placeholders the first time, at the
// transport boundary; reconnects reuse the values, which live only in this
// process's memory.
func (s *Server) expand() (config.Server, error) {
	// Not under s.mu: resolving an ${input:} may wait on a person at a
	// terminal, and Status, call and Close must not wait with it.
	s.expandMu.Lock()
	defer s.expandMu.Unlock()
	if s.expanded != nil {
		return *s.expanded, nil
	}
	expanded, secretValues, err := config.ExpandServer(s.cfg, config.Resolver{LookupEnv: s.opts.LookupEnv, Input: s.opts.Input})
	if err != nil {
		return config.Server{}, err
	}
	secretValues, warnings := configuredSecrets(s.cfg, expanded, secretValues)
	s.secrets.Add(secretValues...)
	for _, w := range warnings {
		s.logger.Warn(w)
	}
	s.expanded = &expanded
	return expanded, nil
}

// discovery is the outcome of listing a server's tools.
type discovery struct {
	tools    []*tool.Tool // to register
	skipped  []Skipped
	warnings []string
}

// discover lists the server's tools, checks them against their pins and
// adapts the ones allowed, bounded by the server's timeout.
func (s *Server) discover(ctx context.Context, c *conn) (*discovery, error) {
	lctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	listing, err := c.list(lctx)
	if err != nil {
		return nil, s.requestError(ctx, lctx, "list tools", err)
	}
	s.noteToolCount(len(listing))
	listing, defs := prepare(s.cfg, listing, s.descriptionLimit())
	s.mu.Lock()
	s.pin.defs = defs
	s.mu.Unlock()
	held, err := s.checkPins(lctx, defs)
	if err != nil {
		return nil, err
	}
	ad, err := adapt(s.cfg, listing, s.handler)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", s.cfg.Name, err)
	}
	// A description is the server's text, shown to people and models: a
	// configured secret in it is masked like one in a result.
	for _, t := range ad.tools {
		t.Description = s.secrets.String(t.Description)
	}
	if len(held) > 0 {
		// Adapted before leaving them out, so that a tierOverrides entry
		// naming a quarantined tool is not reported as unlisted.
		ad.tools = slices.DeleteFunc(ad.tools, func(t *tool.Tool) bool { _, ok := held[t.Origin.Name]; return ok })
		ad.skipped = slices.DeleteFunc(ad.skipped, func(sk Skipped) bool { _, ok := held[sk.Name]; return ok })
	}
	if err := preflight(s.cfg.Name, ad.tools, s.reg); err != nil {
		return nil, err
	}
	return &discovery{tools: ad.tools, skipped: ad.skipped, warnings: ad.warnings}, nil
}

// activate makes c the live connection and tools the registered ones, and
// moves to Ready. Close either comes first (registering then fails with
// errClosed, and the caller closes c) or finds c to close.
func (s *Server) activate(c *conn, d *discovery) error {
	left, err := s.install(d.tools)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == Stopped {
		return errClosed
	}
	d.skipped = append(d.skipped, left...)
	s.conn, s.skipped, s.warnings, s.attempt = c, d.skipped, d.warnings, 0
	s.moveLocked(Ready, nil)
	return nil
}

// install swaps the server's registered tools for tools in one step and
// returns, as skipped, those left out because another server (or a tool
// registered directly) holds their names. Names are chosen without looking
// at the registry (see registeredName), and the registry's Source takes
// only names that are free or already the server's, so two servers
// starting at once need no lock of their own, and a name never moves from
// another server's tool to one of this server's.
//
// No lock of the server's is held while the registry changes: its watchers
// run then, and may call back into the server.
func (s *Server) install(tools []*tool.Tool) ([]Skipped, error) {
	conflicts, err := s.src.Replace(tools)
	if errors.Is(err, tool.ErrSourceClosed) {
		return nil, errClosed
	}
	if err != nil {
		return nil, fmt.Errorf("server %q: register tools: %w", s.cfg.Name, err)
	}
	left := make(map[*tool.Tool]bool, len(conflicts))
	var skipped []Skipped
	for _, c := range conflicts {
		left[c.Tool] = true
		holder := fmt.Sprintf("tool %q of server %q", c.Holder.Name, c.Holder.Source)
		if c.Holder.Source == "" {
			holder = fmt.Sprintf("tool %q, registered directly", c.Holder.Name)
		}
		skipped = append(skipped, Skipped{Name: c.Tool.Origin.Name, Reason: fmt.Sprintf(
			"its registered name %q is held by %s (give the servers distinct prefixes)", c.Tool.Name, holder)})
	}
	registered := slices.DeleteFunc(slices.Clone(tools), func(t *tool.Tool) bool { return left[t] })
	s.mu.Lock()
	if s.state != Stopped {
		s.tools = registered
	}
	s.mu.Unlock()
	return skipped, nil
}

// preflight refuses a server whose tools would need a confirmer the
// registry lacks, naming every such tool, before anything is registered.
func preflight(server string, tools []*tool.Tool, reg *tool.Registry) error {
	if reg.CanConfirm() {
		return nil
	}
	var need []string
	for _, t := range tools {
		if t.Tier.NeedsConfirmation() {
			need = append(need, fmt.Sprintf("%s (%s)", t.Name, t.Tier))
		}
	}
	if len(need) == 0 {
		return nil
	}
	return fmt.Errorf("server %q: %w; these tools are write or destructive: %s (configure a confirmer, or set their tiers or filters)",
		server, tool.ErrNeedsConfirmer, strings.Join(need, ", "))
}

// handler returns the registry handler that calls the server's tool named
// original through whatever session is live when the call is made.
func (s *Server) handler(original string) tool.Handler {
	return func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
		return s.call(ctx, original, args)
	}
}

// call sends tools/call under the server's timeout. With no live session it
// fails at once with an error wrapping [tool.ErrUnavailable]. When the caller
// supplied a [tool.Caller], the request carries a progress token and the
// server's progress reports for it are forwarded.
func (s *Server) call(ctx context.Context, name string, args json.RawMessage) (*tool.Result, error) {
	s.mu.Lock()
	c, state, lastErr, attempt := s.conn, s.state, s.lastErr, s.attempt
	s.mu.Unlock()
	if c == nil {
		return nil, s.unavailable(state, attempt, lastErr)
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ref := s.calls.begin(ctx)
	defer s.calls.end(ref)
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if caller := tool.CallerFrom(ctx); caller != nil {
		token := fmt.Sprintf("toolwire-%d", s.nextToken.Add(1))
		s.progress.Store(token, progressTarget{ctx: ctx, caller: caller})
		defer s.progress.Delete(token)
		params.SetProgressToken(token)
	}
	cctx, probe := withCancelProbe(cctx)
	r, err := c.session.CallTool(cctx, params)
	if err != nil && cctx.Err() != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		// The SDK announces the cancellation after returning; Close waits
		// for it (see cancellations).
		c.cancels.expect(probe)
	}
	s.arrivals.catchUp(cctx)
	if err != nil {
		c.noteFailure(err, s.policy.FailureThreshold)
		return nil, s.requestError(ctx, cctx, fmt.Sprintf("call %q", name), err)
	}
	c.noteSuccess()
	return convertResult(r), nil
}

// unavailable explains why a call cannot be sent now.
func (s *Server) unavailable(state State, attempt int, lastErr error) error {
	msg := fmt.Sprintf("server %q is %s", s.cfg.Name, state)
	if state == Reconnecting || state == Connecting || state == Initializing || state == Discovering {
		msg += fmt.Sprintf(" (attempt %d of %d); retry shortly", attempt, s.policy.MaxAttempts)
	}
	if lastErr != nil {
		msg += "; last error: " + lastErr.Error()
	}
	return &maskedError{msg: s.secrets.String(msg), err: tool.ErrUnavailable}
}

func (s *Server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	defer s.arrivals.noteHandled()
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := s.progress.Load(token)
	if !ok {
		return // a report for a call that has ended, or not ours
	}
	t := v.(progressTarget)
	t.caller.Progress(t.ctx, tool.Progress{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
}

// onToolsChanged notes a notifications/tools/list_changed for the
// supervisor; several in a row fold into one re-listing.
func (s *Server) onToolsChanged(context.Context, *mcp.ToolListChangedRequest) {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}

// requestError wraps a failed request, saying plainly when the server's own
// timeout, not the caller, ended it.
func (s *Server) requestError(parent, ctx context.Context, what string, err error) error {
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("server %q: %s: no answer within %s: %w", s.cfg.Name, what, s.timeout, context.DeadlineExceeded)
	}
	// The SDK's message may quote an expanded URL or header, and this one
	// goes to the model: mask it, keeping the cause for errors.Is.
	return &maskedError{msg: fmt.Sprintf("server %q: %s: %s", s.cfg.Name, what, s.secrets.String(err.Error())), err: err}
}

// maskedError shows a message with secrets masked while still wrapping the
// original error.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// ConnectError is returned by [Connect] when the server cannot be started or
// reached.
type ConnectError struct {
	Server string
	msg    string
	err    error
}

func (e *ConnectError) Error() string { return e.msg }
func (e *ConnectError) Unwrap() error { return e.err }

// moveTo changes the state, which must be a legal move from the current one
// (see [State.CanMoveTo]); an illegal move is a bug and panics. Moving to
// the current state is a no-op.
func (s *Server) moveTo(next State, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moveLocked(next, err)
}

func (s *Server) moveLocked(next State, err error) {
	// Stopped is final: a connection attempt that raced with Close finds
	// out when it next takes the lock, and its moves are ignored.
	if s.state == next || s.state == Stopped {
		return
	}
	if !s.state.CanMoveTo(next) {
		panic(fmt.Sprintf("mcpclient: server %q: illegal move from %s to %s", s.cfg.Name, s.state, next))
	}
	s.logger.Debug("server state", "server", s.cfg.Name, "from", s.state.String(), "to", next.String())
	s.state, s.since = next, time.Now()
	if err != nil {
		s.lastErr = s.masked(err)
	}
	if next != Ready {
		s.conn = nil
	}
	if ch := s.opts.StateChanges; ch != nil {
		select {
		case ch <- s.statusLocked():
		default:
		}
	}
}

// fail moves the server to Failed for good: its tools are deregistered and
// the reason kept. phase says what it was doing.
func (s *Server) fail(phase string, err error) {
	s.mu.Lock()
	if s.state.Terminal() {
		s.mu.Unlock()
		return
	}
	s.tools = nil
	s.moveLocked(Failed, err)
	s.mu.Unlock()
	// With no lock held: the registry's watchers and the catalog's may
	// call back into the server.
	_, _ = s.src.Replace(nil) // fails only once Close has removed them
	s.catalogChanged()        // its resources and prompts go too
	s.record(audit.Event{Kind: audit.ServerFailed, Reason: phase, Error: err.Error()})
}

// record writes a lifecycle event naming the server. Its error text is
// masked here, so that a library user's audit log without a redactor does
// not receive an expanded secret either.
func (s *Server) record(ev audit.Event) {
	ev.Source = s.cfg.Name
	ev.Error = s.secrets.String(ev.Error)
	s.opts.Audit.Record(ev)
}

// masked returns err with every known secret masked in its text, still
// wrapping err for errors.Is.
func (s *Server) masked(err error) error {
	if err == nil {
		return nil
	}
	return &maskedError{msg: s.secrets.String(err.Error()), err: err}
}

// registered returns the server's registered tools, in listing order.
func (s *Server) registered() []*tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

func (s *Server) toolCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tools)
}

// Name returns the server's configured name.
func (s *Server) Name() string { return s.cfg.Name }

// State returns the server's lifecycle state.
func (s *Server) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Tools returns the registered names of the server's tools.
func (s *Server) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Name
	}
	return names
}

// Skipped returns the tools of the server's latest listing that were left
// out because their input schema did not compile, with the reasons.
func (s *Server) Skipped() []Skipped {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Skipped(nil), s.skipped...)
}

// Warnings returns adaptation warnings, such as a tier override naming a
// tool the server does not list.
func (s *Server) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.warnings...)
}

// Status is a snapshot of a server for display.
type Status struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"`
	State     State     `json:"state"`
	Since     time.Time `json:"since"`
	Tools     int       `json:"tools"`
	LastError string    `json:"lastError,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	PID       int       `json:"pid,omitempty"`
}

// Status returns a snapshot of the server.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Server) statusLocked() Status {
	st := Status{Name: s.cfg.Name, Transport: s.cfg.Transport, State: s.state, Since: s.since, Tools: len(s.tools), Attempt: s.attempt}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	if s.conn != nil {
		st.PID = s.conn.PID()
	}
	return st
}

// PID returns the stdio child's process id while connected, or 0.
func (s *Server) PID() int { return s.Status().PID }

// Close stops supervising the server, deregisters its tools and ends the
// session. It first lets the server hear of the calls cancelled or timed
// out just before: it waits, at most cancelGrace, until their
// notifications/cancelled are written, which the SDK does after the calls
// have returned. For a stdio server it then closes the child's stdin,
// waits for it to exit (then signals it, as the MCP spec describes), and
// ends anything left in its process group: once Close returns, no process
// of the server's is running. Close is safe to call more than once; later
// calls return the first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		live := s.conn
		s.mu.Unlock()
		if live != nil {
			// Before stop, which ends an SSE connection's event stream.
			live.cancels.flush(live.lost)
		}
		s.stop()
		s.mu.Lock()
		supervising := s.supervising
		s.mu.Unlock()
		if supervising {
			<-s.done
		}
		// The source refuses registrations from now on, so a start racing
		// with Close leaves nothing behind. Watchers run here and below
		// with no lock held.
		s.src.Close()
		s.mu.Lock()
		c := s.conn
		s.tools = nil
		s.moveLocked(Stopped, nil)
		s.mu.Unlock()
		s.catalogChanged()
		if c != nil {
			s.closeErr = c.close()
		}
		s.record(audit.Event{Kind: audit.ServerStopped})
	})
	return s.closeErr
}
