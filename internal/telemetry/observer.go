package telemetry

import (
	"context"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of spans and metrics. Metrics use the bare names as
// Prometheus labels; spans the toolwire.* ones.
const (
	attrTool    = "toolwire.tool"
	attrServer  = "toolwire.server"
	attrTier    = "toolwire.tier"
	attrOutcome = "toolwire.outcome"
	attrCaller  = "toolwire.caller"
	// The revision of the request a call came by, and its client (name
	// and version, as it announced them): spans only, never labels.
	attrProtocol = "mcp.protocol.version"
	attrClient   = "toolwire.client"
)

// unknownTool stands for a name no tool has: what a caller sends as a
// tool's name is not a label value (it would make series without bound).
const unknownTool = "(unknown)"

// Observer returns the executor's hook: a span per tool call, with a child
// for its validation and one for its confirmation, and the call, latency
// and approval metrics. It returns nil (no observer) without traces or
// metrics.
func (t *Telemetry) Observer() tool.Observer {
	if t == nil || (t.tracer == nil && t.metrics == nil) {
		return nil
	}
	return &observer{tracer: t.tracer, metrics: t.metrics}
}

type observer struct {
	tracer  trace.Tracer // nil: no spans
	metrics *Metrics     // nil: no metrics
}

type callKey struct{}

// call is what the observer keeps of one call between its steps.
type call struct {
	span                       trace.Span // nil without a tracer
	start                      time.Time
	tool, server, tier, caller string
	protocol, client           string
}

func (o *observer) CallStarted(ctx context.Context, ev audit.Event) context.Context {
	c := &call{start: ev.Time, tool: ev.Tool, server: ev.Source, tier: ev.Tier, caller: ev.Caller, protocol: ev.Protocol, client: ev.Client}
	if c.tier == "" { // no such tool
		c.tool = unknownTool
	}
	if o.tracer != nil {
		ctx, c.span = o.tracer.Start(ctx, "execute_tool "+c.tool, trace.WithTimestamp(ev.Time),
			trace.WithAttributes(c.spanAttrs()...))
	}
	return context.WithValue(ctx, callKey{}, c)
}

func (c *call) spanAttrs() []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(attrTool, c.tool), attribute.String(attrTier, c.tier)}
	if c.server != "" {
		attrs = append(attrs, attribute.String(attrServer, c.server))
	}
	if c.caller != "" {
		attrs = append(attrs, attribute.String(attrCaller, c.caller))
	}
	if c.protocol != "" {
		attrs = append(attrs, attribute.String(attrProtocol, c.protocol))
	}
	if c.client != "" {
		attrs = append(attrs, attribute.String(attrClient, c.client))
	}
	return attrs
}

func (o *observer) Step(ctx context.Context, ev audit.Event) {
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil {
		return
	}
	switch ev.Kind {
	case audit.ValidationPassed, audit.ValidationFailed:
		o.child(ctx, c, "validate", ev)
	case audit.ConfirmationRequested:
		o.metrics.approvalAsked(ctx, c.tool, c.tier)
	case audit.ConfirmationAccepted, audit.ConfirmationRejected:
		o.child(ctx, c, "confirm", ev)
		o.metrics.approvalDecided(ctx, c.tool, c.tier, ev.Kind == audit.ConfirmationAccepted)
	}
	if ev.Kind.Ends() {
		o.end(ctx, c, ev)
	}
}

// child records a step that has just ended, ev.Duration long, as a span.
func (o *observer) child(ctx context.Context, c *call, name string, ev audit.Event) {
	if c.span == nil {
		return
	}
	_, span := o.tracer.Start(ctx, name, trace.WithTimestamp(ev.Time.Add(-ev.Duration)))
	if ev.Kind == audit.ValidationFailed || ev.Kind == audit.ConfirmationRejected {
		span.SetStatus(codes.Error, string(ev.Kind))
	}
	span.End(trace.WithTimestamp(ev.Time))
}

func (o *observer) end(ctx context.Context, c *call, ev audit.Event) {
	outcome := "ok"
	if ev.Kind != audit.CallExecuted {
		outcome = ev.Reason
		if outcome == "" {
			outcome = string(ev.Kind)
		}
	}
	if o.metrics != nil {
		attrs := attribute.NewSet(attribute.String("tool", c.tool), attribute.String("server", c.server),
			attribute.String("tier", c.tier), attribute.String("outcome", outcome))
		o.metrics.call(ctx, attrs, ev.Time.Sub(c.start))
	}
	if c.span != nil {
		c.span.SetAttributes(attribute.String(attrOutcome, outcome))
		if outcome != "ok" {
			// The reason only: the error text may quote the arguments.
			c.span.SetStatus(codes.Error, outcome)
		}
		c.span.End(trace.WithTimestamp(ev.Time))
	}
}
