package telemetry

import (
	"context"
	"maps"
	"net/http"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// metaCarrier reads and writes trace context in a request's _meta, where
// SEP-414 puts it: the W3C traceparent and tracestate, as the HTTP headers
// would carry them, under their bare names.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c metaCarrier) Set(key, value string) { c[key] = value }

func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// paramsOf returns req's params, or nil when it has none (a typed nil
// pointer would panic on GetMeta).
func paramsOf(req mcp.Request) mcp.Params {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p
}

// ServerMiddleware returns the gateway's receiving middleware (for
// gateway.Options.Middleware): a server span per request a client sends,
// continuing the client's trace, and the session metrics. The parent is
// the request's traceparent HTTP header when it came over HTTP, else its
// _meta.traceparent (SEP-414): over HTTP the header is the more specific
// of the two, as a client's HTTP instrumentation makes it a child of the
// MCP-level context. It returns nil when there is nothing to record.
func (t *Telemetry) ServerMiddleware() mcp.Middleware {
	if t == nil || (t.tracer == nil && t.metrics == nil) {
		return nil
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			var span trace.Span
			if t.tracer != nil {
				ctx, span = t.startServerSpan(ctx, method, req)
			}
			res, err := next(ctx, method, req)
			if method == "initialize" && err == nil {
				t.sessionOpened(req)
			}
			if span != nil {
				outcome := "ok"
				if err != nil {
					outcome = "error"
					span.SetStatus(codes.Error, "error response")
				} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
					outcome = "tool_error"
				}
				span.SetAttributes(attribute.String(attrOutcome, outcome))
				span.End()
			}
			return res, err
		}
	}
}

func (t *Telemetry) startServerSpan(ctx context.Context, method string, req mcp.Request) (context.Context, trace.Span) {
	parent := ctx
	if extra := req.GetExtra(); extra != nil && extra.Header.Get("traceparent") != "" {
		parent = t.prop.Extract(ctx, propagation.HeaderCarrier(extra.Header))
	} else if p := paramsOf(req); p != nil && p.GetMeta() != nil {
		parent = t.prop.Extract(ctx, metaCarrier(p.GetMeta()))
	}
	attrs := []attribute.KeyValue{attribute.String("mcp.method.name", method)}
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
		attrs = append(attrs, attribute.String(attrCaller, extra.TokenInfo.UserID))
	}
	attrs = append(attrs, clientAttrs(req)...)
	return t.tracer.Start(parent, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// clientAttrs are the revision a request spoke and the client that sent
// it, as go-sdk's server requests tell them: from the request's _meta on
// 2026-07-28, from the session's initialize before.
func clientAttrs(req mcp.Request) []attribute.KeyValue {
	ri, ok := req.(interface {
		ProtocolVersion() string
		ClientInfo() *mcp.Implementation
	})
	if !ok {
		return nil
	}
	var attrs []attribute.KeyValue
	if v := ri.ProtocolVersion(); v != "" {
		attrs = append(attrs, attribute.String(attrProtocol, v))
	}
	if info := ri.ClientInfo(); info != nil && info.Name != "" {
		attrs = append(attrs, attribute.String(attrClient, info.Name+"/"+info.Version))
	}
	return attrs
}

// sessionOpened counts the session req initialized, and its end when it
// ends.
func (t *Telemetry) sessionOpened(req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || t.metrics == nil {
		return
	}
	t.metrics.SessionOpened(context.Background())
	go func() {
		_ = ss.Wait()
		t.metrics.SessionClosed(context.Background())
	}()
}

// ClientMiddleware returns the sending middleware for the client of the
// upstream server named server (for mcpclient.Options.Middleware): a
// client span per request sent, whose context goes upstream in the
// request's _meta (SEP-414) and, over HTTP, in its traceparent header (see
// [Telemetry.WrapTransport]). It returns nil without traces.
func (t *Telemetry) ClientMiddleware(server string) []mcp.Middleware {
	if !t.Tracing() {
		return nil
	}
	return []mcp.Middleware{func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			p := paramsOf(req)
			if strings.HasPrefix(method, "notifications/") || p == nil {
				return next(ctx, method, req)
			}
			name := method
			attrs := []attribute.KeyValue{attribute.String("mcp.method.name", method), attribute.String(attrServer, server)}
			if ct, ok := p.(*mcp.CallToolParams); ok {
				name += " " + ct.Name
				attrs = append(attrs, attribute.String(attrTool, ct.Name))
			}
			ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
			defer span.End()
			// A copy: the caller's map may be shared (a progress token's).
			meta := metaCarrier(maps.Clone(p.GetMeta()))
			if meta == nil {
				meta = metaCarrier{}
			}
			t.prop.Inject(ctx, meta)
			p.SetMeta(meta)
			res, err := next(ctx, method, req)
			if err != nil {
				span.SetStatus(codes.Error, "request failed")
			}
			return res, err
		}
	}}
}

// WrapTransport returns a wrapper (for mcpclient.Options.WrapTransport)
// that sets the traceparent header of every request whose context carries
// a span, or nil without traces.
func (t *Telemetry) WrapTransport() func(http.RoundTripper) http.RoundTripper {
	if !t.Tracing() {
		return nil
	}
	return func(next http.RoundTripper) http.RoundTripper {
		return &propagating{next: next, prop: t.prop}
	}
}

type propagating struct {
	next http.RoundTripper
	prop propagation.TextMapPropagator
}

func (p *propagating) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return p.next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	p.prop.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return p.next.RoundTrip(r)
}
