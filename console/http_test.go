package console_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/console"
	"github.com/toolwire/toolwire/tool"
)

// TestPagesNeedTheOperatorToken: without a session, or with a wrong
// token or cookie, a page redirects to the sign-in page and shows nothing
// of the gateway; its changing part and the event stream are 401.
func TestPagesNeedTheOperatorToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	c := f.client()
	for _, path := range []string{"/", "/servers", "/tools", "/sessions", "/approvals", "/audit", "/limits"} {
		resp, body := f.get(c, path)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("GET %s without a session: %s to %q, want 303 to /login", path, resp.Status, resp.Header.Get("Location"))
		}
		if strings.Contains(body, "demo") {
			t.Errorf("GET %s without a session shows %q", path, body)
		}
		resp, body = f.get(c, path+"?part=content")
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "demo") {
			t.Errorf("GET %s?part=content without a session: %s %q, want 401 and nothing shown", path, resp.Status, body)
		}
	}

	// A wrong token: 401, no cookie, still nothing shown.
	resp := f.post(c, "/login", url.Values{"token": {operatorToken + "x"}}, f.url)
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a wrong token: %s, cookies %v; want 401 and none", resp.Status, resp.Cookies())
	}
	if resp, _ := f.get(c, "/tools"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after a wrong token: %s, want 303", resp.Status)
	}
	// A cookie the console never gave.
	u, _ := url.Parse(f.url)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "toolwire_console", Value: "made-up-session-id"}})
	if resp, body := f.get(c, "/tools"); resp.StatusCode != http.StatusSeeOther || strings.Contains(body, "demo__") {
		t.Errorf("a made-up session cookie: %s %q, want 303 and nothing", resp.Status, body)
	}

	// The right token: the pages show the gateway.
	f.signIn(c)
	resp, body := f.get(c, "/tools")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "demo__delete_note") {
		t.Fatalf("signed in, /tools: %s\n%s", resp.Status, body)
	}
	var session *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "toolwire_console" {
			session = ck
		}
	}
	if session == nil {
		t.Fatal("no session cookie after signing in")
	}

	// Signing out ends the session: its cookie no longer opens a page.
	csrf := f.csrfOf(c, "/")
	if resp := f.post(c, "/logout", url.Values{"csrf": {csrf}}, f.url); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %s", resp.Status)
	}
	replay := f.client()
	replay.Jar.SetCookies(u, []*http.Cookie{{Name: "toolwire_console", Value: session.Value}})
	if resp, body := f.get(replay, "/tools"); resp.StatusCode != http.StatusSeeOther || strings.Contains(body, "demo__") {
		t.Errorf("the cookie of a signed-out session: %s, want 303 and nothing", resp.Status)
	}
}

// TestSessionCookieIsHttpOnlyStrict: the session cookie cannot be read by
// a script, nor sent by another site's request.
func TestSessionCookieIsHttpOnlyStrict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	c := f.client()
	resp := f.post(c, "/login", url.Values{"token": {operatorToken}}, f.url)
	var found bool
	for _, ck := range resp.Cookies() {
		if ck.Name != "toolwire_console" {
			continue
		}
		found = true
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || len(ck.Value) < 40 {
			t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, a long random value", ck)
		}
		if ck.Secure {
			t.Errorf("session cookie %+v: Secure over plain HTTP on loopback would never be sent back", ck)
		}
	}
	if !found {
		t.Fatalf("sign-in set no session cookie: %v", resp.Header)
	}
}

// TestStateChangingPostsNeedCSRFAndOrigin: a revocation (the console's
// state-changing POST that needs no waiting call) without the session's
// CSRF token, with another's, from another origin, without an Origin or
// from a cross-site request is refused, and the approval stays; the
// console's own form post revokes it.
func TestStateChangingPostsNeedCSRFAndOrigin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	grants := f.w.Approvals()
	if grants == nil {
		t.Fatal("the workspace keeps no lasting approvals")
	}
	ctx := context.Background()
	g, err := grants.Grant(ctx, approval.Tool, tool.ApprovalKey{Caller: "agent", Tool: "demo__delete_note", Definition: "d"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := f.client()
	f.signIn(c)
	csrf := f.csrfOf(c, "/approvals")
	other := f.client()
	f.signIn(other)
	otherCSRF := f.csrfOf(other, "/approvals")
	if otherCSRF == csrf {
		t.Fatal("two sessions share a CSRF token")
	}
	path := "/grants/" + g.ID + "/revoke"
	for _, c2 := range []struct {
		name   string
		form   url.Values
		origin string
		header map[string]string
	}{
		{"no CSRF token", url.Values{}, f.url, nil},
		{"an empty CSRF token", url.Values{"csrf": {""}}, f.url, nil},
		{"another session's CSRF token", url.Values{"csrf": {otherCSRF}}, f.url, nil},
		{"a foreign Origin", url.Values{"csrf": {csrf}}, "http://evil.example", nil},
		{"a null Origin", url.Values{"csrf": {csrf}}, "null", nil},
		{"no Origin", url.Values{"csrf": {csrf}}, "", nil},
		{"another port", url.Values{"csrf": {csrf}}, "http://127.0.0.1:1", nil},
		{"a cross-site fetch", url.Values{"csrf": {csrf}}, f.url, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		req, _ := http.NewRequest(http.MethodPost, f.url+path, strings.NewReader(c2.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c2.origin != "" {
			req.Header.Set("Origin", c2.origin)
		}
		for k, v := range c2.header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", c2.name, resp.Status)
		}
		if list, _ := grants.List(ctx); len(list) != 1 {
			t.Fatalf("%s: the approval was revoked (%d left)", c2.name, len(list))
		}
	}
	// Without a session at all: 401.
	if resp := f.post(f.client(), path, url.Values{"csrf": {csrf}}, f.url); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no session: %s, want 401", resp.Status)
	}
	// The console's own post.
	resp := f.post(c, path, url.Values{"csrf": {csrf}}, f.url)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals?done=revoked" {
		t.Errorf("the console's own post: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if list, _ := grants.List(ctx); len(list) != 0 {
		t.Errorf("after the console's own post: %d approvals left, want 0", len(list))
	}
}

// TestSignInNeedsTheConsolesOrigin: another site cannot sign a browser in
// (login CSRF), nor reach the console under a name of its own (DNS
// rebinding).
func TestSignInNeedsTheConsolesOrigin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	c := f.client()
	for _, origin := range []string{"", "http://evil.example", "null"} {
		if resp := f.post(c, "/login", url.Values{"token": {operatorToken}}, origin); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("sign-in with Origin %q: %s, cookies %v; want 403 and none", origin, resp.Status, resp.Cookies())
		}
	}
	req, _ := http.NewRequest(http.MethodGet, f.url+"/login", nil)
	req.Host = "rebound.example:80"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a rebound Host: %s, want 403", resp.Status)
	}
}

// TestEveryAnswerForbidsFramingAndCaching: pages, fragments, the script,
// refusals and errors all carry the headers.
func TestEveryAnswerForbidsFramingAndCaching(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	anon, c := f.client(), f.client()
	f.signIn(c)
	check := func(name string, resp *http.Response) {
		t.Helper()
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if h.Get("Cache-Control") != "no-store" || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s (%s): headers %v", name, resp.Status, h)
		}
	}
	for _, path := range []string{"/", "/servers", "/tools", "/sessions", "/approvals", "/audit", "/limits", "/audit?part=content", "/static/console.js", "/static/console.css", "/login", "/nowhere", "/approvals?part=other"} {
		resp, _ := f.get(c, path)
		check("signed in: GET "+path, resp)
		resp, _ = f.get(anon, path)
		check("anonymous: GET "+path, resp)
	}
	check("POST /login, wrong token", f.post(anon, "/login", url.Values{"token": {"nope"}}, f.url))
	check("POST /logout, no CSRF", f.post(c, "/logout", url.Values{}, f.url))
	resp, _ := f.get(anon, "/events")
	check("GET /events anonymous", resp)
	resp, _ = f.get(c, "/static/console.js")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("the script's Content-Type: %q", ct)
	}
}

// TestEventsNeedASession: the event stream is refused without a session,
// and with one it streams.
func TestEventsNeedASession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp, body := f.get(f.client(), "/events")
	if resp.StatusCode != http.StatusUnauthorized || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || strings.Contains(body, "event:") {
		t.Errorf("GET /events without a session: %s %q %q, want 401", resp.Status, resp.Header.Get("Content-Type"), body)
	}

	// Signed in: the stream opens, and a call audited is announced.
	c := f.client()
	f.signIn(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/events", nil)
	stream, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events signed in: %s %q", stream.Status, stream.Header.Get("Content-Type"))
	}
	// The stream's subscription exists once its answer began.
	called := make(chan error, 1)
	go func() {
		_, err := f.callTool(ctx, "demo__echo", map[string]any{"text": "hello"})
		called <- err
	}()
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if sc.Text() == "data: audit" {
			if err := <-called; err != nil {
				t.Errorf("call: %v", err)
			}
			return
		}
	}
	t.Errorf("the stream ended without announcing the audit: %v", errors.Join(sc.Err(), ctx.Err()))
}

// TestEventsEndWithTheSession: an operator's open event stream ends once
// they sign out, at the next change, instead of telling it.
func TestEventsEndWithTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	c := f.client()
	f.signIn(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/events", nil)
	stream, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %s", stream.Status)
	}
	if resp := f.post(c, "/logout", url.Values{"csrf": {f.csrfOf(c, "/")}}, f.url); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %s", resp.Status)
	}
	if _, err := f.callTool(ctx, "demo__echo", map[string]any{"text": "after"}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			t.Fatalf("a signed-out session's stream told %q", sc.Text())
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the stream did not end after the sign-out")
	}
}

// TestNewRefusesAWeakToken: an operator token short enough to guess is
// no credential; one of the callers' tokens is found.
func TestNewRefusesAWeakToken(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"", "short", strings.Repeat("a", console.MinTokenLength-1)} {
		if _, err := console.New(&console.Options{Token: tok}); err == nil {
			t.Errorf("token %q: accepted", tok)
		}
	}
	if _, err := console.New(&console.Options{Token: strings.Repeat("a", console.MinTokenLength)}); err != nil {
		t.Errorf("a token of MinTokenLength: %v", err)
	}
	hash := "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824" // sha256("hello"), upper case
	if !console.SameAsCallerToken("hello", []string{"x", hash}) || console.SameAsCallerToken("hello!", []string{hash}) {
		t.Error("SameAsCallerToken does not find the caller's token, or finds another")
	}
}

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr       string
		tls, plain bool
		ok         bool
	}{
		{"127.0.0.1:0", false, false, true},
		{"[::1]:8790", false, false, true},
		{"localhost:8790", false, false, true},
		{"0.0.0.0:8790", false, false, false},
		{"192.0.2.1:8790", false, false, false},
		{"192.0.2.1:8790", true, false, true},
		{"192.0.2.1:8790", false, true, true},
		{"nonsense", false, false, false},
	} {
		err := console.CheckExposure(c.addr, c.tls, c.plain)
		if (err == nil) != c.ok {
			t.Errorf("%s tls=%v plain=%v: %v", c.addr, c.tls, c.plain, err)
		}
	}
}

// TestBehindATLSProxyTheOriginIsHTTPS: with Secure (a proxy in front
// terminates TLS), the session cookie is Secure and the console's own
// origin is https: a POST naming the http origin is refused.
func TestBehindATLSProxyTheOriginIsHTTPS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &fixtureOptions{secure: true})
	c := f.client()
	if resp := f.post(c, "/login", url.Values{"token": {operatorToken}}, f.url); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in naming %s: %s, want 403", f.url, resp.Status)
	}
	https := "https://" + strings.TrimPrefix(f.url, "http://")
	resp := f.post(c, "/login", url.Values{"token": {operatorToken}}, https)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Errorf("sign-in naming %s: %s, cookies %v; want 303 and a Secure cookie", https, resp.Status, resp.Cookies())
	}
}
