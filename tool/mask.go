package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/toolwire/toolwire/audit"
)

// Masked returns r with every secret s knows masked in its text: the
// message, the violations, text blocks, embedded resources' URIs and text,
// resource links, and the strings of the structured value. Media bytes and
// blobs are left as they are. r itself is not changed: when nothing needs
// masking the result is r, otherwise a copy. A nil s or r returns r.
//
// An [Executor] built with [ExecutorOptions].Mask applies it to every
// result it returns; a caller of an executor without one gets the tools'
// own results and applies Masked where they leave the program.
func (r *Result) Masked(s *audit.Secrets) *Result {
	if s == nil || r == nil || s.Len() == 0 {
		return r
	}
	// The copy is made on the first change only: most results hold no
	// secret, and they cost no allocation.
	var out *Result
	edit := func() *Result {
		if out == nil {
			c := *r
			c.Content = slices.Clone(r.Content)
			c.Violations = slices.Clone(r.Violations)
			out = &c
		}
		return out
	}
	if m := s.String(r.Message); m != r.Message {
		edit().Message = m
	}
	for i, v := range r.Violations {
		if p, m := s.String(v.Path), s.String(v.Message); p != v.Path || m != v.Message {
			edit().Violations[i] = Violation{Path: p, Message: m}
		}
	}
	for i, c := range r.Content {
		if m := maskContent(s, c); m != nil {
			edit().Content[i] = m
		}
	}
	if r.Structured != nil {
		if v, ok := maskValue(s, r.Structured); ok {
			edit().Structured = v
		}
	}
	if out == nil {
		return r
	}
	return out
}

// maskContent returns a masked copy of c, or nil when c holds no secret.
func maskContent(s *audit.Secrets, c Content) Content {
	changed := false
	str := func(v string) string {
		m := s.String(v)
		changed = changed || m != v
		return m
	}
	switch c := c.(type) {
	case *Text:
		if m := str(c.Text); changed {
			return &Text{Text: m}
		}
	case *Resource:
		// Copied only on a change: a copy whose address may be returned
		// lives on the heap.
		uri, mime, text := str(c.URI), str(c.MIMEType), str(c.Text)
		if changed {
			m := *c
			m.URI, m.MIMEType, m.Text = uri, mime, text
			return &m
		}
	case *ResourceLink:
		uri, name, title, desc, mime := str(c.URI), str(c.Name), str(c.Title), str(c.Description), str(c.MIMEType)
		if changed {
			m := *c
			m.URI, m.Name, m.Title, m.Description, m.MIMEType = uri, name, title, desc, mime
			return &m
		}
	}
	return nil
}

// maskValue masks the strings of a JSON-serializable value, returning the
// masked value decoded again and whether anything was masked. A value that
// does not encode cannot leave the program as JSON either, so it is left.
func maskValue(s *audit.Secrets, v any) (any, bool) {
	raw, err := json.Marshal(v)
	if err != nil {
		return v, false
	}
	m, err := s.JSON(raw)
	if err != nil || bytes.Equal(m, raw) {
		return v, false
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(m))
	dec.UseNumber()
	if dec.Decode(&out) != nil {
		return v, false
	}
	return out, true
}

// maskCaller returns c with what passes through it masked, offering the
// same optional interfaces as c: a source decides by them what to relay.
func maskCaller(c Caller, s *audit.Secrets) Caller {
	m := maskedCaller{c: c, s: s}
	lr, isLog := c.(LogReceiver)
	a, isAsk := c.(Asker)
	switch {
	case isLog && isAsk:
		return &struct {
			maskedCaller
			maskedLog
			maskedAsk
		}{m, maskedLog{lr, s}, maskedAsk{a, s}}
	case isLog:
		return &struct {
			maskedCaller
			maskedLog
		}{m, maskedLog{lr, s}}
	case isAsk:
		return &struct {
			maskedCaller
			maskedAsk
		}{m, maskedAsk{a, s}}
	}
	return &m
}

type maskedCaller struct {
	c Caller
	s *audit.Secrets
}

func (m maskedCaller) Progress(ctx context.Context, p Progress) {
	p.Message = m.s.String(p.Message)
	m.c.Progress(ctx, p)
}

type maskedLog struct {
	l LogReceiver
	s *audit.Secrets
}

func (m maskedLog) Log(ctx context.Context, msg LogMessage) {
	data, err := m.s.JSON(msg.Data)
	if err != nil {
		// Not JSON: passed on as a string, masked like any text.
		data, _ = json.Marshal(m.s.String(string(msg.Data)))
	}
	msg.Data, msg.Logger = data, m.s.String(msg.Logger)
	m.l.Log(ctx, msg)
}

// maskedAsk masks the request shown to the caller; the answer goes back
// to the source as the caller gave it.
type maskedAsk struct {
	a Asker
	s *audit.Secrets
}

func (m maskedAsk) Ask(ctx context.Context, kind RequestKind, params json.RawMessage) (json.RawMessage, error) {
	if masked, err := m.s.JSON(params); err == nil {
		params = masked
	}
	return m.a.Ask(ctx, kind, params)
}
