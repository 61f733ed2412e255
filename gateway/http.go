package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/netpolicy"
)

// HTTPOptions configures [Gateway.Handler].
type HTTPOptions struct {
	// Verifier checks each request's bearer token. Nil means no
	// authentication: every caller sees every tool. Only for loopback use;
	// the CLI refuses other addresses without it.
	Verifier auth.TokenVerifier
	// Roles decides which tools each role sees (and may call). Required
	// with a Verifier: a caller whose role is not listed sees no tool.
	Roles Roles
	// ResourceURL is this endpoint's canonical URL, announced in the RFC
	// 9728 protected-resource metadata and the WWW-Authenticate challenge.
	ResourceURL string
	// AuthorizationServers are the issuers that grant tokens for this
	// resource, announced in the metadata.
	AuthorizationServers []string
	// Stateless serves without sessions: 2025 clients are served each
	// request on its own, so they cannot be asked anything during a call
	// (no approvals by asking, no relayed questions); 2026-07-28 clients,
	// which never have sessions, are served as without it. Without
	// Stateless, both kinds are served on the one endpoint.
	Stateless bool
	// MaxBodyBytes limits the size of a request body; a larger one is
	// refused with 413 before it is parsed. Zero means go-sdk's default
	// ([mcp.DefaultMaxRequestBodyBytes], 4 MiB); a negative value removes
	// the limit, which no server reachable by untrusted callers should do.
	MaxBodyBytes int64
	// Limits bound sessions and calls (see [Limits]); the zero value sets
	// none.
	Limits Limits
	// AllowedOrigins are the browser origins (scheme://host[:port]) whose
	// requests to /mcp are served; a request with any other Origin header
	// gets 403. A request without one is not from a browser and is served.
	AllowedOrigins []string
	// InsecurePlainBearer accepts bearer tokens over plain HTTP on a
	// connection to a non-loopback address. Without it such a request gets
	// 403 before its token is looked at: a token sent in the clear can be
	// read and replayed by anyone on the path. A gateway behind a TLS
	// proxy that reaches it over a private network needs it.
	InsecurePlainBearer bool
	// Ready reports whether the gateway is ready for new sessions (say,
	// its required upstreams are connected), for [ReadinessPath]. Nil
	// means always, while not draining.
	Ready func() bool
	// Audit receives the refusals of sessions and calls by the limits,
	// as the executor's audit events. Nil means none.
	Audit *audit.Log
	// Observe, when set, is told of sessions opened, closed and refused
	// and calls refused or cancelled, for metrics. It is called
	// synchronously, outside the gateway's locks: it must not block.
	Observe func(Event)
	// Sessions, when set, keeps the records of 2025 sessions for a fleet
	// of replicas, so that any replica serves any session's requests (see
	// [SessionStore]). Nil keeps every session in this process. The limits
	// on sessions and on calls in progress stay each replica's own.
	Sessions SessionStore
	// CallLimiter, when set, decides each caller's call rate
	// (Limits.CallRate and CallBurst) for the whole fleet instead of this
	// process (see [CallLimiter]).
	CallLimiter CallLimiter
	// Callbacks are handlers served at their paths outside the bearer
	// authentication and the Origin check: the redirects of callers'
	// authorizations at upstreams reached with each caller's own identity
	// (oauth.Callback, by default at oauth.DefaultCallbackPath), which a
	// browser brings back by a navigation from the authorization server,
	// with no token. A path must be absolute and not one the handler
	// serves itself (see [CallbackPathProblem]).
	Callbacks map[string]http.Handler
}

// CallbackPathProblem says why path cannot be an [HTTPOptions] Callbacks
// path: not absolute, or one the handler serves itself (/mcp, the
// metadata, the health endpoints, the approval pages). nil when it can.
func CallbackPathProblem(path string) error {
	switch {
	case !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " {}"):
		return fmt.Errorf("callback path %q: want an absolute path", path)
	case path == "/" || path == "/mcp" || path == MetadataPath || path == LivenessPath || path == ReadinessPath || strings.HasPrefix(path, ApprovalPath) || strings.HasPrefix(path, "/mcp/"):
		return fmt.Errorf("callback path %q is one the gateway serves itself", path)
	}
	return nil
}

// MetadataPath is where the protected-resource metadata is served.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Handler returns the gateway as a Streamable HTTP handler for the path
// /mcp, plus the protected-resource metadata at [MetadataPath] and the
// health endpoints [LivenessPath] and [ReadinessPath], and opts.Callbacks
// at their paths (outside authentication). Requests to /mcp
// pass, in order: the Origin check, the plain-HTTP bearer check, token
// verification, the session binding (a request naming a session must show
// the credential that opened it), the dispatcher, the limits and one of
// go-sdk's two handlers. With a verifier, a request without a valid bearer
// token gets 401 with a WWW-Authenticate challenge pointing at the
// metadata; each caller gets a server listing only its role's tools, and
// its subject is on every audit event of its calls. Host headers that are
// not localhost are refused on loopback listeners (DNS rebinding), as
// go-sdk does by default.
//
// Every revision is served on /mcp: the dispatcher sends the requests of
// 2025 clients, which open sessions, to toolwire's session layer and
// those of 2026-07-28 clients, which have none, to its stateless one (see
// [dispatcher]); both serve the same per-role servers. With
// opts.Stateless, every request goes to the stateless one.
//
// The handler keeps one MCP server per role, each watching the registry;
// Close stops them.
func (g *Gateway) Handler(options *HTTPOptions) *Handler {
	var opts HTTPOptions
	if options != nil {
		opts = *options
	}
	tr := newTracker(opts.Limits, opts.Observe, opts.Audit)
	tr.refuse = g.refuse
	if g.tasks != nil && opts.Audit != nil {
		g.tasks.audit = opts.Audit // before anything is served
	}
	tr.limiter = opts.CallLimiter
	byRole := &roleServers{g: g, servers: map[string]*mcp.Server{}, middleware: []mcp.Middleware{tr.middleware}}
	byRole.now.roles, byRole.now.perCaller = opts.Roles, opts.Verifier != nil && opts.Roles.differ()
	var verifier *swappableVerifier // the one a reload replaces; nil without authentication
	if opts.Verifier != nil {
		verifier = newSwappableVerifier(opts.Verifier)
		opts.Verifier = verifier.verify
	}
	limit := opts.MaxBodyBytes
	if limit == 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	var sessions *stateful // the 2025 sessions; none when stateless
	if !opts.Stateless {
		sessions = newStateful(nil, tr, opts.Sessions, g.opts.Relay, limit, g.logger)
		if g.tasks != nil {
			sessions.methods = withTaskMethods(receivedMethods)
		}
		sessions.replyKey = replyKeyOf(g.sealer)
		if opts.Verifier != nil {
			// Outside the swappable one: a reload changes what verifies
			// tokens, never the binding of sessions to credentials.
			opts.Verifier = sessions.verifier(opts.Verifier)
		}
		if opts.Sessions != nil {
			byRole.middleware = append(byRole.middleware, sessions.record)
		}
	}
	getServer := func(req *http.Request) *mcp.Server {
		if opts.Verifier == nil {
			return byRole.get("", nil)
		}
		_, role := callerOf(req)
		return byRole.get(role, func(name string) bool {
			roles, _ := byRole.now.get()
			return roles.allows(role, name)
		})
	}
	// Closing the stream of a 2026-07-28 request cancels it: that is how
	// such a client cancels over HTTP, and how a parked call learns that
	// its client went away.
	// A 2026-07-28 tools/call is served by modernCalls (modernconn.go)
	// when it can answer as go-sdk would, choosing JSON itself; what
	// go-sdk's handler answers goes as JSON when it is a whole answer
	// (wholeanswer.go).
	modernCalls := &modernCalls{
		next: wholeAnswers(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Stateless: true, PropagateRequestCancellation: true, MaxRequestBodyBytes: opts.MaxBodyBytes,
		})),
		getServer: getServer, servedBy: byRole.servedBy, maxBody: limit,
	}
	stateless := tr.wrapRequests(modernCalls, limit)
	h := stateless
	if sessions != nil {
		sessions.getServer, sessions.servedBy = getServer, byRole.servedBy
		h = &dispatcher{stateful: sessions, stateless: stateless, maxBody: limit}
	}
	h = g.tasks.taskBodies(h, limit)
	// Approvals by URL-mode elicitation link to a page of this handler's,
	// at the address the client reached it by (or the configured one).
	origin := originOnly(opts.ResourceURL)
	h = withApprovalPages(h, g.pages, origin, g.parkTimeout)
	mux := http.NewServeMux()
	mux.Handle(ApprovalPath, &pageServer{pages: g.pages, origin: origin})
	mux.HandleFunc(LivenessPath, liveness)
	mux.Handle(ReadinessPath, readiness(opts.Ready, tr))
	if opts.Verifier != nil {
		h = requireToken(opts, h)
		if !opts.InsecurePlainBearer {
			h = refusePlainBearer(h)
		}
		mux.Handle(MetadataPath, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               opts.ResourceURL,
			AuthorizationServers:   opts.AuthorizationServers,
			BearerMethodsSupported: []string{"header"},
		}))
	}
	mux.Handle("/mcp", checkOrigin(opts.AllowedOrigins, h))
	for path, cb := range opts.Callbacks {
		if err := CallbackPathProblem(path); err != nil {
			panic("gateway: HTTPOptions.Callbacks: " + err.Error())
		}
		mux.Handle(path, cb)
	}
	return &Handler{mux: mux, servers: byRole, tracker: tr, verifier: verifier, sessions: sessions, modern: modernCalls, relay: g.opts.Relay}
}

// Handler is the gateway's HTTP handler (see [Gateway.Handler]).
type Handler struct {
	mux      *http.ServeMux
	servers  *roleServers
	tracker  *tracker
	verifier *swappableVerifier // nil without authentication
	sessions *stateful          // nil when stateless
	modern   *modernCalls       // the 2026-07-28 calls served without go-sdk's handler
	relay    Relay              // names this replica (InstanceHeader); nil outside a fleet
}

// ServeHTTP serves /mcp, the protected-resource metadata and the health
// endpoints.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.relay != nil {
		// Asked each time: a replica taken for lost goes on as a new
		// instance (see store.Store.Claimed).
		w.Header().Set(InstanceHeader, h.relay.Instance())
	}
	h.mux.ServeHTTP(w, r)
}

// Drain shuts the gateway's sessions down: from now on a new session is
// refused with 503 and a new call with an isError result, and readiness
// answers 503; calls in flight may run for up to grace, then are
// cancelled (each upstream is sent notifications/cancelled and each call
// audited as cancelled); Drain waits for them to return, at most until
// ctx ends, then closes every session. It returns how many calls it
// cancelled. The HTTP server's Shutdown can then finish at once.
//
// The tasks this replica runs are given the same grace, then cancelled,
// each ending failed with a status that says the replica shut down.
func (h *Handler) Drain(ctx context.Context, grace time.Duration) int {
	tasks := make(chan int, 1)
	go func() { tasks <- h.servers.g.tasks.drain(ctx, grace) }()
	n := h.tracker.drain(ctx, grace)
	return n + <-tasks
}

// Close stops the per-role servers from following the registry. Requests
// still being served are not interrupted.
func (h *Handler) Close() {
	h.servers.stopAll()
	if h.sessions != nil {
		h.sessions.close()
	}
}

// withApprovalPages puts the approval pages in the context of every
// request to next, with the address to link them by: base, or the
// request's own scheme and host.
func withApprovalPages(next http.Handler, pages *approvalPages, base string, wait time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := base
		if b == "" {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			b = scheme + "://" + r.Host
		}
		next.ServeHTTP(w, r.WithContext(withApprovalLinks(r.Context(), &approvalLinks{pages: pages, base: b, wait: wait})))
	})
}

// requireToken wraps next in go-sdk's bearer-token middleware. The 401
// challenge must point at the protected-resource metadata; without a
// configured ResourceURL its address is derived from each request's Host,
// since a challenge without it leaves a client nowhere to start.
func requireToken(opts HTTPOptions, next http.Handler) http.Handler {
	if opts.ResourceURL != "" {
		return auth.RequireBearerToken(opts.Verifier, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: originOnly(opts.ResourceURL) + MetadataPath,
		})(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		auth.RequireBearerToken(opts.Verifier, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: scheme + "://" + r.Host + MetadataPath,
		})(next).ServeHTTP(w, r)
	})
}

// refusePlainBearer answers 403 to a request over plain HTTP to a
// non-loopback address, so that no bearer token is accepted in the clear.
func refusePlainBearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil && !loopbackConn(r) {
			http.Error(w, "Forbidden: bearer tokens are not accepted over plain HTTP on a non-loopback address; connect with https", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackConn reports whether r arrived on a connection to a loopback
// address. Unknown means no.
func loopbackConn(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || addr == nil {
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	return err == nil && netpolicy.IsLoopbackHost(host)
}

// roleServers keeps one MCP server per role: callers of the same role see
// the same tools, so they can share it.
type roleServers struct {
	g          *Gateway
	now        rolesNow         // the roles, and whether what a server answers depends on its role (see [Gateway.cacheHints])
	middleware []mcp.Middleware // added to every server made (the tracker's, the session binding's)

	mu      sync.Mutex
	servers map[string]*mcp.Server
	served  map[string]*served // the same servers' sync state, for a reload
	stops   []func()
	closed  bool
}

// get returns the role's server, making it on first use. Making one may
// wait for the upstreams that changed since their last listing to be
// listed again (each bounded by its timeout; see [upstreams]), so it
// happens outside the lock: one slow upstream does not hold up the other
// roles.
// Two first requests of a role may both make one; the second is stopped.
func (r *roleServers) get(role string, visible func(string) bool) *mcp.Server {
	r.mu.Lock()
	s, ok := r.servers[role]
	r.mu.Unlock()
	if ok {
		return s
	}
	perCaller := func() bool { _, p := r.now.get(); return p }
	made, sv, stop := r.g.serve(visible, perCaller, r.middleware...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.servers[role]; ok {
		stop()
		return s
	}
	if r.closed {
		stop() // the handler is closing: serve this request, keep nothing
		return made
	}
	if r.served == nil {
		r.served = map[string]*served{}
	}
	r.servers[role], r.served[role] = made, sv
	r.stops = append(r.stops, stop)
	return made
}

// servedBy returns the sync state of srv, a server get made and kept,
// or nil.
func (r *roleServers) servedBy(srv *mcp.Server) *served {
	r.mu.Lock()
	defer r.mu.Unlock()
	for role, s := range r.servers {
		if s == srv {
			return r.served[role]
		}
	}
	return nil
}

func (r *roleServers) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, stop := range r.stops {
		stop()
	}
	r.stops = nil
	r.closed = true
}

// originOnly returns scheme://host of u, or u itself when it does not parse.
func originOnly(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	return p.Scheme + "://" + p.Host
}
