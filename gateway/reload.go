package gateway

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
)

// A reload (SIGHUP to "toolwire serve") changes what a running gateway
// serves without dropping its clients' sessions: the upstreams behind it
// ([Gateway.SetUpstreams]), and who may call what and how often
// ([Handler.Reload]). Each served server keeps its sessions and re-syncs
// its listing, and its clients are told of what changed
// (notifications/tools/list_changed and the like).

// SetUpstreams makes ups the gateway's upstreams (see [Options].Upstreams):
// one already there keeps its listing, a new one is listed when a served
// server next needs it and asked for the most verbose log level a client
// has asked for, one gone is no longer watched; every served server
// re-syncs its resources, templates and prompts, and its clients are told.
// A gateway made with nil Upstreams serves no catalog, whatever it is set
// to later.
func (g *Gateway) SetUpstreams(ctx context.Context, ups []Upstream) {
	added := g.upstreams.set(ups)
	if level := g.level.current(); level != "" {
		for _, up := range added {
			if err := up.SetLogLevel(ctx, level); err != nil {
				g.logger().Warn("could not pass the log level on", "server", up.Name(), "error", err)
			}
		}
	}
}

// ReloadOptions are what [Handler.Reload] changes: the same fields as in
// [HTTPOptions].
type ReloadOptions struct {
	Verifier auth.TokenVerifier
	Roles    Roles
	Limits   Limits
}

// ErrReloadNeedsRestart is returned by [Handler.Reload] for a change a
// running handler cannot make: turning caller authentication on or off
// changes what every request passes through, and who a session belongs
// to.
var ErrReloadNeedsRestart = errors.New("this change needs a restart")

// Reload makes o's verifier, roles and limits the handler's from the next
// request on. Sessions stay open: a session's credential and role are
// checked on each request as before, so a token no longer valid, or whose
// role changed, ends its sessions on their next request; the servers of
// every role re-sync what they list under the new roles. Limits apply to
// new admissions and calls; what is open stays open. A verifier where
// there was none, or none where there was one, is refused with
// [ErrReloadNeedsRestart], and nothing changes.
func (h *Handler) Reload(o ReloadOptions) error {
	if (o.Verifier == nil) != (h.verifier == nil) {
		return ErrReloadNeedsRestart
	}
	if err := o.Roles.Validate(); err != nil {
		return err
	}
	if h.verifier != nil {
		h.verifier.set(o.Verifier)
	}
	h.servers.setRoles(o.Roles, o.Verifier != nil)
	h.tracker.setLimits(o.Limits)
	return nil
}

// Authenticated reports whether the handler authenticates its callers.
func (h *Handler) Authenticated() bool { return h.verifier != nil }

// Limits returns the handler's limits now.
func (h *Handler) Limits() Limits {
	h.tracker.mu.Lock()
	defer h.tracker.mu.Unlock()
	return h.tracker.limits
}

// swappableVerifier is the handler's token verifier, which a reload
// replaces.
type swappableVerifier struct {
	v atomic.Pointer[auth.TokenVerifier]
}

func newSwappableVerifier(v auth.TokenVerifier) *swappableVerifier {
	s := &swappableVerifier{}
	s.set(v)
	return s
}

func (s *swappableVerifier) set(v auth.TokenVerifier) { s.v.Store(&v) }

func (s *swappableVerifier) verify(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
	return (*s.v.Load())(ctx, token, req)
}

// rolesNow is the handler's roles, which a reload replaces.
type rolesNow struct {
	mu        sync.Mutex
	roles     Roles
	perCaller bool // roles differ, so what a server answers depends on its caller
}

func (r *rolesNow) get() (Roles, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roles, r.perCaller
}

// setRoles makes roles the handler's and has every role's server re-sync
// its tools and catalog under them. authenticated is whether callers have
// roles at all.
func (r *roleServers) setRoles(roles Roles, authenticated bool) {
	r.now.mu.Lock()
	r.now.roles, r.now.perCaller = roles, authenticated && roles.differ()
	r.now.mu.Unlock()
	r.mu.Lock()
	served := make([]*served, 0, len(r.served))
	for _, s := range r.served {
		served = append(served, s)
	}
	r.mu.Unlock()
	for _, s := range served {
		s.poke(&s.toolsDirty)
		s.poke(&s.catalogDirty)
	}
}

// setLimits makes l the tracker's limits. The callers' rate buckets keep
// what they hold, up to the new burst.
func (t *tracker) setLimits(l Limits) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.limits = l
	for _, c := range t.callers {
		if l.CallRate <= 0 {
			c.lim = nil
			continue
		}
		burst := callBurst(l)
		if c.lim == nil {
			c.lim = rate.NewLimiter(rate.Limit(l.CallRate), burst)
			continue
		}
		c.lim.SetLimit(rate.Limit(l.CallRate))
		c.lim.SetBurst(burst)
	}
}

// callBurst is l's bucket size: CallBurst, else the rate rounded up, at
// least 1.
func callBurst(l Limits) int {
	if l.CallBurst > 0 {
		return l.CallBurst
	}
	return max(1, int(math.Ceil(l.CallRate)))
}

// current returns the level the upstreams have been asked for, or "".
func (u *upstreamLevel) current() mcp.LoggingLevel {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.level
}
