package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/jsonenc"
)

// Mask replaces a secret wherever a redactor finds one.
const Mask = "[REDACTED]"

// MinSecretLen is the shortest value, in characters, that [Secrets] masks.
// A credential worth the name is longer (API keys and tokens run to 20
// characters and more; NIST SP 800-63B asks at least 8 of a password),
// while shorter values are mostly ordinary words and flags ("1", "true",
// "info", "admin") that output holds for reasons of its own: masking them
// would mangle names, URLs and log lines, and the gaps left would show the
// value anyway. A configured secret shorter than this is left unmasked and
// reported where it is configured (see [Maskable]).
const MinSecretLen = 8

// Maskable reports whether [Secrets] masks v: whether it has at least
// [MinSecretLen] characters.
func Maskable(v string) bool { return utf8.RuneCountInString(v) >= MinSecretLen }

// Secrets is a [Redactor] that replaces known secret values (tokens, values
// expanded from ${VAR} placeholders) in every text field of an event, and
// masks text and JSON for the other places output goes ([Secrets.String],
// [Secrets.JSON]). It masks whole occurrences of each value only, and only
// values that are [Maskable]; text holding no secret comes back unchanged,
// byte for byte. It is safe for concurrent use; values may be added at any
// time.
type Secrets struct {
	mu     sync.RWMutex
	values []string
}

// NewSecrets returns a Secrets redactor knowing values. Values that are not
// [Maskable] are ignored.
func NewSecrets(values ...string) *Secrets {
	s := &Secrets{}
	s.Add(values...)
	return s
}

// Add makes the redactor replace values too. Values that are not
// [Maskable] (the empty one included) are ignored: the caller that knows
// where a value is configured warns about it.
func (s *Secrets) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if Maskable(v) && !slices.Contains(s.values, v) {
			s.values = append(s.values, v)
		}
	}
}

// Len returns how many values s masks; a nil Secrets masks none.
func (s *Secrets) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.values)
}

// Redact masks every known secret in ev's text fields, and in Args and
// Result as [Secrets.JSON] does. JSON that does not decode is an error, so
// the event is replaced rather than stored unexamined.
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
	if s == nil {
		return text
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mask(text)
}

// JSON returns raw with every known secret masked in its strings (keys
// included) and numbers. Each string is decoded before it is searched:
// matching bytes instead would miss a secret written with JSON escapes
// (\u0026 for &, say) and could cut an escape in half. Only a string or
// number holding a secret is written again (a number as a string, the mask
// being one); every other byte stays as it was, so a document holding no
// secret comes back unchanged. Bytes that are not valid JSON are an error.
func (s *Secrets) JSON(raw json.RawMessage) (json.RawMessage, error) {
	if s == nil {
		return raw, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.maskJSON(raw)
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

// maskJSON is JSON under s.mu.
func (s *Secrets) maskJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || len(s.values) == 0 {
		return raw, nil
	}
	if !json.Valid(raw) {
		return nil, errors.New("not valid JSON")
	}
	// In valid JSON, outside strings, a '"' starts a string and a '-' or a
	// digit starts a number; nothing else can hold a secret.
	var out []byte
	changed, copied := false, 0
	replace := func(from, to int, with []byte) {
		out = append(out, raw[copied:from]...)
		out = append(out, with...)
		copied, changed = to, true
	}
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '"':
			end := stringEnd(raw, i)
			if masked, ok := s.maskString(raw[i:end]); ok {
				replace(i, end, masked)
			}
			i = end
		case c == '-' || '0' <= c && c <= '9':
			end := i + 1
			for end < len(raw) && strings.IndexByte("+-.0123456789eE", raw[end]) >= 0 {
				end++
			}
			// A numeric secret (a PIN, an account number) is masked too;
			// the mask is a string, which keeps the document valid.
			if m := s.mask(string(raw[i:end])); m != string(raw[i:end]) {
				replace(i, end, quote(m))
			}
			i = end
		default:
			i++
		}
	}
	if !changed {
		return raw, nil
	}
	return append(out, raw[copied:]...), nil
}

// stringEnd returns the index just past the JSON string starting at
// raw[start], which must be valid.
func stringEnd(raw []byte, start int) int {
	for i := start + 1; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(raw)
}

// maskString masks the JSON string tok (quotes included); ok is false when
// it holds no secret.
func (s *Secrets) maskString(tok []byte) (masked []byte, ok bool) {
	text := string(tok[1 : len(tok)-1])
	if bytes.IndexByte(tok, '\\') >= 0 {
		if err := json.Unmarshal(tok, &text); err != nil {
			return nil, false // cannot happen in valid JSON
		}
	}
	m := s.mask(text)
	if m == text {
		return nil, false
	}
	return quote(m), true
}

// quote encodes text as a JSON string, leaving <, > and & as they are.
func quote(text string) []byte {
	b, _ := jsonenc.Marshal(text) // a string always encodes
	return b
}
