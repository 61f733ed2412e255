package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/tool"
)

// Issue 22.15: once the signal to stop comes, a gateway with a drain delay
// answers 503 on /readyz while it still serves everything else as
// before (a new session is opened, not refused as draining), so that a
// load balancer sees it before the listener closes; then it drains and
// Serve returns.
func TestDrainDelayIsUnreadyWhileServing(t *testing.T) {
	t.Parallel()
	h := New(tool.NewExecutor(tool.NewRegistry(nil), nil), nil).Handler(nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	unready := make(chan struct{})
	go func() {
		_, err := h.Serve(ctx, ln, &ServeOptions{DrainDelay: 3 * time.Second, Unready: func() { close(unready) }})
		done <- err
	}()
	get := func(path string) int {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(ReadinessPath); code != http.StatusOK {
		t.Fatalf("/readyz before the signal: %d", code)
	}
	stop()
	select {
	case <-unready:
	case <-time.After(time.Minute):
		t.Fatal("the gateway did not turn unready after the signal")
	}
	if code := get(ReadinessPath); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the drain delay: %d, want 503", code)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("a new session during the drain delay: %d, want it opened (200 with a session)", resp.StatusCode)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after the delay and the drain")
	}
}
