package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// Add makes the redactor replace values too.
func (s *Secrets) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if v != "" {
			s.values = append(s.values, v)
		}
	}
}

// Redact masks every known secret in ev's text fields. Args and Result are
// decoded, masked inside their strings and keys, and encoded again: matching
// bytes instead would miss a secret written with JSON escapes (\u0026 for
// &, say) and could cut an escape in half. JSON that does not decode is an
// error, so the event is replaced rather than stored unexamined.
func (s *Secrets) Redact(ev *Event) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.values) == 0 {
		return nil
	}
	for _, p := range []*string{&ev.Error, &ev.Tool, &ev.Source, &ev.Original, &ev.CallID, &ev.Reason, &ev.Transport} {
		*p = s.mask(*p)
	}
	for _, list := range [][]string{ev.Added, ev.Removed, ev.Changed} {
		for i := range list {
			list[i] = s.mask(list[i])
		}
	}
	var err error
	if ev.Args, err = s.maskJSON(ev.Args); err != nil {
		return fmt.Errorf("args: %w", err)
	}
	if ev.Result, err = s.maskJSON(ev.Result); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	return nil
}

// String returns text with every known secret masked. Callers use it for
// error messages and log lines that must not carry a secret either.
func (s *Secrets) String(text string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mask(text)
}

// mask replaces every byte covered by an occurrence of any secret. Marking
// coverage first, then masking each covered run once, handles secrets that
// overlap or contain one another: no fragment of either is left showing.
func (s *Secrets) mask(text string) string {
	var covered []bool
	for _, v := range s.values {
		for from := 0; from <= len(text)-len(v); {
			i := strings.Index(text[from:], v)
			if i < 0 {
				break
			}
			if covered == nil {
				covered = make([]bool, len(text))
			}
			for j := from + i; j < from+i+len(v); j++ {
				covered[j] = true
			}
			from += i + 1
		}
	}
	if covered == nil {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		if !covered[i] {
			b.WriteByte(text[i])
			i++
			continue
		}
		b.WriteString(Mask)
		for i < len(text) && covered[i] {
			i++
		}
	}
	return b.String()
}

// maskJSON masks secrets in the strings and keys of a JSON document.
func (s *Secrets) maskJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s.maskValue(v)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (s *Secrets) maskValue(v any) any {
	switch v := v.(type) {
	case string:
		return s.mask(v)
	case json.Number:
		// A numeric secret (a PIN, an account number) is masked too; the
		// mask is a string, which keeps the document valid.
		if m := s.mask(string(v)); m != string(v) {
			return m
		}
		return v
	case []any:
		for i := range v {
			v[i] = s.maskValue(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			out[s.mask(k)] = s.maskValue(val)
		}
		return out
	default:
		return v
	}
}
