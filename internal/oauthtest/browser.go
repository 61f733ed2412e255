package oauthtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Browser plays the user at the OP: it follows an authorization URL, logs
// in through the login form as [Username], and follows the OP's redirect
// back to the client (to the loopback receiver of a login, say). It keeps
// cookies, as a browser would. Its methods are safe for concurrent use;
// one authorization runs at a time.
type Browser struct {
	client *http.Client
	user   string // the username it logs in as

	run sync.Mutex // one authorization at a time

	mu         sync.Mutex
	opened     int
	stopAt     string
	stopped    string
	tamper     func(*url.URL)
	lastStatus int
	lastBody   string
}

// NewBrowser returns a browser with an empty cookie jar that logs in as
// [Username].
func NewBrowser() *Browser { return NewBrowserAs(Username) }

// NewBrowserAs returns a browser with an empty cookie jar that logs in as
// user: [Username] (subject [Subject]) or [Username2] (subject
// [Subject2]).
func NewBrowserAs(user string) *Browser {
	jar, _ := cookiejar.New(nil)
	b := &Browser{user: user}
	b.client = &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: b.checkRedirect}
	return b
}

// Open is an oauth.Loopback's Open: it counts the call and runs the whole
// user side before it returns.
func (b *Browser) Open(ctx context.Context, authURL string) error {
	b.mu.Lock()
	b.opened++
	b.mu.Unlock()
	return b.Authorize(ctx, authURL)
}

// Opened returns how many times Open was called: how often the user was
// asked to log in.
func (b *Browser) Opened() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opened
}

// StopAt makes the browser stop before following a redirect to a URL with
// this prefix, as an application's own page would take over there (or a
// browser on another machine, whose address the user copies). The URL is
// then kept for Stopped. Empty follows every redirect.
func (b *Browser) StopAt(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopAt, b.stopped = prefix, ""
}

// Stopped returns the URL the browser stopped at (see StopAt), or "".
func (b *Browser) Stopped() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}

// Tamper makes f rewrite the redirect that carries the authorization code
// before the browser follows it (a forged state, say); nil leaves it.
func (b *Browser) Tamper(f func(*url.URL)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tamper = f
}

// LastStatus returns the HTTP status of the last authorization's final
// response (the client's answer to the redirect, unless it stopped).
func (b *Browser) LastStatus() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastStatus
}

func (b *Browser) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return fmt.Errorf("stopped after %d redirects", len(via))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopAt != "" && strings.HasPrefix(req.URL.String(), b.stopAt) {
		b.stopped = req.URL.String()
		return http.ErrUseLastResponse
	}
	if b.tamper != nil && req.URL.Query().Get("code") != "" {
		b.tamper(req.URL)
	}
	return nil
}

// Authorize follows authURL, submits the login form and follows the
// redirects that come back. It fails when no login form is shown; what
// the client answered the redirect with is in LastStatus.
func (b *Browser) Authorize(ctx context.Context, authURL string) error {
	b.run.Lock()
	defer b.run.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" || !bytes.Contains(page, []byte(`name="password"`)) {
		return fmt.Errorf("no login form at %s (HTTP %d): %.300s", resp.Request.URL, resp.StatusCode, page)
	}
	login := resp.Request.URL.ResolveReference(&url.URL{Path: "/login/username"})
	form := url.Values{"id": {id}, "username": {b.user}, "password": {Password}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, login.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = b.client.Do(req)
	if err != nil {
		return err
	}
	last, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	b.mu.Lock()
	b.lastStatus, b.lastBody = resp.StatusCode, string(last)
	b.mu.Unlock()
	return nil
}

// LastBody returns the page the client answered the last authorization's
// redirect with (a gateway's callback page, say).
func (b *Browser) LastBody() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastBody
}

// linkCode finds a toolwire confirmation code (XXXXX-XXXXX, base32) in a
// page.
var linkCode = regexp.MustCompile(`\b[A-Z2-7]{5}-[A-Z2-7]{5}\b`)

// LinkCode returns the confirmation code the last callback page showed
// (toolwire's caller login), or "".
func (b *Browser) LinkCode() string {
	return linkCode.FindString(b.LastBody())
}
