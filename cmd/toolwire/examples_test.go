package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// shellWords splits a command line as a POSIX shell would for the
// examples: words separated by blanks, with '…' and "…" quoting.
func shellWords(line string) []string {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestEveryCommandHasExamplesThatParse is issue 23.5: every command's
// --help has an Examples section, and each toolwire command in it names
// a command that exists, with flags it has and arguments it accepts.
func TestEveryCommandHasExamplesThatParse(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no examples", c.CommandPath())
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			for _, part := range strings.Split(line, "|") {
				part, _, _ = strings.Cut(part, "<")
				checkExample(t, c.CommandPath(), part)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand(defaultEnv()))
}

func checkExample(t *testing.T, owner, line string) {
	t.Helper()
	words := shellWords(line)
	for len(words) > 0 && strings.Contains(words[0], "=") {
		words = words[1:] // VAR=value
	}
	if len(words) == 0 || words[0] != "toolwire" {
		return
	}
	root := newRootCommand(defaultEnv()) // flags parsed afresh
	c, rest, err := root.Find(words[1:])
	if err != nil {
		t.Errorf("%s: example %q: %v", owner, line, err)
		return
	}
	if err := c.ParseFlags(rest); err != nil {
		t.Errorf("%s: example %q: %v", owner, line, err)
		return
	}
	args := c.Flags().Args()
	if c.HasSubCommands() && len(args) > 0 {
		t.Errorf("%s: example %q: %q is no subcommand of %s", owner, line, args[0], c.CommandPath())
		return
	}
	if err := c.ValidateArgs(args); err != nil {
		t.Errorf("%s: example %q: %v", owner, line, err)
	}
}

func TestCallWithNoArgumentsSaysWhatItNeeds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "call")
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, `call needs the tool's registered name (see "toolwire tools")`, "for example: toolwire call demo__echo text=hi")
	// The example works as written.
	o = f.run(t, "", false, "call", "demo__echo", "text=hi")
	o.expect(t, exitOK)
}
