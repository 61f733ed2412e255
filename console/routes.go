package console

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/toolwire/toolwire/approval"
)

//go:embed assets
var assets embed.FS

// staticFS are the files the pages load: the style sheet and the script.
var staticFS = func() fs.FS {
	sub, err := fs.Sub(assets, "assets/static")
	if err != nil {
		panic(err)
	}
	return sub
}()

// maxForm bounds a POST's body: the console's forms are a few fields.
const maxForm = 16 << 10

// routes is the console's HTTP handler; done ends its event streams.
//
// Every answer carries the headers of [setHeaders]. A request that reached
// a loopback listener under another name is refused first. The pages and
// the event stream need an operator's session: without one a page
// redirects to the sign-in page (and shows nothing), anything else is 401.
// A POST is refused unless it comes from a console page (its Origin) and
// carries the session's CSRF token.
func (c *Console) routes(done context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(staticFS)))
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.post(c.logout))
	for _, p := range pages {
		pattern := "GET /" + p.name
		if p.name == "overview" {
			pattern = "GET /{$}"
		}
		mux.HandleFunc(pattern, c.page(p))
	}
	mux.HandleFunc("POST /approvals/{id}", c.post(c.decide))
	mux.HandleFunc("POST /grants/{id}/revoke", c.post(c.revoke))
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		id := sessionID(r)
		if c.auth.lookup(id, time.Now()) == nil {
			http.Error(w, "Unauthorized: sign in to the console first", http.StatusUnauthorized)
			return
		}
		c.serveEvents(done, w, r, func() bool { return c.auth.alive(id, time.Now()) })
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w.Header())
		if reboundHost(r) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// operator is the session of a request that passed the console's checks.
type operator struct {
	id string
	*session
}

// post wraps a state-changing handler: a session, the console's own
// Origin, and the session's CSRF token, or the request is refused and
// nothing happens.
func (c *Console) post(h func(w http.ResponseWriter, r *http.Request, op operator)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := sessionID(r)
		se := c.auth.lookup(id, time.Now())
		if se == nil {
			http.Error(w, "Unauthorized: sign in to the console first", http.StatusUnauthorized)
			return
		}
		if !fromOwnPage(r, c.opts.Secure) {
			http.Error(w, "Forbidden: a console form is posted from the console's own pages", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "Bad Request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if !validCSRF(r, se) {
			http.Error(w, "Forbidden: the form's CSRF token is missing or not this session's; reload the page", http.StatusForbidden)
			return
		}
		h(w, r, operator{id, se})
	}
}

// page serves one of the pages: the whole page, or with ?part=content the
// part that changes, which the script fetches when the event stream says
// one of the page's topics changed.
func (c *Console) page(p pageDef) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se := c.auth.lookup(sessionID(r), time.Now())
		part := r.URL.Query().Get("part")
		if se == nil {
			if part != "" {
				http.Error(w, "Unauthorized: sign in to the console first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if part != "" && part != "content" {
			http.Error(w, `Bad Request: part must be "content"`, http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		data := pageData{Page: p.name, Title: p.title, Topics: strings.Join(p.topics, " "), CSRF: se.csrf, Nav: pages, Flash: flash(r.URL.Query().Get("done"))}
		data.View = p.view(ctx, c)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		name := "layout"
		if part == "content" {
			name = "content"
		}
		if err := p.tmpl.ExecuteTemplate(w, name, data); err != nil {
			c.log.Warn("console: rendering a page", "page", p.name, "error", err.Error())
		}
	}
}

// pageData is what every page's template gets; View is the page's own.
type pageData struct {
	Page, Title, Topics, CSRF, Flash string
	Nav                              []pageDef
	View                             any
}

// flash is the message of a page reached after a decision: one of a few
// fixed texts, never the request's words.
func flash(done string) string {
	switch done {
	case "allowed":
		return "The call is allowed."
	case "denied":
		return "The call is denied."
	case "gone":
		return "That call is no longer waiting: its time ran out, or it ended."
	case "decided":
		return "That call was decided already, by someone else."
	case "revoked":
		return "The approval is revoked."
	case "unknown":
		return "No such approval: it expired, or was revoked already."
	}
	return ""
}

var loginTemplate = template.Must(template.ParseFS(assets, "assets/templates/login.html"))

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.auth.lookup(sessionID(r), time.Now()) != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.renderLogin(w, http.StatusOK, "")
}

func (c *Console) renderLogin(w http.ResponseWriter, status int, problem string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginTemplate.Execute(w, struct{ Problem string }{problem})
}

// login signs an operator in: the token posted from the console's own
// sign-in page, a few wrong tokens a minute at most for everyone.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !fromOwnPage(r, c.opts.Secure) {
		http.Error(w, "Forbidden: sign in on the console's own page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "Bad Request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !c.auth.failures.Allow() {
		w.Header().Set("Retry-After", "60")
		c.renderLogin(w, http.StatusTooManyRequests, "Too many attempts: wait a minute, then try again.")
		return
	}
	if !c.auth.check(r.PostFormValue("token")) {
		c.log.Warn("console: a sign-in with a wrong token", "remote", r.RemoteAddr)
		c.renderLogin(w, http.StatusUnauthorized, "That is not the operator token.")
		return
	}
	id := c.auth.open(time.Now())
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: c.opts.Secure, SameSite: http.SameSiteStrictMode})
	c.log.Info("console: an operator signed in", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, op operator) {
	c.auth.close(op.id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.opts.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// decide answers a waiting call with the operator's decision, its scope
// and, for a refusal, the reason the caller is given.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, _ operator) {
	q := c.sources().Workspace.Pending()
	if q == nil {
		http.Error(w, "Not Found: this store keeps no calls waiting for an operator", http.StatusNotFound)
		return
	}
	var d approval.Decision
	switch r.PostFormValue("decision") {
	case "allow":
		d.Approve = true
	case "deny":
	default:
		http.Error(w, `Bad Request: decision must be "allow" or "deny"`, http.StatusBadRequest)
		return
	}
	scope, err := approval.ParseScope(cmp.Or(r.PostFormValue("scope"), string(approval.Once)))
	if err != nil {
		http.Error(w, "Bad Request: scope: "+err.Error(), http.StatusBadRequest)
		return
	}
	d.Scope = scope
	if v := r.PostFormValue("for"); v != "" && scope != approval.Once {
		dur, err := time.ParseDuration(v)
		if err != nil || dur <= 0 || dur > 7*24*time.Hour {
			http.Error(w, fmt.Sprintf("Bad Request: for %q: want a duration such as 15m or 8h, at most a week", v), http.StatusBadRequest)
			return
		}
		d.For = dur
	}
	if reason := strings.TrimSpace(r.PostFormValue("reason")); reason != "" && !d.Approve {
		if len(reason) > 500 {
			http.Error(w, "Bad Request: reason: at most 500 bytes", http.StatusBadRequest)
			return
		}
		d.Reason = reason
	}
	d.By = "console"
	id := r.PathValue("id")
	if scope != approval.Once {
		// A lasting decision needs a caller and a tool to be bound to;
		// the queue would keep one bound to nobody.
		req, err := q.Get(r.Context(), id)
		if err == nil && !lastingAllowed(req) {
			http.Error(w, "Bad Request: scope: a lasting decision needs a caller it is bound to; this call's client is not authenticated, so decide it once", http.StatusBadRequest)
			return
		}
	}
	_, err = q.Decide(r.Context(), id, d)
	switch {
	case errors.Is(err, approval.ErrNotFound), errors.Is(err, approval.ErrExpired), errors.Is(err, approval.ErrWithdrawn):
		http.Redirect(w, r, "/approvals?done=gone", http.StatusSeeOther)
		return
	case errors.Is(err, approval.ErrDecided):
		http.Redirect(w, r, "/approvals?done=decided", http.StatusSeeOther)
		return
	case err != nil:
		c.log.Warn("console: a decision was not taken", "id", id, "error", err.Error())
		http.Error(w, "Bad Request: the decision was not taken: "+err.Error(), http.StatusBadRequest)
		return
	}
	c.log.Info("console: an operator answered a waiting call", "id", id, "approve", d.Approve, "scope", string(d.Scope))
	c.hub.notify(topicApprovals)
	done := "denied"
	if d.Approve {
		done = "allowed"
	}
	http.Redirect(w, r, "/approvals?done="+done, http.StatusSeeOther)
}

// revoke revokes a lasting approval.
func (c *Console) revoke(w http.ResponseWriter, r *http.Request, _ operator) {
	g := c.sources().Workspace.Approvals()
	if g == nil {
		http.Error(w, "Not Found: this store keeps no lasting approvals", http.StatusNotFound)
		return
	}
	if err := g.Revoke(r.Context(), r.PathValue("id")); err != nil {
		http.Redirect(w, r, "/approvals?done=unknown", http.StatusSeeOther)
		return
	}
	c.log.Info("console: an operator revoked a lasting approval", "id", r.PathValue("id"))
	c.hub.notify(topicApprovals)
	http.Redirect(w, r, "/approvals?done=revoked", http.StatusSeeOther)
}
