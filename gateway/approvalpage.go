package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/approval"
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

// approvalPages are the approval pages open now, the gateway's. In a
// fleet, the page is held by the replica whose call asked and its address
// may be opened on any: a replica that does not hold a page passes the
// request to the one that does, over the [Relay] (which knows each page by
// the SHA-256 of its token, never by the token).
type approvalPages struct {
	relay Relay         // nil: one process
	ttl   time.Duration // of a hold: longer than a page stays open

	mu    sync.Mutex
	pages map[string]*approvalPage
}

// The relay's methods of the approval pages.
const (
	relayPageShow   = "page.show"
	relayPageDecide = "page.decide"
)

// approvalPage is one question: the call shown, and the decision once the
// user took it; or, for a code page, the sign-in to confirm, and the
// confirmation.
type approvalPage struct {
	call    tool.PendingCall
	origin  string        // of the page's link, normalized: where the client was sent
	decided chan struct{} // closed when the decision is taken
	allowed bool          // set before decided is closed
	release func()        // of the page's hold in a fleet; nil in one process

	// confirm, on a code page, takes the code the caller's browser was
	// shown when their sign-in at source completed (tool.Authorization's
	// Confirm); nil on an approval page.
	confirm func(ctx context.Context, code string) error
	source  string

	// queue and request, on the page of a pending request (see
	// [Operators]): the decision taken there is the request's, in the
	// queue (decided then stays open), with one of scopes.
	queue   approval.Queue
	request string
	scopes  []approval.Scope
}

func newApprovalPages(relay Relay, ttl time.Duration) *approvalPages {
	a := &approvalPages{relay: relay, ttl: ttl, pages: map[string]*approvalPage{}}
	if relay != nil {
		relay.Handle(relayPageShow, a.serveShow)
		relay.Handle(relayPageDecide, a.serveDecide)
	}
	return a
}

// pageKey is how the relay knows a page: the SHA-256 of its token.
func pageKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// open makes a page for call, linked at origin (scheme://host), and
// returns its token; close it with closePage. In a fleet the page is
// recorded as held here first, and open fails when it cannot be.
func (a *approvalPages) open(ctx context.Context, call tool.PendingCall, origin string) (string, *approvalPage, error) {
	return a.openRequest(ctx, call, origin, nil, "", nil)
}

// openRequest makes the page of the pending request id in q, for call,
// linked at origin, offering scopes (q nil: a page deciding itself, as
// open makes); close it with closePage.
func (a *approvalPages) openRequest(ctx context.Context, call tool.PendingCall, origin string, q approval.Queue, id string, scopes []approval.Scope) (string, *approvalPage, error) {
	return a.openPage(ctx, &approvalPage{call: call, origin: normalOrigin(origin), decided: make(chan struct{}), queue: q, request: id, scopes: scopes})
}

// openPage makes p, complete, a page and returns its token.
func (a *approvalPages) openPage(ctx context.Context, p *approvalPage) (string, *approvalPage, error) {
	token := rand.Text() + rand.Text() // 52 base32 characters: 260 random bits
	if a.relay != nil {
		release, err := a.relay.Hold(ctx, "page", pageKey(token), a.ttl)
		if err != nil {
			return "", nil, fmt.Errorf("the approval page cannot be offered to the fleet: %w", err)
		}
		p.release = release
	}
	a.mu.Lock()
	a.pages[token] = p
	a.mu.Unlock()
	return token, p, nil
}

// openCode makes a code page for a sign-in at source, linked at origin:
// where the caller enters the code their browser was shown, which goes to
// confirm (see [Gateway.confirmSignIn]). It is closed with closePage, or
// when ttl has passed.
func (a *approvalPages) openCode(ctx context.Context, source string, confirm func(context.Context, string) error, origin string, ttl time.Duration) (string, *approvalPage, error) {
	token, p, err := a.openPage(ctx, &approvalPage{origin: normalOrigin(origin), decided: make(chan struct{}), confirm: confirm, source: source})
	if err != nil {
		return "", nil, err
	}
	time.AfterFunc(ttl, func() { a.closePage(token) })
	return token, p, nil
}

func (a *approvalPages) closePage(token string) {
	a.mu.Lock()
	p := a.pages[token]
	delete(a.pages, token)
	a.mu.Unlock()
	if p != nil && p.release != nil {
		p.release()
	}
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

// confirmCode gives code to the code page of token and, when it confirms
// the sign-in, takes that as the page's decision. It reports what came of
// it, and the confirmation's refusal for the user.
func (a *approvalPages) confirmCode(ctx context.Context, token, code string) (result, refusal string) {
	p := a.lookup(token)
	if p == nil || p.confirm == nil {
		return pageMissing, ""
	}
	select {
	case <-p.decided:
		return pageConflict, ""
	default:
	}
	if err := p.confirm(ctx, code); err != nil {
		return pageRefused, err.Error()
	}
	if !a.decide(token, true) {
		return pageConflict, ""
	}
	return pageDecided, ""
}

func (a *approvalPages) lookup(token string) *approvalPage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pages[token]
}

var approvalTemplate = template.Must(template.New("approval").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{if .Source}}Confirm your sign-in{{else}}Allow this call?{{end}}</title>
<style>body{font-family:sans-serif;max-width:48rem;margin:2rem auto}pre{white-space:pre-wrap;background:#f4f4f4;padding:1rem}</style>
</head><body>
{{if .Done}}<p id="done">{{.Done}}</p>{{else if .Source}}
<h1>Confirm your sign-in</h1>
<p>Enter the code the sign-in page of {{.Source}} showed you once you had signed in.</p>{{if .Refusal}}
<p id="refusal"><strong>{{.Refusal}}</strong></p>{{end}}
<form method="post"><input name="code" autocomplete="off" spellcheck="false" required> <button name="decision" value="confirm">Confirm</button></form>
{{else}}
<h1>Allow this call?</h1>
<pre>{{.Call}}</pre>
<form method="post">{{if .Scopes}}<fieldset><legend>The decision applies to</legend>{{range $i, $s := .Scopes}}
<label><input type="radio" name="scope" value="{{$s.Value}}"{{if eq $i 0}} checked{{end}}> {{$s.Title}}</label><br>{{end}}
<label>For <input type="number" name="minutes" min="1" max="1440" step="1" size="5"> minutes (empty: as above)</label>
</fieldset><p>{{end}}<button name="decision" value="allow">Allow</button> <button name="decision" value="deny">Deny</button>{{if .Scopes}}</p>{{end}}</form>
{{end}}</body></html>
`))

// pageData is what the page template shows.
type pageData struct {
	Call, Done, Source, Refusal string
	Scopes                      []scopeChoice
}

// scopeChoice is one scope a pending request's page offers.
type scopeChoice struct{ Value, Title string }

// scopeChoices are the scopes a page's view names, as the page offers
// them; a name this gateway does not know (from a newer replica) is left
// out.
func scopeChoices(names []string) []scopeChoice {
	var out []scopeChoice
	for _, n := range names {
		if s, err := approval.ParseScope(n); err == nil {
			out = append(out, scopeChoice{Value: n, Title: scopeTitle(s)})
		}
	}
	return out
}

// pageServer serves the approval pages on one HTTP handler. origin is the
// handler's configured origin (of its resource URL), which a browser
// behind a TLS proxy names; "" means the request's own.
type pageServer struct {
	pages  *approvalPages
	origin string
}

// The outcomes of a decision.
const (
	pageDecided  = "decided"
	pageConflict = "conflict" // decided already
	pageMissing  = "missing"  // no such page
	pageRefused  = "refused"  // a code page's code did not confirm the sign-in
	pageBadScope = "badscope" // a scope the page did not offer
)

// pageWire is a request about a page another replica holds, and its reply.
type pageWire struct {
	Token string `json:"token"`
	Allow bool   `json:"allow,omitempty"`
	Scope string `json:"scope,omitempty"` // decide: of a pending request's page
	// Minutes is how long a lasting scope lasts (decide; 0: its default).
	Minutes int `json:"minutes,omitempty"`
	// Scopes are what the page of a pending request offers (show).
	Scopes []string `json:"scopes,omitempty"`
	Call   string   `json:"call,omitempty"`   // show: the call rendered, "" for no such page
	Origin string   `json:"origin,omitempty"` // show: the origin the page was linked at
	Source string   `json:"source,omitempty"` // show: of a code page, the server signed in at
	Code   string   `json:"code,omitempty"`   // decide: on a code page, the code entered
	Result string   `json:"result,omitempty"` // decide
	// Refusal is why a code page's code did not confirm (decide).
	Refusal string `json:"refusal,omitempty"`
}

// show returns what the page of token shows, wherever it is held: the
// call rendered, or the source of a code page (both "" for no such page),
// and the origin its link named ("" when its holder did not say).
func (a *approvalPages) show(ctx context.Context, token string) (pageWire, error) {
	if p := a.lookup(token); p != nil {
		return p.view(), nil
	}
	return a.remote(ctx, relayPageShow, pageWire{Token: token})
}

// view is what p shows.
func (p *approvalPage) view() pageWire {
	if p.confirm != nil {
		return pageWire{Source: p.source, Origin: p.origin}
	}
	w := pageWire{Call: p.call.Render(), Origin: p.origin}
	if p.queue != nil {
		for _, s := range p.scopes {
			w.Scopes = append(w.Scopes, string(s))
		}
	}
	return w
}

// decideHere takes the decision on the page of token, held here, and says
// what came of it: a pending request's is taken in its queue, by "approval
// page", with scope; another page's is the page's own.
func (a *approvalPages) decideHere(ctx context.Context, token string, allow bool, scope string, minutes int) (string, error) {
	p := a.lookup(token)
	if p == nil {
		return pageMissing, nil
	}
	if p.queue == nil {
		if a.decide(token, allow) {
			return pageDecided, nil
		}
		return pageConflict, nil
	}
	sc := approval.Once
	if scope != "" {
		sc = approval.Scope(scope)
	}
	if !slices.Contains(p.scopes, sc) {
		return pageBadScope, nil
	}
	_, err := p.queue.Decide(ctx, p.request, approval.Decision{Approve: allow, Scope: sc, For: lastingFor(sc, float64(minutes)), By: "approval page"})
	switch {
	case err == nil:
		return pageDecided, nil
	case errors.Is(err, approval.ErrNotFound):
		return pageMissing, nil
	case errors.Is(err, approval.ErrDecided), errors.Is(err, approval.ErrExpired), errors.Is(err, approval.ErrWithdrawn):
		return pageConflict, nil
	}
	return "", err
}

// confirmAnywhere gives code to the code page of token wherever it is
// held, and says what came of it.
func (a *approvalPages) confirmAnywhere(ctx context.Context, token, code string) (result, refusal string, err error) {
	if p := a.lookup(token); p != nil {
		result, refusal := a.confirmCode(ctx, token, code)
		return result, refusal, nil
	}
	rep, err := a.remote(ctx, relayPageDecide, pageWire{Token: token, Code: code})
	if rep.Result == "" {
		rep.Result = pageMissing
	}
	return rep.Result, rep.Refusal, err
}

// decideAnywhere takes the decision on the page of token wherever it is
// held, and says what came of it.
func (a *approvalPages) decideAnywhere(ctx context.Context, token string, allow bool, scope string, minutes int) (string, error) {
	if p := a.lookup(token); p != nil {
		return a.decideHere(ctx, token, allow, scope, minutes)
	}
	rep, err := a.remote(ctx, relayPageDecide, pageWire{Token: token, Allow: allow, Scope: scope, Minutes: minutes})
	if rep.Result == "" {
		rep.Result = pageMissing
	}
	return rep.Result, err
}

// remote passes a request about a page this replica does not hold to the
// one that does; with none, the reply is empty.
func (a *approvalPages) remote(ctx context.Context, method string, req pageWire) (pageWire, error) {
	if a.relay == nil {
		return pageWire{}, nil
	}
	holder, err := a.relay.Holder(ctx, "page", pageKey(req.Token))
	if replicaLost(err) || holder == "" || holder == a.relay.Instance() {
		return pageWire{}, nil // the call it belonged to is gone with its replica
	}
	if err != nil {
		return pageWire{}, err
	}
	body, _ := json.Marshal(req)
	raw, err := a.relay.Call(ctx, holder, method, body, nil)
	if replicaLost(err) {
		return pageWire{}, nil
	}
	if err != nil {
		return pageWire{}, err
	}
	var rep pageWire
	err = json.Unmarshal(raw, &rep)
	return rep, err
}

func (a *approvalPages) serveShow(_ context.Context, body []byte, _ func([]byte)) ([]byte, error) {
	var req pageWire
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	var rep pageWire
	if p := a.lookup(req.Token); p != nil {
		rep = p.view()
	}
	return json.Marshal(rep)
}

func (a *approvalPages) serveDecide(ctx context.Context, body []byte, _ func([]byte)) ([]byte, error) {
	var req pageWire
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	rep := pageWire{Result: pageMissing}
	if p := a.lookup(req.Token); p != nil && p.confirm != nil {
		rep.Result, rep.Refusal = a.confirmCode(ctx, req.Token, req.Code)
	} else if p != nil {
		var err error
		if rep.Result, err = a.decideHere(ctx, req.Token, req.Allow, req.Scope, req.Minutes); err != nil {
			return nil, err
		}
	}
	return json.Marshal(rep)
}

const pageNotFound = "Not Found: no such approval (it was answered, or the call ended)"

// ServeHTTP serves the page of the token in the path: GET shows the call,
// POST takes the decision (on a code page: shows a form for the code, and
// takes the code). Nothing else is served: no page's address can
// be guessed, a page says nothing about the gateway, a decision is taken
// once, and another site can neither frame the page nor post to it, nor
// reach it under a name of its own (DNS rebinding): a page is served only
// at the origin its link named (the configured one, else the scheme and
// host the client reached the gateway at), and a request naming another
// Host is refused, on any listener.
//
// The page's referrer policy is same-origin, not no-referrer: under
// no-referrer a browser names the origin of the page's own form post
// "null" (the Fetch standard's rule for a request's Origin header), which
// cannot be told from a post by another site's page that chose
// no-referrer, so the decision could only be refused or taken blindly.
// Under same-origin the browser names the page's origin on its own post,
// and the page still sends its address (which holds the token) to no
// other origin: it links to nothing and loads nothing (its
// Content-Security-Policy), and the only request it makes is that post.
// "null" stays refused.
func (s *pageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	if reboundHost(r) {
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
		return
	}
	token := strings.TrimPrefix(r.URL.Path, ApprovalPath)
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		h.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	view, err := s.pages.show(r.Context(), token)
	if err != nil {
		http.Error(w, "Service Unavailable: the approval could not be reached: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if view.Call == "" && view.Source == "" {
		http.Error(w, pageNotFound, http.StatusNotFound)
		return
	}
	linked := view.Origin
	// The page's own origin: the configured one, else the one its link
	// named, never one the request names itself.
	own := s.origin
	if own == "" {
		if linked == "" || normalOrigin(requestOrigin(r)) != linked {
			http.Error(w, fmt.Sprintf("Forbidden: this approval is at the address its link names, not at host %q", r.Host), http.StatusForbidden)
			return
		}
		own = linked
	}
	data := pageData{Call: view.Call, Source: view.Source, Scopes: scopeChoices(view.Scopes)}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if !sameOrigin(r, own) {
			http.Error(w, "Forbidden: a decision is taken on its own page", http.StatusForbidden)
			return
		}
		if view.Source != "" {
			if !s.serveCode(w, r, token, &data) {
				return
			}
			break
		}
		decision := r.PostFormValue("decision")
		if decision != "allow" && decision != "deny" {
			http.Error(w, `Bad Request: decision must be "allow" or "deny"`, http.StatusBadRequest)
			return
		}
		scope := r.PostFormValue("scope")
		minutes := 0
		if m := r.PostFormValue("minutes"); m != "" {
			n, err := strconv.Atoi(m)
			if err != nil || n < 1 || n > maxLastingMinutes {
				http.Error(w, fmt.Sprintf("Bad Request: minutes must be a whole number from 1 to %d, or empty", maxLastingMinutes), http.StatusBadRequest)
				return
			}
			minutes = n
		}
		result, err := s.pages.decideAnywhere(r.Context(), token, decision == "allow", scope, minutes)
		switch {
		case err == nil && result == pageBadScope:
			http.Error(w, "Bad Request: scope must be one the page offers", http.StatusBadRequest)
			return
		case err != nil:
			http.Error(w, "Service Unavailable: the approval could not be reached: "+err.Error(), http.StatusServiceUnavailable)
			return
		case result == pageMissing:
			http.Error(w, pageNotFound, http.StatusNotFound)
			return
		case result == pageConflict:
			http.Error(w, "Conflict: this call was decided already", http.StatusConflict)
			return
		}
		data.Done = "The call is denied. You may close this page."
		if decision == "allow" {
			data.Done = "The call is allowed. You may close this page."
		}
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	_ = approvalTemplate.Execute(w, data)
}

// serveCode takes the code posted to the code page of token into data, and
// reports whether the page is to be written; when not, the answer is.
func (s *pageServer) serveCode(w http.ResponseWriter, r *http.Request, token string, data *pageData) bool {
	code := strings.TrimSpace(r.PostFormValue("code"))
	if code == "" || len(code) > 64 {
		http.Error(w, "Bad Request: code must be the code the sign-in page showed", http.StatusBadRequest)
		return false
	}
	result, refusal, err := s.pages.confirmAnywhere(r.Context(), token, code)
	switch {
	case err != nil:
		http.Error(w, "Service Unavailable: the sign-in could not be reached: "+err.Error(), http.StatusServiceUnavailable)
		return false
	case result == pageMissing:
		http.Error(w, pageNotFound, http.StatusNotFound)
		return false
	case result == pageConflict:
		http.Error(w, "Conflict: this sign-in was confirmed already", http.StatusConflict)
		return false
	case result == pageRefused:
		data.Refusal = refusal
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnprocessableEntity)
		return true
	}
	data.Done = "Your sign-in is confirmed. You may close this page."
	return true
}

// reboundHost reports whether r reached a loopback listener under a name
// that is not a loopback one: a page of another site whose name was made
// to resolve to this machine (DNS rebinding), which would otherwise be the
// approval page's own origin in the browser's eyes. /mcp refuses the same
// (go-sdk's check, and [stateful]'s copy of it).
func reboundHost(r *http.Request) bool {
	return loopbackConn(r) && !loopbackAddr(r.Host)
}

// sameOrigin reports whether a POST comes from the page itself, whose
// origin is own: a browser names the page's origin in Origin and says
// same-origin in Sec-Fetch-Site; a request from another site names that
// site, or "null" when that site's page chose not to tell, which is
// refused too. A request with neither is
// not from a browser, so no other site's page can have made it. A request
// that repeats either header is refused: which of two a proxy or a server
// reads first is not something to decide a call on.
func sameOrigin(r *http.Request, own string) bool {
	sites, origins := r.Header.Values("Sec-Fetch-Site"), r.Header.Values("Origin")
	if len(sites) > 1 || len(origins) > 1 {
		return false
	}
	if len(sites) == 1 && sites[0] != "same-origin" {
		return false
	}
	if len(origins) == 0 {
		return true
	}
	return normalOrigin(origins[0]) == normalOrigin(own)
}

// requestOrigin is the origin r was sent to: its scheme and Host.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
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
