package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/gateway"
)

// operatorWaitConfig makes the approval tests' calls wait for an operator
// longer than any of the tests takes, so that a call that waited when it
// should not have makes its test fail by its deadline; and authenticates
// their caller, to whom a lasting approval or denial is bound.
var operatorWaitConfig = "gateway:\n  approvals:\n    operatorWait: 2m\n  tokens:\n    - {sha256: " + gateway.HashToken(agentToken) +
	", subject: build-agent, role: agent}\n  roles:\n    agent: ['*']\n"

// waitingFixture is a fixture whose authenticated headless agent's calls
// wait for an operator.
func waitingFixture(t *testing.T, store string) *fixture {
	return newFixture(t, &fixtureOptions{extra: operatorWaitConfig, caller: agentToken, store: store})
}

// callResult is what a call made in the background came to.
type callResult struct {
	res *mcp.CallToolResult
	err error
}

func (f *fixture) callInBackground(ctx context.Context, name string, args map[string]any) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		res, err := f.callTool(ctx, name, args)
		out <- callResult{res, err}
	}()
	return out
}

// waitingCall calls name with args in the background and returns, once q
// lists it as the one call waiting for an operator, its ID and where the
// call's result will come. The call ending first, or ctx, fails the test.
func (f *fixture) waitingCall(ctx context.Context, q approval.Queue, name string, args map[string]any) (string, <-chan callResult) {
	f.t.Helper()
	changed := q.Watch(ctx)
	done := f.callInBackground(ctx, name, args)
	for {
		select {
		case <-changed:
		case r := <-done:
			f.t.Fatalf("the call ended before anyone decided: %v %q", r.err, resultText(r.res))
		case <-ctx.Done():
			f.t.Fatal("the call never waited for an operator")
		}
		p, err := q.Pending(ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(p) == 1 && p[0].Tool == name {
			return p[0].ID, done
		}
	}
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return "(no result)"
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// browserApproveWaitingCall: a headless client (no elicitation) calls a
// destructive tool of the demo server; the call waits for an operator;
// the console's approvals page shows it (its hostile arguments as inert
// text) without a reload, the operator allows it, and the call completes.
func browserApproveWaitingCall(t *testing.T, tab context.Context) {
	f := waitingFixture(t, "")
	ctx, cancel := context.WithTimeout(tab, 50*time.Second)
	defer cancel()
	title := "<script>window.__pwned = 1</script>\x1b[2J\u202enote"
	if res, err := f.callTool(ctx, "demo__write_note", map[string]any{"title": title, "body": "b"}); err != nil || res.IsError {
		t.Fatalf("write_note: %v %v", res, err)
	}
	signInBrowser(t, tab, f, operatorToken)
	if err := chromedp.Do(tab, chromedp.Navigate(f.url+"/approvals"), chromedp.WaitVisible(chromedp.CSS(`body[data-live="on"]`))); err != nil {
		t.Fatal(err)
	}
	done := f.callInBackground(ctx, "demo__delete_note", map[string]any{"title": title})
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`article.call[data-tool="demo__delete_note"]`))); err != nil {
		t.Fatalf("the waiting call did not appear: %v", err)
	}
	shown := text(t, tab, "article.call pre.args")
	if !strings.Contains(shown, `<script>window.__pwned = 1</script>\u001b[2J\u202enote`) && !strings.Contains(shown, `<script>window.__pwned = 1</script>\x1b[2J\u202enote`) {
		t.Errorf("the arguments are not shown as inert text: %q", shown)
	}
	if !eval[bool](t, tab, `window.__pwned === undefined && document.scripts.length === 1`) {
		t.Error("the arguments ran")
	}
	select {
	case r := <-done:
		t.Fatalf("the call ended before anyone decided: %+v", r)
	default:
	}
	if err := chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`article.call button.allow`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := text(t, tab, "#flash"); !strings.Contains(got, "allowed") {
		t.Errorf("after Allow the page says %q", got)
	}
	r := <-done
	if r.err != nil || r.res.IsError {
		t.Fatalf("the allowed call: %v %+v", r.err, r.res)
	}
	if res, err := f.callTool(ctx, "demo__list_notes", nil); err != nil || strings.Contains(resultText(res), "window.__pwned") {
		t.Errorf("the note is still there after its deletion was allowed: %v %v", resultText(res), err)
	}
	// The audit tail names the decision: an approval by the console.
	if err := chromedp.Do(tab, chromedp.Navigate(f.url+"/audit"), chromedp.WaitVisible(chromedp.CSS(`#chain`))); err != nil {
		t.Fatal(err)
	}
	if got := text(t, tab, "#content"); !strings.Contains(got, `by "console"`) || !strings.Contains(got, "Chain intact") {
		t.Errorf("the audit page does not show the console's approval:\n%s", got)
	}
}

// browserDenyWithScope: the operator denies a waiting call with the scope
// "this tool with exactly these arguments" and a reason; the caller is
// refused with the reason, the next identical call is refused without
// waiting for anyone, and a call with other arguments waits again.
func browserDenyWithScope(t *testing.T, tab context.Context) {
	f := waitingFixture(t, "")
	ctx, cancel := context.WithTimeout(tab, 50*time.Second)
	defer cancel()
	args := map[string]any{"title": "quarterly-report"}
	signInBrowser(t, tab, f, operatorToken)
	if err := chromedp.Do(tab, chromedp.Navigate(f.url+"/approvals"), chromedp.WaitVisible(chromedp.CSS(`body[data-live="on"]`))); err != nil {
		t.Fatal(err)
	}
	done := f.callInBackground(ctx, "demo__delete_note", args)
	if err := chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.CSS(`article.call[data-tool="demo__delete_note"]`)),
		chromedp.SetValue(chromedp.CSS(`article.call select[name="scope"]`), "args"),
		chromedp.SendKeys(chromedp.CSS(`article.call input[name="reason"]`), "reports are kept"),
		chromedp.Click(chromedp.CSS(`article.call button.deny`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.res.IsError || !strings.Contains(resultText(r.res), "reports are kept") {
		t.Fatalf("the denied call: %v %q, want a refusal with the reason", r.err, resultText(r.res))
	}
	// The same call again: refused at once by the lasting denial. Had it
	// waited for an operator, it would wait past ctx's deadline.
	again, err := f.callTool(ctx, "demo__delete_note", args)
	if err != nil || !again.IsError || !strings.Contains(resultText(again), "lasting denial") {
		t.Fatalf("the same call again: %v %q, want refused by the lasting denial", err, resultText(again))
	}
	if p, err := f.w.Pending().Pending(ctx); err != nil || len(p) != 0 {
		t.Errorf("calls waiting after the lasting denial: %v %v", p, err)
	}
	// The denial covers these arguments only: others wait for an operator.
	other := f.callInBackground(ctx, "demo__delete_note", map[string]any{"title": "draft"})
	if err := chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.CSS(`article.call[data-tool="demo__delete_note"]`)),
		chromedp.Click(chromedp.CSS(`article.call button.deny`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	); err != nil {
		t.Fatalf("a call with other arguments: %v", err)
	}
	if r := <-other; r.err != nil || !r.res.IsError {
		t.Errorf("the other call denied once: %v %+v", r.err, r.res)
	}
}

// TestLastingScopeNeedsAnAuthenticatedCaller: a call of an
// unauthenticated client has nobody a lasting decision could be bound
// to: its form offers this call only, and a post of a lasting scope is
// refused, leaving it waiting; decided once, it runs.
func TestLastingScopeNeedsAnAuthenticatedCaller(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &fixtureOptions{extra: "gateway:\n  approvals:\n    operatorWait: 2m\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := f.w.Pending()
	id, done := f.waitingCall(ctx, q, "demo__delete_note", map[string]any{"title": "x"})
	c := f.client()
	f.signIn(c)
	_, page := f.get(c, "/approvals")
	if !strings.Contains(page, `value="once"`) || strings.Contains(page, `value="args"`) || strings.Contains(page, `value="tool"`) {
		t.Errorf("the form of an unauthenticated call offers lasting scopes:\n%s", page)
	}
	csrf := f.csrfOf(c, "/approvals")
	for _, scope := range []string{"args", "tool", "session"} {
		resp := f.post(c, "/approvals/"+id, url.Values{"csrf": {csrf}, "decision": {"allow"}, "scope": {scope}}, f.url)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("scope %s: %s, want 400", scope, resp.Status)
		}
	}
	if g, _ := f.w.Approvals().List(ctx); len(g) != 0 {
		t.Errorf("lasting approvals kept: %+v", g)
	}
	if p, _ := q.Pending(ctx); len(p) != 1 {
		t.Fatalf("the call is no longer waiting: %+v", p)
	}
	resp := f.post(c, "/approvals/"+id, url.Values{"csrf": {csrf}, "decision": {"allow"}, "scope": {"once"}}, f.url)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("allow once: %s", resp.Status)
	}
	if r := <-done; r.err != nil {
		t.Fatalf("the call allowed once: %v", r.err)
	}
}

// TestDecisionsNeedCSRFAndOrigin: a decision posted without the
// session's CSRF token, with another's, or from another origin is
// refused, and the call goes on waiting; the console's own post decides
// it.
func TestDecisionsNeedCSRFAndOrigin(t *testing.T) {
	t.Parallel()
	f := waitingFixture(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := f.w.Pending()
	id, done := f.waitingCall(ctx, q, "demo__delete_note", map[string]any{"title": "x"})
	c, other := f.client(), f.client()
	f.signIn(c)
	f.signIn(other)
	csrf, otherCSRF := f.csrfOf(c, "/approvals"), f.csrfOf(other, "/approvals")
	for _, p := range []struct {
		name, csrf, origin string
	}{
		{"no CSRF token", "", f.url},
		{"another session's CSRF token", otherCSRF, f.url},
		{"a foreign Origin", csrf, "http://evil.example"},
		{"no Origin", csrf, ""},
	} {
		form := url.Values{"decision": {"deny"}, "scope": {"tool"}}
		if p.csrf != "" {
			form.Set("csrf", p.csrf)
		}
		if resp := f.post(c, "/approvals/"+id, form, p.origin); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", p.name, resp.Status)
		}
	}
	if pending, _ := q.Pending(ctx); len(pending) != 1 {
		t.Fatalf("a refused post decided the call: %+v", pending)
	}
	if g, _ := f.w.Approvals().List(ctx); len(g) != 0 {
		t.Fatalf("a refused post kept a lasting decision: %+v", g)
	}
	if resp := f.post(c, "/approvals/"+id, url.Values{"csrf": {csrf}, "decision": {"deny"}}, f.url); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the console's own post: %s", resp.Status)
	}
	if r := <-done; r.err != nil || !r.res.IsError {
		t.Errorf("the denied call: %v %q", r.err, resultText(r.res))
	}
}
