package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestQuickstartWithoutTerminal runs the README's first command the way CI
// does, with no terminal: every step must show what the README promises.
func TestQuickstartWithoutTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	// The pins and the server's state directory stay out of the user's.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	q := &quickstart{dir: t.TempDir(), stdin: strings.NewReader(""), stdout: &out}
	if err := q.run(ctx); err != nil {
		t.Fatalf("quickstart failed: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"demo__delete_note        destructive",        // tools listed with tiers
		"demo__write_note         write",              // the override from the config
		"\nhello from toolwire\n",                     // the read tool's output
		`missing property 'b'`,                        // the schema refusal
		`saved note "groceries"`,                      // the write approved with --yes
		"nobody to ask for confirmation: no terminal", // the destructive call refused, not declined
		"confirmation.rejected  ",                     // and the audit log shows it
		"call.executed",
		"SANDBOX", // servers shows each server's confinement
	} {
		if !strings.Contains(text, want) {
			t.Errorf("quick start output lacks %q:\n%s", want, text)
		}
	}
	if runtime.GOOS == "linux" && !strings.Contains(text, "seccomp") {
		t.Errorf("on Linux the demo server runs confined, but servers does not say so:\n%s", text)
	}
}
