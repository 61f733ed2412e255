package mcpclient

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/tool"
)

// A legacy HTTP+SSE server (protocol 2024-11-05) connects over the SDK's SSE
// client transport, with headers and the bearer token on its requests.
func TestSSEConnectAndCall(t *testing.T) {
	t.Parallel()
	srv := demo.NewServer(nil)
	var sawAuth, sawTeam bool
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer sse-token" {
			sawAuth = true
		}
		if r.Header.Get("X-Team") == "blue" {
			sawTeam = true
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	reg := confirmingRegistry()
	s, err := Connect(boundedCtx(t, waitTime), config.Server{
		Name: "legacy", Transport: "sse", URL: ts.URL,
		Headers: map[string]string{"X-Team": "blue"}, BearerToken: "sse-token",
	}, reg, nil)
	if err != nil {
		t.Fatalf("Connect over SSE: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if !reg.Has("legacy__echo") || !reg.Has("legacy__delete_note") {
		t.Fatalf("registry after SSE connect: %v", toolNames(reg))
	}
	ex := tool.NewExecutor(reg, nil)
	if res := call(t, ex, "legacy__echo", `{"text":"over sse"}`); res.IsError || res.Text() != "over sse" {
		t.Errorf("echo over SSE = %+v", res)
	}
	res := call(t, ex, "legacy__fail", `{"reason":"sse"}`)
	if !res.IsError || res.Reason != tool.ReasonTool || !strings.Contains(res.Message, "demo failure: sse") {
		t.Errorf("fail over SSE = %+v", res)
	}
	if !sawAuth || !sawTeam {
		t.Errorf("SSE requests carried bearer=%v header=%v, want both", sawAuth, sawTeam)
	}
	if got := s.Status().Transport; got != "sse" {
		t.Errorf("Status().Transport = %q", got)
	}
}
