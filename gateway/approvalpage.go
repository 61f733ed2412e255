package gateway

import (
	"context"
	"crypto/rand"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/tool"
)

// A client that declares URL-mode elicitation and not forms is asked for
// an approval with a link: it opens a page the gateway serves, where its
// user sees the call as a form would show it and allows or denies it. The
// page's address holds a random token, known only to the client that was
// asked, and lives as long as the question; the decision taken there is
// the answer, whatever the client then says.

// ApprovalPath is where the HTTP handler serves the approval pages of
// URL-mode elicitation, one per question: ApprovalPath + a random token.
const ApprovalPath = "/approvals/"

// approvalPages are the approval pages open now.
type approvalPages struct {
	// origin is the gateway's configured origin (of its resource URL),
	// which a browser behind a TLS proxy names; "" means the request's own.
	origin string

	mu    sync.Mutex
	pages map[string]*approvalPage
}

// approvalPage is one question: the call shown, and the decision once the
// user took it.
type approvalPage struct {
	call    tool.PendingCall
	decided chan struct{} // closed when the decision is taken
	allowed bool          // set before decided is closed
}

func newApprovalPages(origin string) *approvalPages {
	return &approvalPages{origin: origin, pages: map[string]*approvalPage{}}
}

// open makes a page for call and returns its token; close it with closePage.
func (a *approvalPages) open(call tool.PendingCall) (string, *approvalPage) {
	token := rand.Text() + rand.Text() // 52 base32 characters: 260 random bits
	p := &approvalPage{call: call, decided: make(chan struct{})}
	a.mu.Lock()
	a.pages[token] = p
	a.mu.Unlock()
	return token, p
}

func (a *approvalPages) closePage(token string) {
	a.mu.Lock()
	delete(a.pages, token)
	a.mu.Unlock()
}

// decide records the decision on the page of token, once. It reports
// whether the page was open and undecided.
func (a *approvalPages) decide(token string, allow bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pages[token]
	if !ok {
		return false
	}
	select {
	case <-p.decided:
		return false
	default:
	}
	p.allowed = allow
	close(p.decided)
	return true
}

func (a *approvalPages) lookup(token string) *approvalPage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pages[token]
}

var approvalTemplate = template.Must(template.New("approval").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Allow this call?</title>
<style>body{font-family:sans-serif;max-width:48rem;margin:2rem auto}pre{white-space:pre-wrap;background:#f4f4f4;padding:1rem}</style>
</head><body>
{{if .Done}}<p>{{.Done}}</p>{{else}}
<h1>Allow this call?</h1>
<pre>{{.Call}}</pre>
<form method="post"><button name="decision" value="allow">Allow</button> <button name="decision" value="deny">Deny</button></form>
{{end}}</body></html>
`))

// ServeHTTP serves the page of the token in the path: GET shows the call,
// POST takes the decision. Nothing else is served: no page's address can
// be guessed, a page says nothing about the gateway, a decision is taken
// once, and another site can neither frame the page nor post to it.
func (a *approvalPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	token := strings.TrimPrefix(r.URL.Path, ApprovalPath)
	p := a.lookup(token)
	if p == nil {
		http.Error(w, "Not Found: no such approval (it was answered, or the call ended)", http.StatusNotFound)
		return
	}
	var data struct{ Call, Done string }
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		data.Call = p.call.Render()
	case http.MethodPost:
		if !sameOrigin(r, a.origin) {
			http.Error(w, "Forbidden: a decision is taken on its own page", http.StatusForbidden)
			return
		}
		decision := r.PostFormValue("decision")
		if decision != "allow" && decision != "deny" {
			http.Error(w, `Bad Request: decision must be "allow" or "deny"`, http.StatusBadRequest)
			return
		}
		if !a.decide(token, decision == "allow") {
			http.Error(w, "Conflict: this call was decided already", http.StatusConflict)
			return
		}
		data.Done = "The call is denied. You may close this page."
		if decision == "allow" {
			data.Done = "The call is allowed. You may close this page."
		}
	default:
		h.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	_ = approvalTemplate.Execute(w, data)
}

// sameOrigin reports whether a POST comes from the page itself: a browser
// names the page's origin in Origin (own: the configured one, else the
// request's scheme and host) and says same-origin in Sec-Fetch-Site; a
// request from another site names that site. A request with neither is
// not from a browser, so no other site's page can have made it.
func sameOrigin(r *http.Request, own string) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if own == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		own = scheme + "://" + r.Host
	}
	return normalOrigin(origin) == normalOrigin(own)
}

// approvalLinks is how a call's approver reaches the pages: the pages, and
// the gateway's address as the client reached it, for the link.
type approvalLinks struct {
	pages *approvalPages
	base  string        // scheme://host, no slash
	wait  time.Duration // for the decision, once the client said its user went to the page
}

type approvalLinksKey struct{}

func withApprovalLinks(ctx context.Context, l *approvalLinks) context.Context {
	return context.WithValue(ctx, approvalLinksKey{}, l)
}

func approvalLinksFrom(ctx context.Context) *approvalLinks {
	l, _ := ctx.Value(approvalLinksKey{}).(*approvalLinks)
	return l
}
