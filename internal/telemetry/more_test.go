package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func newTelemetry(t *testing.T, env map[string]string) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(context.Background(), &telemetry.Options{Prometheus: true, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// failingSink fails every write.
type failingSink struct{}

func (failingSink) Write(*audit.Event) error { return errors.New("disk full") }

// A write tool served over stdio-like transport (in memory): approvals are
// counted and traced, and the trace continues the client's
// _meta.traceparent, since there is no HTTP header.
func TestApprovalsAndMetaTraceparent(t *testing.T) {
	t.Parallel()
	recv := newReceiver(t)
	tel := newTelemetry(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": recv.URL + "/v1/traces"})
	var n atomic.Int32
	approveFirst := tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) { return n.Add(1) == 1, nil })
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: approveFirst})
	if err := reg.Register(&tool.Tool{Name: "note", Tier: tool.Write, InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }}); err != nil {
		t.Fatal(err)
	}
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Observer: tel.Observer(), Audit: audit.NewLog(tel.Metrics().Sink(failingSink{}), &audit.LogOptions{Logger: slog.New(slog.DiscardHandler)})})
	gw := gateway.New(ex, &gateway.Options{Middleware: []mcp.Middleware{tel.ServerMiddleware()}})
	srv, stop := gw.Server(nil)
	defer stop()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for i := range 2 {
		p := &mcp.CallToolParams{Name: "note", Arguments: map[string]any{"text": secretArg}}
		p.Meta = map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01"}
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError != (i == 1) {
			t.Fatalf("call %d: isError %v, want %v", i, res.IsError, i == 1)
		}
	}

	fams := scrape(t, tel.MetricsHandler())
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"toolwire_approvals_asked_total", map[string]string{"tool": "note", "tier": "write"}, 2},
		{"toolwire_approvals_total", map[string]string{"tool": "note", "decision": "granted"}, 1},
		{"toolwire_approvals_total", map[string]string{"tool": "note", "decision": "denied"}, 1},
		{"toolwire_calls_total", map[string]string{"tool": "note", "tier": "write", "outcome": "ok"}, 1},
		{"toolwire_calls_total", map[string]string{"tool": "note", "tier": "write", "outcome": "declined"}, 1},
		{"toolwire_audit_failures_total", map[string]string{"kind": "call.requested"}, 2},
	}
	for _, c := range checks {
		m := sample(fams, c.name, c.labels)
		if m == nil || m.GetCounter().GetValue() != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, m, c.want)
		}
	}
	if m := sample(fams, "toolwire_audit_writes_total", nil); m != nil {
		t.Errorf("a failing sink counted writes: %v", m)
	}

	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans, raw := recv.snapshot()
	var down, confirms []*tracepb.Span
	execs := map[string]*tracepb.Span{}
	for _, s := range spans {
		switch s.Name {
		case "tools/call":
			down = append(down, s)
		case "execute_tool note":
			execs[hex.EncodeToString(s.SpanId)] = s
		case "confirm":
			confirms = append(confirms, s)
		}
	}
	if len(down) != 2 || len(execs) != 2 || len(confirms) != 2 {
		t.Fatalf("got %d request, %d call and %d confirm spans, want 2 of each", len(down), len(execs), len(confirms))
	}
	for _, s := range down {
		if hex.EncodeToString(s.TraceId) != traceID || hex.EncodeToString(s.ParentSpanId) != parentID {
			t.Errorf("request span in trace %x under %x, want %s under %s (from _meta)", s.TraceId, s.ParentSpanId, traceID, parentID)
		}
	}
	outcomes := map[string]bool{}
	for _, c := range confirms {
		e := execs[hex.EncodeToString(c.ParentSpanId)]
		if e == nil {
			t.Fatalf("confirm span's parent %x is no call span", c.ParentSpanId)
		}
		outcomes[attrs(e)["toolwire.outcome"]] = true
	}
	if !outcomes["ok"] || !outcomes["declined"] {
		t.Errorf("call span outcomes %v, want ok and declined", outcomes)
	}
	for _, b := range raw {
		if bytes.Contains(b, []byte(secretArg)) {
			t.Error("an argument value was exported in a span")
		}
	}
}

func TestSessionsOpenFallsWhenTheSessionCloses(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	cs := r.connect(t, "")
	open := func() float64 {
		if m := sample(scrape(t, r.tel.MetricsHandler()), "toolwire_sessions_open", nil); m != nil {
			return m.GetGauge().GetValue()
		}
		return -1
	}
	if got := open(); got != 1 {
		t.Fatalf("toolwire_sessions_open = %v with a session open, want 1", got)
	}
	_ = cs.Close() // DELETE ends the session on the gateway
	deadline := time.Now().Add(10 * time.Second)
	for open() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("toolwire_sessions_open = %v 10 s after the session closed, want 0", open())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestUpstreamReconnectsAreCounted(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t, nil)
	m := tel.Metrics()
	states := []mcpclient.State{mcpclient.Connecting, mcpclient.Ready, mcpclient.Degraded, mcpclient.Reconnecting, mcpclient.Connecting, mcpclient.Ready, mcpclient.Degraded, mcpclient.Reconnecting, mcpclient.Ready}
	ch := make(chan mcpclient.Status, len(states)+1)
	for _, s := range states {
		ch <- mcpclient.Status{Name: "up", State: s}
	}
	ch <- mcpclient.Status{Name: "other", State: mcpclient.Ready} // a first start is no reconnect
	close(ch)
	m.FollowUpstreams(context.Background(), ch)
	m.ObserveUpstreams(func() []mcpclient.Status { return []mcpclient.Status{{Name: "up", State: mcpclient.Degraded}} })
	fams := scrape(t, tel.MetricsHandler())
	if got := sample(fams, "toolwire_upstream_reconnects_total", map[string]string{"server": "up"}); got == nil || got.GetCounter().GetValue() != 2 {
		t.Errorf("toolwire_upstream_reconnects_total{server=up} = %v, want 2", got)
	}
	if got := sample(fams, "toolwire_upstream_reconnects_total", map[string]string{"server": "other"}); got != nil {
		t.Errorf("a first start counted as a reconnect: %v", got)
	}
	for state, want := range map[string]float64{"degraded": 1, "ready": 0} {
		if got := sample(fams, "toolwire_upstream_state", map[string]string{"server": "up", "state": state}); got == nil || got.GetGauge().GetValue() != want {
			t.Errorf("toolwire_upstream_state{server=up,state=%s} = %v, want %v", state, got, want)
		}
	}
}

func TestEnvironmentChoosesTheExporters(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env     map[string]string
		off     bool   // New returns nil: nothing to do
		wantErr string // a substring of the error
	}{
		{env: nil, off: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, off: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, off: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL "grpc"`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "127.0.0.1:4318"}, wantErr: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "127.0.0.1:4318": want an http:// or https:// URL`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER "zipkin"`},
	} {
		tel, err := telemetry.New(context.Background(), &telemetry.Options{LookupEnv: func(k string) (string, bool) {
			v, ok := c.env[k]
			return v, ok
		}})
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("env %v: error %v, want one saying %s", c.env, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("env %v: %v", c.env, err)
		case c.off != (tel == nil):
			t.Errorf("env %v: telemetry %v, want off=%v", c.env, tel, c.off)
		}
		_ = tel.Shutdown(context.Background())
	}
}
