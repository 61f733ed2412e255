package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeEscapesWhatATerminalWouldActOn(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab"},
		{"\x1b[1A\x1b[2Kdemo__x is a read tool", `\x1b[1A\x1b[2Kdemo__x is a read tool`},
		{"bell\x07 and del\x7f", `bell\x07 and del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"override \u202egnp.exe", `override \u202egnp.exe`},
		{"isolate \u2066x\u2069", `isolate \u2066x\u2069`},
		{"ünïcödé 日本", "ünïcödé 日本"},
	}
	for _, c := range cases {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLineFoldsEscapesAndCuts(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"one\n  two\tthree ", 80, "one two three"},
		{"Reads.\x1b[2A\x1b[2K(a read tool)", 200, `Reads.\x1b[2A\x1b[2K(a read tool)`},
		{"abcdef", 4, "abc…"},
		{"日本語テキスト", 3, "日本…"},
		{"abc", 3, "abc"},
	}
	for _, c := range cases {
		if got := Line(c.in, c.n); got != c.want {
			t.Errorf("Line(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func FuzzLine(f *testing.F) {
	f.Add("Reads.\x1b[2A\u202e\n", 10)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 1 || n > 1000 {
			return
		}
		got := Line(s, n)
		if strings.ContainsAny(got, "\n\r\x1b") || strings.ContainsRune(got, '\u202e') {
			t.Errorf("Line(%q, %d) = %q keeps a line break or a control", s, n, got)
		}
		if c := utf8.RuneCountInString(got); c > n {
			t.Errorf("Line(%q, %d) has %d runes", s, n, c)
		}
	})
}
