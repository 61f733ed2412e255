package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/tool"
)

func httpConfig(name, url string) config.Server {
	return config.Server{Name: name, Transport: "http", URL: url, DefaultTier: "read"}
}

// serveHTTP serves h on 127.0.0.1 for the test and returns the endpoint URL.
func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func TestHTTPConnectDemo(t *testing.T) {
	t.Parallel()
	reg := confirmingRegistry()
	s := connect(t, httpConfig("web", serveHTTP(t, demo.HTTPHandler(nil))), reg, nil)
	if len(s.Tools()) != len(demoToolNames(t)) {
		t.Errorf("Tools() = %v, want every demo tool", s.Tools())
	}
	if tl, ok := reg.Lookup("web__delete_note"); !ok || tl.Tier != tool.Destructive {
		t.Errorf("web__delete_note = %+v, want it registered as destructive", tl)
	}
	ex := tool.NewExecutor(reg, nil)
	if res := call(t, ex, "web__echo", `{"text":"over http"}`); res.IsError || res.Text() != "over http" {
		t.Errorf("echo over HTTP = %+v", res)
	}
	if res := call(t, ex, "web__fail", `{}`); res.Reason != tool.ReasonTool || !strings.Contains(res.Message, "demo failure") {
		t.Errorf("fail over HTTP = Reason %q, Message %q", res.Reason, res.Message)
	}
}

func TestHTTPCancellationReachesServer(t *testing.T) {
	t.Parallel()
	t.Run("wait_for_cancel", func(t *testing.T) {
		t.Parallel()
		reg := confirmingRegistry()
		connect(t, httpConfig("web", serveHTTP(t, demo.HTTPHandler(nil))), reg, nil)
		testCancellationReachesServer(t, tool.NewExecutor(reg, nil), "web", "wait_for_cancel", `{}`)
	})
	t.Run("slow_count", func(t *testing.T) {
		t.Parallel()
		reg := confirmingRegistry()
		connect(t, httpConfig("web", serveHTTP(t, demo.HTTPHandler(nil))), reg, nil)
		testCancellationReachesServer(t, tool.NewExecutor(reg, nil), "web", "slow_count", `{"steps":100,"interval_ms":100}`)
	})
}

// headerLog records the headers of every request a handler receives.
type headerLog struct {
	mu   sync.Mutex
	reqs []string      // "METHOD path" per request
	hdrs []http.Header // headers per request
}

func (l *headerLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
		l.hdrs = append(l.hdrs, r.Header.Clone())
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *headerLog) snapshot() ([]string, []http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs), slices.Clone(l.hdrs)
}

func TestHTTPHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		bearer  string
		headers map[string]string
	}{
		{name: "bearer and header", bearer: "tok-51f0", headers: map[string]string{"X-Toolwire-Test": "yes"}},
		{name: "header only", headers: map[string]string{"X-Toolwire-Test": "yes"}},
		{name: "neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &headerLog{}
			cfg := httpConfig("web", serveHTTP(t, log.wrap(demo.HTTPHandler(nil))))
			cfg.BearerToken, cfg.Headers = tc.bearer, tc.headers
			reg := confirmingRegistry()
			s, err := Connect(boundedCtx(t, waitTime), cfg, reg, nil)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			if res := call(t, tool.NewExecutor(reg, nil), "web__echo", `{"text":"x"}`); res.IsError {
				t.Errorf("echo: %s", res.Message)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}

			reqs, hdrs := log.snapshot()
			if len(reqs) < 3 {
				t.Fatalf("server saw only %v; want at least initialize, list and call", reqs)
			}
			t.Logf("requests: %v", reqs)
			for i, h := range hdrs {
				auth := h.Values("Authorization")
				if tc.bearer != "" {
					if len(auth) != 1 || auth[0] != "Bearer "+tc.bearer {
						t.Errorf("%s: Authorization %q, want Bearer %s", reqs[i], auth, tc.bearer)
					}
				} else if len(auth) != 0 {
					t.Errorf("%s: Authorization %q sent without a bearer token", reqs[i], auth)
				}
				for k, v := range tc.headers {
					if got := h.Values(k); len(got) != 1 || got[0] != v {
						t.Errorf("%s: %s = %q, want %q", reqs[i], k, got, v)
					}
				}
			}
		})
	}
}

func TestHTTPPagination(t *testing.T) {
	t.Parallel()
	const n = 2500
	srv := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "0"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	for i := range n {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%04d", i), InputSchema: json.RawMessage(`{"type":"object"}`)}, handler)
	}
	var lists atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	url := serveHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))

	reg := confirmingRegistry()
	s := connect(t, httpConfig("many", url), reg, nil)
	if got := reg.Len(); got != n || len(s.Tools()) != n {
		t.Errorf("registered %d tools (Tools() has %d), want %d", got, len(s.Tools()), n)
	}
	for _, i := range []int{0, 999, 1000, 1999, 2000, n - 1} {
		if name := fmt.Sprintf("many__t%04d", i); !reg.Has(name) {
			t.Errorf("%s is missing", name)
		}
	}
	if got := lists.Load(); got < 3 {
		t.Errorf("the server answered %d tools/list requests; %d tools at 1000 a page need 3", got, n)
	}
}

// deadURL returns the URL of a 127.0.0.1 port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	return url
}

func TestHTTPUnreachable(t *testing.T) {
	t.Parallel()
	url := deadURL(t)
	reg := confirmingRegistry()
	_, err := Connect(boundedCtx(t, waitTime), httpConfig("gone", url), reg, nil)
	var ce *ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("Connect to a dead port = %v (%T), want *ConnectError", err, err)
	}
	if ce.Server != "gone" || !strings.Contains(err.Error(), `"gone"`) || !strings.Contains(err.Error(), url) {
		t.Errorf("error %q (server %q) does not name the server and %s", err, ce.Server, url)
	}
	if reg.Len() != 0 {
		t.Errorf("registry holds %v", toolNames(reg))
	}
}

const urlSecret = "tw-url-secret-9c2e"

func lookupURLSecret(k string) (string, bool) {
	if k == "KEY" {
		return urlSecret, true
	}
	return "", false
}

// A secret expanded into the URL must not appear in a connect error, which
// names the URL as configured (placeholder and all).
func TestHTTPConnectErrorMasksSecrets(t *testing.T) {
	t.Parallel()
	url := deadURL(t) + "?key=${KEY}"
	_, err := Connect(boundedCtx(t, waitTime), httpConfig("gone", url), confirmingRegistry(), &Options{LookupEnv: lookupURLSecret})
	if err == nil {
		t.Fatal("Connect to a dead port succeeded")
	}
	if strings.Contains(err.Error(), urlSecret) {
		t.Errorf("connect error %q reveals the expanded secret", err)
	}
	if !strings.Contains(err.Error(), url) {
		t.Errorf("connect error %q does not name the configured URL %s", err, url)
	}
}

// A call that fails in the transport must not carry a placeholder's secret
// into the result's message, which goes to the model.
func TestHTTPCallErrorMasksSecrets(t *testing.T) {
	t.Parallel()

	var dead atomic.Bool
	h := demo.HTTPHandler(nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dead.Load() {
			// Drop the connection without an answer.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			http.Error(w, "gone", http.StatusBadGateway)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections() // ends the session's open GET stream
		ts.Close()
	})
	cfg := httpConfig("web", ts.URL+"/mcp?key=${KEY}")
	reg := confirmingRegistry()
	secrets := audit.NewSecrets()
	connect(t, cfg, reg, &Options{LookupEnv: lookupURLSecret, Secrets: secrets})

	dead.Store(true)
	res := call(t, tool.NewExecutor(reg, nil), "web__echo", `{"text":"x"}`)
	if !res.IsError {
		t.Fatalf("echo to a dead server succeeded: %+v", res)
	}
	if strings.Contains(res.Message, urlSecret) || strings.Contains(res.Text(), urlSecret) {
		t.Errorf("error result %q reveals the expanded secret", res.Message)
	}
}

// The server's timeout ends a call over HTTP too, and the server hears of it.
func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	url := serveHTTP(t, demo.HTTPHandler(nil)) // one demo state for both sessions
	cfg := httpConfig("web", url)
	// The timeout bounds connecting too: a second, which a loaded machine
	// connects within (300 ms was not always enough).
	cfg.Timeout = time.Second
	reg := confirmingRegistry()
	connect(t, cfg, reg, nil)
	res := call(t, tool.NewExecutor(reg, nil), "web__wait_for_cancel", `{}`)
	if res.Reason != tool.ReasonTimeout || !strings.Contains(res.Message, "no answer within 1s") {
		t.Errorf("wait_for_cancel with a 1s timeout = Reason %q, Message %q", res.Reason, res.Message)
	}

	// A second session, with the default timeout, asks the shared demo
	// whether the timed-out call was cancelled on its side.
	observer := confirmingRegistry()
	connect(t, httpConfig("obs", url), observer, nil)
	if st := stats(t, tool.NewExecutor(observer, nil), "obs", 1); st.Cancelled < 1 {
		t.Errorf("server stats after the timeout = %+v, want cancelled >= 1", st)
	}
}
