package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// okHandler returns a text result and ignores its arguments.
func okHandler(_ context.Context, _ json.RawMessage) (*tool.Result, error) {
	return tool.TextResult("ok"), nil
}

// recorder is a handler that remembers every call it receives.
type recorder struct {
	mu   sync.Mutex
	args []json.RawMessage
}

func (r *recorder) handle(_ context.Context, args json.RawMessage) (*tool.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.args = append(r.args, append(json.RawMessage(nil), args...))
	return tool.TextResult("ok"), nil
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.args)
}

func (r *recorder) last(t *testing.T) json.RawMessage {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.args) == 0 {
		t.Fatal("handler was never called")
	}
	return r.args[len(r.args)-1]
}

// confirmRecorder is a Confirmer that answers with a fixed decision and
// remembers what it was shown.
type confirmRecorder struct {
	mu      sync.Mutex
	answer  bool
	err     error
	panicV  any
	pending []tool.PendingCall
}

func (c *confirmRecorder) Confirm(_ context.Context, call tool.PendingCall) (bool, error) {
	c.mu.Lock()
	c.pending = append(c.pending, call)
	c.mu.Unlock()
	if c.panicV != nil {
		panic(c.panicV)
	}
	return c.answer, c.err
}

func (c *confirmRecorder) seen() []tool.PendingCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]tool.PendingCall(nil), c.pending...)
}

// newRegistry returns a registry with confirmer c (nil for none) holding
// tools, failing the test if registration fails.
func newRegistry(t *testing.T, c tool.Confirmer, tools ...*tool.Tool) *tool.Registry {
	t.Helper()
	var opts *tool.RegistryOptions
	if c != nil {
		opts = &tool.RegistryOptions{Confirmer: c}
	}
	reg := tool.NewRegistry(opts)
	if err := reg.RegisterAll(tools); err != nil {
		t.Fatalf("RegisterAll: %v", err)
	}
	return reg
}

// quietLogger returns a logger writing into a buffer the test can inspect,
// so expected panics do not clutter the test output.
func quietLogger() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, nil)), buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var _ io.Writer = (*syncBuffer)(nil)

// newAuditedExecutor returns an executor over reg whose audit events land in
// the returned Memory.
func newAuditedExecutor(reg *tool.Registry, logArgs bool) (*tool.Executor, *audit.Memory) {
	mem := &audit.Memory{}
	logger, _ := quietLogger()
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{
		Audit:        audit.NewLog(mem, &audit.LogOptions{Logger: logger}),
		LogArguments: logArgs,
		Logger:       logger,
	})
	return ex, mem
}

// kinds returns the Kind of each event, in order.
func kinds(evs []audit.Event) []audit.Kind {
	out := make([]audit.Kind, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

// testContext returns a context that ends well before the test binary's
// timeout, so a test waiting on a broken interleaving fails instead of
// hanging.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wait blocks until ch is closed or ctx ends, reporting which.
func wait(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// wantError checks that res is an error result with the given reason.
func wantError(t *testing.T, res *tool.Result, reason tool.Reason) {
	t.Helper()
	if res == nil {
		t.Fatal("result is nil")
	}
	if !res.IsError {
		t.Fatalf("result is not an error, want reason %q: %+v", reason, res)
	}
	if res.Reason != reason {
		t.Fatalf("reason = %q, want %q (message %q)", res.Reason, reason, res.Message)
	}
	if res.Message == "" {
		t.Errorf("error result with reason %q has an empty message", reason)
	}
}

// wantText checks that res is a successful result whose text is want.
func wantText(t *testing.T, res *tool.Result, want string) {
	t.Helper()
	if res == nil {
		t.Fatal("result is nil")
	}
	if res.IsError {
		t.Fatalf("result is an error (%s): %s", res.Reason, res.Message)
	}
	if got := res.Text(); got != want {
		t.Fatalf("result text = %q, want %q", got, want)
	}
}
