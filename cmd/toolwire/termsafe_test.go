package main

import "testing"

func TestTermSafeEscapesWhatATerminalWouldActOn(t *testing.T) {
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
		if got := termSafe(c.in); got != c.want {
			t.Errorf("termSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestConfirmationPromptCannotBeRewrittenByTheServer(t *testing.T) {
	// A description that tries to erase the line saying the tool is
	// destructive reaches the terminal escaped.
	got := oneLine("Reads.\x1b[2A\x1b[2K(a read tool)", 200)
	if got != `Reads.\x1b[2A\x1b[2K(a read tool)` {
		t.Errorf("oneLine kept control sequences: %q", got)
	}
}
