package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/approval"
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
// [ApprovalPath]). The form and the page offer the lasting scopes of
// [approval.Scope] when the approver keeps lasting approvals
// ([Operators].Grants).
//
// A call whose client can be asked neither way (one without elicitation,
// one that did not come through the gateway) waits for an operator when
// [Operators] has a queue and a wait: it is listed as pending, a webhook
// is told, and it runs once an operator approves it (toolwire approvals
// approve, the console, its approval page), within the wait. Otherwise,
// or past the wait, it does not run unless the policy allows it (the
// outcome is unconfirmed: nobody could be asked). A lasting denial an
// operator gave refuses the calls it covers without asking anyone.
type Approver struct {
	policy atomic.Pointer[ApprovalPolicy]
	ops    atomic.Pointer[Operators]
}

// Operators configures how the approver keeps lasting approvals and
// reaches an operator. The zero value keeps none and reaches nobody.
type Operators struct {
	// Grants keeps the lasting approvals the form and the page offer, and
	// the lasting denials the approver honours; nil offers none.
	Grants approval.Grants
	// Queue is where a call waits for an operator; nil means no call
	// waits.
	Queue approval.Queue
	// Wait is how long a call whose client cannot be asked waits for an
	// operator; 0 means it does not wait (it is refused at once).
	Wait time.Duration
	// Webhook, when set, is told of each call that starts waiting.
	Webhook *Webhook
	// Logger reports a webhook that could not be told; nil means
	// slog.Default().
	Logger *slog.Logger
}

// NewApprover returns an approver applying policy.
func NewApprover(policy ApprovalPolicy) *Approver {
	a := &Approver{}
	a.SetPolicy(policy)
	a.SetOperators(Operators{})
	return a
}

// SetPolicy makes policy the approver's, for the calls confirmed from now
// on (a reload); a call already being approved keeps its answer.
func (a *Approver) SetPolicy(policy ApprovalPolicy) { a.policy.Store(&policy) }

// SetOperators makes o the approver's, for the calls confirmed from now
// on (a reload); a call already waiting keeps its wait.
func (a *Approver) SetOperators(o Operators) { a.ops.Store(&o) }

// Operators returns what [Approver.SetOperators] set last.
func (a *Approver) Operators() Operators { return *a.ops.Load() }

// SessionApprovals returns grants as an executor serving the gateway
// consults them: with the session of each call (its 2025 MCP session) in
// the context, so that an approval of scope session covers the calls of
// that session alone; and, when grants also keeps lasting denials
// ([approval.Grants]), a call a denial covers is covered by no approval
// (the approver then refuses it): a later denial wins over an earlier
// approval.
func SessionApprovals(grants tool.Approvals) tool.Approvals {
	return sessionApprovals{grants}
}

type sessionApprovals struct{ tool.Approvals }

func (s sessionApprovals) Approved(ctx context.Context, key tool.ApprovalKey) (string, error) {
	ctx = approval.WithSession(ctx, sessionOf(ctx))
	if g, ok := s.Approvals.(approval.Grants); ok {
		if _, denied, err := g.Denied(ctx, key); err != nil || denied {
			return "", err
		}
	}
	return s.Approvals.Approved(ctx, key)
}

// sessionOf is the session of the call ctx carries, to which an approval
// of scope session is bound: its 2025 MCP session's id; "" for a
// 2026-07-28 call, whose chain of requestStates ends with the call (so
// that scope would cover nothing later), and for a call from no client.
func sessionOf(ctx context.Context) string {
	if d, ok := downstreamFrom(ctx).(*sessionDownstream); ok && d.ss != nil {
		if id := d.ss.ID(); id != "" {
			return "mcp:" + id
		}
	}
	return ""
}

// Confirm implements [tool.Confirmer].
func (a *Approver) Confirm(ctx context.Context, call tool.PendingCall) (bool, error) {
	ops := a.ops.Load()
	session := sessionOf(ctx)
	if ops.Grants != nil && call.Key.Tool != "" {
		// A person's lasting denial wins over the tier's allow: fail closed.
		g, denied, err := ops.Grants.Denied(approval.WithSession(ctx, session), call.Key)
		if err != nil {
			return false, fmt.Errorf("%w: the lasting denials could not be read: %v", ErrApprovalRequired, err)
		}
		if denied {
			msg := fmt.Sprintf("denied by lasting denial %s (%s scope)", g.ID, g.Scope)
			if g.Reason != "" {
				msg += ": " + safetext.Line(g.Reason, 300)
			}
			return false, errors.New(msg)
		}
	}
	switch a.policy.Load().forCall(call) {
	case Allow:
		return true, nil
	case Deny:
		return false, fmt.Errorf("%w: the gateway's policy refuses %s calls to %s", ErrApprovalRequired, call.Tier, call.Name)
	}
	scopes := offeredScopes(ops, call, session)
	d := downstreamFrom(ctx)
	var caps *mcp.ClientCapabilities
	if d != nil {
		caps = d.capabilities()
	}
	links := approvalLinksFrom(ctx)
	switch {
	case d == nil:
		return a.waitForOperator(ctx, ops, call, session, links, "no connected client to ask")
	case formElicitation(caps):
		return askForm(ctx, d, ops, call, session, scopes)
	case links != nil && caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil:
		return a.confirmAtPage(ctx, d, ops, call, session, links)
	}
	return a.waitForOperator(ctx, ops, call, session, links, "the client does not support elicitation, so its user cannot be asked")
}

// offeredScopes are the scopes a person asked about call may choose: once
// always; these arguments and this tool when lasting approvals are kept;
// this session when the call is in one.
func offeredScopes(ops *Operators, call tool.PendingCall, session string) []approval.Scope {
	scopes := []approval.Scope{approval.Once}
	if ops.Grants == nil || call.Key.Tool == "" {
		return scopes
	}
	scopes = append(scopes, approval.Args, approval.Tool)
	if session != "" {
		scopes = append(scopes, approval.Session)
	}
	return scopes
}

// scopeTitle says what a scope approves, as the form and the page offer
// it.
func scopeTitle(s approval.Scope) string {
	switch s {
	case approval.Args:
		return fmt.Sprintf("Also later calls with these same arguments, for %s (or the minutes given)", approval.DefaultFor(s))
	case approval.Tool:
		return fmt.Sprintf("Every call of this tool, whatever its arguments, for %s (or the minutes given)", approval.DefaultFor(s))
	case approval.Session:
		return "Every call of this tool in this session"
	}
	return "This call only"
}

// askForm asks the client's user with a form: tick to run, and the
// scopes on offer. An answer naming a scope not offered approves this
// call only.
func askForm(ctx context.Context, d downstream, ops *Operators, call tool.PendingCall, session string, scopes []approval.Scope) (bool, error) {
	params, err := json.Marshal(&mcp.ElicitParams{Message: approvalMessage(call), RequestedSchema: approvalSchemaFor(scopes)})
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
	if approved, _ := res.Content["approve"].(bool); !approved {
		return false, nil
	}
	chosen, _ := res.Content["scope"].(string)
	if scope := approval.Scope(chosen); scope != approval.Once && slices.Contains(scopes, scope) {
		grantScope(ctx, ops, call, session, scope, lastingFor(scope, res.Content["minutes"]), "the client's user")
	}
	return true, nil
}

// maxLastingMinutes bounds the lifetime a person may give a lasting
// approval at a form or a page: a day.
const maxLastingMinutes = 24 * 60

// lastingFor is how long a lasting approval of scope given at a form or a
// page lasts: the whole minutes given, from 1 to a day, or, given none (or
// anything else), the scope's default. A session approval lasts as its
// session does, within the default.
func lastingFor(scope approval.Scope, minutes any) time.Duration {
	m, ok := minutes.(float64) // a JSON number
	if scope == approval.Session || !ok || m != float64(int(m)) || m < 1 || m > maxLastingMinutes {
		return approval.DefaultFor(scope)
	}
	return time.Duration(m) * time.Minute
}

// grantScope keeps the lasting approval a person gave with their yes, and
// notes it for the call's audit event; the call runs either way.
func grantScope(ctx context.Context, ops *Operators, call tool.PendingCall, session string, scope approval.Scope, ttl time.Duration, who string) {
	g, err := ops.Grants.Grant(approval.WithSession(ctx, session), scope, call.Key, ttl)
	if err != nil {
		ops.logger().Error("a lasting approval could not be kept; the call it came with runs", "tool", call.Name, "scope", string(scope), "error", err.Error())
		return
	}
	tool.NoteConfirmation(ctx, fmt.Sprintf("approval %s (%s scope) given by %s", g.ID, scope, who))
}

func (o *Operators) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// confirmAtPage asks a client that declares URL-mode elicitation, and not
// forms, to open the call's approval page (see [ApprovalPath]); the
// decision taken there is the answer. The client's accepting only says
// that its user went there: the approver then waits for the decision, at
// most links.wait (a 2026-07-28 client asks again once its user is done,
// so the decision is usually in already). A client that declines, or a
// user who never decides, does not approve. With a queue, the call also
// waits as a pending request meanwhile, which an operator may decide as
// well: the page is that request's.
func (a *Approver) confirmAtPage(ctx context.Context, d downstream, ops *Operators, call tool.PendingCall, session string, links *approvalLinks) (bool, error) {
	var (
		token string
		page  *approvalPage
		err   error
		req   approval.Request
	)
	if ops.Queue != nil {
		req, err = ops.Queue.Submit(ctx, newRequest(ctx, call, session, "the client's user was sent the approval page", links.wait))
		if err != nil {
			return false, fmt.Errorf("%w: the call could not be listed for approval: %v", ErrApprovalRequired, err)
		}
		defer withdraw(ctx, ops.Queue, req.ID)
		token, page, err = links.pages.openRequest(ctx, call, links.base, ops.Queue, req.ID, offeredScopes(ops, call, session))
	} else {
		token, page, err = links.pages.open(ctx, call, links.base)
	}
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
	if ops.Queue != nil {
		return awaitDecision(ctx, ops.Queue, req, links.wait)
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

// waitForOperator lists a call whose client cannot be asked (why) as
// pending and waits, at most ops.Wait, for an operator's decision; without
// a queue or a wait it is refused at once, as nobody can be asked.
func (a *Approver) waitForOperator(ctx context.Context, ops *Operators, call tool.PendingCall, session string, links *approvalLinks, why string) (bool, error) {
	if ops.Queue == nil || ops.Wait <= 0 {
		return false, fmt.Errorf("%w: %s: %w", ErrApprovalRequired, why, tool.ErrNobodyToAsk)
	}
	// A task's call is input_required before an operator can see it.
	defer taskWaiting(ctx, "waiting for an operator's approval of "+safetext.Line(call.Name, 128))()
	req, err := ops.Queue.Submit(ctx, newRequest(ctx, call, session, why, ops.Wait))
	if err != nil {
		return false, fmt.Errorf("%w: %s, and the call could not be listed for an operator: %v: %w", ErrApprovalRequired, why, err, tool.ErrNobodyToAsk)
	}
	defer withdraw(ctx, ops.Queue, req.ID)
	link := ""
	if links != nil {
		token, _, err := links.pages.openRequest(ctx, call, links.base, ops.Queue, req.ID, offeredScopes(ops, call, session))
		if err == nil {
			defer links.pages.closePage(token)
			link = links.base + ApprovalPath + token
		}
	}
	if ops.Webhook != nil {
		ops.Webhook.Notify(req, link, ops.logger())
	}
	return awaitDecision(ctx, ops.Queue, req, ops.Wait)
}

// newRequest is the pending request of call, waiting at most wait.
func newRequest(ctx context.Context, call tool.PendingCall, session, why string, wait time.Duration) approval.Request {
	caller := tool.IdentityFrom(ctx)
	if p, ok := tool.PrincipalFrom(ctx); ok && p.Subject != "" {
		caller = p.Subject
		if p.Role != "" {
			caller += " (role " + p.Role + ")"
		}
	}
	reason := why
	if call.Rule != "" {
		reason = fmt.Sprintf("policy rule %q asks for confirmation", call.Rule)
		if call.Reason != "" {
			reason += ": " + call.Reason
		}
		reason += "; " + why
	}
	return approval.Request{
		Key: call.Key, Tool: call.Name, Server: call.Source, Tier: call.Tier.String(), Rule: call.Rule,
		Caller: caller, Args: call.Args, Reason: reason, Session: session, Deadline: time.Now().Add(wait),
	}
}

// withdraw ends request id's wait, once the call is done with it; a
// request with an outcome keeps it.
func withdraw(ctx context.Context, q approval.Queue, id string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = q.Withdraw(wctx, id)
}

// awaitDecision waits for the decision of req and says it as the
// confirmer's answer, naming the decision and who took it (in the audit:
// the note of an approval, the error of a refusal).
func awaitDecision(ctx context.Context, q approval.Queue, req approval.Request, wait time.Duration) (bool, error) {
	d, err := q.Wait(ctx, req.ID)
	switch {
	case err == nil && d.Approve:
		note := fmt.Sprintf("approval %s by %q", req.ID, d.By)
		if d.Grant != "" {
			note += fmt.Sprintf(", granted %s (%s scope)", d.Grant, d.Scope)
		}
		tool.NoteConfirmation(ctx, note)
		return true, nil
	case err == nil:
		msg := fmt.Sprintf("denied by %q (approval %s)", d.By, req.ID)
		if d.Reason != "" {
			msg += ": " + safetext.Line(d.Reason, 300)
		}
		return false, errors.New(msg)
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(err, approval.ErrExpired):
		return false, fmt.Errorf("%w: nobody decided within %s (approval %s): %w", ErrApprovalRequired, wait, req.ID, tool.ErrNobodyToAsk)
	}
	return false, fmt.Errorf("%w: waiting for a decision (approval %s): %v: %w", ErrApprovalRequired, req.ID, err, tool.ErrNobodyToAsk)
}

// approvalSchemaFor asks for one explicit yes (accepting the form without
// ticking it is a no) and, when more than once is on offer, how far the
// yes reaches.
func approvalSchemaFor(scopes []approval.Scope) map[string]any {
	props := map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Run this call", "default": false},
	}
	if len(scopes) > 1 {
		var one []any
		for _, s := range scopes {
			one = append(one, map[string]any{"const": string(s), "title": scopeTitle(s)})
		}
		props["scope"] = map[string]any{"type": "string", "title": "Approve", "oneOf": one, "default": string(approval.Once)}
		if slices.Contains(scopes, approval.Args) || slices.Contains(scopes, approval.Tool) {
			props["minutes"] = map[string]any{"type": "integer", "title": "For how many minutes a lasting approval holds (empty: as above)", "minimum": 1, "maximum": maxLastingMinutes}
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": []string{"approve"}}
}

// approvalMessage shows the call as the user must judge it, rendered as
// the CLI renders its prompt ([tool.PendingCall.Render]): the validated
// arguments first, never the model's raw output, and the tool's
// description bounded, escaped and marked as its server's words.
func approvalMessage(call tool.PendingCall) string {
	return "Allow this call?\n\n" + call.Render()
}
