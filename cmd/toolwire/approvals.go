package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/workspace"
)

// newApprovalsCommand groups the commands on lasting approvals: those a
// person gave at a confirmation prompt (a: these arguments, t: this tool
// for a while), which later calls run under without asking.
func newApprovalsCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List or revoke the lasting approvals given at confirmation prompts",
		Long: "An approval given at a confirmation prompt with a (these arguments, for a day) or t (this tool, " +
			"whatever its arguments, for a quarter of an hour) lets later calls run without asking, as long as the " +
			"caller, the tool's definition and the policy rules are the same. They are kept beside the pins file " +
			"(files store only).",
	}
	cmd.AddCommand(newApprovalsListCommand(e, g), newApprovalsRevokeCommand(e, g))
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
		return nil, nil, &exitError{exitUsage, errors.New("this store keeps no lasting approvals (they are kept with a files store only)")}
	}
	return a, func() { st.Close() }, nil
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
				if gr.Scope == approval.Tool {
					scope = "any arguments"
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
