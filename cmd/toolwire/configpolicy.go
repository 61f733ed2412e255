package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/workspace"
)

// configPolicyJSON is the policy part of config check's report: each rule
// with the tools it applies to.
type configPolicyJSON struct {
	// Checked says whether the rules were checked against the tools the
	// servers list (config check --tools): only then is Tools known.
	Checked bool             `json:"checked"`
	Rules   []configRuleJSON `json:"rules"`
}

type configRuleJSON struct {
	Name     string   `json:"name"`
	Line     int      `json:"line"`
	On       string   `json:"on"`
	Decision string   `json:"decision"`
	When     string   `json:"when,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Select   []string `json:"select,omitempty"` // the selectors as written: tools=…, servers=…, tiers=…
	Tools    []string `json:"tools"`            // the registered tools it applies to; null unless checked
}

// checkConfigPolicy compiles f's rules and, with withTools, starts f's
// servers (without the rules) and checks each rule against the tools it
// applies to. The error is the rules' problems, each with its file, line
// and rule; nil report when f has no policy.
func checkConfigPolicy(ctx context.Context, e *env, g *globalFlags, f *config.File, withTools bool) (*configPolicyJSON, error) {
	if f.Policy == nil {
		return nil, nil
	}
	pol, err := workspace.Policy(f)
	if err != nil {
		return nil, policyProblems(err)
	}
	r := &configPolicyJSON{Rules: []configRuleJSON{}}
	for _, cr := range f.Policy.Rules {
		jr := configRuleJSON{Name: cr.Name, Line: cr.Line, On: cr.On, Decision: cr.Decision, When: cr.When, Reason: cr.Reason}
		if len(cr.Tools) > 0 {
			jr.Select = append(jr.Select, "tools="+strings.Join(cr.Tools, ","))
		}
		if len(cr.Servers) > 0 {
			jr.Select = append(jr.Select, "servers="+strings.Join(cr.Servers, ","))
		}
		if len(cr.Tiers) > 0 {
			jr.Select = append(jr.Select, "tiers="+strings.Join(cr.Tiers, ","))
		}
		r.Rules = append(r.Rules, jr)
	}
	if !withTools || pol == nil {
		return r, nil
	}
	// The servers start without the rules, which are checked here, so
	// that every problem is reported rather than the first refusal.
	bare := *f
	bare.Policy = nil
	w, err := open(ctx, e, g, &bare, &workspace.Options{Confirmer: refuseAll{}})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	applied, err := pol.Check(w.Registry().List())
	if err != nil {
		return nil, policyProblems(err)
	}
	r.Checked = true
	for i := range r.Rules {
		r.Rules[i].Tools = applied[r.Rules[i].Name]
	}
	return r, nil
}

// printConfigPolicy prints the rules of config check's text report.
func printConfigPolicy(w io.Writer, r *configPolicyJSON) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\npolicy (%s, first match decides, in this order)\n", configPlural(len(r.Rules), "rule"))
	for _, jr := range r.Rules {
		fmt.Fprintf(w, "  rule %s (line %d)\n", jr.Name, jr.Line)
		decision := jr.Decision
		if jr.On == "result" {
			decision += " (on the result: deny withholds it)"
		}
		fmt.Fprintf(w, "    decision     %s\n", decision)
		if jr.When != "" {
			fmt.Fprintf(w, "    when         %s\n", strings.Join(strings.Fields(jr.When), " "))
		}
		sel := "every tool"
		if len(jr.Select) > 0 {
			sel = strings.Join(jr.Select, " ")
		}
		fmt.Fprintf(w, "    selects      %s\n", sel)
		switch {
		case !r.Checked:
			fmt.Fprintln(w, "    applies to   (not known until the servers list their tools: config check --tools starts them)")
		case len(jr.Tools) == 0:
			fmt.Fprintln(w, "    applies to   no tool the servers list")
		default:
			fmt.Fprintf(w, "    applies to   %s\n", strings.Join(jr.Tools, ", "))
		}
		if jr.Reason != "" {
			fmt.Fprintf(w, "    reason       %s\n", jr.Reason)
		}
	}
}

// policyProblems returns the problems err joins as one flat join, one per
// line of the report, without the ErrPolicy mark.
func policyProblems(err error) error {
	var leaves []error
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if err != workspace.ErrPolicy {
			leaves = append(leaves, err)
		}
	}
	walk(err)
	return errors.Join(leaves...)
}
