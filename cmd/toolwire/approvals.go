package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/internal/safetext"
	"github.com/toolwire/toolwire/workspace"
)

// newApprovalsCommand groups the commands on lasting approvals (those a
// person gave at a confirmation prompt, or with an operator's decision)
// and on the calls waiting for an operator's decision.
func newApprovalsCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "Decide the calls waiting for an operator; list or revoke lasting approvals",
		Long: "A call through toolwire serve whose client cannot be asked (no elicitation) waits for an operator, " +
			"at most gateway.approvals.operatorWait: pending lists it, approve and deny decide it, from any " +
			"machine that reaches the configuration's store (the files of this machine, or the fleet's PostgreSQL).\n\n" +
			"An approval given with a scope (args: these arguments; tool: this tool, whatever its arguments; " +
			"session: this tool in the caller's session), here or at a confirmation prompt (a, t), lets later " +
			"calls run without asking, as long as the caller, the tool's definition and the policy rules are " +
			"the same; list shows them, revoke ends one.",
	}
	cmd.AddCommand(newApprovalsListCommand(e, g), newApprovalsRevokeCommand(e, g),
		newApprovalsPendingCommand(e, g), newApprovalsDecideCommand(e, g, true), newApprovalsDecideCommand(e, g, false))
	return cmd
}

// approvalsOf opens the store the flags name and returns its approvals.
func approvalsOf(cmd *cobra.Command, e *env, g *globalFlags) (approval.Grants, func(), error) {
	st, err := tokenStore(cmd.Context(), e, g)
	if err != nil {
		return nil, nil, err
	}
	a := workspace.ApprovalsOf(st)
	if a == nil {
		st.Close()
		return nil, nil, &exitError{exitUsage, errors.New("this store keeps no lasting approvals")}
	}
	return a, func() { st.Close() }, nil
}

// pendingOf opens the store the flags name and returns its queue of
// calls waiting for an operator.
func pendingOf(cmd *cobra.Command, e *env, g *globalFlags) (approval.Queue, func(), error) {
	st, err := tokenStore(cmd.Context(), e, g)
	if err != nil {
		return nil, nil, err
	}
	q := workspace.PendingOf(st, workspace.ApprovalsOf(st))
	if q == nil {
		st.Close()
		return nil, nil, &exitError{exitUsage, errors.New("this store keeps no calls waiting for an operator")}
	}
	return q, func() { st.Close() }, nil
}

func newApprovalsPendingCommand(e *env, g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "List the calls waiting for an operator's decision, with their validated arguments",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, done, err := pendingOf(cmd, e, g)
			if err != nil {
				return err
			}
			defer done()
			list, err := q.Pending(cmd.Context())
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if asJSON {
				if list == nil {
					list = []approval.Request{}
				}
				var b bytes.Buffer
				if err := writeConfigJSON(&b, list); err != nil {
					return err
				}
				_, err := e.stdout.Write(jsonTermSafe(b.Bytes()))
				return err
			}
			if len(list) == 0 {
				fmt.Fprintln(e.stdout, "no calls waiting")
				return nil
			}
			now := time.Now()
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTOOL\tTIER\tCALLER\tLEFT\tARGUMENTS")
			for _, r := range list {
				caller := r.Caller
				if caller == "" {
					caller = "(unauthenticated)"
				}
				left := r.Deadline.Sub(now).Round(time.Second)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, safetext.Line(r.Tool, 64), safetext.Line(r.Tier, 16),
					safetext.Line(caller, 48), max(left, 0), safetext.Line(string(r.Args), 96))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the calls as JSON, with their whole arguments")
	return cmd
}

// jsonTermSafe escapes, in JSON text, what a terminal would act on and
// JSON leaves as it is (DEL, C1 controls, direction marks and overrides:
// the runes safetext escapes; JSON has escaped the other controls), as
// \uXXXX: still the same JSON, but it cannot reorder or rewrite what the
// operator reads.
func jsonTermSafe(raw []byte) []byte {
	var b bytes.Buffer
	for _, r := range string(raw) {
		if safetext.Unsafe(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.Bytes()
}

// operatorName is who decides from this command, for the audit: the user
// and the machine.
func operatorName() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + name + "@" + host
}

func newApprovalsDecideCommand(e *env, g *globalFlags, approve bool) *cobra.Command {
	var (
		scope  string
		lasts  time.Duration
		reason string
	)
	verb, short := "approve", "Approve a call waiting for an operator (and, with a scope, the calls like it)"
	if !approve {
		verb, short = "deny", "Deny a call waiting for an operator (and, with a scope, the calls like it)"
	}
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := approval.ParseScope(scope)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("--scope: %w", err)}
			}
			if lasts < 0 || (cmd.Flags().Changed("for") && (lasts == 0 || sc == approval.Once)) {
				return &exitError{exitUsage, fmt.Errorf("--for %s: want a duration more than zero, with --scope args, tool or session", lasts)}
			}
			q, done, err := pendingOf(cmd, e, g)
			if err != nil {
				return err
			}
			defer done()
			id := args[0]
			d, err := q.Decide(cmd.Context(), id, approval.Decision{Approve: approve, Scope: sc, For: lasts, By: operatorName(), Reason: reason})
			switch {
			case errors.Is(err, approval.ErrNotFound):
				return &exitError{exitUsage, fmt.Errorf("%w (toolwire approvals pending lists the calls waiting)", err)}
			case err != nil: // decided already, expired, withdrawn, or the store's
				return &exitError{exitToolErr, err}
			}
			said, lasting := "approved", "approval"
			if !approve {
				said, lasting = "denied", "denial"
			}
			fmt.Fprintf(e.stdout, "%s %s", said, termSafe(id))
			if d.Grant != "" {
				fmt.Fprintf(e.stdout, "; lasting %s %s of scope %s (toolwire approvals revoke %s)", lasting, d.Grant, d.Scope, d.Grant)
			}
			fmt.Fprintln(e.stdout)
			return nil
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "once", "how far the decision reaches: once (this call), args (also later calls with these arguments), tool (every call of the tool), session (the tool in the caller's session)")
	cmd.Flags().DurationVar(&lasts, "for", 0, "how long a decision of scope args, tool or session lasts (default: a day for args and session, 15m for tool)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit (and, for a denial, the caller)")
	return cmd
}

func newApprovalsListCommand(e *env, g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the unexpired approvals",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, done, err := approvalsOf(cmd, e, g)
			if err != nil {
				return err
			}
			defer done()
			list, err := a.List(cmd.Context())
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if asJSON {
				if list == nil {
					list = []approval.Grant{}
				}
				return writeConfigJSON(e.stdout, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(e.stdout, "no approvals")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTOOL\tSCOPE\tCALLER\tEXPIRES")
			for _, gr := range list {
				scope := "these arguments"
				switch gr.Scope {
				case approval.Tool:
					scope = "any arguments"
				case approval.Session:
					scope = "this session"
				}
				if gr.Deny {
					scope = "DENIED: " + scope
				}
				caller := gr.Key.Caller
				if caller == "" {
					caller = "(terminal)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", gr.ID, termSafe(gr.Key.Tool), scope, termSafe(caller), gr.Expires.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the approvals as JSON")
	return cmd
}

func newApprovalsRevokeCommand(e *env, g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke approvals: the next such call is asked about again",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, done, err := approvalsOf(cmd, e, g)
			if err != nil {
				return err
			}
			defer done()
			for _, id := range args {
				if err := a.Revoke(cmd.Context(), id); err != nil {
					code := exitToolErr
					if errors.Is(err, approval.ErrNotFound) {
						code = exitUsage
					}
					return &exitError{code, err}
				}
				fmt.Fprintf(e.stdout, "revoked %s\n", id)
			}
			return nil
		},
	}
}
