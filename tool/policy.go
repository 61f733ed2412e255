package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolwire/toolwire/audit"
)

// Policy decides on calls beyond their tool's tier: who may call what,
// with which arguments (the CEL rules of package policy implement it). The
// executor asks it about every call that passed validation, before any
// confirmation, and about every result before the caller gets it.
//
// Both methods are called concurrently, from the goroutines that run the
// calls, and must return promptly: they decide, they do not ask anyone.
// A policy that cannot decide (a rule that fails to evaluate) returns
// [Deny] with the reason: it fails closed.
type Policy interface {
	// Decide returns the decision on call c, whose arguments passed its
	// tool's input schema. The caller is in ctx ([PrincipalFrom],
	// [IdentityFrom]).
	Decide(ctx context.Context, c PolicyCall) Decision
	// Withhold returns the decision on res, the result of call c: [Deny]
	// withholds it from the caller, with the decision's reason; anything
	// else lets it through.
	Withhold(ctx context.Context, c PolicyCall, res *Result) Decision
}

// PolicyCall is a validated call as a [Policy] is asked about it.
type PolicyCall struct {
	Tool *Tool
	// Args are the validated arguments, the bytes the tool is given.
	Args json.RawMessage
	// Decoded are the same arguments as the executor decoded them to
	// validate them (numbers as json.Number), so that a policy need not
	// decode them again; nil when the caller of the policy has none. A
	// policy must not change them.
	Decoded map[string]any
}

// Effect is what a [Decision] does to a call.
type Effect uint8

const (
	// NoMatch: no rule decided; the tool's tier does, as without a policy.
	NoMatch Effect = iota
	// Allow runs the call without asking, whatever its tier.
	Allow
	// Deny refuses the call (or withholds its result), with a reason the
	// caller is given.
	Deny
	// Ask has the call confirmed before it runs, whatever its tier.
	Ask
)

var effectNames = [...]string{NoMatch: "none", Allow: "allow", Deny: "deny", Ask: "ask"}

// String returns "none", "allow", "deny" or "ask".
func (e Effect) String() string {
	if int(e) < len(effectNames) {
		return effectNames[e]
	}
	return fmt.Sprintf("effect(%d)", uint8(e))
}

// Decision is a [Policy]'s answer about one call or one result.
type Decision struct {
	Effect Effect
	// Rule names the rule that decided, for the audit log and the caller;
	// empty for NoMatch.
	Rule string
	// Reason says why, in words the caller is given with a refusal.
	Reason string
}

// ReasonPolicy means a policy rule refused the call before it ran (the
// result's message names the rule and gives its reason). Retrying the
// same call is refused the same way.
const ReasonPolicy Reason = "denied_by_policy"

// ReasonWithheld means the call ran but a policy rule withheld its result
// from the caller (the message names the rule and gives its reason).
const ReasonWithheld Reason = "withheld_by_policy"

// policyBox holds the executor's policy so that it can be swapped while
// calls run (a configuration reload) with one atomic pointer.
type policyBox struct{ p Policy }

// SetPolicy makes p the policy of every call that starts from now on; nil
// removes it, leaving tiers alone to decide. Calls already past their
// decision keep the one they got.
func (e *Executor) SetPolicy(p Policy) {
	if p == nil {
		e.policy.Store(nil)
		return
	}
	e.policy.Store(&policyBox{p})
}

// Policy returns the executor's policy, or nil.
func (e *Executor) Policy() Policy {
	if b := e.policy.Load(); b != nil {
		return b.p
	}
	return nil
}

// decide asks the policy about call p, recording the decision; it returns
// the refusal that ends the call, or nil and whether the call must be
// confirmed first. Without a policy it costs one atomic load.
func (b *batch) decide(ctx context.Context, p *pending, pol Policy) (res *Result, confirm bool) {
	t := p.tool
	confirm = t.Tier.NeedsConfirmation()
	d := safeDecide(func() Decision { return pol.Decide(ctx, PolicyCall{Tool: t, Args: p.args, Decoded: p.decoded}) })
	if d.Effect == NoMatch {
		return nil, confirm
	}
	ev := b.event(p.index, audit.PolicyDecided, t)
	ev.Rule, ev.Reason, ev.Error = d.Rule, d.Effect.String(), d.Reason
	err := b.record(ev)
	if d.Effect == Deny {
		return b.errored(p, ErrorResult(ReasonPolicy, denyMessage(t.Name, d)), 0), false
	}
	if err != nil {
		return b.errored(p, auditFailed(t.Name, err), 0), false
	}
	if d.Effect == Allow {
		return nil, false
	}
	p.asked = d // Ask, or an effect this executor does not know: ask
	return nil, true
}

// withhold asks the policy about res, the result of call p; it returns
// the result the caller gets.
func (b *batch) withhold(ctx context.Context, p *pending, pol Policy, res *Result) *Result {
	t := p.tool
	d := safeDecide(func() Decision { return pol.Withhold(ctx, PolicyCall{Tool: t, Args: p.args, Decoded: p.decoded}, res) })
	if d.Effect != Deny {
		return res
	}
	ev := b.event(p.index, audit.PolicyDecided, t)
	ev.Rule, ev.Reason, ev.Error = d.Rule, "withhold", d.Reason
	_ = b.record(ev) // the result is withheld either way
	msg := fmt.Sprintf("the result of %q was withheld by policy rule %q: %s", t.Name, d.Rule, d.Reason)
	return ErrorResult(ReasonWithheld, msg)
}

// safeDecide runs a policy method, turning a panic into a denial: a
// policy that breaks fails closed.
func safeDecide(f func() Decision) (d Decision) {
	defer func() {
		if r := recover(); r != nil {
			d = Decision{Effect: Deny, Rule: "(policy)", Reason: fmt.Sprintf("the policy failed: %v", r)}
		}
	}()
	return f()
}

func denyMessage(name string, d Decision) string {
	if d.Reason == "" {
		return fmt.Sprintf("call to %q was denied by policy rule %q; do not retry it", name, d.Rule)
	}
	return fmt.Sprintf("call to %q was denied by policy rule %q: %s", name, d.Rule, d.Reason)
}
