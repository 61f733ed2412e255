package main

import (
	"strings"
	"testing"
)

// TestMisspelledSubcommandsAndFlagsAreUsageErrors is issue 23.4: under
// every command that groups others, a word that is none of them, and any
// unknown flag, is exit status 2 with the closest names, never the help
// and status 0 a script would take for success.
func TestMisspelledSubcommandsAndFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"pinz"}, `unknown command "pinz" for "toolwire"; did you mean pins?`},
		{[]string{"pins", "aprove", "demo"}, `unknown command "aprove" for "toolwire pins"; did you mean approve?`},
		{[]string{"config", "chek"}, `unknown command "chek" for "toolwire config"; did you mean check?`},
		{[]string{"audit", "verfy", "x.jsonl"}, `unknown command "verfy" for "toolwire audit"; did you mean verify?`},
		{[]string{"token", "nwe"}, `unknown command "nwe" for "toolwire token"; did you mean new?`},
		{[]string{"auth", "stats"}, `unknown command "stats" for "toolwire auth"; did you mean status?`},
		{[]string{"pins", "zzzzzz"}, `unknown command "zzzzzz" for "toolwire pins" (see "toolwire pins --help")`},
		{[]string{"tools", "--jsn"}, `unknown flag: --jsn; did you mean --json?`},
		{[]string{"call", "--yess", "demo__echo"}, `unknown flag: --yess; did you mean --yes?`},
		{[]string{"tools", "--strcit"}, `unknown flag: --strcit; did you mean --strict?`},
	}
	for _, tt := range tests {
		o := f.run(t, "", false, tt.args...)
		o.expect(t, exitUsage)
		mustContain(t, strings.Join(tt.args, " "), o.stderr, tt.want)
		if strings.Contains(o.stdout, "Usage:") {
			t.Errorf("%v printed the help on stdout:\n%s", tt.args, o.stdout)
		}
	}
	// A group named alone still shows its help, successfully.
	o := f.run(t, "", false, "pins")
	o.expect(t, exitOK)
	mustContain(t, "pins", o.stdout, "Available Commands:", "approve")
}
