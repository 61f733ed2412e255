package telemetry

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/mcpclient"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics records what toolwire does, as OpenTelemetry instruments read
// by the Prometheus endpoint and the OTLP exporter alike. A nil *Metrics
// records nothing, so callers need not check whether metrics are on.
//
// The names below are the OpenTelemetry ones; Prometheus sees dots as
// underscores, counters with _total and durations with _seconds
// (toolwire.calls is toolwire_calls_total).
type Metrics struct {
	calls          metric.Int64Counter     // toolwire.calls{tool,server,tier,outcome}
	duration       metric.Float64Histogram // toolwire.call.duration{tool,server,tier,outcome}
	approvalsAsked metric.Int64Counter     // toolwire.approvals.asked{tool,tier}
	approvals      metric.Int64Counter     // toolwire.approvals{tool,tier,decision}
	sessionsOpened metric.Int64Counter     // toolwire.sessions.opened
	sessionsOpen   metric.Int64UpDownCounter
	sessionsRefuse metric.Int64Counter // toolwire.sessions.refused{reason}
	sessionsExpire metric.Int64Counter // toolwire.sessions.expired
	reconnects     metric.Int64Counter // toolwire.upstream.reconnects{server}
	limits         metric.Int64Counter // toolwire.limits.hit{limit}
	auditWrites    metric.Int64Counter // toolwire.audit.writes{kind}
	auditFailures  metric.Int64Counter // toolwire.audit.failures{kind}
	upstreamState  metric.Int64ObservableGauge

	mu        sync.Mutex
	upstreams func() []mcpclient.Status // read at each collection
	wasReady  map[string]bool           // servers seen ready, for reconnects
}

// durationBuckets suit tool calls: from a local tool's milliseconds to the
// default 60 s timeout of a slow upstream.
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// upstreamStates are the states toolwire_upstream_state reports, one
// series per server and state, 1 for the server's current one.
var upstreamStates = []mcpclient.State{
	mcpclient.Configured, mcpclient.Connecting, mcpclient.Initializing, mcpclient.Discovering,
	mcpclient.Ready, mcpclient.Degraded, mcpclient.Reconnecting, mcpclient.Failed, mcpclient.Stopped,
}

func newMetrics(meter metric.Meter) (*Metrics, error) {
	m := &Metrics{wasReady: map[string]bool{}}
	var errs errList
	m.calls = errs.counter(meter, "toolwire.calls", "Tool calls by tool, server, tier and outcome (ok, or the result's reason).")
	var err error
	m.duration, err = meter.Float64Histogram("toolwire.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Tool call latency, from the request to the result, by tool, server, tier and outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	errs.add(err)
	m.approvalsAsked = errs.counter(meter, "toolwire.approvals.asked", "Write and destructive calls shown to the approver.")
	m.approvals = errs.counter(meter, "toolwire.approvals", "Approval decisions: granted or denied.")
	m.sessionsOpened = errs.counter(meter, "toolwire.sessions.opened", "Downstream MCP sessions initialized.")
	m.sessionsOpen, err = meter.Int64UpDownCounter("toolwire.sessions.open", metric.WithDescription("Downstream MCP sessions open now."))
	errs.add(err)
	m.sessionsRefuse = errs.counter(meter, "toolwire.sessions.refused", "Downstream sessions refused, by reason.")
	m.sessionsExpire = errs.counter(meter, "toolwire.sessions.expired", "Downstream sessions ended by their idle timeout.")
	m.reconnects = errs.counter(meter, "toolwire.upstream.reconnects", "Upstream servers that reconnected after losing their session.")
	m.limits = errs.counter(meter, "toolwire.limits.hit", "Requests refused by a limit, by limit.")
	m.auditWrites = errs.counter(meter, "toolwire.audit.writes", "Audit events written, by kind.")
	m.auditFailures = errs.counter(meter, "toolwire.audit.failures", "Audit events the sink failed to store, by kind.")
	m.upstreamState, err = meter.Int64ObservableGauge("toolwire.upstream.state",
		metric.WithDescription("1 for each upstream server's current state, 0 for its others."),
		metric.WithInt64Callback(m.observeUpstreams))
	errs.add(err)
	return m, errs.err
}

type errList struct{ err error }

func (e *errList) add(err error) {
	if err != nil && e.err == nil {
		e.err = err
	}
}

func (e *errList) counter(meter metric.Meter, name, desc string) metric.Int64Counter {
	c, err := meter.Int64Counter(name, metric.WithDescription(desc))
	e.add(err)
	return c
}

// call records one finished tool call.
func (m *Metrics) call(ctx context.Context, attrs attribute.Set, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.Add(ctx, 1, metric.WithAttributeSet(attrs))
	m.duration.Record(ctx, d.Seconds(), metric.WithAttributeSet(attrs))
}

func (m *Metrics) approvalAsked(ctx context.Context, tool, tier string) {
	if m == nil {
		return
	}
	m.approvalsAsked.Add(ctx, 1, metric.WithAttributes(attribute.String("tool", tool), attribute.String("tier", tier)))
}

func (m *Metrics) approvalDecided(ctx context.Context, tool, tier string, granted bool) {
	if m == nil {
		return
	}
	decision := "denied"
	if granted {
		decision = "granted"
	}
	m.approvals.Add(ctx, 1, metric.WithAttributes(attribute.String("tool", tool), attribute.String("tier", tier), attribute.String("decision", decision)))
}

// SessionOpened counts a downstream session that was initialized; call
// SessionClosed when it ends.
func (m *Metrics) SessionOpened(ctx context.Context) {
	if m == nil {
		return
	}
	m.sessionsOpened.Add(ctx, 1)
	m.sessionsOpen.Add(ctx, 1)
}

// SessionClosed counts a downstream session that ended, however it ended.
func (m *Metrics) SessionClosed(ctx context.Context) {
	if m == nil {
		return
	}
	m.sessionsOpen.Add(ctx, -1)
}

// SessionRefused counts a new session refused; reason is a short fixed
// name (max_sessions, max_sessions_per_caller, draining), never anything
// a caller sent.
func (m *Metrics) SessionRefused(ctx context.Context, reason string) {
	if m == nil {
		return
	}
	m.sessionsRefuse.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}

// SessionExpired counts a session ended by its idle timeout (it is also
// closed: call SessionClosed too, or let the session's end do it).
func (m *Metrics) SessionExpired(ctx context.Context) {
	if m == nil {
		return
	}
	m.sessionsExpire.Add(ctx, 1)
}

// LimitHit counts a request refused by the limit named limit, a short
// fixed name such as calls_per_session or rate.
func (m *Metrics) LimitHit(ctx context.Context, limit string) {
	if m == nil {
		return
	}
	m.limits.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", limit)))
}

// ObserveUpstreams reports status's servers as toolwire.upstream.state at
// each collection.
func (m *Metrics) ObserveUpstreams(status func() []mcpclient.Status) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.upstreams = status
	m.mu.Unlock()
}

func (m *Metrics) observeUpstreams(_ context.Context, o metric.Int64Observer) error {
	m.mu.Lock()
	status := m.upstreams
	m.mu.Unlock()
	if status == nil {
		return nil
	}
	for _, st := range status() {
		for _, s := range upstreamStates {
			v := int64(0)
			if st.State == s {
				v = 1
			}
			o.Observe(v, metric.WithAttributes(attribute.String("server", st.Name), attribute.String("state", s.String())))
		}
	}
	return nil
}

// FollowUpstreams counts reconnects from the state changes on ch (give it
// to mcpclient.Options.StateChanges) until ch is closed or ctx ends: a
// server that is ready again after having been ready once has reconnected.
func (m *Metrics) FollowUpstreams(ctx context.Context, ch <-chan mcpclient.Status) {
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-ch:
			if !ok {
				return
			}
			m.upstreamChanged(ctx, st)
		}
	}
}

func (m *Metrics) upstreamChanged(ctx context.Context, st mcpclient.Status) {
	if m == nil || st.State != mcpclient.Ready {
		return
	}
	m.mu.Lock()
	again := m.wasReady[st.Name]
	m.wasReady[st.Name] = true
	m.mu.Unlock()
	if again {
		m.reconnects.Add(ctx, 1, metric.WithAttributes(attribute.String("server", st.Name)))
	}
}

// Sink returns s counting each event it writes, and each it fails to, by
// kind; with nil metrics it returns s itself. A [audit.BatchSink] stays
// one, so that the log still writes its batches together.
func (m *Metrics) Sink(s audit.Sink) audit.Sink {
	if m == nil || s == nil {
		return s
	}
	c := &countingSink{m: m, next: s}
	if b, ok := s.(audit.BatchSink); ok {
		return &countingBatchSink{countingSink: c, next: b}
	}
	return c
}

// countingBatchSink is a countingSink of a BatchSink.
type countingBatchSink struct {
	*countingSink
	next audit.BatchSink
}

func (s *countingBatchSink) WriteBatch(evs []*audit.Event) error {
	err := s.next.WriteBatch(evs)
	for _, ev := range evs {
		s.countingSink.count(ev, err)
	}
	return err
}

type countingSink struct {
	m    *Metrics
	next audit.Sink
}

// Close closes the sink it counts for, so that closing the audit log still
// syncs and closes its file.
func (s *countingSink) Close() error {
	if c, ok := s.next.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (s *countingSink) Write(ev *audit.Event) error {
	err := s.next.Write(ev)
	s.count(ev, err)
	return err
}

// count counts ev as written, or as failed with err.
func (s *countingSink) count(ev *audit.Event, err error) {
	kind := metric.WithAttributes(attribute.String("kind", string(ev.Kind)))
	if err != nil {
		s.m.auditFailures.Add(context.Background(), 1, kind)
	} else {
		s.m.auditWrites.Add(context.Background(), 1, kind)
	}
}
