//go:build unix

package tool_test

// What telemetry costs a call, in the executor alone (an in-process
// handler, no audit):
//
//	go test -run='^$' -bench=ExecutorTelemetry -benchmem -count=6 ./tool/
//
// telemetry=off is no observer at all, as toolwire runs without
// --metrics-listen or an OTLP endpoint; noop is the observer over
// OpenTelemetry's no-op providers (the instrumentation's own cost); on is
// the observer over the SDK's providers, spans batched to an exporter that
// drops them and metrics aggregated for a reader, as when exporting.

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolwire/toolwire/internal/benchkit"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/tool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// dropSpans is a span exporter that keeps nothing.
type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }

func BenchmarkExecutorTelemetry(b *testing.B) {
	for _, mode := range []string{"off", "noop", "on"} {
		b.Run("telemetry="+mode, func(b *testing.B) {
			var obs tool.Observer
			switch mode {
			case "noop":
				tel, err := telemetry.WithProviders(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider())
				if err != nil {
					b.Fatal(err)
				}
				obs = tel.Observer()
			case "on":
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(dropSpans{}))
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
				tel, err := telemetry.WithProviders(tp, mp)
				if err != nil {
					b.Fatal(err)
				}
				obs = tel.Observer()
			}
			reg := tool.NewRegistry(nil)
			err := reg.Register(&tool.Tool{
				Name: "bench__echo", InputSchema: json.RawMessage(benchEchoSchema), Tier: tool.Read,
				Origin: tool.Origin{Source: "bench", Name: "echo"}, Handler: benchHandler,
			})
			if err != nil {
				b.Fatal(err)
			}
			ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Observer: obs})
			ctx := context.Background()
			for range 100 { // warm-up
				if res := ex.Call(ctx, "bench__echo", benchArgs); res.IsError {
					b.Fatalf("call failed: %s", res.Message)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := benchkit.CPU(b)
			for i := 0; i < b.N; i++ {
				if res := ex.Call(ctx, "bench__echo", benchArgs); res.IsError {
					b.Fatalf("call failed: %s", res.Message)
				}
			}
			cpu := benchkit.CPU(b) - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
