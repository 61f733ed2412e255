package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// secretArg is an argument value that must appear in no span.
const secretArg = "s3cret-argument-value-7f3a"

// receiver is an OTLP/HTTP collector: it decodes the protobuf export
// requests the SDK posts and keeps their raw bytes too.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	raw   [][]byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.URL.Path == "/v1/traces" {
			var ex coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &ex); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.mu.Lock()
			for _, rs := range ex.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					r.spans = append(r.spans, ss.Spans...)
				}
			}
			r.raw = append(r.raw, body)
			r.mu.Unlock()
			out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(out)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) snapshot() ([]*tracepb.Span, [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([][]byte(nil), r.raw...)
}

// seen is what the upstream's tool handler received of the trace context.
type seen struct {
	mu                  sync.Mutex
	header, meta, state string
}

// rig is a gateway over HTTP in front of one Streamable HTTP upstream,
// instrumented by one Telemetry, with a caller authenticated as alice.
type rig struct {
	tel     *telemetry.Telemetry
	gateway string // URL of /mcp
	seen    *seen
	sink    *audit.Memory
	token   string
}

func newRig(t *testing.T, env map[string]string) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	tel, err := telemetry.New(ctx, &telemetry.Options{Version: "test", Prometheus: true, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })

	r := &rig{tel: tel, seen: &seen{}, sink: &audit.Memory{}, token: "tok-alice"}
	upSrv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	upSrv.AddTool(&mcp.Tool{
		Name:        "lookup",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r.seen.mu.Lock()
		if req.Extra != nil {
			r.seen.header = req.Extra.Header.Get("traceparent")
		}
		r.seen.meta, _ = req.Params.Meta["traceparent"].(string)
		r.seen.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upSrv }, nil))
	t.Cleanup(up.Close)

	reg := tool.NewRegistry(nil)
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Observer: tel.Observer(), Audit: audit.NewLog(tel.Metrics().Sink(r.sink), nil)})
	server, err := mcpclient.Connect(ctx, config.Server{Name: "upstream", Transport: "http", URL: up.URL, DefaultTier: "read"}, reg, &mcpclient.Options{
		Middleware: tel.ClientMiddleware, WrapTransport: tel.WrapTransport(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })

	verifier, err := gateway.StaticVerifier([]gateway.StaticToken{{SHA256: gateway.HashToken(r.token), Subject: "alice", Role: "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(ex, &gateway.Options{Middleware: []mcp.Middleware{tel.ServerMiddleware()}})
	h := gw.Handler(&gateway.HTTPOptions{Verifier: verifier, Roles: gateway.Roles{"ops": {"*"}}})
	t.Cleanup(h.Close)
	gs := httptest.NewServer(h)
	t.Cleanup(gs.Close)
	r.gateway = gs.URL + "/mcp"
	return r
}

// headers sets fixed headers on every request.
type headers struct {
	set  map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.set {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// connect opens a client session (2025-11-25: the session metrics count
// sessions) to the gateway whose every request carries traceparent (when
// not empty) and the bearer token.
func (r *rig) connect(t *testing.T, traceparent string) *mcp.ClientSession {
	t.Helper()
	set := map[string]string{"Authorization": "Bearer " + r.token}
	if traceparent != "" {
		set["traceparent"] = traceparent
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.gateway, HTTPClient: &http.Client{Transport: headers{set, http.DefaultTransport}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "upstream__lookup", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

func TestSpansFollowACallFromTheClientToTheUpstream(t *testing.T) {
	t.Parallel()
	recv := newReceiver(t)
	r := newRig(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cs := r.connect(t, "00-"+traceID+"-"+parentID+"-01")
	if res := call(t, cs, map[string]any{"query": secretArg}); res.IsError {
		t.Fatalf("call failed: %+v", res.Content)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans, raw := recv.snapshot()
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			byName[s.Name] = s
		}
	}
	want := func(name string, kind tracepb.Span_SpanKind, parent []byte) *tracepb.Span {
		t.Helper()
		s := byName[name]
		if s == nil {
			var names []string
			for n := range byName {
				names = append(names, n)
			}
			t.Fatalf("no span %q in trace %s; spans: %q", name, traceID, names)
		}
		if s.Kind != kind {
			t.Errorf("span %q: kind %v, want %v", name, s.Kind, kind)
		}
		if !bytes.Equal(s.ParentSpanId, parent) {
			t.Errorf("span %q: parent %x, want %x", name, s.ParentSpanId, parent)
		}
		return s
	}
	incoming, _ := hex.DecodeString(parentID)
	down := want("tools/call", tracepb.Span_SPAN_KIND_SERVER, incoming)
	if a := attrs(down); a["toolwire.caller"] != "alice" || a["toolwire.outcome"] != "ok" {
		t.Errorf("downstream span attributes %v: want caller alice, outcome ok", a)
	}
	exec := want("execute_tool upstream__lookup", tracepb.Span_SPAN_KIND_INTERNAL, down.SpanId)
	wantAttrs := map[string]string{"toolwire.tool": "upstream__lookup", "toolwire.server": "upstream", "toolwire.tier": "read", "toolwire.outcome": "ok", "toolwire.caller": "alice"}
	got := attrs(exec)
	for k, v := range wantAttrs {
		if got[k] != v {
			t.Errorf("tool call span: %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	want("validate", tracepb.Span_SPAN_KIND_INTERNAL, exec.SpanId)
	upCall := want("tools/call lookup", tracepb.Span_SPAN_KIND_CLIENT, exec.SpanId)
	if a := attrs(upCall); a["toolwire.server"] != "upstream" {
		t.Errorf("upstream span attributes %v: want server upstream", a)
	}

	// The upstream continues the upstream span's trace, from the HTTP
	// header and from _meta alike.
	wantTP := "00-" + traceID + "-" + hex.EncodeToString(upCall.SpanId) + "-01"
	r.seen.mu.Lock()
	header, meta := r.seen.header, r.seen.meta
	r.seen.mu.Unlock()
	if header != wantTP || meta != wantTP {
		t.Errorf("upstream saw traceparent header %q and _meta.traceparent %q, want %q for both", header, meta, wantTP)
	}

	// No argument value is exported, though the tool's name is.
	all := bytes.Join(raw, nil)
	if !bytes.Contains(all, []byte("upstream__lookup")) {
		t.Fatal("the export requests do not name the tool: the search below would prove nothing")
	}
	if bytes.Contains(all, []byte(secretArg)) {
		t.Error("an argument value was exported in a span")
	}
}

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	ms := httptest.NewServer(h)
	defer ms.Close()
	resp, err := http.Get(ms.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample returns the metric of family name whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func TestMetricsShowTheCallsJustMade(t *testing.T) {
	t.Parallel()
	r := newRig(t, nil)
	cs := r.connect(t, "")
	for range 2 {
		if res := call(t, cs, map[string]any{"query": "x"}); res.IsError {
			t.Fatalf("call failed: %+v", res.Content)
		}
	}
	if res := call(t, cs, map[string]any{"query": 7}); !res.IsError {
		t.Fatal("a call with a number for a string was not refused")
	}
	fams := scrape(t, r.tel.MetricsHandler())

	ok := map[string]string{"tool": "upstream__lookup", "server": "upstream", "tier": "read", "outcome": "ok"}
	if m := sample(fams, "toolwire_calls_total", ok); m == nil || m.GetCounter().GetValue() != 2 {
		t.Errorf("toolwire_calls_total%v = %v, want 2", ok, m)
	}
	bad := map[string]string{"tool": "upstream__lookup", "outcome": "invalid_arguments"}
	if m := sample(fams, "toolwire_calls_total", bad); m == nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("toolwire_calls_total%v = %v, want 1", bad, m)
	}
	if m := sample(fams, "toolwire_call_duration_seconds", ok); m == nil || m.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("toolwire_call_duration_seconds%v = %v, want 2 samples", ok, m)
	}
	if m := sample(fams, "toolwire_sessions_opened_total", nil); m == nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("toolwire_sessions_opened_total = %v, want 1", m)
	}
	if m := sample(fams, "toolwire_sessions_open", nil); m == nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("toolwire_sessions_open = %v, want 1", m)
	}
	// call.requested, validation.passed and call.executed twice, then
	// call.requested and validation.failed.
	if m := sample(fams, "toolwire_audit_writes_total", map[string]string{"kind": "call.requested"}); m == nil || m.GetCounter().GetValue() != 3 {
		t.Errorf("toolwire_audit_writes_total{kind=call.requested} = %v, want 3", m)
	}
	for name := range fams {
		if strings.Contains(name, "telemetry_error") {
			t.Errorf("the scrape reports a collection error: %v", fams[name])
		}
	}
}
