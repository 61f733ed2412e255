package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// A call that is cancelled or runs out of time, followed at once by Close
// (as toolwire call does on Ctrl-C or a timeout), is announced to the
// server with notifications/cancelled before the session ends.
func TestCancelledCallIsAnnouncedBeforeClose(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"cancel", "deadline"} {
		t.Run("stdio/"+how, func(t *testing.T) {
			t.Parallel()
			cancels := filepath.Join(t.TempDir(), "cancels")
			cfg := stdioConfig("custom", "custom")
			cfg.Env[envCancels] = cancels
			writableBy(&cfg, cancels)
			reg := confirmingRegistry()
			s := connect(t, cfg, reg, nil)
			cancelThenClose(t, s, tool.NewExecutor(reg, nil), how)
			// Close waited for the child to exit: its record is complete.
			got, err := os.ReadFile(cancels)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			want := context.Canceled.Error() + "\n"
			if how == "deadline" {
				want = context.DeadlineExceeded.Error() + "\n"
			}
			if string(got) != want {
				t.Errorf("the server received cancellations with the reasons %q, want %q", got, want)
			}
		})
		// Over HTTP the session ends with a DELETE, over SSE when the
		// event stream's GET ends.
		for _, transport := range []string{"http", "sse"} {
			t.Run(transport+"/"+how, func(t *testing.T) {
				t.Parallel()
				release := make(chan struct{})
				srv := customServer(release)
				wire := &wireLog{}
				var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
				ended := "delete"
				if transport == "sse" {
					h, ended = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil), "stream ended"
				}
				url := serveHTTP(t, wire.wrap(h))
				t.Cleanup(func() { close(release) }) // before the server closes
				reg := confirmingRegistry()
				cfg := httpConfig("custom", url)
				cfg.Transport = config.Transport(transport)
				s := connect(t, cfg, reg, nil)
				cancelThenClose(t, s, tool.NewExecutor(reg, nil), how)
				// The server notices a GET ending some time after the client.
				waitFor(t, "the server saw the session end", func() bool { return slices.Contains(wire.snapshot(), ended) })
				got := wire.snapshot()
				if transport == "http" {
					// Its standalone stream ends with the session too.
					got = slices.DeleteFunc(got, func(e string) bool { return e == "stream ended" })
				}
				i := slices.IndexFunc(got, func(e string) bool { return strings.HasPrefix(e, "call ") })
				if i < 0 {
					t.Fatalf("the server saw no tools/call: %q", got)
				}
				id := strings.TrimPrefix(got[i], "call ")
				if want := []string{"call " + id, "cancelled " + id, ended}; !slices.Equal(got[i:], want) {
					t.Errorf("the server saw %q from the call on, want %q", got[i:], want)
				}
			})
		}
	}
}

// cancelThenClose starts a burst that blocks after its first report, ends
// it (how: "cancel" cancels its context, "deadline" lets a deadline pass)
// once that report proves the server's handler runs, and closes s as soon
// as the call has returned.
func cancelThenClose(t *testing.T, s *Server, ex *tool.Executor, how string) {
	t.Helper()
	parent := boundedCtx(t, waitTime)
	ctx, cancel := context.WithCancel(parent)
	wantReason := tool.ReasonCancelled
	if how == "deadline" {
		ctx, cancel = context.WithTimeout(parent, 2*time.Second)
		wantReason = tool.ReasonTimeout
	}
	defer cancel()
	rec := &recorder{first: make(chan struct{})}
	done := make(chan *tool.Result, 1)
	go func() { done <- ex.Call(tool.WithCaller(ctx, rec), "custom__burst", json.RawMessage(`{"n":1}`)) }()
	select {
	case <-rec.first:
	case res := <-done:
		t.Fatalf("the burst ended before its first report: %+v", res)
	}
	if how == "cancel" {
		cancel()
	}
	select {
	case res := <-done:
		if res.Reason != wantReason {
			t.Fatalf("the ended burst = Reason %q, Message %q; want %s", res.Reason, res.Message, wantReason)
		}
	case <-time.After(waitTime):
		t.Fatalf("the burst did not return once its context ended")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// wireLog records, in order of arrival, the tools/call requests (with
// their IDs), the notifications/cancelled (with the IDs they name), the
// session deletions and the ends of event streams (GETs) an HTTP handler
// receives.
type wireLog struct {
	mu     sync.Mutex
	events []string
}

func (l *wireLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			defer l.add("stream ended")
		case http.MethodDelete:
			l.add("delete")
		case http.MethodPost:
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					RequestID json.RawMessage `json:"requestId"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil {
				switch m.Method {
				case "tools/call":
					l.add("call " + string(m.ID))
				case "notifications/cancelled":
					l.add("cancelled " + string(m.Params.RequestID))
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (l *wireLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *wireLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}
