package mcpclient

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/tool"
)

// A redirect to another origin (here the same host on another port) is
// followed without the configured bearer token and headers: they are added
// only to requests for the configured origin.
func TestCredentialsStayWithTheConfiguredOrigin(t *testing.T) {
	t.Parallel()
	var leaked, reachedOther atomic.Bool
	h := demo.HTTPHandler(nil)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reachedOther.Store(true)
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Team") != "" {
			leaked.Store(true)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { other.CloseClientConnections(); other.Close() })
	var sawAuth atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer front-token" && r.Header.Get("X-Team") == "blue" {
			sawAuth.Store(true)
		}
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(front.Close)

	reg := confirmingRegistry()
	s, err := Connect(boundedCtx(t, waitTime), config.Server{
		Name: "moved", Transport: "http", URL: front.URL + "/mcp",
		BearerToken: "front-token", Headers: map[string]string{"X-Team": "blue"},
	}, reg, nil)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
		if res := call(t, tool.NewExecutor(reg, nil), "moved__echo", `{"text":"hi"}`); res.IsError {
			t.Errorf("echo through the redirect = %+v", res)
		}
	}
	if !sawAuth.Load() {
		t.Fatalf("the configured origin never received the credentials (connect error: %v)", err)
	}
	if !reachedOther.Load() {
		t.Fatalf("the redirect was not followed (connect error: %v)", err)
	}
	if leaked.Load() {
		t.Error("the bearer token or the configured header reached another origin")
	}
}
