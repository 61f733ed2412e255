package audit

import (
	"bytes"
	"strings"
	"sync"
)

// Mask replaces a secret wherever a redactor finds one.
const Mask = "[REDACTED]"

// Secrets is a [Redactor] that replaces known secret values (tokens, values
// expanded from ${VAR} placeholders) in every text field of an event. It is
// safe for concurrent use; values may be added at any time.
type Secrets struct {
	mu     sync.RWMutex
	values []string
}

// NewSecrets returns a Secrets redactor knowing values. Empty values are
// ignored.
func NewSecrets(values ...string) *Secrets {
	s := &Secrets{}
	s.Add(values...)
	return s
}

// Add makes the redactor replace values too. Longer values are replaced
// first, so a secret that contains another is masked whole.
func (s *Secrets) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if v != "" {
			s.values = append(s.values, v)
		}
	}
	// Insertion sort by length, longest first; the list is short.
	for i := 1; i < len(s.values); i++ {
		for j := i; j > 0 && len(s.values[j]) > len(s.values[j-1]); j-- {
			s.values[j], s.values[j-1] = s.values[j-1], s.values[j]
		}
	}
}

// Redact masks every known secret in ev's text fields.
func (s *Secrets) Redact(ev *Event) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.values) == 0 {
		return nil
	}
	for _, p := range []*string{&ev.Error, &ev.Tool, &ev.Source, &ev.Original, &ev.CallID, &ev.Reason} {
		*p = s.mask(*p)
	}
	ev.Args = s.bytes(ev.Args)
	ev.Result = s.bytes(ev.Result)
	return nil
}

// String returns text with every known secret masked. Callers use it for
// error messages and log lines that must not carry a secret either.
func (s *Secrets) String(text string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mask(text)
}

func (s *Secrets) mask(text string) string {
	for _, v := range s.values {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, Mask)
		}
	}
	return text
}

// bytes masks secrets inside JSON. A secret is matched as it would appear
// inside a JSON string, so one containing quotes or backslashes is found too;
// the mask is plain text, so the JSON stays valid.
func (s *Secrets) bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	for _, v := range s.values {
		for _, form := range []string{v, jsonEscaped(v)} {
			if bytes.Contains(b, []byte(form)) {
				b = bytes.ReplaceAll(b, []byte(form), []byte(Mask))
			}
		}
	}
	return b
}

// jsonEscaped returns v as it appears between the quotes of a JSON string.
func jsonEscaped(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
