package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/version"
	"github.com/toolwire/toolwire/internal/warm"
	"github.com/toolwire/toolwire/task"
	"github.com/toolwire/toolwire/tool"
)

// Options configures a [Gateway]. The zero value is usable.
type Options struct {
	// Name is the server name announced to clients; default "toolwire".
	Name string
	// Logger receives the SDK's server logs. Nil means none.
	Logger *slog.Logger
	// Unprefixed serves tools under their upstream's own names
	// (Origin.Name) instead of their registered <prefix>__<tool> names:
	// for a gateway in front of a single upstream, whose clients expect
	// its names. Two tools that would share a name are a collision (see
	// [Gateway.Collisions]).
	Unprefixed bool
	// Upstreams are the MCP servers whose resources, resource templates,
	// prompts and completions are served beside the tools, and to which
	// clients' logging/setLevel is passed on. Each is listed once per
	// change it reports, whatever number of servers the gateway serves.
	// Non-nil (even empty) says the gateway serves upstreams' catalogs at
	// all, which its servers then announce as capabilities; the list
	// itself may change later ([Gateway.SetUpstreams]). Nil offers none.
	Upstreams []Upstream
	// Middleware is added to every MCP server the gateway makes, as
	// receiving middleware outside the gateway's own (the first is the
	// outermost): telemetry starts a span per request there.
	Middleware []mcp.Middleware
	// MaxResultBytes caps what a client receives of a result (see
	// [tool.Result.Truncated]); the audit log and the executor's caller
	// still see the whole. 0 means no cap.
	MaxResultBytes int

	// Parking holds the calls of 2026-07-28 clients between the requests
	// of their multi round-trip exchanges (see [Parking]); nil means one
	// in this process's memory ([NewLocalParking]). A fleet of gateways
	// shares one, with StateKey, so that a retry reaches the replica
	// holding its call.
	Parking Parking
	// StateKey seals the requestState of those exchanges (HMAC-SHA256); at
	// least 32 bytes, the same on every replica that shares Parking. Nil
	// means 32 random bytes of this process: its states are then refused
	// by any other process.
	StateKey []byte
	// ParkTimeout is how long a parked call waits for its client's answer
	// to one question before it is cancelled; 0 means [DefaultParkTimeout].
	ParkTimeout time.Duration
	// Relay connects this gateway to the other replicas of its fleet (see
	// [Relay]): a retry answering a call parked on another replica, or a
	// request for an approval page another replica holds, is passed to
	// it. Nil means one process: every such request reaches this one. A
	// fleet also shares StateKey.
	Relay Relay
	// CacheTTL is the time-to-live the gateway announces for its listings
	// and reads (the ttlMs cache hint of 2026-07-28, SEP-2549), bounded
	// for a read by the upstream's own hint. 0 means none: every result is
	// stale at once, and a client asks again.
	CacheTTL time.Duration
	// Tasks keeps the tasks the gateway runs for its clients (2025-11-25's
	// task-augmented tools/call; see gateway/tasks.go). Nil offers none.
	// A fleet shares one, so that any replica answers for any task.
	Tasks *task.Store
}

// Gateway serves an executor's registry over MCP.
type Gateway struct {
	ex        *tool.Executor
	opts      Options
	level     upstreamLevel
	upstreams *upstreams // listed once, shared by every served server
	subs      *subscriptions

	logins      logins // the callers' authorizations calls wait for (authorize.go)
	parking     Parking
	pages       *approvalPages // the approval pages of URL-mode elicitation
	sealer      *sealer
	parkTimeout time.Duration
	unanswered  error       // the cause of a parked call whose question waited past parkTimeout
	tasks       *taskRunner // nil: no tasks offered
}

// callGoroutines are the goroutines the gateways of the process run
// their calls on (a session's tools/call, a parked call): a goroutine that
// ran a call waits a while for the next, so that the stack the first grew
// serves it, where a new goroutine would start small and copy its stack
// as it grows on every call (docs/performance.md).
var callGoroutines warm.Pool

func (g *Gateway) logger() *slog.Logger {
	if g.opts.Logger != nil {
		return g.opts.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// New returns a gateway for ex. The executor's registry should have an
// [Approver] as its confirmer, so that write and destructive calls are
// approved per the gateway's policy. It panics when opts.StateKey is set
// but shorter than 32 bytes: a short key would let a client forge the
// requestState that continues a call.
func New(ex *tool.Executor, opts *Options) *Gateway {
	g := &Gateway{ex: ex}
	if opts != nil {
		g.opts = *opts
	}
	if g.opts.Name == "" {
		g.opts.Name = "toolwire"
	}
	if n := len(g.opts.StateKey); n > 0 && n < minStateKey {
		panic(fmt.Sprintf("gateway: Options.StateKey has %d bytes; give at least %d random bytes, or none for a key of this process", n, minStateKey))
	}
	g.sealer = newSealer(g.opts.StateKey)
	g.parkTimeout = g.opts.ParkTimeout
	if g.parkTimeout <= 0 {
		g.parkTimeout = DefaultParkTimeout
	}
	g.unanswered = fmt.Errorf("the client did not answer within %s", g.parkTimeout)
	g.parking = g.opts.Parking
	if g.parking == nil {
		g.parking = NewLocalParking(g.parkTimeout)
	}
	if g.opts.Relay != nil {
		g.parking = newRelayedParking(g.parking, g.opts.Relay, g.parkTimeout)
	}
	g.pages = newApprovalPages(g.opts.Relay, 2*g.parkTimeout)
	g.upstreams = newUpstreams(g.opts.Upstreams, g.ex.Mask, g.logger)
	g.subs = newSubscriptions(g.logger)
	g.tasks = newTaskRunner(g.opts.Tasks)
	if g.tasks != nil {
		g.tasks.resume = g.resumeTask
	}
	return g
}

// servedName is the name a client sees for t.
func (g *Gateway) servedName(t *tool.Tool) string {
	if g.opts.Unprefixed && t.Origin.Name != "" {
		return t.Origin.Name
	}
	return t.Name
}

// Collisions reports tools of the registry that would be served under the
// same name, naming both, or nil. Only an unprefixed gateway can have them
// (registered names are unique); serve refuses to start with any.
func (g *Gateway) Collisions() error {
	var errs []error
	by := map[string]*tool.Tool{}
	for _, t := range g.ex.Registry().List() {
		name := g.servedName(t)
		if first, dup := by[name]; dup {
			errs = append(errs, fmt.Errorf("tools %s and %s would both be served as %q", describeTool(first), describeTool(t), name))
			continue
		}
		by[name] = t
	}
	return errors.Join(errs...)
}

func describeTool(t *tool.Tool) string {
	if t.Origin.Source == "" {
		return fmt.Sprintf("%q", t.Name)
	}
	return fmt.Sprintf("%q (%q of server %q)", t.Name, t.Origin.Name, t.Origin.Source)
}

// Server returns an MCP server offering the registry's tools that visible
// accepts (nil accepts all), and keeps it in step with the registry: tools
// that appear, change or go away are added, replaced or removed, and
// connected clients are told (notifications/tools/list_changed). A tool
// visible refuses is absent from the listing, not listed and refused.
// Call stop when the server is no longer served.
func (g *Gateway) Server(visible func(name string) bool) (srv *mcp.Server, stop func()) {
	perCaller := visible != nil
	srv, _, stop = g.serve(visible, func() bool { return perCaller })
	return srv, stop
}

// serve is Server with extra receiving middleware (the HTTP handler's
// limits and session binding), placed outside the gateway's own and
// inside [Options].Middleware, so that telemetry sees what they refuse.
// go-sdk wraps each later AddReceivingMiddleware outside the earlier.
// perCaller says whether what the server answers depends on its caller,
// for the cache hints.
func (g *Gateway) serve(visible func(name string) bool, perCaller func() bool, extra ...mcp.Middleware) (srv *mcp.Server, s *served, stop func()) {
	s = &served{g: g, visible: visible, offered: map[string]*tool.Tool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	opts := &mcp.ServerOptions{
		Logger:                    g.opts.Logger,
		HasTools:                  true,
		SupportedProtocolVersions: protocolVersions,
		SetCacheable:              g.cacheHints(perCaller),
	}
	if g.opts.Upstreams != nil {
		opts.HasResources, opts.HasPrompts = true, true
		opts.CompletionHandler = s.complete
		opts.SubscribeHandler, opts.UnsubscribeHandler = s.subscribe, s.unsubscribe
	}
	s.impl = &mcp.Implementation{Name: g.opts.Name, Version: version.String()}
	srv = mcp.NewServer(s.impl, opts)
	// The receiving middleware, outermost first: go-sdk's server runs
	// every request through it, and a 2025 session's tools/call served
	// directly (served.direct) through the same chain.
	var mws []mcp.Middleware
	// Whatever any layer sends while serving a request of a 2025 session
	// goes on the POST that carried the request.
	mws = append(mws, relatePost)
	if g.tasks != nil {
		mws = append(mws, g.tasks.taskAdvert) // outside all that reads the results it rewrites
	}
	mws = append(mws, g.opts.Middleware...) // telemetry: sees what the rest refuse
	mws = append(mws, extra...)
	// capInitialize changes the initialize request in place before
	// go-sdk's own handler keeps it; nothing of the gateway's reads the
	// revision an initialize asked for.
	mws = append(mws, s.guard, g.forwardLogLevel, capInitialize)
	if g.tasks != nil {
		g.tasks.register(srv)
		mws = append(mws, g.tasks.taskCalls(s)) // innermost: a task's call passes all the rest
	}
	srv.AddReceivingMiddleware(mws...)
	s.direct = s.callTool
	for _, mw := range slices.Backward(mws) {
		s.direct = mw(s.direct)
	}
	s.srv = srv
	unwatch := []func(){g.ex.Registry().Watch(func() { s.poke(&s.toolsDirty) })}
	s.sync()
	if g.opts.Upstreams != nil {
		// Followed before the first sync, so that no change is missed
		// between the two.
		unwatch = append(unwatch, g.upstreams.follow(s))
		s.syncCatalog()
	}
	go s.loop()
	var once sync.Once
	return srv, s, func() {
		once.Do(func() {
			for _, f := range unwatch {
				f()
			}
			close(s.done)
		})
	}
}

// served is one MCP server kept in step with the registry.
type served struct {
	g       *Gateway
	srv     *mcp.Server
	visible func(string) bool
	wake    chan struct{}
	done    chan struct{}

	// toolsDirty and catalogDirty say what a wake-up is for.
	toolsDirty, catalogDirty atomic.Bool

	// direct serves a tools/call through the server's middleware, as
	// go-sdk's server would (callTool), for a session's transport that
	// decoded the request itself (sessionconn.go).
	direct mcp.MethodHandler

	impl *mcp.Implementation // what the server says it is

	mu      sync.Mutex
	offered map[string]*tool.Tool // what the server lists now, by served name
	tools   map[string]servedTool // how the tools offered are called, by served name
	catalog catalog               // the upstreams' resources and prompts it offers
}

// servedTool is how a tool offered is called.
type servedTool struct {
	handler mcp.ToolHandler
	// headerBound says that the tool's schema may bind arguments to
	// headers (x-mcp-header), which go-sdk checks on a 2026-07-28 call.
	headerBound bool
}

// headerBound reports whether the tool offered as name may bind arguments
// to headers.
func (s *served) headerBound(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools[name].headerBound
}

// callTool is go-sdk's server's own handling of tools/call (its
// Server.callTool), on the served tools' handlers: an unknown tool is an
// invalid-params error, and a result without content gets an empty list
// rather than null.
func (s *served) callTool(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
	r, ok := req.(*mcp.CallToolRequest)
	if !ok {
		return nil, fmt.Errorf("gateway: a direct call of %T", req)
	}
	s.mu.Lock()
	h := s.tools[r.Params.Name].handler
	s.mu.Unlock()
	if h == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", r.Params.Name)}
	}
	res, err := h(ctx, r)
	if err != nil || res == nil {
		return res, err
	}
	// go-sdk's checks of a multi round-trip result (its
	// handleMultiRoundTripResult), for a client that has them (2026-07-28).
	asks := res.InputRequests != nil
	if asks && (len(res.Content) > 0 || res.StructuredContent != nil) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
	}
	multiRoundTrip := r.Session != nil && modern(sessionRevision(r.Session))
	if asks && !multiRoundTrip {
		// go-sdk's own innermost middleware would ask a 2025 client for
		// the input and call the handler again; the gateway's handlers ask
		// 2025 clients on the session themselves and never answer them so
		// (only callModern does, for 2026-07-28). Should one, it fails
		// here rather than send a question the client cannot read.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a call of a 2025 client asked for input in its result"}
	}
	if multiRoundTrip {
		res = withResultType(res, asks)
	}
	if res.Content == nil && !(multiRoundTrip && asks) {
		whole := *res
		whole.Content = []mcp.Content{}
		res = &whole
	}
	return res, nil
}

// sessionRevision is the revision a session's initialize (or the _meta of
// a 2026-07-28 request) named, as go-sdk reads it, or "".
func sessionRevision(ss *mcp.ServerSession) string {
	if ip := ss.InitializeParams(); ip != nil {
		return ip.ProtocolVersion
	}
	return ""
}

// poke asks for a resync of what dirty marks. It runs in the goroutine
// that changed the registry or heard from an upstream, so it only signals;
// several changes fold into one resync.
func (s *served) poke(dirty *atomic.Bool) {
	dirty.Store(true)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *served) loop() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
			if s.toolsDirty.Swap(false) {
				s.sync()
			}
			if s.catalogDirty.Swap(false) {
				s.syncCatalog()
			}
		}
	}
}

// sync makes the server's tools those of the registry that are visible.
func (s *served) sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]*tool.Tool{}
	for _, t := range s.g.ex.Registry().List() { // sorted: the first of a collision wins
		if s.visible != nil && !s.visible(t.Name) {
			continue
		}
		name := s.g.servedName(t)
		if _, dup := want[name]; dup {
			continue // a collision: refused at start-up, ignored if it appears later
		}
		want[name] = t
	}
	var gone []string
	for name := range s.offered {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	tools := make(map[string]servedTool, len(want))
	for name, t := range want {
		if s.offered[name] == t {
			tools[name] = s.tools[name]
			continue // same registration: nothing to tell clients
		}
		schema := advertisedSchema(t)
		st := servedTool{handler: s.g.handler(t), headerBound: bytes.Contains(schema, []byte("x-mcp-header"))}
		tools[name] = st
		s.srv.AddTool(&mcp.Tool{
			Name:        name,
			Description: t.Description,
			InputSchema: schema,
			Annotations: Annotations(t),
		}, st.handler)
	}
	s.offered, s.tools = want, tools
}

// handler runs a call that arrived through the gateway through the
// executor, with the client that made it in the context: to be asked for
// approvals, and to be relayed what the tool's upstream sends during the
// call (progress when the client asked for it, log lines, sampling and
// elicitation requests). A 2025 session's client is asked and told on its
// session while the call runs; a 2026-07-28 client's call is parked
// between the requests of its multi round-trip exchange (see
// [Gateway.callModern]).
func (g *Gateway) handler(t *tool.Tool) mcp.ToolHandler {
	name, rewrite := t.Name, g.rewriteFor(t.Origin.Source)
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = withClient(withCaller(ctx, req), req)
		if modern(req.ProtocolVersion()) {
			return g.callModern(ctx, req, name, rewrite)
		}
		if req.Session != nil {
			d := &sessionDownstream{ss: req.Session, token: req.Params.GetProgressToken()}
			ctx = taskCaller(tool.WithCaller(withDownstream(ctx, d), relay{d}))
		}
		res := g.run(ctx, name, req.Params.Arguments)
		return toMCP(res.Truncated(g.opts.MaxResultBytes), rewrite), nil
	}
}

// toMCP converts a result for the wire. A refusal or failure is an isError
// result whose text says why (a tool's own error keeps the tool's content).
// rewrite, when not nil, maps the URIs of resources in the content to the
// URIs the gateway serves them under.
func toMCP(res *tool.Result, rewrite func(string) string) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: res.IsError, StructuredContent: res.Structured}
	if res.IsError && res.Reason != tool.ReasonTool {
		out.Content = []mcp.Content{&mcp.TextContent{Text: res.Message}}
		return out
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *tool.Text:
			out.Content = append(out.Content, &mcp.TextContent{Text: c.Text})
		case *tool.Image:
			out.Content = append(out.Content, &mcp.ImageContent{Data: c.Data, MIMEType: c.MIMEType})
		case *tool.Audio:
			out.Content = append(out.Content, &mcp.AudioContent{Data: c.Data, MIMEType: c.MIMEType})
		case *tool.Resource:
			out.Content = append(out.Content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text, Blob: c.Blob}})
		case *tool.ResourceLink:
			out.Content = append(out.Content, &mcp.ResourceLink{URI: c.URI, Name: c.Name, Title: c.Title, Description: c.Description, MIMEType: c.MIMEType, Size: c.Size})
		}
	}
	rewriteContent(out.Content, rewrite)
	if out.Content == nil {
		out.Content = []mcp.Content{}
		if res.Structured != nil {
			if raw, err := json.Marshal(res.Structured); err == nil {
				out.Content = []mcp.Content{&mcp.TextContent{Text: string(raw)}}
			}
		}
	}
	return out
}

// rewriteContent maps the URIs of resource links and embedded resources in
// content with rewrite (nil leaves them).
func rewriteContent(content any, rewrite func(string) string) {
	if rewrite == nil {
		return
	}
	var list []mcp.Content
	switch c := content.(type) {
	case []mcp.Content:
		list = c
	case mcp.Content:
		list = []mcp.Content{c}
	}
	for _, c := range list {
		switch c := c.(type) {
		case *mcp.ResourceLink:
			c.URI = rewrite(c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				c.Resource.URI = rewrite(c.Resource.URI)
			}
		}
	}
}
