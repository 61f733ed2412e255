package mcpclient

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/tool"
)

// Calls that keep failing in the transport while the session still looks
// open (here: an HTTP front that answers tools/call with 503) count as a
// lost session after FailureThreshold in a row; the server reconnects and
// its tools work again once the front recovers.
func TestRepeatedTransportFailuresReconnect(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	h := demo.HTTPHandler(nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})

	changes := make(chan Status, 256)
	reg := confirmingRegistry()
	policy := ReconnectPolicy{MaxAttempts: 5, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, FailureThreshold: 3}
	s, err := Connect(boundedCtx(t, waitTime), config.Server{Name: "web", Transport: "http", URL: ts.URL}, reg, &Options{Reconnect: policy, StateChanges: changes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ex := tool.NewExecutor(reg, nil)
	ctx := boundedCtx(t, waitTime)
	awaitState(t, ctx, changes, "web", Ready) // drain the start

	broken.Store(true)
	for i := 1; i <= 2; i++ {
		res := call(t, ex, "web__echo", `{"text":"x"}`)
		if res.Reason != tool.ReasonFailed {
			t.Fatalf("call %d during the outage = %+v, want failed", i, res)
		}
		if st := s.State(); st != Ready {
			t.Fatalf("after %d failed call(s) the server is %s, want still ready", i, st)
		}
	}
	if res := call(t, ex, "web__echo", `{"text":"x"}`); res.Reason != tool.ReasonFailed {
		t.Fatalf("third call = %+v, want failed", res)
	}
	seen := awaitState(t, ctx, changes, "web", Degraded)
	if last := seen[len(seen)-1]; !strings.Contains(last.LastError, "3 calls in a row failed") {
		t.Errorf("degraded with last error %q, want it to say why", last.LastError)
	}
	broken.Store(false)
	awaitState(t, ctx, changes, "web", Ready)
	if res := call(t, ex, "web__echo", `{"text":"back"}`); res.IsError || res.Text() != "back" {
		t.Errorf("echo after reconnecting = %+v", res)
	}
}
