package mcpclient

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// supervise watches the live connection until Close: a lost session is
// re-established (see reconnect) and a list_changed notification re-lists
// the tools. It returns when the server is closed or has failed for good,
// and closes s.done.
func (s *Server) supervise(c *conn) {
	defer close(s.done)
	for {
		select {
		case <-s.stopCtx.Done():
			return
		case <-c.lost:
			c = s.reconnect(c)
			if c == nil {
				return
			}
		case <-s.relist:
			s.refresh(c)
		}
	}
}

// reconnect replaces a lost connection: Degraded, then up to MaxAttempts
// tries with capped exponential backoff and jitter, each going through
// Connecting, Initializing and Discovering again. The tools stay registered
// meanwhile (their calls fail fast as unavailable) and are swapped for the
// new listing in one step. It returns the new connection, or nil when the
// server was closed or has Failed.
func (s *Server) reconnect(old *conn) *conn {
	// The session may still be open when calls kept failing in its
	// transport: close it before anything else (Wait would block on it).
	cause := old.lostCause()
	_ = old.close()
	s.moveTo(Degraded, cause)
	for attempt := 1; attempt <= s.policy.MaxAttempts; attempt++ {
		wait := s.backoff(attempt)
		s.mu.Lock()
		s.attempt = attempt
		s.moveLocked(Reconnecting, nil)
		s.mu.Unlock()
		s.logger.Warn("server lost; reconnecting", "server", s.cfg.Name, "attempt", attempt, "backoff", wait, "cause", s.secrets.String(cause.Error()))
		s.record(audit.Event{Kind: audit.ServerDegraded, Attempt: attempt, Backoff: wait, Error: cause.Error()})

		timer := time.NewTimer(wait)
		select {
		case <-s.stopCtx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		c, err := s.establish(s.stopCtx, true)
		if err == nil {
			s.logger.Info("server reconnected", "server", s.cfg.Name, "attempt", attempt)
			s.record(audit.Event{Kind: audit.ServerReconnected, Attempt: attempt, Tools: s.toolCount()})
			return c
		}
		if s.stopCtx.Err() != nil {
			return nil
		}
		cause = err
		if !transient(err) {
			break
		}
		s.moveTo(Reconnecting, err)
	}
	s.fail("reconnect", cause)
	return nil
}

// transient reports whether a failed attempt is worth repeating. A server
// that now lists tools the registry cannot take (no confirmer, a name
// clash), or whose tools cannot be checked against their pins, will not
// change its mind on the next try.
func transient(err error) bool {
	return !errors.Is(err, tool.ErrNeedsConfirmer) && !errors.Is(err, tool.ErrDuplicateName) && !errors.Is(err, ErrPinsUnavailable) && !needsLogin(err)
}

// backoff is the wait before the given attempt: Initial doubled per attempt,
// capped at Max, minus a random jitter of up to half.
func (s *Server) backoff(attempt int) time.Duration {
	d := s.policy.Initial
	for i := 1; i < attempt && d < s.policy.Max; i++ {
		d *= 2
	}
	d = min(d, s.policy.Max)
	return d/2 + rand.N(d/2+1)
}

// refresh re-lists the tools after notifications/tools/list_changed and
// applies the difference in one step; tools that pinning quarantines leave
// the registry. A listing that fails, or whose tools cannot be registered,
// leaves the current tools in place, less any that pinning has just
// quarantined; a lost session is the watcher's to notice. A listing that
// pinning in enforce mode cannot check withdraws every tool of the server
// instead: what the server offers now is unverified, and the tools
// registered before would call it.
func (s *Server) refresh(c *conn) {
	s.mu.Lock()
	before, skipped, warnings := s.tools, s.skipped, s.warnings
	s.mu.Unlock()
	var tools []*tool.Tool
	d, err := s.discover(s.stopCtx, c)
	if s.stopCtx.Err() != nil {
		// Close cut the re-listing short: toolwire is exiting, the
		// tools are about to go, and nothing failed worth a word.
		return
	}
	switch {
	case errors.Is(err, ErrPinsUnavailable):
		s.logger.Error("tools changed, but they cannot be checked against their pins; withdrawing every tool of the server until they can",
			"server", s.cfg.Name, "error", s.secrets.String(err.Error()))
	case err != nil:
		s.logger.Warn("tools changed, but re-listing failed; keeping the current tools", "server", s.cfg.Name, "error", s.secrets.String(err.Error()))
		tools = s.withoutQuarantined(before)
	default:
		tools, skipped, warnings = d.tools, d.skipped, d.warnings
	}
	added, removed, changed := diffTools(before, tools)
	if len(added)+len(removed)+len(changed) == 0 {
		s.mu.Lock()
		s.skipped, s.warnings = skipped, warnings
		s.mu.Unlock()
		return
	}
	left, err := s.install(tools)
	if err != nil {
		if errors.Is(err, errClosed) {
			return
		}
		s.logger.Warn("tools changed, but the new tools could not be registered; keeping the current ones", "server", s.cfg.Name, "error", s.secrets.String(err.Error()))
		// Taking tools away cannot clash with another server's names.
		if tools = s.withoutQuarantined(before); len(tools) == len(before) {
			return
		}
		if _, err := s.install(tools); err != nil {
			return
		}
		added, removed, changed = diffTools(before, tools)
	} else {
		for _, sk := range left {
			s.logger.Warn("tool left out", "server", s.cfg.Name, "tool", sk.Name, "reason", sk.Reason)
		}
		tools = s.registered()
		added, removed, changed = diffTools(before, tools)
		s.mu.Lock()
		s.skipped, s.warnings = append(skipped, left...), warnings
		s.mu.Unlock()
		if len(added)+len(removed)+len(changed) == 0 {
			return // only tools that stay left out, as before
		}
	}
	s.logger.Info("tools changed", "server", s.cfg.Name, "added", len(added), "removed", len(removed), "changed", len(changed))
	s.record(audit.Event{Kind: audit.ToolsChanged, Added: added, Removed: removed, Changed: changed, Tools: len(tools)})
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

// codeRejected is the code go-sdk gives its "rejected by transport" error
// (jsonrpc2.ErrRejected, not exported): a request the transport could not
// deliver, such as an HTTP POST answered with 503. It has the type of an
// error response but is the transport's failure.
const codeRejected = -32005

// isWireError reports whether err is an error response the server sent,
// which says nothing about the health of the transport.
func isWireError(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code != codeRejected
}

// contextOf returns a context that ends when either a or b does.
func contextOf(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
