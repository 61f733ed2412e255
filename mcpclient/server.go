package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

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
	// Callers makes the per-caller upstream credentials of each server
	// whose oauth settings say identity: caller (see [oauth.Callers]).
	// Such a server is reached by each caller's own session for every
	// call, read, prompt, completion and subscription, with the caller the
	// call's context carries ([tool.WithPrincipal]); its shared connection,
	// with the handler OAuth makes, lists and hears notifications only.
	// Without Callers such a server fails to start.
	Callers CallersFunc
	// CallerSessions bounds the callers' sessions each such server keeps.
	CallerSessions CallerSessionPolicy
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
	// Sandbox says how stdio servers are confined; the zero value
	// confines each where the system can (see [SandboxOptions]).
	Sandbox SandboxOptions
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

// settings is what every part of a server reads and none changes: its
// configuration, the options with their defaults filled in, and the bounds
// they set. It needs no lock.
type settings struct {
	cfg     config.Server
	opts    Options
	logger  *slog.Logger
	secrets *audit.Secrets
	timeout time.Duration
	policy  ReconnectPolicy
	// confined is how a stdio server is confined; nil for a remote one.
	confined *Confinement
	// midCallLogged: the log said once that the server asks its client
	// during a 2026-07-28 call (see explainMidCall).
	midCallLogged atomic.Bool
}

func newSettings(cfg config.Server, opts *Options) *settings {
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
	set := &settings{cfg: cfg, opts: o, logger: o.Logger, secrets: o.Secrets, timeout: cfg.Timeout, policy: o.Reconnect}
	if set.timeout <= 0 {
		set.timeout = DefaultTimeout
	}
	set.confined = set.confinement()
	return set
}

// Server is one MCP server whose tools are in a registry, supervised: when
// its session is lost it reconnects by itself, and when it announces a
// changed tool list the registry follows.
//
// A Server's registered tools always call through the live session. While
// the server is reconnecting they stay registered but fail fast with an
// error wrapping [tool.ErrUnavailable]; once the server has failed for good
// they are deregistered.
//
// A Server composes four parts, each with its own state and lock: the
// supervisor (the session and the lifecycle), the tool set (naming,
// pinning and registering the tools), the router (what the server sends
// during a call) and the [Catalog] (its resources and prompts); a server
// reached with each caller's own identity (oauth.identity: caller) has a
// fifth, the pool of its callers' sessions (see [Options].Callers), and
// its supervisor's session only lists.
type Server struct {
	set   *settings
	sup   *supervisor
	tools *toolSet
	relay *router
	cat   *Catalog
	// pool holds the callers' sessions of a server reached with each
	// caller's identity (oauth.identity: caller); nil otherwise.
	pool *callerSessions
}

// newServer returns a server in the Configured state.
func newServer(cfg config.Server, reg *tool.Registry, opts *Options) *Server {
	set := newSettings(cfg, opts)
	s := &Server{set: set, relay: &router{set: set}}
	s.tools = &toolSet{set: set, reg: reg, src: reg.NewSource(), call: s.call}
	s.cat = &Catalog{set: set, reach: s.reach}
	s.sup = newSupervisor(set, s.tools, s.cat)
	s.cat.sup = s.sup
	handlers := s.handlersFor(s.relay)
	handlers.ToolListChangedHandler = s.sup.onToolsChanged
	handlers.ResourceListChangedHandler = s.cat.onListChanged
	handlers.PromptListChangedHandler = s.cat.onPromptsChanged
	s.sup.dial = &dialer{set: set, logLevel: s.cat.level,
		shared: endpoint{handlers: handlers, relay: s.relay, listOnly: cfg.OAuth.PerCaller()}}
	if cfg.OAuth.PerCaller() {
		s.pool = newCallerSessions(set, s.sup.dial, s.handlersFor, s.cat.level)
		s.cat.sessions, s.cat.existing = s.pool.each, s.pool.existing
	}
	return s
}

// handlersFor returns the client handlers of a connection whose arrivals
// r routes: progress, log lines, and the requests the callers can answer,
// and resource updates. A caller's session has these alone; the shared
// connection also hears the list changes (see newServer), which a
// caller's session leaves to it.
func (s *Server) handlersFor(r *router) mcp.ClientOptions {
	h := mcp.ClientOptions{
		ProgressNotificationHandler: r.onProgress,
		LoggingMessageHandler:       r.onLog,
		ResourceUpdatedHandler:      s.cat.onResourceUpdated,
	}
	// Sampling and elicitation only when the callers can answer them: a
	// server must not be led to ask for what toolwire would refuse.
	if s.set.opts.Relay.Elicitation {
		h.ElicitationHandler = r.onElicit
	}
	if s.set.opts.Relay.Sampling {
		h.CreateMessageHandler = r.onSample
	}
	return h
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

// start makes the first connection and, on success, starts supervising. A
// server reached with each caller's identity makes its per-caller
// credentials first.
func (s *Server) start(ctx context.Context) error {
	if s.pool != nil {
		if err := s.pool.prepare(); err != nil {
			s.sup.fail("configure", err)
			return err
		}
	}
	return s.sup.start(ctx)
}

// reach returns the connection a request made with ctx goes through, and
// the function that ends its use: for a server reached with each caller's
// identity, the session of the caller ctx carries (none without one: see
// callerSessions.acquire); otherwise the live shared connection. It notes
// for the call's audit with whose identity the request reaches the
// server. Every request but a listing goes through reach: the shared
// connection of a per-caller server is never returned by it.
func (s *Server) reach(ctx context.Context) (*conn, func(), error) {
	if s.pool != nil {
		c, release, err := s.pool.acquire(ctx)
		if err != nil {
			return nil, nil, s.set.masked(authorizationOf(err))
		}
		return c, release, nil
	}
	c, err := s.sup.live()
	if err != nil {
		return nil, nil, err
	}
	tool.NoteUpstreamIdentity(ctx, tool.UpstreamShared)
	return c, func() {}, nil
}

// call sends tools/call under the server's timeout, through the
// connection reach gives. With no live session it fails at once with an
// error wrapping [tool.ErrUnavailable]. When the caller supplied a
// [tool.Caller], the request carries a progress token and the server's
// progress reports for it are forwarded (see [router]). A tool that needs
// to run as a task is called as one (see tasks.go).
func (s *Server) call(ctx context.Context, name string, args json.RawMessage) (*tool.Result, error) {
	c, release, err := s.reach(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if ut := tool.UpstreamTaskFrom(ctx); ut != nil && ut.Resume != "" {
		return s.resumeTask(ctx, c, name, ut.Resume)
	}
	if era := c.tasks.needs(name); era != noTask {
		return s.callTask(ctx, c, name, args, era)
	}
	r, err := s.callOnce(ctx, c, name, args)
	if err != nil && s.pool == nil && mayRetry(ctx, err) {
		r, err = s.retry(ctx, c, name, args, err)
	}
	if era := s.taskNeeded(ctx, c, name, r, err); era != noTask {
		// The server refused a plain call of a tool that needs a task,
		// before running it (see tasks.go).
		c.tasks.note(name, era)
		return s.callTask(ctx, c, name, args, era)
	}
	if err != nil {
		return nil, err
	}
	res := convertResult(r)
	if res.IsError && askedMidCall(c, res) {
		s.set.explainMidCall(res)
	}
	return res, nil
}

// goSDKMidCallRefusal is what go-sdk's server writes in a tool's error
// when the tool asks its client (sampling, elicitation, roots) during a
// call served on 2026-07-28, which the revision does not allow: a server
// asks in its answer instead (SEP-2322).
const goSDKMidCallRefusal = "cannot be sent while serving a request on protocol version 2026-07-28"

// askedMidCall reports whether res is a tool's error saying that the
// tool asked its client during the call on a 2026-07-28 connection c,
// and was refused: a server written for an earlier revision.
func askedMidCall(c *conn, res *tool.Result) bool {
	return stateless(c.protocol) && strings.Contains(res.Text(), goSDKMidCallRefusal)
}

// midCallHint names what makes a server that asks its client during a
// call work through toolwire.
func (set *settings) midCallHint(what string) string {
	return fmt.Sprintf("toolwire: server %q %s during a call, which protocol 2026-07-28 (the revision toolwire speaks to it) does not allow: "+
		"a server asks in its answer instead. If the server was written for an earlier revision, set \"protocol: 2025-11-25\" on server %q in the configuration",
		set.cfg.Name, what, set.cfg.Name)
}

// explainMidCall adds to res, the error of a tool that asked its client
// during a 2026-07-28 call, the setting that makes it work, and logs it
// once per server.
func (set *settings) explainMidCall(res *tool.Result) {
	hint := set.midCallHint("asked its client (sampling, elicitation or roots)")
	res.Content = append(res.Content, &tool.Text{Text: hint})
	res.Message = hint
	if set.midCallLogged.CompareAndSwap(false, true) {
		set.logger.Warn(hint, "server", set.cfg.Name)
	}
}

// callOnce sends one tools/call. Its error still wraps the SDK's.
func (s *Server) callOnce(ctx context.Context, c *conn, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	callCtx, end := c.relay.beginCall(ctx, params)
	defer end()
	cctx, cancel := context.WithTimeout(callCtx, s.set.timeout)
	defer cancel()
	cctx, probe := withCancelProbe(cctx)
	r, err := c.session.CallTool(cctx, params)
	if err != nil && cctx.Err() != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		// The SDK announces the cancellation after returning; Close waits
		// for it (see cancellations).
		c.cancels.expect(probe)
	}
	c.relay.catchUp(cctx)
	if err != nil {
		c.noteFailure(err, s.set.policy.FailureThreshold)
		return nil, s.set.requestError(ctx, cctx, fmt.Sprintf("call %q", name), authorizationOf(err))
	}
	c.noteSuccess()
	return r, nil
}

// requestError wraps a failed request, saying plainly when the server's own
// timeout, not the caller, ended it.
func (set *settings) requestError(parent, ctx context.Context, what string, err error) error {
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("server %q: %s: no answer within %s: %w", set.cfg.Name, what, set.timeout, context.DeadlineExceeded)
	}
	// The SDK's message may quote an expanded URL or header, and this one
	// goes to the model: mask it, keeping the cause for errors.Is.
	return &maskedError{msg: fmt.Sprintf("server %q: %s: %s", set.cfg.Name, what, set.secrets.String(err.Error())), err: err}
}

// record writes a lifecycle event naming the server. Its error text is
// masked here, so that a library user's audit log without a redactor does
// not receive an expanded secret either.
func (set *settings) record(ev audit.Event) {
	ev.Source = set.cfg.Name
	ev.Error = set.secrets.String(ev.Error)
	set.opts.Audit.Record(ev)
}

// masked returns err with every known secret masked in its text, still
// wrapping err for errors.Is.
func (set *settings) masked(err error) error {
	if err == nil {
		return nil
	}
	return &maskedError{msg: set.secrets.String(err.Error()), err: err}
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

// Name returns the server's configured name.
func (s *Server) Name() string { return s.set.cfg.Name }

// State returns the server's lifecycle state.
func (s *Server) State() State { return s.sup.currentState() }

// Tools returns the registered names of the server's tools.
func (s *Server) Tools() []string { return s.tools.names() }

// Skipped returns the tools of the server's latest listing that were left
// out because their input schema did not compile, with the reasons.
func (s *Server) Skipped() []Skipped { return s.tools.skippedTools() }

// Warnings returns adaptation warnings, such as a tier override naming a
// tool the server does not list.
func (s *Server) Warnings() []string { return s.tools.warningList() }

// Definitions returns the definitions of the tools in the server's latest
// listing, as pins fingerprint them, in listing order: every tool the
// configuration selects (onlyTools, excludeTools), quarantined ones
// included. It is what an operator approves ([pins.Store.Approve]). Before
// the first listing it returns nil.
func (s *Server) Definitions() []pins.Definition { return s.tools.definitions() }

// Quarantined returns the tools of the server's latest listing that
// pinning keeps out of the registry, in listing order. In warn mode and
// with pinning off it is empty.
func (s *Server) Quarantined() []Quarantine { return s.tools.quarantined() }

// Catalog returns what the server offers besides tools: its resources,
// resource templates and prompts, and the requests about them (see
// [Catalog]). It is the same for the server's whole life, across
// reconnects.
func (s *Server) Catalog() *Catalog { return s.cat }

// Status is a snapshot of a server for display.
type Status struct {
	Name      string           `json:"name"`
	Transport config.Transport `json:"transport"`
	State     State            `json:"state"`
	Since     time.Time        `json:"since"`
	Tools     int              `json:"tools"`
	LastError string           `json:"lastError,omitempty"`
	Attempt   int              `json:"attempt,omitempty"`
	PID       int              `json:"pid,omitempty"`
	// Protocol is the MCP revision the server's latest connection
	// negotiated ("2026-07-28", "2025-11-25", ...), kept while it
	// reconnects; "" before the first.
	Protocol string `json:"protocol,omitempty"`
	// CallerSessions is how many callers' own sessions a server reached
	// with each caller's identity holds.
	CallerSessions int `json:"callerSessions,omitempty"`
	// Sandbox is how a stdio server is confined (or would be, before it
	// starts); nil for a remote server.
	Sandbox *Confinement `json:"sandbox,omitempty"`
}

// Status returns a snapshot of the server.
func (s *Server) Status() Status {
	st := s.sup.status()
	if s.pool != nil {
		st.CallerSessions = s.pool.size()
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
// of the server's is running. The callers' own sessions of a server
// reached with each caller's identity are closed last. Close is safe to
// call more than once; later calls return the first call's result.
func (s *Server) Close() error {
	err := s.sup.close()
	if s.pool != nil {
		s.pool.close()
	}
	return err
}
