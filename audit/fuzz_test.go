package audit_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/audit"
)

// overlapsMask reports whether masking secret could itself produce secret:
// when secret occurs inside the mask, or a prefix of it ends the mask or a
// suffix of it starts the mask (so "[REDACTED]" next to leftover text could
// spell it). Such secrets cannot be masked by substitution at all, so they
// are no fair test.
func overlapsMask(secret string) bool {
	if strings.Contains(audit.Mask, secret) {
		return true
	}
	for k := 1; k < len(secret); k++ {
		if strings.HasSuffix(audit.Mask, secret[:k]) || strings.HasPrefix(audit.Mask, secret[len(secret)-k:]) {
			return true
		}
	}
	return false
}

// jsonString returns s as encoding/json writes it (with HTML escaping, as
// json.Marshal does), without the surrounding quotes, and the byte offsets
// in that encoding at which each character of s starts or ends.
func jsonString(s string) (string, map[int]bool) {
	var b strings.Builder
	bounds := map[int]bool{0: true}
	for _, r := range s {
		enc, _ := json.Marshal(string(r))
		b.Write(enc[1 : len(enc)-1])
		bounds[b.Len()] = true
	}
	return b.String(), bounds
}

// FuzzSecretsRedact checks that once an event holding a known secret is
// redacted, no one reading the marshalled event can find the secret: not in
// its text fields, not in its Args or Result once decoded, and (where the
// secret is plain text) not in the raw bytes either.
func FuzzSecretsRedact(f *testing.F) {
	for _, seed := range [][3]string{
		{"sk-12345", "token ", " end"},
		{"abcdefgh", "", ""},
		{`pass"word`, `x `, ` y`},
		{"multi\nline", "a", "b"},
		{"tab\there", "", "!"},
		{"ü-ñ-秘密-äö", "«", "»"},
		{"call.requested", "", ""},
		{"12345678", "x", "y"},
		{"ED]ED]ED]", "", ""},           // overlaps the mask: skipped
		{"p&ssword", "", ""},            // escapes that byte matching would miss
		{`password\`, "", ""},           // an escape that byte matching would split
		{"tokenabc", "a\tokenabc ", ""}, // an escape that byte matching would split
		{"e", "s", "rv"},                // too short to mask: skipped
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, secret, before, after string) {
		text := before + secret + after
		if !audit.Maskable(secret) || !utf8.ValidString(text) || !utf8.ValidString(secret) || overlapsMask(secret) {
			t.Skip("not a fair input")
		}
		at := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
		args, err := json.Marshal(map[string]string{"v": text})
		if err != nil {
			t.Fatal(err)
		}
		ev := audit.Event{
			Time: at, Kind: audit.CallErrored, Batch: "b", Index: 1,
			Error: text, Tool: text, Source: text, Original: text, CallID: text, Reason: text,
			Args: args, Result: bytes.Clone(args),
		}
		if err := audit.NewSecrets(secret).Redact(&ev); err != nil {
			t.Fatal(err)
		}

		// Plain text fields: always checked.
		for name, v := range map[string]string{"Error": ev.Error, "Tool": ev.Tool, "Source": ev.Source,
			"Original": ev.Original, "CallID": ev.CallID, "Reason": ev.Reason} {
			if strings.Contains(v, secret) {
				t.Fatalf("%s = %q still contains secret %q", name, v, secret)
			}
		}

		// JSON fields.
		enc, _ := jsonString(text)
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("redacted event no longer marshals: %v (Args %s)", err, ev.Args)
		}
		var back audit.Event
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		for name, raw := range map[string]json.RawMessage{"Args": back.Args, "Result": back.Result} {
			var m map[string]string
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%s %s: %v", name, raw, err)
			}
			for k, v := range m {
				if strings.Contains(k, secret) || strings.Contains(v, secret) {
					t.Fatalf("%s decodes to {%q: %q}, which contains secret %q", name, k, v, secret)
				}
			}
		}

		// Raw bytes: only meaningful when neither the secret nor the text
		// needs escaping (otherwise escapes of leftover text, like \t before
		// "ok", can spell a secret "tok" that no reader would see), and when
		// the secret is not part of the event's own structure.
		if enc != text {
			return
		}
		baseline, err := json.Marshal(audit.Event{Time: at, Kind: audit.CallErrored, Batch: "b", Index: 1,
			Error: audit.Mask, Tool: audit.Mask, Source: audit.Mask, Original: audit.Mask, CallID: audit.Mask,
			Reason: audit.Mask, Args: json.RawMessage(`{"v":"[REDACTED]"}`), Result: json.RawMessage(`{"v":"[REDACTED]"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(baseline, []byte(secret)) {
			return
		}
		if bytes.Contains(out, []byte(secret)) {
			t.Fatalf("marshalled event contains secret %q:\n%s", secret, out)
		}
	})
}

// FuzzSecretsChangeNothingElse checks that masking changes only whole
// occurrences of a maskable secret: text and JSON holding none come back
// byte for byte (key order, spacing, escapes and number forms included),
// and a secret too short to mask changes nothing at all.
func FuzzSecretsChangeNothingElse(f *testing.F) {
	for _, seed := range [][2]string{
		{"sk-12345", `{"b": 1,  "a":"\u0026 x", "c":[1.50e3, true, null]}`},
		{"e", `{"server":"e","url":"https://e.example/e"}`},
		{"x", "s x rv x r"},
		{"hunter22", `"hunter2 hunter 22"`},
		{"12345678", `[1234567, 123456789e0]`},
		{"secret-value", "not json at all {"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, secret, text string) {
		s := audit.NewSecrets(secret)
		if !audit.Maskable(secret) {
			if got := s.String(text); got != text {
				t.Fatalf("secret %q is too short to mask, yet String(%q) = %q", secret, text, got)
			}
			if json.Valid([]byte(text)) {
				if got, err := s.JSON(json.RawMessage(text)); err != nil || string(got) != text {
					t.Fatalf("secret %q is too short to mask, yet JSON(%s) = %s, %v", secret, text, got, err)
				}
			}
			return
		}
		if !strings.Contains(text, secret) {
			if got := s.String(text); got != text {
				t.Fatalf("String(%q) = %q, though it holds no %q", text, got, secret)
			}
		}
		// A secret in the raw bytes (even one a decoder would read
		// otherwise, as in invalid UTF-8) is masked; the rest must not be.
		if !json.Valid([]byte(text)) || strings.Contains(text, secret) || holdsSecret(text, secret) {
			return
		}
		got, err := s.JSON(json.RawMessage(text))
		if err != nil || string(got) != text {
			t.Fatalf("JSON(%s) = %s, %v, though no string or number in it holds %q", text, got, err, secret)
		}
	})
}

// holdsSecret reports whether any string, key or number of the JSON
// document doc, once decoded, contains secret.
func holdsSecret(doc, secret string) bool {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return false // the end, as doc is valid
		}
		switch v := tok.(type) {
		case string:
			if strings.Contains(v, secret) {
				return true
			}
		case json.Number:
			if strings.Contains(string(v), secret) {
				return true
			}
		}
	}
}
