package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

func newToolsCommand(e *env, g *globalFlags) *cobra.Command {
	var (
		asJSON  bool
		servers []string
	)
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the tools of every configured server",
		Long: `List the tools of every configured server (or of those --server names):
registered name, tier, where the tier comes from, server and description.

Every server is waited for, up to its start timeout; on a terminal a line
shows each server as it becomes ready, and now and then which servers are
still being waited for.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := loadConfig(e, g)
			if err != nil {
				return err
			}
			if len(servers) > 0 {
				picked, err := serversNamed(file, servers)
				if err != nil {
					return &exitError{exitUsage, err}
				}
				file = withServers(file, picked)
			}
			// Listing calls nothing, but the registry still needs a
			// confirmer to accept write and destructive tools.
			// On a terminal a server is told, as call tells it, that it may
			// ask questions, so that it lists what a call there would see
			// (and pins them alike): no tool is new to the next call.
			wo := &workspace.Options{Confirmer: refuseAll{}}
			wo.Relay.Elicitation = e.isTerminal()
			w, err := open(cmd.Context(), e, g, file, wo)
			if err != nil {
				return err
			}
			defer w.Close()
			tools := w.Registry().List()
			if asJSON {
				return printToolsJSON(e, tools)
			}
			printToolsTable(e, tools)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tools as JSON, with their input schemas")
	cmd.Flags().StringArrayVar(&servers, "server", nil, "list only this server's tools (starting only it); repeat for more servers")
	return cmd
}

// refuseAll is the confirmer of commands that never call a tool.
type refuseAll struct{}

func (refuseAll) Confirm(_ context.Context, _ tool.PendingCall) (bool, error) { return false, nil }

func printToolsTable(e *env, tools []*tool.Tool) {
	// On a terminal the description gets what the other columns leave of
	// its width, so that no row wraps; elsewhere (a pipe, a file) 72 runes.
	desc := 72
	if width, ok := terminalWidth(e.stdout); ok {
		used := 0
		cols := []int{len("NAME"), len("TIER"), len("FROM"), len("SERVER")}
		for _, t := range tools {
			cols[0] = max(cols[0], utf8.RuneCountInString(t.Name))
			cols[1] = max(cols[1], len(t.Tier.String()))
			cols[2] = max(cols[2], len(cmp.Or(string(t.TierSource), "-")))
			cols[3] = max(cols[3], utf8.RuneCountInString(t.Origin.Source))
		}
		for _, c := range cols {
			used += c + 2
		}
		desc = max(width-used-1, 12)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTIER\tFROM\tSERVER\tDESCRIPTION")
	for _, t := range tools {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Tier, cmp.Or(string(t.TierSource), "-"), t.Origin.Source, oneLine(t.Description, desc))
	}
	_ = tw.Flush()
}

// terminalWidth returns the width of w when it is a terminal.
func terminalWidth(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	return width, err == nil && width > 0
}

// toolJSON is the --json shape of one tool.
type toolJSON struct {
	Name        string          `json:"name"`
	Tier        tool.Tier       `json:"tier"`
	TierSource  tool.TierSource `json:"tierSource,omitempty"`
	Server      string          `json:"server,omitempty"`
	Original    string          `json:"original,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

func printToolsJSON(e *env, tools []*tool.Tool) error {
	out := make([]toolJSON, 0, len(tools))
	for _, t := range tools {
		out = append(out, toolJSON{t.Name, t.Tier, t.TierSource, t.Origin.Source, t.Origin.Name, t.Description, t.Schema()})
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// oneLine folds s onto one line, makes it safe for a terminal (see
// termSafe) and cuts it to at most n runes.
func oneLine(s string, n int) string {
	s = termSafe(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
