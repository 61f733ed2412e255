package mcpclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/tool"
)

// toolSet is a server's share of the registry: it lists the server's tools,
// prepares them, checks them against their pins (pins.go), adapts them,
// runs the confirmation preflight and installs them through the server's
// [tool.Source], and keeps what the latest listing left out and warned
// about.
//
// Its lock is a leaf: nothing else is called while it is held, and it is
// never held while the registry changes, whose watchers may call back into
// the server.
type toolSet struct {
	set  *settings
	reg  *tool.Registry
	src  *tool.Source // the server's names in reg
	call func(ctx context.Context, name string, args json.RawMessage) (*tool.Result, error)

	mu       sync.Mutex
	tools    []*tool.Tool // registered, in listing order
	skipped  []Skipped
	warnings []string
	pin      pinning // the latest listing's definitions and pin outcome (pins.go)
	closed   bool    // close was called: nothing is registered any more
}

// discovery is the outcome of listing a server's tools.
type discovery struct {
	tools    []*tool.Tool // to register
	skipped  []Skipped
	warnings []string
}

// discover lists the server's tools, checks them against their pins and
// adapts the ones allowed, bounded by the server's timeout.
func (ts *toolSet) discover(ctx context.Context, c *conn) (*discovery, error) {
	cfg := ts.set.cfg
	lctx, cancel := context.WithTimeout(ctx, ts.set.timeout)
	defer cancel()
	listing, err := c.list(lctx)
	if err != nil {
		return nil, ts.set.requestError(ctx, lctx, "list tools", err)
	}
	ts.noteToolCount(len(listing))
	listing, defs := prepare(cfg, listing, ts.descriptionLimit())
	ts.mu.Lock()
	ts.pin.listing, ts.pin.defs = listing, defs
	ts.mu.Unlock()
	return ts.evaluate(lctx, listing, defs)
}

// evaluate checks a prepared listing against the pins and adapts the tools
// allowed: what discover does once the server has answered, and what a
// recheck does again with the same listing when the pins change.
func (ts *toolSet) evaluate(ctx context.Context, listing []*mcp.Tool, defs []pins.Definition) (*discovery, error) {
	cfg := ts.set.cfg
	held, err := ts.checkPins(ctx, defs)
	if err != nil {
		return nil, err
	}
	ad, err := adapt(cfg, listing, ts.handler)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	// A description is the server's text, shown to people and models: a
	// configured secret in it is masked like one in a result.
	for _, t := range ad.tools {
		t.Description = ts.set.secrets.String(t.Description)
	}
	if len(held) > 0 {
		// Adapted before leaving them out, so that a tierOverrides entry
		// naming a quarantined tool is not reported as unlisted.
		ad.tools = slices.DeleteFunc(ad.tools, func(t *tool.Tool) bool { _, ok := held[t.Origin.Name]; return ok })
		ad.skipped = slices.DeleteFunc(ad.skipped, func(sk Skipped) bool { _, ok := held[sk.Name]; return ok })
	}
	ts.markPins(ad.tools)
	if err := preflight(cfg.Name, ad.tools, ts.reg); err != nil {
		return nil, err
	}
	return &discovery{tools: ad.tools, skipped: ad.skipped, warnings: ad.warnings}, nil
}

// handler returns the registry handler that calls the server's tool named
// original through whatever session is live when the call is made.
func (ts *toolSet) handler(original string) tool.Handler {
	return func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
		return ts.call(ctx, original, args)
	}
}

// install swaps the server's registered tools for tools in one step and
// returns, as skipped, those left out because another server (or a tool
// registered directly) holds their names. Names are chosen without looking
// at the registry (see registeredName), and the registry's Source takes
// only names that are free or already the server's, so two servers
// starting at once need no lock of their own, and a name never moves from
// another server's tool to one of this server's.
//
// No lock is held while the registry changes: its watchers run then, and
// may call back into the server.
func (ts *toolSet) install(tools []*tool.Tool) ([]Skipped, error) {
	conflicts, err := ts.src.Replace(tools)
	if errors.Is(err, tool.ErrSourceClosed) {
		return nil, errClosed
	}
	if err != nil {
		return nil, fmt.Errorf("server %q: register tools: %w", ts.set.cfg.Name, err)
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
	ts.mu.Lock()
	if !ts.closed {
		ts.tools = registered
	}
	ts.mu.Unlock()
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

// refresh re-lists the tools after notifications/tools/list_changed and
// applies the difference in one step; tools that pinning quarantines leave
// the registry. A listing that fails, or whose tools cannot be registered,
// leaves the current tools in place, less any that pinning has just
// quarantined; a lost session is the supervisor's to notice. A listing that
// pinning in enforce mode cannot check withdraws every tool of the server
// instead: what the server offers now is unverified, and the tools
// registered before would call it. ctx ends when the server is closed.
func (ts *toolSet) refresh(ctx context.Context, c *conn) {
	d, err := ts.discover(ctx, c)
	ts.apply(ctx, d, err, "")
}

// recheck checks the latest listing against the pins again, without asking
// the server, after the pins changed elsewhere (another replica, or toolwire
// pins approve or forget in another process): a tool approved there is
// registered, one quarantined there leaves the registry, as a re-listing
// would have it (see refresh, whose rules it follows). The tools.changed
// event it records says "pins" as its reason. Before the first listing it
// does nothing.
func (ts *toolSet) recheck(ctx context.Context) {
	ts.mu.Lock()
	listing, defs := ts.pin.listing, ts.pin.defs
	ts.mu.Unlock()
	if listing == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, ts.set.timeout)
	defer cancel()
	d, err := ts.evaluate(lctx, listing, defs)
	ts.apply(ctx, d, err, "pins")
}

// apply makes the outcome of a re-listing (why "") or of a recheck (why
// "pins") the registered tools, in one step, and logs and audits the
// difference.
func (ts *toolSet) apply(ctx context.Context, d *discovery, err error, why string) {
	name := ts.set.cfg.Name
	logger := ts.set.logger
	what := "tools changed"
	if why == "pins" {
		what = "tool pins changed"
	}
	ts.mu.Lock()
	before, skipped, warnings := ts.tools, ts.skipped, ts.warnings
	ts.mu.Unlock()
	var tools []*tool.Tool
	if ctx.Err() != nil {
		// Close cut the re-listing short: toolwire is exiting, the
		// tools are about to go, and nothing failed worth a word.
		return
	}
	switch {
	case errors.Is(err, ErrPinsUnavailable):
		logger.Error(what+", but the tools cannot be checked against their pins; withdrawing every tool of the server until they can",
			"server", name, "error", ts.set.secrets.String(err.Error()))
	case err != nil:
		logger.Warn(what+", but re-listing failed; keeping the current tools", "server", name, "error", ts.set.secrets.String(err.Error()))
		tools = ts.withoutQuarantined(before)
	default:
		tools, skipped, warnings = d.tools, d.skipped, d.warnings
	}
	added, removed, changed := diffTools(before, tools)
	if len(added)+len(removed)+len(changed) == 0 {
		ts.setReport(skipped, warnings)
		return
	}
	left, err := ts.install(tools)
	if err != nil {
		if errors.Is(err, errClosed) {
			return
		}
		logger.Warn(what+", but the new tools could not be registered; keeping the current ones", "server", name, "error", ts.set.secrets.String(err.Error()))
		// Taking tools away cannot clash with another server's names.
		if tools = ts.withoutQuarantined(before); len(tools) == len(before) {
			return
		}
		if _, err := ts.install(tools); err != nil {
			return
		}
		added, removed, changed = diffTools(before, tools)
	} else {
		for _, sk := range left {
			logger.Warn("tool left out", "server", name, "tool", sk.Name, "reason", sk.Reason)
		}
		tools = ts.registered()
		added, removed, changed = diffTools(before, tools)
		ts.setReport(append(skipped, left...), warnings)
		if len(added)+len(removed)+len(changed) == 0 {
			return // only tools that stay left out, as before
		}
	}
	logger.Info("tools changed", "server", name, "added", len(added), "removed", len(removed), "changed", len(changed), "why", cmp.Or(why, "list_changed"))
	ts.set.record(audit.Event{Kind: audit.ToolsChanged, Added: added, Removed: removed, Changed: changed, Tools: len(tools), Reason: why})
}

// diffTools compares two listings by registered name: a tool is changed
// when its description, schema, tier or original name differ.
func diffTools(before, after []*tool.Tool) (added, removed, changed []string) {
	old := make(map[string]*tool.Tool, len(before))
	for _, t := range before {
		old[t.Name] = t
	}
	seen := make(map[string]bool, len(after))
	for _, t := range after {
		seen[t.Name] = true
		o, ok := old[t.Name]
		switch {
		case !ok:
			added = append(added, t.Name)
		case o.Description != t.Description || o.Tier != t.Tier || o.Origin != t.Origin || string(o.InputSchema) != string(t.InputSchema):
			changed = append(changed, t.Name)
		}
	}
	for _, t := range before {
		if !seen[t.Name] {
			removed = append(removed, t.Name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}

// withdraw deregisters every tool of the server, for a server that has
// failed for good. After close it does nothing.
func (ts *toolSet) withdraw() {
	ts.mu.Lock()
	ts.tools = nil
	ts.mu.Unlock()
	_, _ = ts.src.Replace(nil) // fails only once close has removed them
}

// close deregisters every tool of the server and refuses any later
// registration, so that a start racing with Close leaves nothing behind.
func (ts *toolSet) close() {
	ts.src.Close()
	ts.mu.Lock()
	ts.tools, ts.closed = nil, true
	ts.mu.Unlock()
}

// setReport keeps what the latest listing left out and warned about.
func (ts *toolSet) setReport(skipped []Skipped, warnings []string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.skipped, ts.warnings = skipped, warnings
}

// registered returns the server's registered tools, in listing order.
func (ts *toolSet) registered() []*tool.Tool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.tools)
}

func (ts *toolSet) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.tools)
}

func (ts *toolSet) names() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	names := make([]string, len(ts.tools))
	for i, t := range ts.tools {
		names[i] = t.Name
	}
	return names
}

func (ts *toolSet) skippedTools() []Skipped {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]Skipped(nil), ts.skipped...)
}

func (ts *toolSet) warningList() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.warnings...)
}
