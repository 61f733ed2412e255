package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/safetext"
	"github.com/toolwire/toolwire/tool"
)

// Approval says how a write or destructive call through the gateway is
// approved.
type Approval string

const (
	// Elicit asks the connected client's user, showing the validated
	// arguments: by elicitation/create on a 2025 session, by an input
	// request on 2026-07-28. A call whose client cannot be asked does not
	// run.
	Elicit Approval = "elicit"
	// Deny refuses every such call.
	Deny Approval = "deny"
	// Allow runs such calls without asking: for tools the operator has
	// decided need no confirmation when called through the gateway.
	Allow Approval = "allow"
)

// ParseApproval returns the approval named s.
func ParseApproval(s string) (Approval, error) {
	switch a := Approval(s); a {
	case Elicit, Deny, Allow:
		return a, nil
	}
	return "", fmt.Errorf("unknown approval %q (want elicit, deny or allow)", s)
}

// ApprovalPolicy configures approvals per tier and per tool. Unset tiers
// default to Elicit; a per-tool entry (by registered name) wins over its
// tier's. Read calls are never asked about.
type ApprovalPolicy struct {
	Write       Approval
	Destructive Approval
	Tools       map[string]Approval
}

func (p ApprovalPolicy) forCall(call tool.PendingCall) Approval {
	a, ok := p.Tools[call.Name]
	if !ok {
		switch call.Tier {
		case tool.Read: // here only because a policy rule asks about it
		case tool.Write:
			a = p.Write
		default:
			a = p.Destructive
		}
	}
	// A policy rule that asks about the call wants a person asked, not
	// the call approved by its tier (tool.PendingCall.Rule).
	if a == "" || (a == Allow && call.Rule != "") {
		return Elicit
	}
	return a
}

// ErrApprovalRequired, wrapped, is why a call was refused: the policy
// denies it, or the client cannot be asked (then the error also wraps
// [tool.ErrNobodyToAsk], and the call's outcome is unconfirmed).
var ErrApprovalRequired = errors.New("approval required")

// Approver is the [tool.Confirmer] of a registry served by a gateway. It
// approves each write or destructive call per its policy, asking the
// client that made the call: by elicitation/create on a 2025 session, by
// an input request of the parked call on 2026-07-28 (see [Parking]); with
// a form, or, to a client over HTTP that declares URL-mode elicitation
// and not forms, with a link to the call's approval page (see
// [ApprovalPath]). A call that did not come through the gateway, or whose
// client can be asked neither way, cannot be asked about and does not run
// unless the policy allows it (the outcome is unconfirmed: nobody could
// be asked).
type Approver struct {
	policy atomic.Pointer[ApprovalPolicy]
}

// NewApprover returns an approver applying policy.
func NewApprover(policy ApprovalPolicy) *Approver {
	a := &Approver{}
	a.SetPolicy(policy)
	return a
}

// SetPolicy makes policy the approver's, for the calls confirmed from now
// on (a reload); a call already being approved keeps its answer.
func (a *Approver) SetPolicy(policy ApprovalPolicy) { a.policy.Store(&policy) }

// Confirm implements [tool.Confirmer].
func (a *Approver) Confirm(ctx context.Context, call tool.PendingCall) (bool, error) {
	switch a.policy.Load().forCall(call) {
	case Allow:
		return true, nil
	case Deny:
		return false, fmt.Errorf("%w: the gateway's policy refuses %s calls to %s", ErrApprovalRequired, call.Tier, call.Name)
	}
	d := downstreamFrom(ctx)
	if d == nil {
		return false, fmt.Errorf("%w: no connected client to ask: %w", ErrApprovalRequired, tool.ErrNobodyToAsk)
	}
	caps := d.capabilities()
	if !formElicitation(caps) {
		if links := approvalLinksFrom(ctx); links != nil && caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil {
			return confirmAtPage(ctx, d, call, links)
		}
		return false, fmt.Errorf("%w: the client does not support elicitation, so its user cannot be asked: %w", ErrApprovalRequired, tool.ErrNobodyToAsk)
	}
	params, err := json.Marshal(&mcp.ElicitParams{Message: approvalMessage(call), RequestedSchema: approvalSchema})
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrApprovalRequired, err)
	}
	raw, err := d.ask(ctx, tool.Elicitation, params)
	if err != nil {
		return false, fmt.Errorf("%w: asking the client failed: %w", ErrApprovalRequired, err)
	}
	var res mcp.ElicitResult
	if err := json.Unmarshal(raw, &res); err != nil || res.Action != "accept" {
		return false, nil
	}
	approved, _ := res.Content["approve"].(bool)
	return approved, nil
}

// confirmAtPage asks a client that declares URL-mode elicitation, and not
// forms, to open the call's approval page (see [ApprovalPath]); the
// decision taken there is the answer. The client's accepting only says
// that its user went there: the approver then waits for the decision, at
// most links.wait (a 2026-07-28 client asks again once its user is done,
// so the decision is usually in already). A client that declines, or a
// user who never decides, does not approve.
func confirmAtPage(ctx context.Context, d downstream, call tool.PendingCall, links *approvalLinks) (bool, error) {
	token, page, err := links.pages.open(ctx, call, links.base)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrApprovalRequired, err)
	}
	defer links.pages.closePage(token)
	params, err := json.Marshal(&mcp.ElicitParams{
		Mode:          "url",
		Message:       "Open the page to allow or deny the call to " + safetext.Line(call.Name, 128) + ".",
		URL:           links.base + ApprovalPath + token,
		ElicitationID: rand.Text(),
	})
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrApprovalRequired, err)
	}
	raw, err := d.ask(ctx, tool.Elicitation, params)
	if err != nil {
		return false, fmt.Errorf("%w: asking the client failed: %v", ErrApprovalRequired, err)
	}
	var res mcp.ElicitResult
	if err := json.Unmarshal(raw, &res); err != nil || res.Action != "accept" {
		return false, nil
	}
	wait := time.NewTimer(links.wait)
	defer wait.Stop()
	select {
	case <-page.decided:
		return page.allowed, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-wait.C:
		return false, fmt.Errorf("%w: nobody decided at the approval page within %s: %w", ErrApprovalRequired, links.wait, tool.ErrNobodyToAsk)
	}
}

// approvalSchema asks for one explicit yes: accepting the form without
// ticking it is a no.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Run this call", "default": false},
	},
	"required": []string{"approve"},
}

// approvalMessage shows the call as the user must judge it, rendered as
// the CLI renders its prompt ([tool.PendingCall.Render]): the validated
// arguments first, never the model's raw output, and the tool's
// description bounded, escaped and marked as its server's words.
func approvalMessage(call tool.PendingCall) string {
	return "Allow this call?\n\n" + call.Render()
}
