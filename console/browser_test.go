package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolwire/toolwire/internal/browsertest"
)

// TestConsoleInBrowser drives the console in a real headless Chromium,
// one browser for every subtest (each in a browser context of its own, so
// that no cookie is shared): started once, it is most of a subtest's
// cost.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	browser := browsertest.New(t, nil)
	for _, c := range []struct {
		name string
		run  func(t *testing.T, tab context.Context)
	}{
		{"SignInAndEveryPage", browserSignInAndEveryPage},
		{"WrongTokenShowsNothing", browserWrongTokenShowsNothing},
		{"HostileTextIsInert", browserHostileTextIsInert},
		{"UpdatesWithoutReload", browserUpdatesWithoutReload},
		{"ApproveWaitingCall", browserApproveWaitingCall},
		{"DenyWithScope", browserDenyWithScope},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
			t.Cleanup(cancel)
			tab, cancelT := context.WithTimeout(tab, 60*time.Second)
			t.Cleanup(cancelT)
			c.run(t, tab)
		})
	}
}

// signInBrowser signs the tab in on the console's sign-in page, as a
// person would, and waits for the overview.
func signInBrowser(t *testing.T, tab context.Context, f *fixture, token string) {
	t.Helper()
	if err := chromedp.Do(tab,
		chromedp.Navigate(f.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-page="overview"]`)),
	); err != nil {
		t.Fatalf("signing in: %v", err)
	}
}

// text returns the text of the first element sel matches.
func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](t *testing.T, tab context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

func browserSignInAndEveryPage(t *testing.T, tab context.Context) {
	f := newFixture(t, nil)
	signInBrowser(t, tab, f, operatorToken)
	// The script runs (the Content-Security-Policy lets the console's own
	// script in) and follows the event stream.
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`body[data-live="on"]`))); err != nil {
		t.Fatalf("the event stream did not open: %v", err)
	}
	if got := text(t, tab, "#stat-servers"); !strings.Contains(got, "1/1") {
		t.Errorf("overview, servers: %q", got)
	}
	for _, c := range []struct{ path, sel, want string }{
		{"/servers", "#content", "ready"},
		{"/servers", "#content", "2026-07-28"},
		{"/tools", "#content", "demo__delete_note"},
		{"/tools", "#content", "destructive hint"},
		{"/sessions", "#content", "sessions open"},
		{"/approvals", "#content", "No call is waiting."},
		{"/audit", "#chain", "Chain intact"},
		{"/limits", "#content", "maxSessionsPerCaller"},
	} {
		if err := chromedp.Do(tab, chromedp.Navigate(f.url+c.path), chromedp.WaitVisible(chromedp.CSS(`#content`))); err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if got := text(t, tab, c.sel); !strings.Contains(got, c.want) {
			t.Errorf("%s: %s says %q, want %q in it", c.path, c.sel, got, c.want)
		}
	}
	// Signing out ends it: the pages send the browser to sign in again.
	if err := chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`.logout button`)),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.Navigate(f.url+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
	); err != nil {
		t.Fatalf("signing out: %v", err)
	}
}

func browserWrongTokenShowsNothing(t *testing.T, tab context.Context) {
	f := newFixture(t, nil)
	if err := chromedp.Do(tab,
		chromedp.Navigate(f.url+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), "not-the-operator-token-at-all-0123"),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`#problem`)),
	); err != nil {
		t.Fatal(err)
	}
	if body := text(t, tab, "body"); strings.Contains(body, "demo") || !strings.Contains(body, "not the operator token") {
		t.Errorf("after a wrong token the page says %q", body)
	}
	if cookies := eval[string](t, tab, "document.cookie"); cookies != "" {
		t.Errorf("cookies after a wrong token: %q", cookies)
	}
}

func browserHostileTextIsInert(t *testing.T, tab context.Context) {
	f := newFixture(t, &fixtureOptions{servers: serverEntry("demo", "demo") + serverEntry("evil", "hostile")})
	signInBrowser(t, tab, f, operatorToken)
	if err := chromedp.Do(tab, chromedp.Navigate(f.url+"/tools"), chromedp.WaitVisible(chromedp.CSS(`body[data-live="on"]`))); err != nil {
		t.Fatal(err)
	}
	desc := text(t, tab, "#content")
	for _, want := range []string{`<script>window.__pwned = 1</script><img src=x id=pwned-img>`, `\x1b]0;owned\x07\x1b[2J`, `\u202eevil`,
		`upstream: <script>window.__pwned=3</script>`} {
		if !strings.Contains(desc, want) {
			t.Errorf("the hostile description is not shown as text: want %q in\n%s", want, desc)
		}
	}
	if i := strings.IndexAny(desc, "\x1b\x07\u202e"); i >= 0 {
		t.Errorf("a control character reached the page: %q", desc[max(i-60, 0):min(i+20, len(desc))])
	}
	// Nothing of it ran or loaded: no script but the console's own, no
	// element it wrote.
	if v := eval[bool](t, tab, `window.__pwned === undefined && document.getElementById('pwned-img') === null && document.scripts.length === 1`); !v {
		t.Errorf("the hostile description ran: scripts %d", eval[int](t, tab, "document.scripts.length"))
	}
}

func browserUpdatesWithoutReload(t *testing.T, tab context.Context) {
	f := newFixture(t, nil)
	signInBrowser(t, tab, f, operatorToken)
	if err := chromedp.Do(tab, chromedp.Navigate(f.url+"/sessions"), chromedp.WaitVisible(chromedp.CSS(`body[data-live="on"]`))); err != nil {
		t.Fatal(err)
	}
	// The page is marked: a reload would lose the mark.
	eval[bool](t, tab, `(window.__mark = true)`)
	if got := text(t, tab, "#content"); strings.Contains(got, "ip:127.0.0.1") {
		t.Fatalf("a session before any client connected: %q", got)
	}
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	cs, err := f.connect(ctx, rev2025)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := chromedp.Do(tab, chromedp.WaitVisible(`//td[contains(., "ip:127.0.0.1")]`)); err != nil {
		t.Fatalf("the session did not appear: %v", err)
	}
	if !eval[bool](t, tab, `window.__mark === true && Number(document.body.dataset.refreshed) > 0`) {
		t.Error("the page was reloaded, not updated")
	}
}
