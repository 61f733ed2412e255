package store

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/oauth"
)

// callerReplicas are two gateway replicas on one PostgreSQL database with
// per-caller login at one protected MCP server, and the callback of each
// behind one URL, as a load balancer would send a browser to either: here
// always to the other replica than the one the caller's call was on.
type callerReplicas struct {
	f       *oauthFixture
	url     string
	callers []*oauth.Callers
	stores  []*oauth.Store
}

func newCallerReplicas(t *testing.T) *callerReplicas {
	t.Helper()
	r := &callerReplicas{f: newOAuthFixture(t), url: pgtest.DB(t)}
	var mu sync.Mutex
	next := 1 // each caller begins on replica i and comes back to the other
	var callbacks []http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		cb := callbacks[next%len(callbacks)]
		next++ // the replicas take turns
		mu.Unlock()
		cb.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	for range 2 {
		st := openPG(t, r.url, nil).Tokens()
		c, err := oauth.NewCallers(&oauth.CallersConfig{Server: "upstream", Resource: r.f.rs.URL, Mode: oauth.CallerLogin,
			HTTPClient: r.f.hc, Store: st, RedirectURL: srv.URL + oauth.DefaultCallbackPath})
		if err != nil {
			t.Fatal(err)
		}
		cb, err := oauth.NewCallback(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		callbacks = append(callbacks, cb)
		r.callers, r.stores = append(r.callers, c), append(r.stores, st)
	}
	return r
}

// whoamiAs connects through h and calls whoami.
func (r *callerReplicas) whoamiAs(ctx context.Context, h *oauth.CallerHandler) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.f.rs.URL, HTTPClient: r.f.hc, OAuthHandler: h, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return "", err
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: oauthtest.WhoamiTool})
	if err != nil {
		return "", err
	}
	m, _ := res.StructuredContent.(map[string]any)
	u, _ := m["user"].(string)
	return u, nil
}

// TestCallersOnPostgreSQL: two callers log in through two replicas of a
// gateway sharing one database (each caller's first call on one replica,
// the browser's redirect on the other), reach the upstream as themselves from
// either replica, and with both tokens expired 16 goroutines across the
// replicas refresh once per caller. The database holds ciphertext under
// keys that name neither caller.
func TestCallersOnPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newCallerReplicas(t)
	who := []oauth.Caller{{Issuer: "https://idp.test", Subject: oauthtest.Subject}, {Issuer: "https://idp.test", Subject: oauthtest.Subject2}}
	users := []string{oauthtest.Username, oauthtest.Username2}
	for i, c := range who {
		_, err := r.whoamiAs(ctx, r.callers[i].Handler(c))
		var le *oauth.CallerLoginError
		if !errors.As(err, &le) {
			t.Fatalf("%s before login: %v, want a *CallerLoginError", c, err)
		}
		b := oauthtest.NewBrowserAs(users[i])
		if err := b.Authorize(ctx, le.URL); err != nil || b.LastStatus() != http.StatusOK {
			t.Fatalf("%s: authorize: %v, callback status %d", c, err, b.LastStatus())
		}
		if err := le.Confirm(ctx, b.LinkCode()); err != nil {
			t.Fatalf("%s: confirming with the code the browser was shown: %v", c, err)
		}
		for j, rep := range r.callers {
			if got, err := r.whoamiAs(ctx, rep.Handler(c)); err != nil || got != c.Subject {
				t.Fatalf("%s on replica %d: %q, %v", c, j, got, err)
			}
		}
	}
	old := map[string]string{}
	conn, err := pgx.Connect(ctx, r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT server, record FROM toolwire.oauth_tokens")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]byte{}
	for rows.Next() {
		var k string
		var rec []byte
		if err := rows.Scan(&k, &rec); err != nil {
			t.Fatal(err)
		}
		keys[k] = rec
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(keys) != 3 {
		t.Errorf("records %d, want 3 (two callers, one shared registration)", len(keys))
	}
	for k := range keys {
		if !strings.HasPrefix(k, "caller:upstream:") && k != "callers:upstream" || strings.Contains(k, "id1") || strings.Contains(k, "id2") {
			t.Errorf("record key %q: want a caller pseudonym or the shared registration", k)
		}
	}
	// Expire both callers' tokens; every stored token is ciphertext.
	for _, c := range who {
		var key string
		for k := range keys {
			e, _ := r.stores[0].Get(k)
			if e != nil && e.Caller != nil && *e.Caller == c {
				key = k
			}
		}
		if key == "" {
			t.Fatalf("no record of %s", c)
		}
		err := r.stores[0].Update(ctx, key, func(e *oauth.Entry) error {
			old[c.Subject] = e.Token.AccessToken
			if strings.Contains(string(keys[key]), e.Token.AccessToken) || strings.Contains(string(keys[key]), e.Token.RefreshToken) {
				t.Errorf("the record of %s holds its token in plain text", c)
			}
			e.Token.Obtained, e.Token.Expiry = time.Now().Add(-time.Hour), time.Now().Add(-time.Second)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each replica anew, as after a restart: nothing in memory.
	var fresh []*oauth.Callers
	for _, st := range r.stores {
		c, err := oauth.NewCallers(&oauth.CallersConfig{Server: "upstream", Resource: r.f.rs.URL, Mode: oauth.CallerLogin,
			HTTPClient: r.f.hc, Store: st, RedirectURL: r.callers[0].RedirectURL()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Discover(ctx); err != nil {
			t.Fatal(err)
		}
		fresh = append(fresh, c)
	}
	const n = 16
	tokens := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		h := fresh[(i/2)%2].Handler(who[i%2])
		wg.Go(func() {
			<-start
			ts, err := h.TokenSource(ctx)
			if err != nil || ts == nil {
				errs[i] = errors.Join(errors.New("no token source"), err)
				return
			}
			tok, err := ts.Token()
			errs[i] = err
			if err == nil {
				tokens[i] = tok.AccessToken
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
		if tokens[i] != tokens[i%2] {
			t.Errorf("goroutine %d of %s got another token than its caller's first", i, who[i%2])
		}
	}
	for i, c := range who {
		if tokens[i] == old[c.Subject] {
			t.Errorf("%s: not refreshed", c)
		}
		ti, err := r.f.op.Userinfo(ctx, tokens[i], nil)
		if err != nil || ti.UserID != c.Subject {
			t.Errorf("%s's refreshed token is for %v (%v)", c, ti, err)
		}
	}
	if got := r.f.op.Refreshes(); got != 2 {
		t.Errorf("refreshes at the authorization server = %d, want 2 (one per caller across the replicas)", got)
	}
}
