package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/workspace"
)

func newServersCommand(e *env, g *globalFlags) *cobra.Command {
	var asJSON, watch bool
	cmd := &cobra.Command{
		Use:   "servers",
		Short: "Start every configured server and show its state",
		Long: `Start every configured server and show, for each: its transport, its
lifecycle state (ready, failed, degraded, reconnecting, ...), how many tools
it registered, its process id (stdio), the MCP revision it speaks, since
when it has been in that state, how a stdio server is confined (on Linux:
"landlock v7, seccomp, net: none", and what could not be applied; "not
confined" elsewhere; OFF for a server whose sandbox is off) and its last
error.

With --watch, keep the servers running and print a line at every change of
state, until interrupted: kill a server's process to watch it reconnect.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var changes chan mcpclient.Status
			if watch {
				changes = make(chan mcpclient.Status, 256)
				tuneGC(e.lookupEnv) // a long-running command
			}
			w, err := open(cmd.Context(), e, g, nil, &workspace.Options{Confirmer: refuseAll{}, StateChanges: changes})
			if err != nil {
				return err
			}
			defer w.Close()
			if asJSON {
				if err := printJSON(e, w.Manager().Status()); err != nil {
					return err
				}
			} else {
				printServersTable(e, w.Manager().Status())
				printQuarantined(e, w.Manager().Servers())
			}
			if !watch {
				return nil
			}
			// The start-up transitions are in the table already.
			for len(changes) > 0 {
				<-changes
			}
			for {
				select {
				case <-cmd.Context().Done():
					return nil
				case st := <-changes:
					printChange(e, st, asJSON)
				}
			}
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the servers as JSON (with --watch: one JSON object per change)")
	cmd.Flags().BoolVar(&watch, "watch", false, "keep running and print every change of state")
	return cmd
}

func printServersTable(e *env, sts []mcpclient.Status) {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTRANSPORT\tSTATE\tTOOLS\tPID\tPROTOCOL\tSINCE\tSANDBOX\tLAST ERROR")
	var unconfined []string
	for _, st := range sts {
		pid, protocol, sandbox := "-", "-", "-"
		if st.Sandbox != nil {
			sandbox = st.Sandbox.Short()
			if st.Sandbox.Off {
				unconfined = append(unconfined, st.Name)
			}
		}
		if st.PID > 0 {
			pid = fmt.Sprint(st.PID)
		}
		if st.Protocol != "" {
			protocol = st.Protocol
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", st.Name, st.Transport, st.State, st.Tools, pid, protocol,
			st.Since.Format(time.TimeOnly), sandbox, oneLine(st.LastError, 60))
	}
	_ = tw.Flush()
	for _, name := range unconfined {
		fmt.Fprintf(e.stderr, "warning: server %q runs unconfined (sandbox: off): it can read, write and reach whatever you can\n", name)
	}
}

func printChange(e *env, st mcpclient.Status, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(st)
		fmt.Fprintln(e.stdout, string(b))
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", st.Since.Format(time.TimeOnly), st.Name, st.State)
	if st.Attempt > 0 && st.State != mcpclient.Ready {
		fmt.Fprintf(&b, " (attempt %d)", st.Attempt)
	}
	if st.State == mcpclient.Ready {
		fmt.Fprintf(&b, " tools=%d", st.Tools)
		if st.PID > 0 {
			fmt.Fprintf(&b, " pid=%d", st.PID)
		}
		if st.Protocol != "" {
			b.WriteString(" protocol=" + st.Protocol)
		}
	}
	if st.LastError != "" && st.State != mcpclient.Ready {
		b.WriteString(": " + oneLine(st.LastError, 100))
	}
	fmt.Fprintln(e.stdout, b.String())
}
