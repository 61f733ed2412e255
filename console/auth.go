package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/netpolicy"
	"golang.org/x/time/rate"
)

// cookieName is the operator's session cookie. Its value is a random
// session id; the console keeps only its SHA-256.
const cookieName = "toolwire_console"

// maxSessions bounds the operators' sessions kept; beyond it the oldest
// is signed out.
const maxSessions = 64

// sessions are the operators signed in to the console.
type sessions struct {
	token     [sha256.Size]byte // of the operator token
	idle, max time.Duration
	// failures bounds wrong tokens: a few per minute, for everyone, so
	// that a token cannot be guessed at the speed of the network.
	failures *rate.Limiter

	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
}

// session is one operator signed in.
type session struct {
	csrf     string
	created  time.Time
	lastSeen time.Time
}

func newSessions(token string, idle, max time.Duration) *sessions {
	return &sessions{
		token: sha256.Sum256([]byte(token)), idle: idle, max: max,
		failures: rate.NewLimiter(rate.Every(6*time.Second), 10),
		byID:     map[[sha256.Size]byte]*session{},
	}
}

// check reports whether token is the operator's, in constant time: both
// sides are hashed first, so neither the length nor the content of the
// operator token shows in the time taken.
func (s *sessions) check(token string) bool {
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// open starts a session and returns its id (for the cookie).
func (s *sessions) open(now time.Time) string {
	id := rand.Text() + rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if len(s.byID) >= maxSessions {
		var oldest [sha256.Size]byte
		var at time.Time
		for k, v := range s.byID {
			if at.IsZero() || v.created.Before(at) {
				oldest, at = k, v.created
			}
		}
		delete(s.byID, oldest)
	}
	s.byID[sha256.Sum256([]byte(id))] = &session{csrf: rand.Text() + rand.Text(), created: now, lastSeen: now}
	return id
}

// lookup returns the live session of id, marking it seen at now; nil when
// there is none.
func (s *sessions) lookup(id string, now time.Time) *session {
	if id == "" {
		return nil
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.byID[k]
	if se == nil {
		return nil
	}
	if now.Sub(se.lastSeen) > s.idle || now.Sub(se.created) > s.max {
		delete(s.byID, k)
		return nil
	}
	se.lastSeen = now
	return se
}

// alive reports whether the session of id is still signed in, without
// marking it seen.
func (s *sessions) alive(id string, now time.Time) bool {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.byID[k]
	return se != nil && now.Sub(se.lastSeen) <= s.idle && now.Sub(se.created) <= s.max
}

func (s *sessions) close(id string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	delete(s.byID, k)
	s.mu.Unlock()
}

func (s *sessions) expireLocked(now time.Time) {
	for k, se := range s.byID {
		if now.Sub(se.lastSeen) > s.idle || now.Sub(se.created) > s.max {
			delete(s.byID, k)
		}
	}
}

// sessionID is the session cookie's value in r, or "".
func sessionID(r *http.Request) string {
	// A request that repeats the cookie is refused: which one a proxy or
	// a server reads first is not something to sign a person in on.
	var id string
	n := 0
	for _, ck := range r.CookiesNamed(cookieName) {
		id = ck.Value
		n++
	}
	if n != 1 {
		return ""
	}
	return id
}

// setHeaders sets what every answer of the console carries: no caching,
// no framing, no sniffing, and a Content-Security-Policy that lets a page
// load and run only the console's own files. The referrer policy is
// same-origin so that the browser names the console's origin on its own
// form posts (under no-referrer it would say "null"), and the console's
// addresses reach no other site.
func setHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

// reboundHost reports whether r reached a loopback listener under a name
// that is not a loopback one: another site's name made to resolve to this
// machine (DNS rebinding), whose pages would otherwise count as the
// console's own origin.
func reboundHost(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || addr == nil {
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil || !netpolicy.IsLoopbackHost(host) {
		return false
	}
	name, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		name = strings.Trim(r.Host, "[]")
	}
	return !netpolicy.IsLoopbackHost(name)
}

// ownOrigin is the console's origin as r reached it: its scheme (https
// over TLS, or when secure says a proxy in front terminates it) and Host.
func ownOrigin(r *http.Request, secure bool) string {
	scheme := "http"
	if r.TLS != nil || secure {
		scheme = "https"
	}
	return scheme + "://" + strings.ToLower(r.Host)
}

// fromOwnPage reports whether a POST comes from one of the console's own
// pages: the browser names the console's origin in Origin (required: the
// browsers the console supports send it on every POST), and, when it
// sends Sec-Fetch-Site, says same-origin. A header given twice is
// refused.
func fromOwnPage(r *http.Request, secure bool) bool {
	sites, origins := r.Header.Values("Sec-Fetch-Site"), r.Header.Values("Origin")
	if len(sites) > 1 || len(origins) != 1 {
		return false
	}
	if len(sites) == 1 && sites[0] != "same-origin" {
		return false
	}
	u, err := url.Parse(origins[0])
	if err != nil || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return false
	}
	return strings.ToLower(u.Scheme+"://"+u.Host) == ownOrigin(r, secure)
}

// validCSRF reports whether the form of r carries the session's CSRF
// token, compared in constant time.
func validCSRF(r *http.Request, se *session) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}
