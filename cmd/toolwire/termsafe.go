package main

import (
	"fmt"
	"strings"
)

// termSafe makes server-controlled text safe to print on a terminal: control
// characters other than newline and tab, C1 controls and the Unicode
// direction overrides are shown escaped (\x1b, \u202e) instead of being
// acted on. Otherwise a tool's description or result could move the cursor
// and overwrite the confirmation prompt ("... is a read tool"), or reorder
// what the user reads.
func termSafe(s string) string {
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
