// Package safetext makes text that an untrusted party wrote (an MCP server's
// tool description, a model's arguments) safe to show a person: control
// characters are escaped instead of acted on, and text is folded and cut to
// a bounded length. The CLI's terminal output and the gateway's approval
// messages use it alike.
package safetext

import (
	"fmt"
	"strings"
)

// Escape shows control characters other than newline and tab, C1 controls
// and the Unicode direction marks, overrides and isolates escaped (\x1b,
// \u202e) instead of letting them act. Otherwise a tool's description or
// result could move a terminal's cursor and overwrite a confirmation prompt
// ("... is a read tool"), or reorder what the user reads.
func Escape(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unsafeRune(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// Unsafe reports whether [Escape] escapes r: for a writer of another
// escape syntax (JSON's \uXXXX) that must escape the same runes.
func Unsafe(r rune) bool { return unsafeRune(r) }

func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Line folds s onto one line (runs of white space become one space),
// escapes it and cuts it to at most n runes, the last of them "…" when
// something was cut.
func Line(s string, n int) string {
	s = Escape(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:max(n-1, 0)]) + "…"
	}
	return s
}
