package netpolicy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// hopServer is a test server on 127.0.0.1 that records the headers of
// every request by path and redirects the paths it is told to.
type hopServer struct {
	*httptest.Server
	mu     sync.Mutex
	routes map[string]string // path → absolute URL to redirect to
	seen   map[string]http.Header
}

func newHopServer(t *testing.T, tls bool) *hopServer {
	t.Helper()
	s := &hopServer{routes: map[string]string{}, seen: map[string]http.Header{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen[r.URL.Path] = r.Header.Clone()
		target, ok := s.routes[r.URL.Path]
		s.mu.Unlock()
		if ok {
			http.Redirect(w, r, target, http.StatusTemporaryRedirect)
			return
		}
		io.WriteString(w, "ok")
	})
	if tls {
		s.Server = httptest.NewTLSServer(h)
	} else {
		s.Server = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

func (s *hopServer) route(path, target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[path] = target
}

// headers returns what the request for path carried, or nil if none came.
func (s *hopServer) headers(path string) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[path]
}

func get(t *testing.T, c *http.Client, target string, h http.Header) error {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

func TestClientKeepsSecretsOnTheOrigin(t *testing.T) {
	a, b := newHopServer(t, false), newHopServer(t, false)
	a.route("/same", a.URL+"/same-end")
	a.route("/away", b.URL+"/landed")
	a.route("/bounce", b.URL+"/back")
	b.route("/back", a.URL+"/home")
	// Two spellings of one origin: the default port is the same port.
	a.route("/relative", "/relative-end")

	c := NewClient(&ClientOptions{SecretHeaders: []string{"x-api-key"}})
	sent := http.Header{
		"Authorization": {"Bearer tok"},
		"Cookie":        {"sid=1"},
		"x-api-key":     {"key"}, // not canonical: set as some callers do
		"X-Trace":       {"t1"},
	}
	secrets := []string{"Authorization", "Cookie", "x-api-key"}
	tests := []struct {
		start    string
		srv      *hopServer
		end      string
		keepsAll bool
	}{
		{"/same", a, "/same-end", true},
		{"/relative", a, "/relative-end", true},
		{"/away", b, "/landed", false},
		{"/bounce", a, "/home", false},
	}
	for _, tt := range tests {
		if err := get(t, c, a.URL+tt.start, sent); err != nil {
			t.Fatalf("GET %s: %v", tt.start, err)
		}
		if h := a.headers(tt.start); h.Get("Authorization") != "Bearer tok" || h.Get("X-Api-Key") == "" {
			t.Fatalf("%s: the first request lacks its own headers: %v", tt.start, h)
		}
		h := tt.srv.headers(tt.end)
		if h == nil {
			t.Fatalf("%s: %s never reached", tt.start, tt.end)
		}
		if h.Get("X-Trace") != "t1" {
			t.Errorf("%s → %s: X-Trace = %q, want it kept", tt.start, tt.end, h.Get("X-Trace"))
		}
		for _, k := range secrets {
			if got := len(h.Values(k)) > 0; got != tt.keepsAll {
				t.Errorf("%s → %s: header %s present = %v, want %v", tt.start, tt.end, k, got, tt.keepsAll)
			}
		}
		if tt.end == "/home" && h.Get("Referer") != "" {
			t.Errorf("/bounce → /home: Referer %q sent after leaving the origin", h.Get("Referer"))
		}
	}
}

// A server that redirects /n/k to /n/k+1 until k reaches ?stop.
func newCountingServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/n/"))
		stop, _ := strconv.Atoi(r.URL.Query().Get("stop"))
		if k < stop {
			http.Redirect(w, r, fmt.Sprintf("/n/%d?stop=%d", k+1, stop), http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func TestClientRedirectCap(t *testing.T) {
	s := newCountingServer(t)
	tests := []struct {
		max, redirects int
		wantErr        string
	}{
		{0, 10, ""},
		{0, 11, "stopped after 10 redirects"},
		{3, 3, ""},
		{3, 4, "stopped after 3 redirects"},
		{-1, 0, ""},
		{-1, 1, "this client follows no redirects"},
	}
	for _, tt := range tests {
		c := NewClient(&ClientOptions{MaxRedirects: tt.max})
		err := get(t, c, fmt.Sprintf("%s/n/0?stop=%d", s.URL, tt.redirects), nil)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("max %d, %d redirects: %v", tt.max, tt.redirects, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("max %d, %d redirects: error %v, want %q", tt.max, tt.redirects, err, tt.wantErr)
		}
	}
}

func TestClientRefusesDowngrade(t *testing.T) {
	secure, secure2 := newHopServer(t, true), newHopServer(t, true)
	plain := newHopServer(t, false)
	secure.route("/down", plain.URL+"/landed")
	secure.route("/across", secure2.URL+"/landed")
	c := NewClient(&ClientOptions{Transport: secure.Client().Transport})

	// https to https on another origin is followed: the refusal below is
	// about the scheme.
	if err := get(t, c, secure.URL+"/across", nil); err != nil {
		t.Fatalf("https → https: %v", err)
	}
	err := get(t, c, secure.URL+"/down", nil)
	if err == nil || !strings.Contains(err.Error(), "redirect from https to plain http refused") ||
		!strings.Contains(err.Error(), plain.URL+"/landed") {
		t.Errorf("https → http: error %v, want a refusal naming the target", err)
	}
	if plain.headers("/landed") != nil {
		t.Error("the plain http server was reached")
	}
}

// roundTripFunc lets a function stand in for a transport.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestClientAppliesTheURLRule(t *testing.T) {
	a := newHopServer(t, false)
	a.route("/to-remote-http", "http://192.0.2.1/mcp")
	a.route("/to-userinfo", "https://user:pw@192.0.2.1/mcp")
	a.route("/to-ftp", "ftp://192.0.2.1/x")
	a.route("/to-decimal", "http://2130706433/mcp")
	base := http.DefaultTransport
	c := NewClient(&ClientOptions{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Hostname() != "127.0.0.1" {
			t.Errorf("request sent to %s", r.URL)
		}
		return base.RoundTrip(r)
	})})
	tests := []struct{ target, want string }{
		// The first request, which a CheckRedirect alone never sees.
		{"http://192.0.2.1/mcp", `url "http://192.0.2.1/mcp": plain http is allowed only to a loopback address`},
		{a.URL + "/to-remote-http", `url "http://192.0.2.1/mcp": plain http is allowed only to a loopback address`},
		{a.URL + "/to-userinfo", `url "https://192.0.2.1/mcp": must not contain a user name or password`},
		{a.URL + "/to-ftp", `scheme "ftp" is not allowed`},
		{a.URL + "/to-decimal", `non-standard form`},
	}
	for _, tt := range tests {
		err := get(t, c, tt.target, nil)
		var ue *URLError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("GET %s: error %v, want a *URLError containing %q", tt.target, err, tt.want)
		}
		// Go's client names the Location as the server sent it; the
		// refusal itself must not repeat the user information.
		if ue != nil && strings.Contains(ue.Error(), ":pw@") {
			t.Errorf("GET %s: refusal shows the password: %v", tt.target, ue)
		}
	}
}

func TestHeaderTransport(t *testing.T) {
	a, b := newHopServer(t, false), newHopServer(t, false)
	a.route("/away", b.URL+"/landed")
	a.route("/bounce", b.URL+"/back")
	b.route("/back", a.URL+"/home")
	a.route("/stay", "/stay-end")
	headers := map[string]string{"Authorization": "Bearer tok", "x-team": "blue"}
	ht, err := NewHeaderTransport(a.URL+"/mcp", headers, nil)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*http.Client{
		"NewClient": NewClient(&ClientOptions{Transport: ht}),
		// Go's own redirect policy: the transport alone must hold.
		"http.Client": {Transport: ht},
	}
	tests := []struct {
		start string
		srv   *hopServer
		path  string
		want  bool
	}{
		{a.URL + "/mcp", a, "/mcp", true},
		{a.URL + "/stay", a, "/stay-end", true},
		{a.URL + "/away", a, "/away", true},
		{a.URL + "/away", b, "/landed", false},
		{a.URL + "/bounce", a, "/home", false},
		{b.URL + "/direct", b, "/direct", false},
	}
	for name, c := range clients {
		for _, tt := range tests {
			if err := get(t, c, tt.start, nil); err != nil {
				t.Fatalf("%s: GET %s: %v", name, tt.start, err)
			}
			h := tt.srv.headers(tt.path)
			got := h.Get("Authorization") == "Bearer tok" && h.Get("X-Team") == "blue"
			leaked := h.Get("Authorization") != "" || h.Get("X-Team") != ""
			if got != tt.want || !tt.want && leaked {
				t.Errorf("%s: GET %s, at %s: headers %v, want them sent = %v", name, tt.start, tt.path, h, tt.want)
			}
		}
	}

	req, _ := http.NewRequest(http.MethodGet, a.URL+"/mcp", nil)
	if _, err := ht.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if len(req.Header) != 0 {
		t.Errorf("RoundTrip modified the caller's request: %v", req.Header)
	}

	for _, bad := range []string{"http://example.com/mcp", "https://u:p@example.com/", "::"} {
		var ue *URLError
		if _, err := NewHeaderTransport(bad, headers, nil); !errors.As(err, &ue) {
			t.Errorf("NewHeaderTransport(%q) error = %v, want a *URLError", bad, err)
		}
	}
}

func TestOrigin(t *testing.T) {
	tests := []struct{ a, b string }{
		{"https://Example.com/x", "https://example.com:443/y"},
		{"http://localhost/", "http://LOCALHOST:80/"},
		{"http://[::1]/", "http://[0:0:0:0:0:0:0:1]:80/"},
	}
	for _, tt := range tests {
		if oa, ob := origin(mustParse(t, tt.a)), origin(mustParse(t, tt.b)); oa != ob {
			t.Errorf("origin(%s) = %s, origin(%s) = %s, want equal", tt.a, oa, tt.b, ob)
		}
	}
	differ := []struct{ a, b string }{
		{"http://example.com/", "https://example.com/"},
		{"https://example.com/", "https://example.com:8443/"},
		{"https://example.com/", "https://api.example.com/"},
		{"http://127.0.0.1:80/", "http://localhost:80/"},
	}
	for _, tt := range differ {
		if oa, ob := origin(mustParse(t, tt.a)), origin(mustParse(t, tt.b)); oa == ob {
			t.Errorf("origin(%s) = origin(%s) = %s, want different", tt.a, tt.b, oa)
		}
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
