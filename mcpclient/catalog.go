package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// Catalog is what a server offers besides tools: its resources, resource
// templates and prompts, and the requests about them (reads, prompt gets,
// completions, subscriptions, the log level). A gateway serves it beside the
// registry's tools (it implements gateway.Upstream); get it with
// [Server.Catalog].
//
// Each request goes through the server's live session, bounded by the
// server's timeout within its ctx, and counts as in flight with the
// server's tool calls while it runs, so that what the server sends while
// serving it (log lines, elicitation and sampling requests) is not taken
// for a concurrent call's. Its error has the server's configured secrets
// masked and still wraps the cause. While the server has no session it
// offers nothing, and its requests fail with an error wrapping
// [tool.ErrUnavailable].
//
// Subscriptions and the log level are kept for the server's life and
// applied again to every new session after a reconnect. A Catalog is safe
// for concurrent use.
type Catalog struct {
	set *settings
	sup *supervisor // for the live shared session, which lists
	// reach is the server's (Server.reach): the connection every request
	// but a listing goes through, and the end of its use.
	reach func(context.Context) (*conn, func(), error)
	// sessions returns the callers' sessions of a per-caller server, and
	// existing the session of the caller in a context, if they have one
	// (with the end of its use); nil for another server.
	sessions func() []*conn
	existing func(context.Context) (*conn, func())
	watchers watchers

	mu         sync.Mutex
	logLevel   mcp.LoggingLevel // asked for by SetLogLevel; "" for none
	subscribed map[string]bool  // resource URIs asked for by Subscribe
}

// Name returns the server's configured name (its tools' Origin.Source).
func (c *Catalog) Name() string { return c.set.cfg.Name }

// PerCaller reports whether the server is reached with each caller's own
// identity (oauth.identity: caller): then its reads, prompt gets,
// completions and subscriptions are the caller's in their context, and a
// request without a caller fails ([ErrNoCaller]); its listing is the
// operator's, the same for every caller.
func (c *Catalog) PerCaller() bool { return c.set.cfg.OAuth.PerCaller() }

// Prefix returns the prefix of the server's registered tool names, under
// which a gateway serves its resources and prompts too.
func (c *Catalog) Prefix() string { return sanitize(prefixOf(c.set.cfg)) }

// begin returns the session for one request other than a listing (see
// Server.reach: for a server reached with each caller's identity, the
// session of the caller ctx carries), with ctx bounded by the server's
// timeout and the request counted in flight on that session until end is
// called; with no live session, an error wrapping [tool.ErrUnavailable].
func (c *Catalog) begin(ctx context.Context) (_ *mcp.ClientSession, _ context.Context, end func(), _ error) {
	conn, release, err := c.reach(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return c.track(ctx, conn, release)
}

// beginListing is begin for a listing, which goes through the shared
// session whatever the server (a per-caller server's lists with the
// operator's identity, and only lists).
func (c *Catalog) beginListing(ctx context.Context) (_ *mcp.ClientSession, _ context.Context, end func(), _ error) {
	conn := c.sup.current()
	if conn == nil {
		return nil, nil, nil, &maskedError{msg: fmt.Sprintf("server %q is not connected; retry shortly", c.set.cfg.Name), err: tool.ErrUnavailable}
	}
	return c.track(ctx, conn, func() {})
}

func (c *Catalog) track(ctx context.Context, conn *conn, release func()) (_ *mcp.ClientSession, _ context.Context, end func(), _ error) {
	ctx, done := conn.relay.track(ctx)
	ctx, cancel := context.WithTimeout(ctx, c.set.timeout)
	return conn.session, ctx, func() {
		cancel()
		done()
		release()
	}, nil
}

// List returns everything the server offers besides tools, every page of
// it: resources and resource templates when the server has the resources
// capability (a server that lists resources but not templates offers
// none), prompts when it has the prompts capability. With no live session
// it returns nothing and no error. The listing is the caller's to change.
func (c *Catalog) List(ctx context.Context) (resources []*mcp.Resource, templates []*mcp.ResourceTemplate, prompts []*mcp.Prompt, err error) {
	session, rctx, end, err := c.beginListing(ctx)
	if err != nil {
		return nil, nil, nil, nil
	}
	defer end()
	fail := func(what string, err error) ([]*mcp.Resource, []*mcp.ResourceTemplate, []*mcp.Prompt, error) {
		return nil, nil, nil, c.set.requestError(ctx, rctx, what, err)
	}
	caps := session.InitializeResult().Capabilities
	if caps != nil && caps.Resources != nil {
		for r, err := range session.Resources(rctx, nil) {
			if err != nil {
				return fail("list resources", err)
			}
			resources = append(resources, r)
		}
		for t, err := range session.ResourceTemplates(rctx, nil) {
			if isMethodNotFound(err) {
				break // resources without templates
			}
			if err != nil {
				return fail("list resource templates", err)
			}
			templates = append(templates, t)
		}
	}
	if caps != nil && caps.Prompts != nil {
		for p, err := range session.Prompts(rctx, nil) {
			if err != nil {
				return fail("list prompts", err)
			}
			prompts = append(prompts, p)
		}
	}
	return resources, templates, prompts, nil
}

// isMethodNotFound reports whether err is the server's JSON-RPC "method not
// found": a server may list resources and not templates.
func isMethodNotFound(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound
}

// ReadResource reads the server's resource uri (resources/read).
func (c *Catalog) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	session, rctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	res, err := session.ReadResource(rctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, c.set.masked(authorizationOf(err))
	}
	return res, nil
}

// GetPrompt gets the server's prompt name with args (prompts/get).
func (c *Catalog) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	session, rctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	res, err := session.GetPrompt(rctx, &mcp.GetPromptParams{Name: name, Arguments: args})
	if err != nil {
		return nil, c.set.masked(authorizationOf(err))
	}
	return res, nil
}

// Complete asks the server to complete an argument of one of its prompts
// or resource templates (completion/complete); params name them as the
// server does.
func (c *Catalog) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	session, rctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	res, err := session.Complete(rctx, params)
	if err != nil {
		return nil, c.set.masked(authorizationOf(err))
	}
	return res, nil
}

// Subscribe asks the server for notifications/resources/updated about uri,
// now and after every reconnect (see [Catalog.Watch]). Subscriptions are
// kept for the server's life. With no live session it only remembers uri.
//
// On a server reached with each caller's identity, the subscription is
// the caller's in ctx, made on their own session, and lasts as long as
// that session (which closes when idle: see [CallerSessionPolicy]); a
// request without a caller fails.
func (c *Catalog) Subscribe(ctx context.Context, uri string) error {
	if c.set.cfg.OAuth.PerCaller() {
		session, rctx, end, err := c.begin(ctx)
		if err != nil {
			return err
		}
		defer end()
		return c.subscribeOn(session, rctx, uri)
	}
	c.mu.Lock()
	if c.subscribed == nil {
		c.subscribed = map[string]bool{}
	}
	c.subscribed[uri] = true
	c.mu.Unlock()
	return c.subscribe(ctx, uri)
}

func (c *Catalog) subscribe(ctx context.Context, uri string) error {
	session, rctx, end, err := c.begin(ctx)
	if err != nil {
		return nil // applied when the session is back
	}
	defer end()
	return c.subscribeOn(session, rctx, uri)
}

// subscribeOn subscribes to uri on session.
func (c *Catalog) subscribeOn(session *mcp.ClientSession, rctx context.Context, uri string) error {
	if caps := session.InitializeResult().Capabilities; stateless(session.InitializeResult().ProtocolVersion) && (caps == nil || caps.Resources == nil || !caps.Resources.Subscribe) {
		// From 2026-07-28 on, a subscription is a stream the SDK opens
		// without waiting for the answer, which would grant nothing: say
		// so here, as a server of an earlier revision answers.
		return c.set.masked(fmt.Errorf("server %q: subscribe to %q: the server offers no resource subscriptions", c.set.cfg.Name, uri))
	}
	if err := session.Subscribe(rctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		return c.set.masked(err)
	}
	return nil
}

// Unsubscribe withdraws [Catalog.Subscribe]: the server is asked to stop
// reporting updates of uri (resources/unsubscribe), and a reconnect no
// longer subscribes again. With no live session it only forgets uri.
//
// On a server reached with each caller's identity it withdraws the
// subscription of the caller in ctx (who needs no token for it) on their
// session, if they still have one: a closed session took its
// subscriptions with it, and none is made to withdraw one.
func (c *Catalog) Unsubscribe(ctx context.Context, uri string) error {
	c.mu.Lock()
	delete(c.subscribed, uri)
	c.mu.Unlock()
	if c.existing != nil {
		conn, release := c.existing(ctx)
		if conn == nil {
			return nil
		}
		session, rctx, end, _ := c.track(ctx, conn, release)
		defer end()
		if err := session.Unsubscribe(rctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			return c.set.masked(err)
		}
		return nil
	}
	session, rctx, end, err := c.begin(ctx)
	if err != nil {
		return nil // the next session is not subscribed
	}
	defer end()
	if err := session.Unsubscribe(rctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		return c.set.masked(err)
	}
	return nil
}

// SetLogLevel asks the server for log lines at level and above, now and
// after every reconnect: with logging/setLevel before protocol 2026-07-28,
// and from then on in the _meta of every request toolwire sends it, where
// the level travels per request.
func (c *Catalog) SetLogLevel(ctx context.Context, level mcp.LoggingLevel) error {
	c.mu.Lock()
	c.logLevel = level
	c.mu.Unlock()
	err := c.applyLogLevel(ctx)
	if c.sessions == nil {
		return err
	}
	// The callers' sessions of a per-caller server hear it too; the ones
	// made later are told as they are made.
	for _, conn := range c.sessions() {
		if stateless(conn.protocol) {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, c.set.timeout)
		if e := conn.session.SetLoggingLevel(rctx, &mcp.SetLoggingLevelParams{Level: level}); e != nil {
			c.set.logger.Warn("could not set the log level of a caller's session", "server", c.set.cfg.Name, "error", c.set.secrets.String(e.Error()))
		}
		cancel()
	}
	return err
}

func (c *Catalog) applyLogLevel(ctx context.Context) error {
	c.mu.Lock()
	level := c.logLevel
	c.mu.Unlock()
	if level == "" {
		return nil
	}
	session, rctx, end, err := c.beginListing(ctx)
	if err != nil {
		return nil // applied when the session is back
	}
	defer end()
	if stateless(session.InitializeResult().ProtocolVersion) {
		return nil // each request carries it (see dialer.stampLogLevel)
	}
	if err := session.SetLoggingLevel(rctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
		return c.set.masked(err)
	}
	return nil
}

// level returns the log level asked for by SetLogLevel, or "".
func (c *Catalog) level() mcp.LoggingLevel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logLevel
}

// restore re-applies the log level and subscriptions to a new session and
// tells the watchers. Failures are logged: the session serves tools
// without them.
func (c *Catalog) restore(ctx context.Context) {
	name := c.set.cfg.Name
	if err := c.applyLogLevel(ctx); err != nil && ctx.Err() == nil {
		c.set.logger.Warn("could not set the log level", "server", name, "error", err)
	}
	c.mu.Lock()
	uris := make([]string, 0, len(c.subscribed))
	for uri := range c.subscribed {
		uris = append(uris, uri)
	}
	c.mu.Unlock()
	for _, uri := range uris {
		if err := c.subscribe(ctx, uri); err != nil && ctx.Err() == nil {
			c.set.logger.Warn("could not subscribe to a resource", "server", name, "uri", uri, "error", err)
		}
	}
	c.changed()
}

// Watch calls changed whenever what the server offers besides tools may
// have changed: a session was established (at start or after a reconnect),
// the server announced a changed list, or it failed for good or was closed
// (then [Catalog.List] returns nothing). It calls updated with a resource's
// URI when the server reports that a subscribed resource changed. Both are
// called from the server's message handling and its lifecycle with no lock
// of the server's held, so they may call back into the server or the
// catalog; they must not block. stop ends the calls.
func (c *Catalog) Watch(changed func(), updated func(uri string)) (stop func()) {
	return c.watchers.add(watcher{changed: changed, updated: updated})
}

// changed tells the watchers that the catalog may have changed.
func (c *Catalog) changed() {
	c.watchers.each(func(w watcher) {
		if w.changed != nil {
			w.changed()
		}
	})
}

func (c *Catalog) onListChanged(context.Context, *mcp.ResourceListChangedRequest) { c.changed() }

func (c *Catalog) onPromptsChanged(context.Context, *mcp.PromptListChangedRequest) { c.changed() }

func (c *Catalog) onResourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	c.watchers.each(func(w watcher) {
		if w.updated != nil {
			w.updated(req.Params.URI)
		}
	})
}

// watchers are told when what a server offers besides tools may have
// changed, and when a subscribed resource was updated.
type watchers struct {
	mu   sync.Mutex
	next int
	set  map[int]watcher
}

type watcher struct {
	changed func()
	updated func(uri string)
}

func (w *watchers) add(x watcher) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set == nil {
		w.set = map[int]watcher{}
	}
	id := w.next
	w.next++
	w.set[id] = x
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.set, id)
	}
}

// each calls f for every watcher, with the lock released: a watcher may
// stop itself, add another, or call back into the server.
func (w *watchers) each(f func(watcher)) {
	w.mu.Lock()
	set := make([]watcher, 0, len(w.set))
	for _, x := range w.set {
		set = append(set, x)
	}
	w.mu.Unlock()
	for _, x := range set {
		f(x)
	}
}
