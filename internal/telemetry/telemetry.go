// Package telemetry wires toolwire's traces and metrics to their
// exporters: an OpenTelemetry span for each MCP request the gateway
// serves, each tool call through validation and confirmation, and each
// request sent upstream, with W3C trace context taken from the caller and
// passed on to the upstream; and metrics of calls, approvals, sessions,
// upstreams, limits and the audit log, served in the Prometheus text
// format and pushed over OTLP when an endpoint is configured.
//
// The packages it instruments take small hooks only: a [tool.Observer],
// go-sdk middleware, an http.RoundTripper wrapper and an [audit.Sink]
// wrapper. A nil *Telemetry hands out none of them, so with telemetry off
// nothing of it runs on a call's path.
//
//	tel, err := telemetry.New(ctx, &telemetry.Options{Prometheus: true})
//	defer tel.Shutdown(context.Background())
//	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Observer: tel.Observer()})
//	http.Handle("/metrics", tel.MetricsHandler())
//
// Spans and metrics carry tool, server, tier, outcome and caller, never a
// call's arguments, results or error texts, which may hold personal data or
// secrets.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configures [New]. The zero value exports whatever the OTEL_*
// environment variables configure, and keeps no Prometheus metrics.
type Options struct {
	// Version is the service.version of the exported resource.
	Version string
	// LookupEnv reads the OTEL_* variables. Nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Prometheus keeps metrics for [Telemetry.MetricsHandler] even when
	// no OTLP metrics endpoint is configured.
	Prometheus bool
}

// Telemetry holds the trace and meter providers of one process. Its
// methods are safe for concurrent use, and on a nil *Telemetry return the
// nil hooks that mean "no telemetry".
type Telemetry struct {
	tp       *sdktrace.TracerProvider // nil: no traces
	mp       *sdkmetric.MeterProvider // nil: no metrics
	tracer   trace.Tracer             // nil with tp
	prop     propagation.TextMapPropagator
	metrics  *Metrics
	registry *prometheus.Registry // nil: no Prometheus endpoint
}

// instrumentation is the name of toolwire's tracer and meter.
const instrumentation = "github.com/toolwire/toolwire"

// New sets up what the options and the environment ask for, the way the
// OpenTelemetry SDKs read it: traces go to
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT plus
// /v1/traces; metrics likewise to .../v1/metrics (as well as Prometheus
// when asked); OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER "none" turns a
// signal off, and OTEL_SDK_DISABLED=true both. Only OTLP over HTTP with
// protobuf is spoken: another OTEL_EXPORTER_OTLP_PROTOCOL is an error
// naming it. The exporters read OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and
// the like themselves. With nothing configured New returns nil, which is
// a usable *Telemetry that does nothing.
func New(ctx context.Context, options *Options) (*Telemetry, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	env := envReader(opts.LookupEnv)
	disabled := strings.EqualFold(env("OTEL_SDK_DISABLED"), "true")
	traces, err := endpoint(env, "TRACES", "/v1/traces", disabled)
	if err != nil {
		return nil, err
	}
	metricsURL, err := endpoint(env, "METRICS", "/v1/metrics", disabled)
	if err != nil {
		return nil, err
	}
	if traces == "" && metricsURL == "" && !opts.Prometheus {
		return nil, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", serviceName(env)),
		attribute.String("service.version", opts.Version),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	t := &Telemetry{prop: propagation.TraceContext{}}
	if traces != "" {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(traces))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP trace exporter for %s: %w", traces, err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.tracer = t.tp.Tracer(instrumentation)
	}
	var readers []sdkmetric.Option
	var manual *sdkmetric.ManualReader
	if opts.Prometheus {
		manual = sdkmetric.NewManualReader()
		readers = append(readers, sdkmetric.WithReader(manual))
	}
	if metricsURL != "" {
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(metricsURL))
		if err != nil {
			_ = t.Shutdown(ctx)
			return nil, fmt.Errorf("telemetry: OTLP metric exporter for %s: %w", metricsURL, err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if len(readers) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		if t.metrics, err = newMetrics(t.mp.Meter(instrumentation)); err != nil {
			_ = t.Shutdown(ctx)
			return nil, err
		}
	}
	if manual != nil {
		t.registry = prometheus.NewRegistry()
		t.registry.MustRegister(&bridge{reader: manual}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return t, nil
}

// WithProviders returns telemetry recording through tp and mp (either nil
// for none) rather than through exporters of its own: for a program that
// has set up its providers already, and for comparing no-op providers in
// benchmarks. Shutting it down leaves the providers to their owner.
func WithProviders(tp trace.TracerProvider, mp metric.MeterProvider) (*Telemetry, error) {
	t := &Telemetry{prop: propagation.TraceContext{}}
	if tp != nil {
		t.tracer = tp.Tracer(instrumentation)
	}
	if mp != nil {
		var err error
		if t.metrics, err = newMetrics(mp.Meter(instrumentation)); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// endpoint returns the OTLP URL of one signal, or "" when it is off.
func endpoint(env func(string) string, signal, path string, disabled bool) (string, error) {
	if disabled {
		return "", nil
	}
	switch exporter := env("OTEL_" + signal + "_EXPORTER"); exporter {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", fmt.Errorf("OTEL_%s_EXPORTER %q: toolwire exports otlp or none", signal, exporter)
	}
	proto := env("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	name := "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	if proto == "" {
		proto, name = env("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	if proto != "" && proto != "http/protobuf" {
		return "", fmt.Errorf("%s %q: toolwire speaks OTLP over http/protobuf only", name, proto)
	}
	if u := env("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); u != "" {
		return checkURL("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT", u)
	}
	if u := env("OTEL_EXPORTER_OTLP_ENDPOINT"); u != "" {
		return checkURL("OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimRight(u, "/")+path)
	}
	return "", nil
}

func checkURL(name, u string) (string, error) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return "", fmt.Errorf("%s %q: want an http:// or https:// URL", name, u)
	}
	return u, nil
}

func serviceName(env func(string) string) string {
	if n := env("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "toolwire"
}

func envReader(lookup func(string) (string, bool)) func(string) string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
}

// Tracing reports whether spans are exported.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracer != nil }

// Metrics returns the process's metrics, or nil (whose methods do
// nothing) when none are kept.
func (t *Telemetry) Metrics() *Metrics {
	if t == nil {
		return nil
	}
	return t.metrics
}

// MetricsHandler serves the metrics in the Prometheus text format, or nil
// when [Options.Prometheus] was not set.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t == nil || t.registry == nil {
		return nil
	}
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ForceFlush exports the spans and metrics still buffered.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.ForceFlush(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes and stops the exporters, within ctx (bounded by 5 s
// when ctx has no deadline: an unreachable collector must not hold up the
// process's exit).
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
