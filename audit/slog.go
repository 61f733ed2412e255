package audit

import (
	"context"
	"log/slog"
)

// Handler returns h masking s's secrets first: in each record's message,
// in every string attribute (in groups too) and in the text of every error
// attribute, which reaches h as a string. What s learns later is masked
// from then on, except in the attributes a WithAttrs call fixed before.
// A nil s masks nothing.
func (s *Secrets) Handler(h slog.Handler) slog.Handler {
	return &maskingHandler{next: h, secrets: s}
}

type maskingHandler struct {
	next    slog.Handler
	secrets *Secrets
}

func (h *maskingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *maskingHandler) Handle(ctx context.Context, r slog.Record) error {
	masked := slog.NewRecord(r.Time, r.Level, h.secrets.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		masked.AddAttrs(h.mask(a))
		return true
	})
	return h.next.Handle(ctx, masked)
}

func (h *maskingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.mask(a)
	}
	return &maskingHandler{next: h.next.WithAttrs(masked), secrets: h.secrets}
}

func (h *maskingHandler) WithGroup(name string) slog.Handler {
	return &maskingHandler{next: h.next.WithGroup(name), secrets: h.secrets}
}

// mask returns a with its value resolved and masked.
func (h *maskingHandler) mask(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(h.secrets.String(a.Value.String()))
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			a.Value = slog.StringValue(h.secrets.String(err.Error()))
		}
	case slog.KindGroup:
		group := a.Value.Group()
		masked := make([]slog.Attr, len(group))
		for i, ga := range group {
			masked[i] = h.mask(ga)
		}
		a.Value = slog.GroupValue(masked...)
	}
	return a
}
