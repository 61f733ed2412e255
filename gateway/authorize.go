package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/safetext"
	"github.com/toolwire/toolwire/tool"
)

// An upstream reached with each caller's own identity (see
// mcpclient.Options.Callers) fails a call of a caller who has not
// authorized there yet with a result that carries the authorization URL
// beside its message ([tool.Result.Authorization]); the executor has
// audited the call without it. The URL is the caller's alone (whoever
// completes it links their own account to the caller), so the gateway
// gives it to the client that made the call and nowhere else:
//
//   - to a client that declared URL-mode elicitation, as a URL-mode
//     elicitation during the call (elicitation/create on a 2025 session,
//     an input request of the parked call on 2026-07-28); once the client
//     accepts, the call waits for the authorization to complete (the
//     callback tells [Gateway.Authorized]) and runs once more;
//   - to any other, in the isError result's text, with what to do.
//
// A read, prompt get or completion that meets the same fails with a
// URLElicitationRequired error (-32042) naming the URL-mode elicitation
// for a client that declared URL mode, and with an error naming the URL
// for another.

// logins are the authorizations calls wait for, by authorization ID.
type logins struct {
	mu      sync.Mutex
	waiting map[string]*loginWait
}

type loginWait struct {
	done chan struct{}
	n    int // calls waiting
}

// expect returns the channel closed when the authorization id completes,
// and the function that stops waiting for it. Registered before the
// client is asked, so that a completion is never missed.
func (l *logins) expect(id string) (<-chan struct{}, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting == nil {
		l.waiting = map[string]*loginWait{}
	}
	w := l.waiting[id]
	if w == nil {
		w = &loginWait{done: make(chan struct{})}
		l.waiting[id] = w
	}
	w.n++
	return w.done, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if w.n--; w.n == 0 && l.waiting[id] == w {
			delete(l.waiting, id)
		}
	}
}

func (l *logins) complete(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.waiting[id]; w != nil {
		close(w.done)
		delete(l.waiting, id)
	}
}

// Authorized tells the calls waiting for a caller's authorization id (the
// ID of [tool.Authorization], which oauth's callback reports when it
// completed: oauth.CallbackOptions.Done) that it completed: each runs
// once more. A completion this process did not wait for (the call's
// client went away, or it waits on another replica of a fleet, which then
// tells its caller to call again) does nothing.
func (g *Gateway) Authorized(id string) { g.logins.complete(id) }

// run runs a call through the executor and, when the caller must first
// authorize at the call's upstream, gives them the URL (see above) and
// then asks them for the code that makes the sign-in theirs (see
// confirmSignIn).
func (g *Gateway) run(ctx context.Context, name string, args json.RawMessage) *tool.Result {
	res := g.ex.Call(ctx, name, args)
	if res.Reason != tool.ReasonAuthorization || res.Authorization == nil {
		return res
	}
	a := *res.Authorization
	d := downstreamFrom(ctx)
	if !a.AwaitsCode {
		params, err := json.Marshal(urlElicitation(a))
		if err != nil || d == nil || answerable(d.capabilities(), tool.Elicitation, params) != nil {
			return withURL(res, a)
		}
		if out := g.signIn(ctx, d, name, a, params, res); out != nil {
			return out
		}
	}
	if out := g.confirmSignIn(ctx, d, name, a); out != nil {
		return out
	}
	// Once more, as a call of its own in the audit log; should the
	// upstream still want an authorization, the caller is told where.
	res = g.ex.Call(ctx, name, args)
	if res.Reason == tool.ReasonAuthorization && res.Authorization != nil {
		if res.Authorization.AwaitsCode {
			return withText(res, "The sign-in is not confirmed yet: call again to enter its code.")
		}
		return withURL(res, *res.Authorization)
	}
	return res
}

// signIn sends the caller to a's URL by a URL-mode elicitation (params)
// and waits for the sign-in to complete. nil means it did; res is the
// call's result that asked for it.
func (g *Gateway) signIn(ctx context.Context, d downstream, name string, a tool.Authorization, params json.RawMessage, res *tool.Result) *tool.Result {
	done, stop := g.logins.expect(a.ID)
	defer stop()
	raw, err := d.ask(ctx, tool.Elicitation, params)
	if err != nil {
		if ctx.Err() != nil {
			return tool.ErrorResult(tool.ReasonCancelled, fmt.Sprintf("call to %q was cancelled while its caller was asked to authorize", name))
		}
		return withURL(res, a)
	}
	var answer mcp.ElicitResult
	if err := json.Unmarshal(raw, &answer); err != nil || answer.Action != "accept" {
		return tool.ErrorResult(tool.ReasonAuthorization, fmt.Sprintf("call to %q did not run: its caller did not authorize at %s's authorization server", name, a.Source))
	}
	wait := g.parkTimeout
	if !a.Expires.IsZero() {
		wait = time.Until(a.Expires)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return tool.ErrorResult(tool.ReasonCancelled, fmt.Sprintf("call to %q was cancelled while its caller authorized", name))
	case <-timer.C:
		return tool.ErrorResult(tool.ReasonAuthorization, fmt.Sprintf("call to %q did not run: its caller's authorization at %s did not complete in time; complete it, then call again", name, a.Source))
	}
	if s, ok := d.(*sessionDownstream); ok {
		_ = s.ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: a.ID})
	}
	return nil
}

// confirmSignIn asks the caller's client for the code the caller's
// browser was shown when the sign-in a completed, and gives it to a's
// Confirm, which makes the account signed in the caller's: whoever
// completes a caller's authorization URL links their own account, so it
// is the caller's only when the code comes back through the caller's own
// client, on the caller's own call. A client that declares forms is asked
// by a form; one that declares URL mode, by a link to a code page of the
// gateway's; any other is told the code page's address in the result and
// calls again. nil means the code confirmed the sign-in.
func (g *Gateway) confirmSignIn(ctx context.Context, d downstream, name string, a tool.Authorization) *tool.Result {
	fail := func(format string, args ...any) *tool.Result {
		return tool.ErrorResult(tool.ReasonAuthorization, fmt.Sprintf("call to %q did not run: ", name)+fmt.Sprintf(format, args...))
	}
	if a.Confirm == nil {
		return fail("its caller's sign-in at %s cannot be confirmed", a.Source)
	}
	var caps *mcp.ClientCapabilities
	if d != nil {
		caps = d.capabilities()
	}
	if formElicitation(caps) {
		params, _ := json.Marshal(codeElicitation(a))
		raw, err := d.ask(ctx, tool.Elicitation, params)
		if err != nil {
			if ctx.Err() != nil {
				return tool.ErrorResult(tool.ReasonCancelled, fmt.Sprintf("call to %q was cancelled while its caller was asked for a code", name))
			}
			return fail("its caller could not be asked for the code of the sign-in at %s: %v", a.Source, err)
		}
		var answer mcp.ElicitResult
		var code string
		if json.Unmarshal(raw, &answer) == nil && answer.Action == "accept" {
			code, _ = answer.Content["code"].(string)
		}
		if code == "" {
			return fail("its caller gave no code for the sign-in at %s", a.Source)
		}
		if err := a.Confirm(ctx, code); err != nil {
			return fail("the code did not confirm the sign-in at %s (%v); call again to enter it again", a.Source, err)
		}
		return nil
	}
	links := approvalLinksFrom(ctx)
	if links == nil {
		return fail("its caller's client declares no forms, and over this transport the gateway serves no page to enter the sign-in's code at")
	}
	ttl := g.parkTimeout
	if !a.Expires.IsZero() {
		ttl = time.Until(a.Expires)
	}
	token, page, err := links.pages.openCode(ctx, a.Source, a.Confirm, links.base, ttl)
	if err != nil {
		return fail("%v", err)
	}
	url := links.base + ApprovalPath + token
	params, _ := json.Marshal(&mcp.ElicitParams{Mode: "url", URL: url, ElicitationID: rand.Text(),
		Message: "Enter the code the sign-in page of " + safetext.Line(a.Source, 64) + " showed you: it makes that sign-in yours."})
	if d == nil || answerable(caps, tool.Elicitation, params) != nil {
		// The page stays open until the sign-in expires.
		res := fail("its caller signed in at %s; the sign-in is used once its code is entered", a.Source)
		return withText(res, "To confirm the sign-in, open this page in a browser, enter the code the sign-in page showed, then call again: "+url)
	}
	defer links.pages.closePage(token)
	raw, err := d.ask(ctx, tool.Elicitation, params)
	if err != nil {
		if ctx.Err() != nil {
			return tool.ErrorResult(tool.ReasonCancelled, fmt.Sprintf("call to %q was cancelled while its caller was asked for a code", name))
		}
		return fail("its caller could not be asked for the code of the sign-in at %s: %v", a.Source, err)
	}
	var answer mcp.ElicitResult
	if err := json.Unmarshal(raw, &answer); err != nil || answer.Action != "accept" {
		return fail("its caller gave no code for the sign-in at %s", a.Source)
	}
	timer := time.NewTimer(ttl)
	defer timer.Stop()
	select {
	case <-page.decided:
		return nil
	case <-ctx.Done():
		return tool.ErrorResult(tool.ReasonCancelled, fmt.Sprintf("call to %q was cancelled while its caller was asked for a code", name))
	case <-timer.C:
		return fail("nobody entered the code of the sign-in at %s in time; call again", a.Source)
	}
}

// codeElicitation is the form that asks for the code of the sign-in a.
func codeElicitation(a tool.Authorization) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode: "form",
		Message: "Enter the code the sign-in page of " + safetext.Line(a.Source, 64) +
			" showed you once you signed in: it makes that sign-in yours. Never enter a code someone else gave you.",
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"code": map[string]any{"type": "string", "title": "Code", "minLength": 1, "maxLength": 64}},
			"required":   []string{"code"},
		},
	}
}

// withText is res, for its caller alone, with text added to its message
// (which the client reads as the result's text); the executor audited res
// without it.
func withText(res *tool.Result, text string) *tool.Result {
	out := *res
	out.Message = res.Message + "\n" + text
	out.Content = []tool.Content{&tool.Text{Text: out.Message}}
	return &out
}

// urlElicitation is the URL-mode elicitation that sends a caller to a.
func urlElicitation(a tool.Authorization) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode:          "url",
		URL:           a.URL,
		ElicitationID: a.ID,
		Message:       "Authorize toolwire to reach " + safetext.Line(a.Source, 64) + " as you: open the link, sign in and consent. The call goes on once you have.",
	}
}

// withURL is res, for its caller alone, with the URL to authorize at and
// what to do in its message (which the client reads as the result's
// text); the executor audited res without it.
func withURL(res *tool.Result, a tool.Authorization) *tool.Result {
	out := *res
	out.Message = res.Message + "\nTo authorize, open this URL in a browser, sign in and consent, then call again: " + a.URL
	out.Content = []tool.Content{&tool.Text{Text: out.Message}}
	return &out
}

// authorizationError turns the error of a read, prompt get or completion
// that needs the caller's authorization into what the client of req is
// told (see above); any other error is returned as it is.
func authorizationError(req mcp.Request, err error) error {
	var ae *tool.AuthorizationError
	if !errors.As(err, &ae) {
		return err
	}
	caps := capabilitiesOf(req)
	if caps != nil {
		caps = forRevision(revisionOf(req), caps)
	}
	if ae.AwaitsCode {
		msg := strings.TrimSpace(ae.Error()) + "; the sign-in's code is entered on a tool call: call a tool of " + ae.Source + ", then ask again"
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	}
	if params, jerr := json.Marshal(urlElicitation(ae.Authorization)); jerr == nil && answerable(caps, tool.Elicitation, params) == nil {
		return mcp.URLElicitationRequiredError([]*mcp.ElicitParams{urlElicitation(ae.Authorization)})
	}
	msg := strings.TrimSpace(ae.Error()) + "; to authorize, open this URL in a browser, sign in and consent, then ask again: " + ae.URL
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}
