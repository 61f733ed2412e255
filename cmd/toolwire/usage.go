package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// strictCommands makes every command that only groups others (toolwire,
// pins, config, audit, token, auth, oauth…) refuse a word that is none of
// them: exit status 2 with the closest names, not its help and status 0,
// so that a script with a misspelled subcommand fails. Without a word, it
// still prints its help. It also makes unknown flags suggest the closest.
func strictCommands(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.HasSubCommands() || c.Runnable() {
			return
		}
		c.Args = cobra.ArbitraryArgs
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2
		}
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if near := c.SuggestionsFor(args[0]); len(near) > 0 {
				msg += "; did you mean " + strings.Join(near, ", ") + "?"
			}
			return &exitError{exitUsage, fmt.Errorf("%s (see %q)", msg, c.CommandPath()+" --help")}
		}
	}
	walk(root)
}

// flagError is the error of a flag the command does not have, or one
// given a bad value: exit status 2, with the closest flag names for an
// unknown one.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		seen := map[string]bool{}
		visit := func(f *pflag.Flag) {
			if !seen[f.Name] {
				seen[f.Name] = true
				names = append(names, f.Name)
			}
		}
		c.Flags().VisitAll(visit)
		c.InheritedFlags().VisitAll(visit)
		if near := closestWords(name, names, 3); len(near) > 0 {
			msg += "; did you mean --" + strings.Join(near, ", --") + "?"
		}
	}
	return &exitError{exitUsage, fmt.Errorf("%s (see %q)", msg, c.CommandPath()+" --help")}
}
