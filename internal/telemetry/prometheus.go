package telemetry

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// bridge serves the instruments' current values to a Prometheus scrape:
// the metrics are recorded once, through OpenTelemetry, and read here at
// scrape time from a manual reader (cumulative), so the Prometheus and the
// OTLP views cannot disagree.
type bridge struct {
	reader *sdkmetric.ManualReader
}

// Describe sends nothing: the families are known only at collection, which
// makes this an unchecked collector.
func (b *bridge) Describe(chan<- *prometheus.Desc) {}

func (b *bridge) Collect(ch chan<- prometheus.Metric) {
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(context.Background(), &rm); err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("toolwire_telemetry_error", "Reading the metrics failed.", nil, nil), err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			collect(ch, m)
		}
	}
}

// promName maps an instrument's name to the Prometheus convention.
func promName(m metricdata.Metrics, counter bool) string {
	name := strings.ReplaceAll(m.Name, ".", "_")
	if m.Unit == "s" {
		name += "_seconds"
	}
	if counter {
		name += "_total"
	}
	return name
}

func labels(set attribute.Set) (keys, values []string) {
	for _, kv := range set.ToSlice() {
		keys = append(keys, strings.ReplaceAll(string(kv.Key), ".", "_"))
		values = append(values, kv.Value.Emit())
	}
	return keys, values
}

func collect(ch chan<- prometheus.Metric, m metricdata.Metrics) {
	switch data := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range data.DataPoints {
			point(ch, m, data.IsMonotonic, dp.Attributes, float64(dp.Value))
		}
	case metricdata.Sum[float64]:
		for _, dp := range data.DataPoints {
			point(ch, m, data.IsMonotonic, dp.Attributes, dp.Value)
		}
	case metricdata.Gauge[int64]:
		for _, dp := range data.DataPoints {
			point(ch, m, false, dp.Attributes, float64(dp.Value))
		}
	case metricdata.Gauge[float64]:
		for _, dp := range data.DataPoints {
			point(ch, m, false, dp.Attributes, dp.Value)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range data.DataPoints {
			keys, values := labels(dp.Attributes)
			desc := prometheus.NewDesc(promName(m, false), m.Description, keys, nil)
			buckets := make(map[float64]uint64, len(dp.Bounds))
			var cum uint64
			for i, bound := range dp.Bounds {
				cum += dp.BucketCounts[i]
				buckets[bound] = cum
			}
			// The last OpenTelemetry bucket is +Inf, which Prometheus
			// derives from the count.
			ch <- prometheus.MustNewConstHistogram(desc, dp.Count, dp.Sum, buckets, values...)
		}
	}
}

func point(ch chan<- prometheus.Metric, m metricdata.Metrics, counter bool, set attribute.Set, v float64) {
	keys, values := labels(set)
	typ := prometheus.GaugeValue
	if counter {
		typ = prometheus.CounterValue
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(promName(m, counter), m.Description, keys, nil), typ, v, values...)
}
