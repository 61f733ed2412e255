package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/tool"
)

// Options tunes [Open]: what the CLI's flags decide. A nil *Options means
// the defaults.
type Options struct {
	// Confirmer approves write and destructive calls
	// ([tool.RegistryOptions]). Nil means none: a server that lists such a
	// tool then fails to start.
	Confirmer tool.Confirmer
	// OperatorWait, when set, is how long a call whose client cannot be
	// asked waits for an operator (a [gateway.Approver] confirmer's),
	// in place of gateway.approvals.operatorWait, at Open and every
	// reload: a flag of serve's.
	OperatorWait *time.Duration
	// AuditFile, when set, is the audit file instead of the
	// configuration's audit.file (the CLI's --audit). With a PostgreSQL
	// store it is an error ([ErrAuditFileOnPostgres]): the store's table
	// is the audit log.
	AuditFile string
	// StoreURL, when set, is the store instead of the configuration's
	// store (the CLI's --store, or TOOLWIRE_STORE): a PostgreSQL URL,
	// postgres://USER@HOST:PORT/DATABASE, used as it is (the
	// configuration's store is expanded with LookupEnv; this is a value
	// already). Both unset means the files of one machine. See
	// [OpenStore].
	StoreURL string
	// Strict applies the strict profile, as security.strict: true does
	// (the CLI's --strict): remote servers reach only their own host and
	// security.allowHosts, and tool pins are enforced unless security.pins
	// says otherwise.
	Strict bool
	// Logger receives the configuration's warnings, the servers' failures
	// to start (unless OnFailed is set) and whatever the servers and the
	// audit log report. Every string in its records is masked with the
	// workspace's secrets first. Nil means slog.Default().
	Logger *slog.Logger
	// LookupEnv resolves ${VAR} placeholders (the store URL's too), the
	// variables the configuration names for client secrets, and
	// TOOLWIRE_PASSPHRASE for the store's OAuth tokens. Nil means
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Input answers a ${input:ID} placeholder, asking a person, say
	// ([mcpclient.Options]). Nil refuses such placeholders with an error
	// saying which input is needed.
	Input func(id string, in config.Input) (string, error)
	// StateChanges, when set, receives a snapshot of a server after each
	// change of its state, from the first start on; sends never block
	// ([mcpclient.Options]).
	StateChanges chan<- mcpclient.Status
	// OnFailed, when set, is told of each server that failed to start
	// (and was left out), in configuration order, with the reason (its
	// secrets masked), in place of a warning through Logger: the CLI, having shown the
	// failure on a terminal already, does not say it twice.
	OnFailed func(server, reason string)
	// Relay says which requests servers may make of the calls' callers
	// ([mcpclient.RelayCapabilities]); the zero value advertises none.
	Relay mcpclient.RelayCapabilities
	// OAuth makes the OAuth handler of each remote server that requires
	// one. Nil means [OAuthHandlers] over the store's tokens with
	// OAuthFetcher.
	OAuth mcpclient.OAuthFunc
	// OAuthFetcher obtains a person's authorization for the default OAuth
	// handlers, as [oauth.Loopback] does for toolwire login. Nil means
	// nobody can be asked: a server that needs a person to log in fails,
	// naming "toolwire login SERVER". With it, Open first checks that the
	// store has a key to keep the tokens with ([oauth.Store.CheckKey]: a
	// PostgreSQL store needs TOOLWIRE_PASSPHRASE or a key file given to
	// it). Unused when OAuth is set.
	OAuthFetcher oauth.Fetcher
	// Callers makes the per-caller upstream credentials of each server
	// reached with each gateway caller's own identity (oauth.identity:
	// caller). Nil means [CallerCredentials] over the store's tokens.
	Callers mcpclient.CallersFunc
	// CallerSessions bounds the callers' own sessions each such server
	// keeps ([mcpclient.CallerSessionPolicy]); zero fields take the
	// defaults.
	CallerSessions mcpclient.CallerSessionPolicy
	// Telemetry lets traces and metrics watch the workspace.
	Telemetry Telemetry
	// StartWait, when positive, lets Open return before every server has
	// started, so that a server that never answers does not hold up the
	// others' tools: Open returns once every server is ready or has
	// failed, or, after StartWait, as soon as one server is ready and no
	// required server is still starting. The rest go on starting under
	// their own timeouts, with Open's ctx (which must outlive them); their
	// tools join the registry when they are ready, and their failures are
	// reported (OnFailed, or a warning) once the last start has ended,
	// unless Close came first. Zero waits for every server.
	StartWait time.Duration
}

// Telemetry are the places where traces and metrics watch a workspace:
// toolwire serve fills them from its OpenTelemetry setup. A nil field
// watches nothing there.
type Telemetry struct {
	// Observer is told of each call's steps ([tool.ExecutorOptions]).
	Observer tool.Observer
	// AuditSink wraps the audit log's sink (the audit file's, or the
	// PostgreSQL store's table): to count the events written, say.
	AuditSink func(audit.Sink) audit.Sink
	// Middleware and WrapTransport go to every server's client
	// ([mcpclient.Options]): a span per request, the trace context passed
	// on.
	Middleware    func(server string) []mcp.Middleware
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// ErrNotStarted is matched by the error of [Open] when the configured
// servers could not be started: a required server failed, or none
// started. The error's text is the cause's. Any other error of Open is
// one of the configuration (the store, the audit file, the signing key,
// the pins).
var ErrNotStarted = errors.New("servers not started")

// ErrNoAuditFile is wrapped by the error of [Open] when the configuration
// says audit.required but names no audit file (and the store is files: a
// PostgreSQL store's table is always the audit log).
var ErrNoAuditFile = errors.New("audit.required: no audit file to write")

// auditCloseWait bounds how long Close waits for calls still running to
// record their outcomes; those that do not are recorded as ended by the
// shutdown ([audit.Log.Close]).
const auditCloseWait = 5 * time.Second

// Workspace is a configuration applied: its audit log open and its
// servers started, their tools in one registry behind one executor. Its
// methods are safe for concurrent use.
type Workspace struct {
	security config.Security // the file's, with Options.Strict applied
	registry *tool.Registry
	executor *tool.Executor
	manager  *mcpclient.Manager
	store    *store.Store  // closed last
	stateKey func() []byte // the fleet's requestState key, made once when a gateway needs it; nil on files
	audit    *audit.Log    // nil without an audit sink (files without an audit file)
	secrets  *audit.Secrets
	logger   *slog.Logger      // masks the secrets
	approver *gateway.Approver // Options.Confirmer when it is one, for a reload's approvals
	// approvals are the lasting approvals people gave, pending the calls
	// waiting for an operator; nil when the store keeps none.
	approvals approval.Grants
	pending   approval.Queue
	lookupEnv func(string) (string, bool)
	// operatorWait is Options.OperatorWait.
	operatorWait *time.Duration
	// stopSessions stops the approvals' watch of ended sessions; nil
	// without one.
	stopSessions func()

	// reloading serializes Reload; mu guards what it changes and the
	// gateways and handlers made.
	reloading sync.Mutex
	mu        sync.Mutex
	file      *config.File
	required  map[string]bool    // the servers the configuration marks required
	gateways  []madeGateway      // made by Gateway, whose upstreams follow a reload
	handlers  []*gateway.Handler // closed first by Close
	// callbackPaths are where Handler mounted the callbacks of callers'
	// logins, which a reload cannot add to.
	callbackPaths map[string]bool

	// starting is closed once every server's first start has ended;
	// Close waits for it (it ends the starts first), so that no failure
	// is reported after Close.
	starting chan struct{}
	closing  chan struct{} // closed when Close begins

	closeOnce sync.Once
	closeErr  error
}

// Open applies file: it opens the store ([OpenStore]: files, or the
// PostgreSQL database of a fleet) and the audit log on it, builds the
// registry and the executor, and starts every configured server in
// parallel, returning once each is ready or has failed (or sooner: see
// Options.StartWait). A server that fails is reported and left out. Open fails when a required server fails or when no server
// starts (errors matching [ErrNotStarted]), and when the configuration
// cannot be applied; it then leaves nothing running or open.
func Open(ctx context.Context, file *config.File, opts *Options) (*Workspace, error) {
	if file == nil {
		return nil, errors.New("workspace: no configuration")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	lookupEnv := o.LookupEnv
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	base := o.Logger
	if base == nil {
		base = slog.Default()
	}
	w := &Workspace{file: file, security: file.Security, secrets: audit.NewSecrets(), required: map[string]bool{},
		starting: make(chan struct{}), closing: make(chan struct{})}
	logger := slog.New(w.secrets.Handler(base.Handler()))
	w.logger = logger
	for _, warning := range file.Warnings {
		logger.Warn(warning)
	}
	if o.Strict {
		w.security.Strict = true
	}
	for _, s := range file.Servers {
		if s.Required {
			w.required[s.Name] = true
		}
	}

	pol, err := Policy(file)
	if err != nil {
		return nil, err
	}
	storeURL, err := StoreURL(file, &o)
	if err != nil {
		return nil, err
	}
	w.secrets.Add(urlPassword(storeURL)...)
	so := o
	so.LookupEnv, so.Logger = lookupEnv, logger
	if w.store, err = openStoreAt(ctx, file, storeURL, &so); err != nil {
		return nil, err
	}
	logStore(logger, w.store)
	pass, _ := lookupEnv(oauth.PassphraseEnv)
	w.stateKey = sync.OnceValue(func() []byte { return fleetStateKey(w.store, pass, w.logger) })
	if w.store.Audit() == nil && file.Audit.Required {
		w.store.Close()
		return nil, fmt.Errorf("%w (set audit.file or Options.AuditFile)", ErrNoAuditFile)
	}
	if sink := w.store.Audit(); sink != nil {
		if o.Telemetry.AuditSink != nil {
			sink = o.Telemetry.AuditSink(sink)
		}
		// In a fleet each event names the replica that recorded it, as
		// the Toolwire-Instance header of its answers does.
		var instance string
		if r := w.store.Relay(); r != nil {
			instance = r.Instance()
		}
		w.audit = audit.NewLog(sink, &audit.LogOptions{Redactor: w.secrets, Logger: logger, Required: file.Audit.Required, Instance: instance})
	}
	w.registry = tool.NewRegistry(&tool.RegistryOptions{Confirmer: o.Confirmer})
	w.approver, _ = o.Confirmer.(*gateway.Approver)
	// Every result goes to a terminal, a model or a gateway's client: all
	// are masked, by the executor, in one place.
	w.approvals = ApprovalsOf(w.store)
	w.pending = PendingOf(w.store, w.approvals)
	w.lookupEnv, w.operatorWait = lookupEnv, o.OperatorWait
	var grants tool.Approvals
	if w.approvals != nil {
		grants = w.approvals
	}
	if w.approver != nil {
		if err := w.setOperators(file.Gateway); err != nil {
			_ = w.store.Close()
			return nil, err
		}
		if grants != nil {
			grants = gateway.SessionApprovals(grants)
		}
		w.endSessions()
	}
	w.executor = tool.NewExecutor(w.registry, &tool.ExecutorOptions{
		Audit: w.audit, LogArguments: file.Audit.LogArguments, Logger: logger, Mask: w.secrets, Observer: o.Telemetry.Observer,
		Approvals: grants,
	})
	if pol != nil {
		w.executor.SetPolicy(pol)
	}

	var egress *mcpclient.EgressPolicy
	if w.security.Strict {
		egress = &mcpclient.EgressPolicy{AllowHosts: w.security.AllowHosts}
	}
	pinStore, pinMode, err := pinOptions(w.security, w.store)
	if err != nil {
		w.closeStore()
		return nil, err
	}
	oauthFunc := o.OAuth
	if oauthFunc == nil && o.OAuthFetcher != nil {
		// Someone may be asked to log in: not for tokens the store
		// cannot keep.
		if err := w.store.Tokens().CheckKey(); err != nil {
			w.closeStore()
			return nil, err
		}
	}
	if oauthFunc == nil {
		oauthFunc = OAuthHandlers(w.store.Tokens(), &OAuthOptions{LookupEnv: lookupEnv, Fetcher: o.OAuthFetcher})
	}
	callers := o.Callers
	if callers == nil {
		callers = CallerCredentials(w.store.Tokens(), &OAuthOptions{LookupEnv: lookupEnv})
	}
	w.manager = mcpclient.NewManager(file.Servers, w.registry, &mcpclient.Options{
		Egress: egress, OAuth: oauthFunc, Callers: callers, CallerSessions: o.CallerSessions,
		Pins: pinStore, PinMode: pinMode, MaxDescription: w.security.DescriptionLimit(), MaxTools: w.security.ToolLimit(),
		Logger: logger, LookupEnv: lookupEnv, Input: o.Input, Secrets: w.secrets, Audit: w.audit, StateChanges: o.StateChanges,
		Relay: o.Relay, Middleware: o.Telemetry.Middleware, WrapTransport: o.Telemetry.WrapTransport,
		Sandbox: mcpclient.SandboxOptions{Mode: w.security.Sandbox},
	})
	started := make(chan error, 1)
	go func() { started <- w.manager.Start(ctx) }()
	reported := map[string]bool{}
	report := func() {
		failed := w.manager.Failed()
		for _, st := range w.manager.Status() {
			if reason, ok := failed[st.Name]; ok && !reported[st.Name] {
				reported[st.Name] = true
				if o.OnFailed != nil {
					o.OnFailed(st.Name, w.secrets.String(reason))
				} else {
					logger.Warn(reason)
				}
			}
		}
	}
	var startErr error
	if !w.waitStart(started, o.StartWait, &startErr) {
		// Open returns with servers still starting: their failures are
		// reported as their starts end, unless Close came first.
		report()
		go func() {
			defer close(w.starting)
			<-started
			select {
			case <-w.closing:
			default:
				report()
			}
		}()
		return w, nil
	}
	close(w.starting)
	if startErr != nil {
		w.Close()
		return nil, &marked{startErr, ErrNotStarted}
	}
	report()
	if n := len(w.manager.Servers()); n > 0 && len(w.manager.Failed()) == n {
		w.Close()
		return nil, &marked{errors.New("no server could be started"), ErrNotStarted}
	}
	// The tools are known now: a rule that does not fit one it applies to
	// is the configuration's error, as a misspelt field would be.
	if err := w.checkPolicy(pol); err != nil {
		w.Close()
		return nil, err
	}
	w.watchPolicy()
	return w, nil
}

// startPoll is how often Open looks again, past its StartWait, for a
// server ready and no required one still starting.
const startPoll = 50 * time.Millisecond

// waitStart waits for the servers' starts: until started yields Start's
// error (stored in *err; waitStart then reports true) or, with wait
// positive, until wait has passed and one server is ready with no
// required server still starting (false: the rest are still starting).
func (w *Workspace) waitStart(started <-chan error, wait time.Duration, err *error) bool {
	if wait <= 0 {
		*err = <-started
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case *err = <-started:
		return true
	case <-timer.C:
	}
	tick := time.NewTicker(startPoll)
	defer tick.Stop()
	for {
		if w.enoughStarted() {
			return false
		}
		select {
		case *err = <-started:
			return true
		case <-tick.C:
		}
	}
}

// enoughStarted reports whether one server is ready and no server the
// configuration marks required is still starting.
func (w *Workspace) enoughStarted() bool {
	ready := false
	for _, st := range w.manager.Status() {
		switch {
		case st.State == mcpclient.Ready:
			ready = true
		case w.required[st.Name] && st.State != mcpclient.Failed:
			return false
		}
	}
	return ready
}

// pinOptions returns what the security section says about pinning: the
// store's pins (nil when pinning is off) and the mode.
func pinOptions(sec config.Security, st *store.Store) (*pins.Store, pins.Mode, error) {
	mode, err := pins.ParseMode(sec.PinMode())
	if err != nil {
		return nil, 0, fmt.Errorf("security.pins: %w", err)
	}
	if mode == pins.Off {
		return nil, mode, nil
	}
	return st.Pins(), mode, nil
}

// File returns the configuration the workspace applies.
func (w *Workspace) File() *config.File {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.file
}

// Registry returns the registry of every started server's tools.
func (w *Workspace) Registry() *tool.Registry { return w.registry }

// Executor returns the executor over the registry: calls are validated,
// confirmed, audited, and their results masked.
func (w *Workspace) Executor() *tool.Executor { return w.executor }

// Manager returns the manager of the configured servers: their states,
// and each server itself.
func (w *Workspace) Manager() *mcpclient.Manager { return w.manager }

// Audit returns the audit log, or nil (which records nothing) on files
// without an audit file.
func (w *Workspace) Audit() *audit.Log { return w.audit }

// Store returns the store the workspace keeps its state in: its pins
// (for toolwire pins approve), tokens (for toolwire login) and audit
// sink, and on PostgreSQL the fleet's limits and sessions. The workspace
// owns it: Close closes it.
func (w *Workspace) Store() *store.Store { return w.store }

// Secrets returns the secrets masked in results, log lines and audit
// events: those of the servers' configurations, and whatever else is
// added to it (an LLM's API key, say).
func (w *Workspace) Secrets() *audit.Secrets { return w.secrets }

// Ready reports whether every server the configuration marks required is
// ready and the store can be used (on PostgreSQL: the database answers
// within 2 s), the gateway's readiness.
func (w *Workspace) Ready() bool {
	w.mu.Lock()
	required := w.required
	w.mu.Unlock()
	for _, s := range w.manager.Servers() {
		if required[s.Name()] && s.State() != mcpclient.Ready {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeReady)
	defer cancel()
	return w.store.Ping(ctx) == nil
}

// Gateway returns a gateway serving the workspace's registry through its
// executor ([gateway.New]), with the workspace's servers as its upstreams
// (after any opts lists) and, when opts sets no MaxResultBytes, the
// configuration's security.maxResultBytes. The registry's confirmer
// should be a [gateway.Approver]. On a PostgreSQL store, where opts leaves
// them unset, the gateway is one replica of a fleet: its Relay is the
// store's and its StateKey the fleet's.
func (w *Workspace) Gateway(opts *gateway.Options) *gateway.Gateway {
	var o gateway.Options
	if opts != nil {
		o = *opts
	}
	if r := w.store.Relay(); r != nil && o.Relay == nil {
		o.Relay = r
	}
	if w.store.Kind() == store.Postgres {
		// A replica: it recovers the instances that are lost, and takes no
		// calls while it holds no claim in the fleet.
		w.store.Replica()
		o.Middleware = append([]mcp.Middleware{claimed(w.store)}, o.Middleware...)
	}
	if o.StateKey == nil {
		o.StateKey = w.stateKey()
	}
	extra := o.Upstreams[:len(o.Upstreams):len(o.Upstreams)]
	o.Upstreams = upstreams(extra, w.manager)
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = w.security.ResultLimit()
	}
	gw := gateway.New(w.executor, &o)
	w.mu.Lock()
	w.gateways = append(w.gateways, madeGateway{gw, extra})
	w.mu.Unlock()
	return gw
}

// upstreams returns extra and the manager's servers as a gateway's
// upstreams: never nil, so that the gateway serves their catalogs even
// when a reload is what brings the first server.
func upstreams(extra []gateway.Upstream, m *mcpclient.Manager) []gateway.Upstream {
	ups := append([]gateway.Upstream{}, extra...)
	for _, srv := range m.Servers() {
		ups = append(ups, srv.Catalog())
	}
	return ups
}

// Handler returns gw's Streamable HTTP handler ([gateway.Gateway.Handler])
// with, where opts leaves them unset, the workspace's audit log (for the
// refusals of the limits), [Workspace.Ready] as its readiness, on a
// PostgreSQL store the store's session records and per-caller rate
// buckets (one replica of a fleet), and, for the servers with a login per
// caller, the callback of their callers' authorizations at each of its
// paths ([Workspace.CallerCallback]), which tells gw of each
// authorization completed ([gateway.Gateway.Authorized]). Close closes it
// before the servers. It panics when a callback path is one the gateway
// serves itself; [Workspace.CallerCallbackPaths] and
// [gateway.CallbackPathProblem] tell beforehand.
func (w *Workspace) Handler(gw *gateway.Gateway, options *gateway.HTTPOptions) *gateway.Handler {
	var opts gateway.HTTPOptions
	if options != nil {
		opts = *options
	}
	if opts.Audit == nil {
		opts.Audit = w.audit
	}
	if opts.Ready == nil {
		opts.Ready = w.Ready
	}
	if w.store.Kind() == store.Postgres {
		if opts.Sessions == nil {
			opts.Sessions = GatewaySessions(w.store)
		}
		if opts.CallLimiter == nil {
			opts.CallLimiter = GatewayLimiter(w.store)
		}
	}
	if opts.Callbacks == nil {
		cbo := &oauth.CallbackOptions{Log: w.logger, Done: func(_ string, _ oauth.Caller, id string) { gw.Authorized(id) }}
		for _, path := range w.CallerCallbackPaths() {
			if opts.Callbacks == nil {
				opts.Callbacks = map[string]http.Handler{}
			}
			opts.Callbacks[path] = w.CallerCallback(path, cbo)
		}
	}
	w.mu.Lock()
	if w.callbackPaths == nil {
		w.callbackPaths = map[string]bool{}
	}
	for path := range opts.Callbacks {
		w.callbackPaths[path] = true
	}
	w.mu.Unlock()
	h := gw.Handler(&opts)
	w.mu.Lock()
	w.handlers = append(w.handlers, h)
	w.mu.Unlock()
	return h
}

// Close ends the workspace in order: the gateway handlers (their sessions
// and the calls in them), every server (and child process), which ends
// the calls still running on them, then the audit log, once each call's
// outcome is in it (waiting at most 5 s; a call still running then is
// recorded as ended by the shutdown), and last the store (the audit file,
// or the database's connections). Close is safe to call more than once;
// later calls return the first's error.
func (w *Workspace) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		handlers, gateways := w.handlers, w.gateways
		w.handlers, w.gateways = nil, nil
		w.mu.Unlock()
		for _, h := range handlers {
			h.Close()
		}
		for _, g := range gateways {
			g.gw.Close()
		}
		close(w.closing)
		err := w.manager.Close()
		<-w.starting
		w.closeErr = errors.Join(err, w.closeStore())
	})
	return w.closeErr
}

// closeStore closes the audit log, if there is one yet, then the store.
func (w *Workspace) closeStore() error {
	var err error
	if w.stopSessions != nil {
		w.stopSessions()
	}
	if w.audit != nil {
		ctx, cancel := context.WithTimeout(context.Background(), auditCloseWait)
		defer cancel()
		err = w.audit.Close(ctx)
	}
	return errors.Join(err, w.store.Close())
}
