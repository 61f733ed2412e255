package audit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolwire/toolwire/audit"
)

// argsOf returns {"v": s} as encoding/json writes it without HTML escaping,
// as the executor re-encodes arguments.
func argsOf(t *testing.T, s string) json.RawMessage {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string{"v": s}); err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(strings.TrimSuffix(b.String(), "\n"))
}

// valueOf decodes {"v": ...} and returns the string value, failing the test
// if the bytes are not valid JSON.
func valueOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if !json.Valid(raw) {
		t.Fatalf("not valid JSON after redaction: %s", raw)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("unmarshal %s: %v", raw, err)
	}
	return m["v"]
}

func TestSecretsMasksEveryTextField(t *testing.T) {
	const s = "tok-12345"
	ev := audit.Event{
		Kind: audit.CallErrored, Batch: "b", Tier: "write",
		Error: "auth failed with tok-12345", Tool: "x_tok-12345", Source: "tok-12345", Original: "o-tok-12345",
		CallID: "id-tok-12345", Reason: "tok-12345",
		Args: argsOf(t, "Bearer tok-12345"), Result: argsOf(t, "echo tok-12345 tok-12345"),
	}
	if err := audit.NewSecrets(s).Redact(&ev); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ field, got, want string }{
		{"Error", ev.Error, "auth failed with [REDACTED]"},
		{"Tool", ev.Tool, "x_[REDACTED]"},
		{"Source", ev.Source, "[REDACTED]"},
		{"Original", ev.Original, "o-[REDACTED]"},
		{"CallID", ev.CallID, "id-[REDACTED]"},
		{"Reason", ev.Reason, "[REDACTED]"},
		{"Args", valueOf(t, ev.Args), "Bearer [REDACTED]"},
		{"Result", valueOf(t, ev.Result), "echo [REDACTED] [REDACTED]"},
		{"Kind", string(ev.Kind), "call.errored"},
		{"Batch", ev.Batch, "b"},
		{"Tier", ev.Tier, "write"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.field, tt.got, tt.want)
		}
	}
}

func TestSecretsMasksLongestFirst(t *testing.T) {
	const text = "key=abcdefghijkl short=abcdefgh"
	const want = "key=[REDACTED] short=[REDACTED]"
	cases := map[string]*audit.Secrets{
		"short added first":   audit.NewSecrets("abcdefgh", "abcdefghijkl"),
		"long added first":    audit.NewSecrets("abcdefghijkl", "abcdefgh"),
		"added in two calls":  func() *audit.Secrets { s := audit.NewSecrets("abcdefgh"); s.Add("abcdefghijkl"); return s }(),
		"with a middle value": audit.NewSecrets("abcdefgh", "bcdefghi", "abcdefghijkl"),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			got := s.String(text)
			if got != want {
				t.Errorf("String(%q) = %q, want %q", text, got, want)
			}
			if strings.Contains(got, "ijkl") {
				t.Errorf("String(%q) = %q leaves part of the longer secret", text, got)
			}
			ev := audit.Event{Error: text, Args: argsOf(t, text)}
			if err := s.Redact(&ev); err != nil {
				t.Fatal(err)
			}
			if ev.Error != want || valueOf(t, ev.Args) != want {
				t.Errorf("Redact: Error=%q Args=%s, want %q in both", ev.Error, ev.Args, want)
			}
		})
	}
}

func TestSecretsMasksJSONEscapedFormsInArgsAndKeepsThemValid(t *testing.T) {
	tests := []struct{ name, secret string }{
		{"quote", `pass"word`},
		{"backslash inside", `a\b\c\d\e`},
		{"newline", "line1\nline2"},
		{"tab and carriage return", "ab\tcd\ref"},
		{"everything", "q\"b\\n\nt\t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := audit.NewSecrets(tt.secret)
			for _, raw := range []json.RawMessage{argsOf(t, "x "+tt.secret+" y"), mustMarshal(t, map[string]string{"v": "x " + tt.secret + " y"})} {
				ev := audit.Event{Args: raw, Result: raw}
				if err := s.Redact(&ev); err != nil {
					t.Fatal(err)
				}
				for name, b := range map[string]json.RawMessage{"Args": ev.Args, "Result": ev.Result} {
					if got := valueOf(t, b); got != "x [REDACTED] y" {
						t.Errorf("%s of %s decodes to %q, want %q", name, raw, got, "x [REDACTED] y")
					}
				}
			}
		})
	}
}

func mustMarshal(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSecretsEndingInBackslashKeepArgsValidJSON(t *testing.T) {
	const secret = `password\`
	ev := audit.Event{Args: argsOf(t, secret)}
	if err := audit.NewSecrets(secret).Redact(&ev); err != nil {
		t.Fatal(err)
	}
	if got := valueOf(t, ev.Args); got != audit.Mask {
		t.Errorf("Args decode to %q, want %q", got, audit.Mask)
	}
	if _, err := json.Marshal(ev); err != nil {
		t.Errorf("redacted event no longer marshals: %v", err)
	}
}

func TestSecretsMaskingDoesNotBreakNeighbouringEscapes(t *testing.T) {
	const secret = "tokenabc"
	ev := audit.Event{Args: argsOf(t, "a\tokenabc tokenabc")}
	if err := audit.NewSecrets(secret).Redact(&ev); err != nil {
		t.Fatal(err)
	}
	if got := valueOf(t, ev.Args); got != "a\tokenabc [REDACTED]" {
		t.Errorf("Args decode to %q, want %q", got, "a\tokenabc [REDACTED]")
	}
}

func TestSecretsMasksEveryEscapeEncodingJSONWrites(t *testing.T) {
	for _, secret := range []string{"p&ssword", "a<b>c<d>e", "bell\bform\ffeed", "nul\x01xyz12", "ls\u2028ps\u2029xy"} {
		ev := audit.Event{Args: mustMarshal(t, map[string]string{"v": "x " + secret})}
		if err := audit.NewSecrets(secret).Redact(&ev); err != nil {
			t.Fatal(err)
		}
		if got := valueOf(t, ev.Args); strings.Contains(got, secret) {
			t.Errorf("secret %q: Args %s still decode to %q", secret, ev.Args, got)
		}
	}
}

func TestSecretsIgnoresEmptyValues(t *testing.T) {
	const text = "nothing secret here"
	for _, s := range []*audit.Secrets{audit.NewSecrets(), audit.NewSecrets(""), audit.NewSecrets("", "")} {
		if got := s.String(text); got != text {
			t.Errorf("String(%q) = %q with only empty secrets", text, got)
		}
		ev := audit.Event{Error: text, Args: json.RawMessage(`{"a":1}`)}
		if err := s.Redact(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Error != text || string(ev.Args) != `{"a":1}` {
			t.Errorf("Redact changed the event: %+v", ev)
		}
	}
	s := audit.NewSecrets("", "secret here")
	if got := s.String(text); got != "nothing [REDACTED]" {
		t.Errorf("String(%q) = %q: an empty value must not mask between every byte", text, got)
	}
	s.Add("")
	if got := s.String("ab"); got != "ab" {
		t.Errorf("after Add(\"\"), String(ab) = %q", got)
	}
}

func TestSecretsString(t *testing.T) {
	s := audit.NewSecrets("hunter22", "s3cr3t-s")
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"password hunter22", "password [REDACTED]"},
		{"hunter22hunter22", "[REDACTED]"}, // adjacent occurrences are one masked run
		{"s3cr3t-s and hunter22", "[REDACTED] and [REDACTED]"},
		{"HUNTER22", "HUNTER22"}, // matching is exact
		{"hunter2", "hunter2"},   // a part of a secret is not it
	}
	for _, tt := range tests {
		if got := s.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	s.Add("plain text")
	if got := s.String("plain text"); got != audit.Mask {
		t.Errorf("after Add, String(plain) = %q, want the mask", got)
	}
}

func TestSecretsAddIsSafeDuringRedact(t *testing.T) {
	s := audit.NewSecrets("seed-value")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s.Add(fmt.Sprintf("value-%d-%d", g, i))
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				ev := audit.Event{Error: "seed-value", Args: json.RawMessage(`{"a":"seed-value"}`)}
				_ = s.Redact(&ev)
				if ev.Error != audit.Mask {
					t.Errorf("Error = %q during concurrent Add", ev.Error)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := s.String("value-3-49 value-0-0"); got != "[REDACTED] [REDACTED]" {
		t.Errorf("values added concurrently not all known: %q", got)
	}
}

// TestSecretsTooShortToMaskAreIgnored is the mangling the issue found: a
// one-letter value masked that letter everywhere, in names and URLs.
func TestSecretsTooShortToMaskAreIgnored(t *testing.T) {
	s := audit.NewSecrets("e", "x", "rv", "1234567")
	const text = "server demo at https://e.example/x?rv=1234567"
	if got := s.String(text); got != text {
		t.Errorf("String(%q) = %q: values shorter than %d characters must not be masked", text, got, audit.MinSecretLen)
	}
	ev := audit.Event{Kind: audit.CallErrored, Source: "server", Tool: "server__echo", Error: text, Args: json.RawMessage(`{"e":"x"}`)}
	want := ev
	if err := s.Redact(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.Source != want.Source || ev.Tool != want.Tool || ev.Error != want.Error || string(ev.Args) != string(want.Args) {
		t.Errorf("Redact changed an event holding no maskable secret: %+v", ev)
	}
}

func TestMaskableCountsCharacters(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"", false},
		{"1234567", false},
		{"12345678", true},
		{"秘密秘密秘密秘", false}, // 7 characters, 21 bytes
		{"秘密秘密秘密秘密", true},
	}
	for _, tt := range tests {
		if got := audit.Maskable(tt.v); got != tt.want {
			t.Errorf("Maskable(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestSecretsJSONRewritesOnlyTheStringsHoldingASecret: the rest of the
// document (spacing, key order, escapes, number forms) is left as written.
func TestSecretsJSONRewritesOnlyTheStringsHoldingASecret(t *testing.T) {
	s := audit.NewSecrets("sk-secret-1", "31415926")
	tests := []struct{ in, want string }{
		{`{"z": 1.50e3,  "a" : "\u0026 plain"}`, `{"z": 1.50e3,  "a" : "\u0026 plain"}`},
		{`{"z": 1.50e3,  "a" : "key sk-secret-1 \u0026"}`, `{"z": 1.50e3,  "a" : "key [REDACTED] &"}`},
		{`{"sk-secret-1": [ 31415926, 2 ]}`, `{"[REDACTED]": [ "[REDACTED]", 2 ]}`},
		{`"sk-\u0073ecret-1"`, `"[REDACTED]"`},
	}
	for _, tt := range tests {
		got, err := s.JSON(json.RawMessage(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("JSON(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if _, err := s.JSON(json.RawMessage(`{"a":`)); err == nil {
		t.Error("JSON of a truncated document: no error")
	}
}
