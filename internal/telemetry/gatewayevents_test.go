package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/tool"
)

// A session refused by the gateway's limit shows on /metrics as a refused
// session and a limit hit, named by the limit.
func TestRefusedSessionsAreCounted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tel, err := telemetry.New(ctx, &telemetry.Options{Version: "test", Prometheus: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())

	gw := gateway.New(tool.NewExecutor(tool.NewRegistry(nil), nil), nil)
	h := gw.Handler(&gateway.HTTPOptions{Limits: gateway.Limits{MaxSessions: 1}, Observe: tel.Metrics().GatewayEvents()})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	// A 2025-11-25 session: 2026-07-28 clients have none.
	first, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// One initialize by hand, so that exactly one request is refused (a
	// client library may retry).
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second session past max_sessions 1 got %s, want 503", resp.Status)
	}

	fams := scrape(t, tel.MetricsHandler())
	limit := map[string]string{"reason": gateway.LimitSessions}
	if m := sample(fams, "toolwire_sessions_refused_total", limit); m == nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("toolwire_sessions_refused_total%v = %v, want 1", limit, m)
	}
	hit := map[string]string{"limit": gateway.LimitSessions}
	if m := sample(fams, "toolwire_limits_hit_total", hit); m == nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("toolwire_limits_hit_total%v = %v, want 1", hit, m)
	}
}

// Counting the audit sink's writes does not keep the log from closing its
// file: closing the log closes the file beneath.
func TestCountedAuditSinkStillCloses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tel, err := telemetry.New(ctx, &telemetry.Options{Version: "test", Prometheus: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	fs, err := audit.OpenFile(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	log := audit.NewLog(tel.Metrics().Sink(fs), nil)
	if err := log.Record(audit.Event{Kind: audit.ServerStarted, Source: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fs.Write(&audit.Event{Kind: audit.ServerStopped, Source: "s"}); err == nil {
		t.Error("the file sink still takes events after the log was closed: it was never closed")
	}
}

// Counting a sink that writes batches keeps it one: the log still writes
// a call's request with its next event, and each event is counted.
func TestCountedAuditSinkKeepsItsBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tel, err := telemetry.New(ctx, &telemetry.Options{Version: "test", Prometheus: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(ctx)
	fs, err := audit.OpenFile(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	counted := tel.Metrics().Sink(fs)
	if _, ok := counted.(audit.BatchSink); !ok {
		t.Fatalf("the counted file sink (%T) no longer writes batches", counted)
	}
	if _, ok := tel.Metrics().Sink(&audit.Memory{}).(audit.BatchSink); ok {
		t.Error("a sink that writes no batches became one")
	}
}
