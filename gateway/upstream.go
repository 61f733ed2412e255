package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
	"github.com/yosida95/uritemplate/v3"
)

// Upstream is an MCP server behind the gateway whose resources, resource
// templates, prompts and completions are served beside the registry's
// tools, namespaced like them. *mcpclient.Catalog implements it.
//
// Each request bounds itself by the upstream's own timeout within ctx,
// counts itself as in flight with the upstream's tool calls while it runs
// (so that what the upstream sends meanwhile, log lines and elicitation or
// sampling requests, is not taken for a concurrent call's), and masks the
// upstream's configured secrets in its error. An Upstream is safe for
// concurrent use.
type Upstream interface {
	// Name is the server's configured name (its tools' Origin.Source).
	Name() string
	// Prefix is the prefix of its registered tool names.
	Prefix() string
	// List returns everything the upstream offers besides tools, every
	// page of it; nothing, and no error, while it has no session. What it
	// returns is the caller's: the gateway masks titles and descriptions
	// in place and keeps it.
	List(ctx context.Context) (resources []*mcp.Resource, templates []*mcp.ResourceTemplate, prompts []*mcp.Prompt, err error)
	// ReadResource reads the upstream's resource uri.
	ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error)
	// GetPrompt gets the upstream's prompt name with args.
	GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error)
	// Complete asks the upstream to complete an argument of one of its
	// prompts or resource templates, named in params as the upstream
	// names them.
	Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error)
	// Subscribe asks the upstream to report updates of the resource uri,
	// from now on, reconnects included.
	Subscribe(ctx context.Context, uri string) error
	// Unsubscribe withdraws Subscribe: the upstream is asked to stop
	// reporting updates of uri.
	Unsubscribe(ctx context.Context, uri string) error
	// SetLogLevel asks the upstream for log lines at level and above,
	// from now on, reconnects included.
	SetLogLevel(ctx context.Context, level mcp.LoggingLevel) error
	// Watch calls changed when the upstream's resources, templates or
	// prompts may have changed (List returns nothing once it is gone for
	// good), and updated when a subscribed resource changed. They are
	// called with none of the upstream's locks held and must not block.
	Watch(changed func(), updated func(uri string)) (stop func())
}

// uriScheme is the scheme of the URIs under which a prefixed gateway serves
// its upstreams' resources: toolwire://<prefix>/<the upstream's own URI>.
// The upstream's URI follows verbatim, so templates stay templates.
const uriScheme = "toolwire://"

// servedURI is the URI a client sees for up's resource uri.
func (g *Gateway) servedURI(up Upstream, uri string) string {
	if g.opts.Unprefixed {
		return uri
	}
	return uriScheme + up.Prefix() + "/" + uri
}

// servedItemName is the name a client sees for up's prompt, resource or
// resource template.
func (g *Gateway) servedItemName(up Upstream, name string) string {
	if g.opts.Unprefixed {
		return name
	}
	return up.Prefix() + "__" + name
}

// rewriteFor returns the function that turns URIs in the results of the
// upstream named source into served URIs, or nil when they stay as they
// are.
func (g *Gateway) rewriteFor(source string) func(string) string {
	if g.opts.Unprefixed || source == "" {
		return nil
	}
	for _, up := range g.upstreams.snapshot() {
		if up.Name() == source {
			return func(uri string) string { return g.servedURI(up.Upstream, uri) }
		}
	}
	return nil
}

// catalog is what one served server offers of the upstreams besides
// tools, by served URI, URI template and prompt name, and what it keeps
// from its caller.
type catalog struct {
	resources map[string]offered
	templates map[string]offered
	prompts   map[string]offered
	// hidden are the upstreams' resources and templates the caller may
	// not see. A visible template can match the URI of a hidden resource
	// (file:///{+path} matches file:///secret), so every read and
	// subscription is checked against them, by the URI asked for.
	hidden []hiddenItem
}

// hiddenItem is one upstream resource or template a caller may not see.
type hiddenItem struct {
	up    *upstream
	uri   string         // a resource's own URI, normalized; "" for a template
	match *regexp.Regexp // a template's own URI template; nil for a resource
}

// hides reports whether the URI uri of up is one the caller may not
// read: a hidden resource's URI (compared normalized, so file:///./secret
// is file:///secret) or a URI a hidden template matches. When a hidden
// and a visible template both match, the gateway cannot know which of them
// the upstream serves the URI by, so the answer is no.
func (c catalog) hides(up *upstream, uri string) bool {
	norm := normalURI(uri)
	for _, h := range c.hidden {
		if h.up != up {
			continue
		}
		if h.match != nil && (h.match.MatchString(uri) || h.match.MatchString(norm)) {
			return true
		}
		if h.match == nil && h.uri == norm {
			return true
		}
	}
	return false
}

// normalURI is uri in a form in which two spellings of one URI compare
// equal: scheme and host in lower case, percent-encoding decoded where it
// need not be, dot segments and doubled slashes removed, no fragment.
// A URI that does not parse is compared as it is.
func normalURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if u.Path != "" {
		p := path.Clean(u.Path)
		if strings.HasSuffix(u.Path, "/") && p != "/" {
			p += "/"
		}
		u.Path, u.RawPath = p, ""
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// offered is one upstream resource, template or prompt: the upstream, its
// own URI, template or name, and the advertisement (as JSON, to tell a
// changed one from the same).
type offered struct {
	up     *upstream
	orig   string
	advert string
	match  *regexp.Regexp // a template's served form, compiled once; nil otherwise
}

// syncCatalog makes the served server's resources, templates and prompts
// those of the upstreams that its caller may see, from the gateway's shared
// listing (listing again only the upstreams that changed since). Visibility
// is decided on <prefix>__<name>, as for tools, in prefixed and unprefixed
// mode alike.
func (s *served) syncCatalog() {
	want := catalog{resources: map[string]offered{}, templates: map[string]offered{}, prompts: map[string]offered{}}
	adverts := map[string]any{} // by kind+served key
	for _, l := range s.g.upstreams.current(context.Background()) {
		up := l.up
		visible := func(name string) bool {
			return s.visible == nil || s.visible(up.Prefix()+"__"+name)
		}
		hide := func(uri string, template bool) {
			h := hiddenItem{up: up, uri: normalURI(uri)}
			if template {
				h.uri = ""
				ut, err := uritemplate.New(uri)
				if err != nil {
					// A template the gateway cannot read could cover
					// anything of this upstream.
					h.match = regexp.MustCompile(``)
				} else {
					h.match = ut.Regexp()
				}
			}
			want.hidden = append(want.hidden, h)
		}
		// add offers one item under its served key; the first of a
		// collision wins.
		add := func(m map[string]offered, kind, key, orig string, advert any) {
			if _, dup := m[key]; !dup {
				m[key] = offered{up: up, orig: orig, advert: advertOf(advert)}
				adverts[kind+key] = advert
			}
		}
		for _, r := range l.resources {
			if visible(r.Name) {
				c := *r
				c.URI, c.Name = s.g.servedURI(up, r.URI), s.g.servedItemName(up, r.Name)
				add(want.resources, "r", c.URI, r.URI, &c)
			} else {
				hide(r.URI, false)
			}
		}
		for _, t := range l.templates {
			if visible(t.Name) {
				c := *t
				c.URITemplate, c.Name = s.g.servedURI(up, t.URITemplate), s.g.servedItemName(up, t.Name)
				add(want.templates, "t", c.URITemplate, t.URITemplate, &c)
				if o := want.templates[c.URITemplate]; o.match == nil {
					if ut, err := uritemplate.New(c.URITemplate); err == nil {
						o.match = ut.Regexp()
						want.templates[c.URITemplate] = o
					}
				}
			} else {
				hide(t.URITemplate, true)
			}
		}
		for _, p := range l.prompts {
			if visible(p.Name) {
				c := *p
				c.Name = s.g.servedItemName(up, p.Name)
				add(want.prompts, "p", c.Name, p.Name, &c)
			}
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.catalog
	if gone := goneKeys(have.resources, want.resources); len(gone) > 0 {
		s.srv.RemoveResources(gone...)
	}
	if gone := goneKeys(have.templates, want.templates); len(gone) > 0 {
		s.srv.RemoveResourceTemplates(gone...)
	}
	if gone := goneKeys(have.prompts, want.prompts); len(gone) > 0 {
		s.srv.RemovePrompts(gone...)
	}
	for uri, o := range want.resources {
		if have.resources[uri].advert != o.advert {
			s.srv.AddResource(adverts["r"+uri].(*mcp.Resource), s.readResource)
		}
	}
	for tmpl, o := range want.templates {
		if have.templates[tmpl].advert != o.advert {
			s.srv.AddResourceTemplate(adverts["t"+tmpl].(*mcp.ResourceTemplate), s.readResource)
		}
	}
	for name, o := range want.prompts {
		if have.prompts[name].advert != o.advert {
			s.srv.AddPrompt(adverts["p"+name].(*mcp.Prompt), s.getPrompt)
		}
	}
	s.catalog = want
}

func goneKeys(have, want map[string]offered) []string {
	var gone []string
	for k := range have {
		if _, ok := want[k]; !ok {
			gone = append(gone, k)
		}
	}
	return gone
}

func advertOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// owner finds the upstream behind a served resource URI and the
// upstream's own URI for it: an exact resource first, then the served
// template that matches it (in the order of the templates' served forms,
// so that the answer does not depend on map order). A URI the caller may
// not see (see [catalog.hides]) has no owner, whatever template matches it.
func (s *served) owner(uri string) (*upstream, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	up, orig, ok := s.ownerLocked(uri)
	if !ok || s.catalog.hides(up, orig) {
		return nil, "", false
	}
	return up, orig, true
}

func (s *served) ownerLocked(uri string) (*upstream, string, bool) {
	if o, ok := s.catalog.resources[uri]; ok {
		return o.up, o.orig, true
	}
	for _, served := range slices.Sorted(maps.Keys(s.catalog.templates)) {
		o := s.catalog.templates[served]
		if o.match == nil || !o.match.MatchString(uri) {
			continue
		}
		if s.g.opts.Unprefixed {
			return o.up, uri, true
		}
		return o.up, strings.TrimPrefix(uri, uriScheme+o.up.Prefix()+"/"), true
	}
	return nil, "", false
}

// readResource reads a served resource from its upstream.
func (s *served) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	up, uri, ok := s.owner(req.Params.URI)
	if !ok {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	res, err := up.ReadResource(withCaller(ctx, req), uri)
	if err != nil {
		return nil, authorizationError(req, err)
	}
	stripServerInfo(res.Meta)
	// The upstream may have read another spelling of the URI as a hidden
	// resource; if what it returns says so, the caller gets nothing of it.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range res.Contents {
		if c != nil && s.catalog.hides(up, c.URI) {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
	}
	mask := s.g.ex.Mask()
	for _, c := range res.Contents {
		if c != nil {
			c.URI, c.Text = s.g.servedURI(up, mask.String(c.URI)), mask.String(c.Text)
		}
	}
	return res, nil
}

// getPrompt gets a served prompt from its upstream.
func (s *served) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	s.mu.Lock()
	o, ok := s.catalog.prompts[req.Params.Name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown prompt %q", req.Params.Name)
	}
	res, err := o.up.GetPrompt(withCaller(ctx, req), o.orig, req.Params.Arguments)
	if err != nil {
		return nil, authorizationError(req, err)
	}
	stripServerInfo(res.Meta)
	mask := s.g.ex.Mask()
	res.Description = mask.String(res.Description)
	for _, m := range res.Messages {
		if m != nil {
			maskContent(m.Content, mask)
			rewriteContent(m.Content, func(uri string) string { return s.g.servedURI(o.up, uri) })
		}
	}
	return res, nil
}

// complete answers completion/complete from the upstream behind the
// prompt or resource template it names.
func (s *served) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref := req.Params.Ref
	if ref == nil {
		return nil, fmt.Errorf("completion/complete: missing ref")
	}
	s.mu.Lock()
	var o offered
	var ok bool
	switch ref.Type {
	case "ref/prompt":
		o, ok = s.catalog.prompts[ref.Name]
	case "ref/resource":
		o, ok = s.catalog.templates[ref.URI]
	}
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("completion/complete: unknown %s %q", ref.Type, ref.Name+ref.URI)
	}
	// The request's own _meta stays here: it is the client's (on
	// 2026-07-28 its revision, capabilities and client), not the
	// upstream's business; trace context is added again on the way out.
	up := *req.Params
	up.Meta = nil
	upRef := *ref
	if ref.Type == "ref/prompt" {
		upRef.Name = o.orig
	} else {
		upRef.URI = o.orig
	}
	up.Ref = &upRef
	res, err := o.up.Complete(withCaller(ctx, req), &up)
	if err != nil {
		return nil, authorizationError(req, err)
	}
	stripServerInfo(res.Meta)
	if mask := s.g.ex.Mask(); mask != nil {
		for i, v := range res.Completion.Values {
			res.Completion.Values[i] = mask.String(v)
		}
	}
	return res, nil
}

// subscribe passes a client's subscription on to the upstream: a 2025
// session's resources/subscribe, or a resource a 2026-07-28 client's
// subscriptions/listen names (go-sdk calls the handler for each, and
// unsubscribe when the listen ends). The gateway counts them (see
// [subscriptions]), so that the upstream is asked once, by the first.
func (s *served) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	up, uri, ok := s.owner(req.Params.URI)
	if !ok {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	ctx, done, err := admitSubscribe(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.g.subs.add(withCaller(ctx, req), req.Session, req.Params.URI, up, uri)
}

// unsubscribe withdraws a client's subscription; the upstream's goes with
// the last.
func (s *served) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.g.subs.remove(req.Session, req.Params.URI)
	return nil
}

// subscriptions counts the clients' subscriptions to each upstream
// resource, over every served server: 2025 sessions' and 2026-07-28
// listens' alike. The upstream is asked to subscribe by the first and to
// unsubscribe when the last is gone: unsubscribed, or its session or
// listen ended (go-sdk drops a closed session's subscriptions without
// calling the handler, so the end of each session is watched).
type subscriptions struct {
	logger func() *slog.Logger

	mu     sync.Mutex
	counts map[subscribed]int
	by     map[*mcp.ServerSession]map[string]subscribed // each session's, by served URI
}

// subscribed is one upstream resource, and for an upstream reached with
// each caller's own identity (see [perCaller]) the caller whose
// subscription it is: there each caller's is their own, made on their own
// upstream session.
type subscribed struct {
	up     *upstream
	uri    string
	caller subscriber // zero for an upstream of one shared identity
}

// subscriber names a caller in a subscription's key; the token is not
// needed to withdraw one, and is not kept.
type subscriber struct{ issuer, subject string }

// perCaller is implemented by an [Upstream] reached with each caller's own
// identity (mcpclient.Catalog): its reads, prompt gets, completions and
// subscriptions are the caller's in their context.
type perCaller interface{ PerCaller() bool }

// keyFor returns the key of the subscription to up's uri made with ctx.
func keyFor(ctx context.Context, up *upstream, uri string) subscribed {
	k := subscribed{up: up, uri: uri}
	if pc, ok := up.Upstream.(perCaller); ok && pc.PerCaller() {
		if p, ok := tool.PrincipalFrom(ctx); ok {
			k.caller = subscriber{issuer: p.Issuer, subject: p.Subject}
		}
	}
	return k
}

// context returns ctx carrying the caller k names, if any, to withdraw
// the subscription with.
func (k subscribed) context(ctx context.Context) context.Context {
	if k.caller.subject == "" {
		return ctx
	}
	return tool.WithPrincipal(ctx, tool.Principal{Issuer: k.caller.issuer, Subject: k.caller.subject})
}

func newSubscriptions(logger func() *slog.Logger) *subscriptions {
	return &subscriptions{logger: logger, counts: map[subscribed]int{}, by: map[*mcp.ServerSession]map[string]subscribed{}}
}

// add records ss's subscription to the served URI served, up's uri,
// subscribing upstream when it is the first. A failed upstream
// subscription is not recorded.
func (b *subscriptions) add(ctx context.Context, ss *mcp.ServerSession, served string, up *upstream, uri string) error {
	k := keyFor(ctx, up, uri)
	b.mu.Lock()
	mine := b.by[ss]
	if _, dup := mine[served]; dup {
		b.mu.Unlock()
		return nil
	}
	if mine == nil {
		mine = map[string]subscribed{}
		b.by[ss] = mine
		go b.watch(ss)
	}
	mine[served] = k
	b.counts[k]++
	first := b.counts[k] == 1
	b.mu.Unlock()
	if !first {
		return nil
	}
	if err := up.Subscribe(ctx, uri); err != nil {
		b.remove(ss, served)
		return err
	}
	return nil
}

// remove drops ss's subscription to served, unsubscribing upstream when it
// was the last.
func (b *subscriptions) remove(ss *mcp.ServerSession, served string) {
	b.mu.Lock()
	k, ok := b.by[ss][served]
	if ok {
		delete(b.by[ss], served)
	}
	last := ok && b.release(k)
	b.mu.Unlock()
	if last {
		go b.unsubscribe(k)
	}
}

// release counts one subscription of k less, reporting whether it was the
// last. b.mu is held.
func (b *subscriptions) release(k subscribed) bool {
	b.counts[k]--
	if b.counts[k] > 0 {
		return false
	}
	delete(b.counts, k)
	return true
}

// watch drops ss's subscriptions when it ends.
func (b *subscriptions) watch(ss *mcp.ServerSession) {
	_ = ss.Wait()
	b.mu.Lock()
	var last []subscribed
	for _, k := range b.by[ss] {
		if b.release(k) {
			last = append(last, k)
		}
	}
	delete(b.by, ss)
	b.mu.Unlock()
	for _, k := range last {
		b.unsubscribe(k)
	}
}

// unsubscribe withdraws the upstream's subscription to k, unless a client
// subscribed again meanwhile (the upstream then keeps reporting, which
// is what that client wants).
func (b *subscriptions) unsubscribe(k subscribed) {
	b.mu.Lock()
	again := b.counts[k] > 0
	b.mu.Unlock()
	if again {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), updateTimeout)
	defer cancel()
	if err := k.up.Unsubscribe(k.context(ctx), k.uri); err != nil {
		b.logger().Warn("could not unsubscribe from an upstream resource", "server", k.up.Name(), "uri", k.uri, "error", err)
	}
}

// active reports how many clients' subscriptions to up's uri are counted,
// every caller's.
func (b *subscriptions) active(up *upstream, uri string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for k, c := range b.counts {
		if k.up == up && k.uri == uri {
			n += c
		}
	}
	return n
}

// stripServerInfo removes an upstream's serverInfo from a result the
// gateway passes on: go-sdk adds the gateway's own to every 2026-07-28
// result, but keeps one already there, which would tell the client it is
// talking to the upstream.
func stripServerInfo(m mcp.Meta) {
	delete(m, mcp.MetaKeyServerInfo)
}

// updateTimeout bounds telling a served server's subscribers of an update.
const updateTimeout = time.Minute

// resourceUpdated tells the served server's subscribers that up's resource
// uri changed.
func (s *served) resourceUpdated(up *upstream, uri string) {
	ctx, cancel := context.WithTimeout(context.Background(), updateTimeout)
	defer cancel()
	_ = s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: s.g.servedURI(up, uri)})
}

// logLevels orders the syslog severities MCP uses, most verbose first.
var logLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelRank(l mcp.LoggingLevel) int {
	for i, x := range logLevels {
		if x == l {
			return i
		}
	}
	return -1
}

// upstreamLevel is the most verbose level any client has asked for: the
// upstreams are asked for that, and each client's session filters to its
// own level.
type upstreamLevel struct {
	mu    sync.Mutex
	level mcp.LoggingLevel
}

// raise records that a client asked for level, reporting whether the
// upstreams must now be asked for more.
func (u *upstreamLevel) raise(level mcp.LoggingLevel) bool {
	r := levelRank(level)
	if r < 0 {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.level != "" && levelRank(u.level) <= r {
		return false
	}
	u.level = level
	return true
}

// forwardLogLevel is receiving middleware: when a client asks for a log
// level more verbose than the upstreams send now, they are asked for it.
// A 2025 client asks with logging/setLevel (passed on once accepted); a
// 2026-07-28 client names its level in each request's _meta, since that
// revision has no logging/setLevel.
func (g *Gateway) forwardLogLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if modern(revisionOf(req)) {
			if p := paramsOf(req); p != nil {
				if level, ok := p.GetMeta()[mcp.MetaKeyLogLevel].(string); ok {
					g.passLevel(ctx, mcp.LoggingLevel(level))
				}
			}
			return next(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		if err != nil || method != "logging/setLevel" {
			return res, err
		}
		if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok {
			g.passLevel(ctx, p.Level)
		}
		return res, nil
	}
}

// passLevel asks the upstreams for level when it is more verbose than what
// they send now.
func (g *Gateway) passLevel(ctx context.Context, level mcp.LoggingLevel) {
	ups := g.upstreams.snapshot()
	if len(ups) == 0 || !g.level.raise(level) {
		return
	}
	for _, up := range ups {
		if err := up.SetLogLevel(ctx, level); err != nil {
			g.logger().Warn("could not pass the log level on", "server", up.Name(), "error", err)
		}
	}
}

// paramsOf returns req's params, or nil when it has none (a typed nil
// pointer would panic on GetMeta).
func paramsOf(req mcp.Request) mcp.Params {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p
}
