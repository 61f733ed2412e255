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
	const s = "tok-123"
	ev := audit.Event{
		Kind: audit.CallErrored, Batch: "b", Tier: "write",
		Error: "auth failed with tok-123", Tool: "x_tok-123", Source: "tok-123", Original: "o-tok-123",
		CallID: "id-tok-123", Reason: "tok-123",
		Args: argsOf(t, "Bearer tok-123"), Result: argsOf(t, "echo tok-123 tok-123"),
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
	const text = "key=abcdef short=abc"
	const want = "key=[REDACTED] short=[REDACTED]"
	cases := map[string]*audit.Secrets{
		"short added first":   audit.NewSecrets("abc", "abcdef"),
		"long added first":    audit.NewSecrets("abcdef", "abc"),
		"added in two calls":  func() *audit.Secrets { s := audit.NewSecrets("abc"); s.Add("abcdef"); return s }(),
		"with a middle value": audit.NewSecrets("abc", "bcd", "abcdef"),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			got := s.String(text)
			if got != want {
				t.Errorf("String(%q) = %q, want %q", text, got, want)
			}
			if strings.Contains(got, "def") {
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
		{"quote", `pa"ss`},
		{"backslash inside", `a\b\c`},
		{"newline", "line1\nline2"},
		{"tab and carriage return", "a\tb\rc"},
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
	const secret = `pa\`
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
	const secret = "tok"
	ev := audit.Event{Args: argsOf(t, "a\tok tok")}
	if err := audit.NewSecrets(secret).Redact(&ev); err != nil {
		t.Fatal(err)
	}
	if got := valueOf(t, ev.Args); got != "a\tok [REDACTED]" {
		t.Errorf("Args decode to %q, want %q", got, "a\tok [REDACTED]")
	}
}

func TestSecretsMasksEveryEscapeEncodingJSONWrites(t *testing.T) {
	for _, secret := range []string{"p&ss", "a<b>c", "bell\bform\ffeed", "nul\x01x", "ls\u2028ps\u2029"} {
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
	s := audit.NewSecrets("", "here")
	if got := s.String(text); got != "nothing secret [REDACTED]" {
		t.Errorf("String(%q) = %q: an empty value must not mask between every byte", text, got)
	}
	s.Add("")
	if got := s.String("ab"); got != "ab" {
		t.Errorf("after Add(\"\"), String(ab) = %q", got)
	}
}

func TestSecretsString(t *testing.T) {
	s := audit.NewSecrets("hunter2", "s3cr3t")
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"password hunter2", "password [REDACTED]"},
		{"hunter2hunter2", "[REDACTED]"}, // adjacent occurrences are one masked run
		{"s3cr3t and hunter2", "[REDACTED] and [REDACTED]"},
		{"HUNTER2", "HUNTER2"}, // matching is exact
	}
	for _, tt := range tests {
		if got := s.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	s.Add("plain")
	if got := s.String("plain"); got != audit.Mask {
		t.Errorf("after Add, String(plain) = %q, want the mask", got)
	}
}

func TestSecretsAddIsSafeDuringRedact(t *testing.T) {
	s := audit.NewSecrets("seed")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s.Add(fmt.Sprintf("v%d-%d", g, i))
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				ev := audit.Event{Error: "seed", Args: json.RawMessage(`{"a":"seed"}`)}
				_ = s.Redact(&ev)
				if ev.Error != audit.Mask {
					t.Errorf("Error = %q during concurrent Add", ev.Error)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := s.String("v3-49 v0-0"); got != "[REDACTED] [REDACTED]" {
		t.Errorf("values added concurrently not all known: %q", got)
	}
}
