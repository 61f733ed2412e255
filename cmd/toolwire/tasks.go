package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/task"
)

// The task commands' examples live here, beside the commands, rather than
// in examples.go's table.
func init() {
	commandExamples["toolwire tasks"] = "toolwire tasks list\ntoolwire tasks get 4YQ3ZB6K2M7TDRXJ5NAP3WQ2HE"
	commandExamples["toolwire tasks list"] = "toolwire tasks list\ntoolwire tasks list --owner subject:alice --status working\ntoolwire tasks list --json"
	commandExamples["toolwire tasks get"] = "toolwire tasks get 4YQ3ZB6K2M7TDRXJ5NAP3WQ2HE\ntoolwire tasks get 4YQ3ZB6K2M7TDRXJ5NAP3WQ2HE --json"
	commandExamples["toolwire tasks cancel"] = "toolwire tasks cancel 4YQ3ZB6K2M7TDRXJ5NAP3WQ2HE\ntoolwire tasks cancel 4YQ3ZB6K2M7TDRXJ5NAP3WQ2HE 7KD2MFQ4XZ3B5NWA6TRJ2PYH4C"
}

func newTasksCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List, show and cancel the tasks the gateway runs for its clients",
		Long: `A client of "toolwire serve --http" may ask for a tool call to run as a task
(MCP 2025-11-25's tasks): it gets the task's id at once, and polls for its
status and result later, from any replica of a fleet. The tasks are kept in
the store: a directory of the machine (toolwire/tasks under
$XDG_STATE_HOME, or ~/.local/state) with the files store, the
toolwire.tasks table with a PostgreSQL store (--store), shared by every
replica. These commands show every caller's tasks, as an operator sees
them; a client sees only its own. A task whose replica was lost while it
ran its call shows as failed, saying so.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTasksListCommand(e, g), newTasksGetCommand(e, g), newTasksCancelCommand(e, g))
	return cmd
}

// openTasks opens the store's tasks; close closes the store.
func openTasks(ctx context.Context, e *env, g *globalFlags) (ts *task.Store, where string, close func(), err error) {
	file, err := optionalConfig(e, g)
	if err != nil {
		return nil, "", nil, err
	}
	st, _, err := openStore(ctx, e, g, file, false)
	if err != nil {
		return nil, "", nil, err
	}
	ts, err = st.Tasks()
	if err != nil {
		st.Close()
		return nil, "", nil, &exitError{exitToolErr, err}
	}
	where = st.String()
	if st.Kind() == store.Files {
		if f, ok := ts.Backend().(*task.Files); ok {
			where = f.Dir()
		}
	}
	return ts, where, func() { st.Close() }, nil
}

func newTasksListCommand(e *env, g *globalFlags) *cobra.Command {
	var asJSON bool
	var owner, status string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tasks, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if status != "" && !task.Status(status).Valid() {
				return &exitError{exitUsage, fmt.Errorf("--status %q: want working, input_required, completed, failed or cancelled", status)}
			}
			if limit <= 0 {
				return &exitError{exitUsage, fmt.Errorf("--limit %d: want a number above 0", limit)}
			}
			ts, where, done, err := openTasks(cmd.Context(), e, g)
			if err != nil {
				return err
			}
			defer done()
			var out []*task.Record
			q := task.Query{All: owner == "", Owner: owner, Limit: 500}
			for len(out) < limit {
				recs, next, err := ts.List(cmd.Context(), q)
				if err != nil {
					return &exitError{exitToolErr, err}
				}
				for _, r := range recs {
					if (status == "" || string(r.Status) == status) && len(out) < limit {
						out = append(out, r)
					}
				}
				if next == "" {
					break
				}
				c, _ := task.ParseCursor(next)
				q.After = &c
			}
			if asJSON {
				list := make([]taskJSON, 0, len(out))
				for _, r := range out {
					list = append(list, toTaskJSON(r, false))
				}
				return printJSON(e, list)
			}
			if len(out) == 0 {
				fmt.Fprintf(e.stdout, "no tasks in %s\n", where)
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tTOOL\tOWNER\tCREATED\tUPDATED\tINSTANCE\tMESSAGE")
			for _, r := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, oneLine(r.Tool, 40), oneLine(ownerLabel(r.Owner), 40),
					r.Created.Local().Format(time.DateTime), r.Updated.Local().Format(time.DateTime), oneLine(r.Instance, 28), oneLine(r.Message, 60))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tasks as JSON")
	cmd.Flags().StringVar(&owner, "owner", "", "only this caller's tasks (as the gateway names callers: subject:NAME, jwt:\"ISSUER\":SUB)")
	cmd.Flags().StringVar(&status, "status", "", "only tasks of this status (working, input_required, completed, failed, cancelled)")
	cmd.Flags().IntVar(&limit, "limit", 200, "at most this many tasks")
	return cmd
}

// ownerLabel shows a caller without a credential.
func ownerLabel(owner string) string {
	if owner == "" {
		return "(anonymous)"
	}
	return owner
}

func newTasksGetCommand(e *env, g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show a task: its status, and its result once it ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := task.CheckID(args[0]); err != nil {
				return &exitError{exitUsage, fmt.Errorf("task id %q: %w", oneLine(args[0], 40), err)}
			}
			ts, where, done, err := openTasks(cmd.Context(), e, g)
			if err != nil {
				return err
			}
			defer done()
			r, err := ts.Lookup(cmd.Context(), args[0])
			if errors.Is(err, task.ErrNotFound) {
				return &exitError{exitUsage, fmt.Errorf("no task %s in %s (it may have expired)", args[0], where)}
			}
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if asJSON {
				return printJSON(e, toTaskJSON(r, true))
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			for _, row := range [][2]string{
				{"id", r.ID}, {"status", string(r.Status)}, {"message", oneLine(r.Message, 200)},
				{"tool", oneLine(r.Tool, 80)}, {"owner", oneLine(ownerLabel(r.Owner), 80)},
				{"created", r.Created.Local().Format(time.DateTime)}, {"updated", r.Updated.Local().Format(time.DateTime)},
				{"expires", r.Expires.Local().Format(time.DateTime)}, {"instance", oneLine(r.Instance, 40)},
			} {
				fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
			}
			if r.Total > 0 || r.Progress > 0 {
				fmt.Fprintf(tw, "progress:\t%g of %g\n", r.Progress, r.Total)
			}
			if r.UpstreamTask != "" {
				fmt.Fprintf(tw, "upstream:\t%s, its task %s\n", oneLine(r.Server, 40), oneLine(r.UpstreamTask, 80))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if txt := taskResultText(r); txt != "" {
				fmt.Fprintf(e.stdout, "result:\n%s\n", termSafe(txt))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task as JSON, with its result")
	return cmd
}

// taskResultText is the text of a task's result or error, for a terminal.
func taskResultText(r *task.Record) string {
	if len(r.Error) > 0 {
		var je struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(r.Error, &je)
		return fmt.Sprintf("error %d: %s", je.Code, je.Message)
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(r.Result, &res) != nil {
		return ""
	}
	var out string
	for _, c := range res.Content {
		if c.Type == "text" {
			out += c.Text + "\n"
		} else {
			out += "[" + c.Type + "]\n"
		}
	}
	return out
}

func newTasksCancelCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel tasks; the replica running each stops its call",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				if err := task.CheckID(id); err != nil {
					return &exitError{exitUsage, fmt.Errorf("task id %q: %w", oneLine(id, 40), err)}
				}
			}
			ts, where, done, err := openTasks(cmd.Context(), e, g)
			if err != nil {
				return err
			}
			defer done()
			var errs []error
			for _, id := range args {
				r, err := ts.Cancel(cmd.Context(), "", true, id, "The task was cancelled by an operator.")
				switch {
				case errors.Is(err, task.ErrNotFound):
					errs = append(errs, fmt.Errorf("no task %s in %s", id, where))
				case errors.Is(err, task.ErrTerminal):
					errs = append(errs, fmt.Errorf("task %s already ended (%s)", id, r.Status))
				case err != nil:
					errs = append(errs, err)
				default:
					fmt.Fprintf(e.stdout, "cancelled %s (%s)\n", id, oneLine(r.Tool, 40))
				}
			}
			if len(errs) > 0 {
				return &exitError{exitToolErr, errors.Join(errs...)}
			}
			return nil
		},
	}
	return cmd
}

// taskJSON is the --json shape of a task.
type taskJSON struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	Message      string          `json:"message,omitempty"`
	Tool         string          `json:"tool"`
	Owner        string          `json:"owner"`
	Progress     float64         `json:"progress,omitempty"`
	Total        float64         `json:"total,omitempty"`
	Created      time.Time       `json:"created"`
	Updated      time.Time       `json:"updated"`
	Expires      time.Time       `json:"expires"`
	Instance     string          `json:"instance"`
	Server       string          `json:"server,omitempty"`
	UpstreamTask string          `json:"upstreamTask,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Error        json.RawMessage `json:"error,omitempty"`
}

func toTaskJSON(r *task.Record, withResult bool) taskJSON {
	j := taskJSON{
		ID: r.ID, Status: string(r.Status), Message: r.Message, Tool: r.Tool, Owner: r.Owner,
		Progress: r.Progress, Total: r.Total, Created: r.Created, Updated: r.Updated, Expires: r.Expires,
		Instance: r.Instance, Server: r.Server, UpstreamTask: r.UpstreamTask,
	}
	if withResult {
		j.Result, j.Error = r.Result, r.Error
	}
	return j
}
