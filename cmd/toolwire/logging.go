package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/toolwire/toolwire/audit"
)

// The values of --log-format.
const (
	logText = "text"
	logJSON = "json"
)

func checkLogFormat(format string) error {
	if format != logText && format != logJSON {
		return fmt.Errorf("--log-format %q: want text or json", format)
	}
	return nil
}

// newLogger returns the logger every warning and diagnostic of a command
// goes through, so that all of them share one format, the one
// --log-format names: text, one line per record reading like the CLI's
// other messages ("toolwire: warning: message key=value"), or json, one
// slog JSON object per line for a log collector. Debug records are shown
// with --verbose only. secrets, when not nil, are masked in every string.
func newLogger(w io.Writer, g *globalFlags, secrets *audit.Secrets) *slog.Logger {
	level := slog.LevelWarn
	if g.verbose {
		level = slog.LevelDebug
	}
	var h slog.Handler = &lineHandler{w: w, level: level, mu: &sync.Mutex{}}
	if g.logFormat == logJSON {
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	}
	if secrets != nil {
		h = secrets.Handler(h)
	}
	return slog.New(h)
}

// lineHandler writes a record as "toolwire: LEVEL: message key=value ...",
// made safe for a terminal.
type lineHandler struct {
	w      io.Writer
	level  slog.Level
	mu     *sync.Mutex // shared by the handlers WithAttrs makes: one write per line
	prefix string      // the attributes of WithAttrs, formatted
	group  string      // the group of WithGroup, with a trailing dot
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func levelWord(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warning"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("toolwire: ")
	b.WriteString(levelWord(r.Level))
	b.WriteString(": ")
	b.WriteString(termSafe(r.Message))
	b.WriteString(h.prefix)
	r.Attrs(func(a slog.Attr) bool {
		h.appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			h.appendAttr(b, g, ga)
		}
		return
	}
	v := termSafe(a.Value.String())
	if v == "" || strings.ContainsAny(v, " \t\"=") {
		v = strconv.Quote(v)
	}
	b.WriteString(" " + group + a.Key + "=" + v)
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	var b strings.Builder
	for _, a := range attrs {
		h.appendAttr(&b, h.group, a)
	}
	c.prefix += b.String()
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group += name + "."
	return &c
}
