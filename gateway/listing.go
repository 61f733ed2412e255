package gateway

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
)

// upstreams is the gateway's one listing of what its upstreams offer
// besides tools, shared by every server it serves (one per role): each
// upstream is listed once per change it reports, however many roles are
// served, and each served server filters the shared listing by what its
// caller may see (see [served.syncCatalog]).
//
// It watches the upstreams while at least one served server follows it,
// and tells the followers of a change with none of its locks held.
type upstreams struct {
	mask   func() *audit.Secrets
	logger func() *slog.Logger

	// watchMu is held while the upstreams' watches start or stop, and so
	// while Upstream.Watch and its stop functions run; nothing else is.
	watchMu sync.Mutex
	unwatch map[*upstream]func() // guarded by watchMu

	mu        sync.Mutex
	list      []*upstream // in Options.Upstreams order; replaced whole by set
	followers map[*served]struct{}
}

// upstream is one upstream of the shared listing.
type upstream struct {
	Upstream
	// changes counts the changes the upstream reported, and those it may
	// have reported while it was not watched.
	changes atomic.Uint64

	// refresh is held while the upstream is listed, so that a change is
	// listed once: the servers that want it meanwhile wait and share it.
	refresh  sync.Mutex
	listedAt uint64   // the value of changes that listing follows; guarded by refresh
	listing  *listing // nil until a listing succeeds; guarded by refresh
}

// listing is one upstream's resources, templates and prompts, with the
// titles and descriptions masked. It is shared by the served servers and
// never changed once made.
type listing struct {
	up        *upstream
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	prompts   []*mcp.Prompt
}

func newUpstreams(list []Upstream, mask func() *audit.Secrets, logger func() *slog.Logger) *upstreams {
	u := &upstreams{mask: mask, logger: logger, followers: map[*served]struct{}{}, unwatch: map[*upstream]func(){}}
	for _, up := range list {
		u.list = append(u.list, listedUpstream(up))
	}
	return u
}

func listedUpstream(up Upstream) *upstream {
	e := &upstream{Upstream: up}
	e.changes.Store(1) // never listed
	return e
}

// snapshot returns the upstreams, in order.
func (u *upstreams) snapshot() []*upstream {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.list
}

// set makes list the upstreams (a reload): an upstream already listed
// keeps its listing and its watch, a new one is watched (when anything
// follows) and listed when next needed, one no longer in list is no
// longer watched; every follower then re-syncs its catalog. It returns
// the upstreams that are new.
func (u *upstreams) set(list []Upstream) (added []Upstream) {
	u.watchMu.Lock()
	defer u.watchMu.Unlock()
	u.mu.Lock()
	old := map[Upstream]*upstream{}
	for _, e := range u.list {
		old[e.Upstream] = e
	}
	next := make([]*upstream, 0, len(list))
	for _, up := range list {
		e, ok := old[up]
		if ok {
			delete(old, up)
		} else {
			e = listedUpstream(up)
			added = append(added, up)
		}
		next = append(next, e)
	}
	u.list = next
	watching := len(u.followers) > 0
	u.mu.Unlock()
	for _, e := range old {
		if stop, ok := u.unwatch[e]; ok {
			stop()
			delete(u.unwatch, e)
		}
	}
	if watching {
		for _, e := range next {
			if _, ok := u.unwatch[e]; !ok {
				u.watch(e)
			}
		}
	}
	for _, s := range u.following() {
		s.poke(&s.catalogDirty)
	}
	return added
}

// watch starts watching up; watchMu must be held.
func (u *upstreams) watch(up *upstream) {
	up.changes.Add(1) // changes went unwatched before
	u.unwatch[up] = up.Watch(func() { u.changed(up) }, func(uri string) { u.updated(up, uri) })
}

// follow makes s one of the servers told when an upstream changes (its
// catalog must be synced) or reports an updated resource, until unfollow
// is called. The first follower starts the watches; as changes went
// unwatched before, every upstream is then listed again.
func (u *upstreams) follow(s *served) (unfollow func()) {
	u.watchMu.Lock()
	defer u.watchMu.Unlock()
	u.mu.Lock()
	first := len(u.followers) == 0
	u.followers[s] = struct{}{}
	u.mu.Unlock()
	if first {
		for _, up := range u.snapshot() {
			u.watch(up)
		}
	}
	var once sync.Once
	return func() { once.Do(func() { u.unfollow(s) }) }
}

func (u *upstreams) unfollow(s *served) {
	u.watchMu.Lock()
	defer u.watchMu.Unlock()
	u.mu.Lock()
	delete(u.followers, s)
	last := len(u.followers) == 0
	u.mu.Unlock()
	if last {
		for up, stop := range u.unwatch {
			stop()
			delete(u.unwatch, up)
		}
	}
}

func (u *upstreams) following() []*served {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]*served, 0, len(u.followers))
	for s := range u.followers {
		out = append(out, s)
	}
	return out
}

// changed notes a change of up and asks every follower to sync; it runs in
// the upstream's goroutine, so it only signals.
func (u *upstreams) changed(up *upstream) {
	up.changes.Add(1)
	for _, s := range u.following() {
		s.poke(&s.catalogDirty)
	}
}

// updated passes an update of up's resource uri on to every follower's
// subscribers.
func (u *upstreams) updated(up *upstream, uri string) {
	for _, s := range u.following() {
		go s.resourceUpdated(up, uri)
	}
}

// current returns the latest listing of every upstream that has one, in
// order, listing again first each upstream that changed since its last
// listing. A listing that fails is logged, and the one before kept until
// the next change.
func (u *upstreams) current(ctx context.Context) []*listing {
	var out []*listing
	for _, up := range u.snapshot() {
		if l := u.latest(ctx, up); l != nil {
			out = append(out, l)
		}
	}
	return out
}

func (u *upstreams) latest(ctx context.Context, up *upstream) *listing {
	up.refresh.Lock()
	defer up.refresh.Unlock()
	changes := up.changes.Load()
	if up.listedAt == changes {
		return up.listing
	}
	up.listedAt = changes
	resources, templates, prompts, err := up.List(ctx)
	if err != nil {
		u.logger().Warn("upstream listing failed; keeping what is served", "server", up.Name(), "error", err)
		return up.listing
	}
	l := &listing{up: up, resources: resources, templates: templates, prompts: prompts}
	l.mask(u.mask())
	up.listing = l
	return l
}
