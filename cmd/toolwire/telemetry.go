package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/workspace"
)

// serveTelemetry sets up serve's telemetry: OTLP export as the OTEL_*
// variables say, and with metricsAddr the Prometheus endpoint on a
// listener of its own, outside the MCP listener and its authentication
// (scrapers do not carry MCP bearer tokens). stop ends both; it is never
// nil.
func serveTelemetry(ctx context.Context, e *env, g *globalFlags, metricsAddr string) (tel *telemetry.Telemetry, stop func(), err error) {
	tel, err = telemetry.New(ctx, &telemetry.Options{Version: buildVersion().Version, LookupEnv: e.lookupEnv, Prometheus: metricsAddr != ""})
	if err != nil {
		return nil, func() {}, &exitError{exitUsage, err}
	}
	stop = func() { _ = tel.Shutdown(context.Background()) }
	if metricsAddr == "" {
		return tel, stop, nil
	}
	ln, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		stop()
		return nil, func() {}, &exitError{exitUsage, fmt.Errorf("--metrics-listen %q: %w", metricsAddr, err)}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", tel.MetricsHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			newLogger(e.stderr, g, nil).Warn("serving metrics failed", "err", err)
		}
	}()
	fmt.Fprintf(e.stderr, "toolwire: serving metrics at http://%s/metrics\n", ln.Addr())
	return tel, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-done
		_ = tel.Shutdown(context.Background())
	}, nil
}

// withTelemetry gives the workspace and the gateway the hooks tel has
// (none when it is nil), and follows the upstreams' states.
func withTelemetry(ctx context.Context, tel *telemetry.Telemetry, wo *workspace.Options, gw *gateway.Options) {
	wo.Telemetry.Observer = tel.Observer()
	if m := tel.Metrics(); m != nil {
		wo.Telemetry.AuditSink = m.Sink
		ch := make(chan mcpclient.Status, 256)
		wo.StateChanges = ch
		go m.FollowUpstreams(ctx, ch)
	}
	if tel.Tracing() {
		wo.Telemetry.Middleware, wo.Telemetry.WrapTransport = tel.ClientMiddleware, tel.WrapTransport()
	}
	if mw := tel.ServerMiddleware(); mw != nil {
		gw.Middleware = []mcp.Middleware{mw}
	}
}
