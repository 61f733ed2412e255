package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/workspace"
)

func newPinsCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pins",
		Short: "List, approve and forget the approved fingerprints of servers' tools",
		Long: `toolwire pins each tool's definition (name, description, input schema and
annotations) with a SHA-256 fingerprint the first time it sees a server, and
checks every later listing against the pins. What a changed or new tool does
depends on security.pins: "enforce" (the default under --strict) keeps it out
of the registry until approved, "warn" (the default) registers it with a
warning, "off" does not check. Either way the change is logged and audited.

Pins are kept in security.pinsFile (default: toolwire/pins.json in the user's
configuration directory), or, with a PostgreSQL store (--store), in its
tables, shared by every replica of a fleet; apart for each server's identity (its name with its
command, arguments and working directory, or its URL), so two projects that
both name a server "files" never share pins. Each pin keeps the name its tool
is registered under. In warn mode a new tool is warned about once, not at
every command.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newPinsListCommand(e, g), newPinsApproveCommand(e, g), newPinsForgetCommand(e, g))
	return cmd
}

func newPinsListCommand(e *env, g *globalFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [SERVER]",
		Short: "List the pinned tools, of every server or of one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, file, err := openStore(cmd.Context(), e, g, nil, false)
			if err != nil {
				return err
			}
			defer st.Close()
			store := st.Pins()
			here := configuredScopes(file)
			entries, err := store.ListContext(cmd.Context())
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if len(args) == 1 {
				entries = slices.DeleteFunc(entries, func(en pins.Entry) bool { return en.Server != args[0] })
				if len(entries) == 0 {
					return &exitError{exitUsage, fmt.Errorf("no pins for server %q in %s", args[0], pinsPlace(st))}
				}
			}
			if asJSON {
				return printJSON(e, pinsJSON(entries, here))
			}
			if len(entries) == 0 {
				fmt.Fprintf(e.stdout, "no pins in %s\n", pinsPlace(st))
				return nil
			}
			printPinsTable(e, entries, here)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the pins as JSON, with full fingerprints")
	return cmd
}

func printPinsTable(e *env, entries []pins.Entry, here map[pins.Scope]bool) {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSCOPE\tTOOL\tREGISTERED AS\tFINGERPRINT\tAPPROVED\tHOW\tDESCRIPTION")
	for _, en := range entries {
		how := "approved"
		if en.FirstUse {
			how = "first-use"
		}
		registered := en.Registered
		if registered == "" {
			registered = "-" // a pin from before names were kept
		}
		// Server and tool names come from configuration and from the
		// server; both are shown as untrusted text.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(en.Server, 40), scopeLabel(en, here), oneLine(en.Tool, 48), oneLine(registered, 64),
			shortPrint(en.Fingerprint), en.ApprovedAt.Local().Format(time.DateTime), how, oneLine(en.Snippet, 48))
	}
	_ = tw.Flush()
}

// configuredScopes are the pin scopes of the configuration's servers.
func configuredScopes(file *config.File) map[pins.Scope]bool {
	here := make(map[pins.Scope]bool, len(file.Servers))
	for _, s := range file.Servers {
		here[mcpclient.PinScope(s)] = true
	}
	return here
}

// scopeLabel says whose pins an entry is: this configuration's server of
// that name, another server of that name (another project's), or pins by
// name only from a file of before scopes, which this configuration's
// server of that name adopts at its next start.
func scopeLabel(en pins.Entry, here map[pins.Scope]bool) string {
	switch {
	case en.Identity == "":
		return "by name"
	case here[pins.Scope{Server: en.Server, Identity: en.Identity}]:
		return "this config"
	default:
		return "other " + shortPrint(en.Identity)
	}
}

// shortPrint is a fingerprint cut to "sha256:" and 12 hex digits, enough
// to tell pins apart on screen.
func shortPrint(fp string) string {
	const keep = len("sha256:") + 12
	if len(fp) <= keep {
		return fp
	}
	return fp[:keep]
}

// pinJSON is the --json shape of one pin.
type pinJSON struct {
	Server string `json:"server"`
	// Identity and Configured say which server of that name the pin is
	// for (see pins.Scope); Identity is empty for pins by name only.
	Identity   string `json:"identity,omitempty"`
	Configured bool   `json:"configured"`
	Tool       string `json:"tool"`
	// Registered is the name the tool was registered under when pinned.
	Registered  string    `json:"registered,omitempty"`
	Fingerprint string    `json:"fingerprint"`
	ApprovedAt  time.Time `json:"approvedAt"`
	FirstUse    bool      `json:"firstUse"`
	Description string    `json:"description,omitempty"` // the start of the approved one
}

func pinsJSON(entries []pins.Entry, here map[pins.Scope]bool) []pinJSON {
	out := make([]pinJSON, 0, len(entries))
	for _, en := range entries {
		out = append(out, pinJSON{
			Server: en.Server, Identity: en.Identity, Configured: here[pins.Scope{Server: en.Server, Identity: en.Identity}],
			Tool: en.Tool, Registered: en.Registered, Fingerprint: en.Fingerprint, ApprovedAt: en.ApprovedAt, FirstUse: en.FirstUse, Description: en.Snippet,
		})
	}
	return out
}

func newPinsApproveCommand(e *env, g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "approve SERVER[/TOOL]",
		Short: "Connect a server and pin its tools' current definitions",
		Long: `Connect the server, read its current tool definitions and pin them as
approved: every tool the configuration selects, or only TOOL. A quarantined
tool is registered again from the next start (or list_changed) on; with a
PostgreSQL store, at once by every running toolwire in enforce mode (a
fleet's replicas).

The server is told that toolwire could answer its questions (elicitation)
and its requests for a model's reply (sampling), so a tool it lists only to
clients that can is approved like the others.

Approve only what you have looked at: "toolwire tools" shows the descriptions
(a quarantined tool is absent there; run with security.pins: warn to see it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file, err := loadConfig(e, g)
			if err != nil {
				return err
			}
			names := make([]string, 0, len(file.Servers))
			for _, s := range file.Servers {
				names = append(names, s.Name)
			}
			server, toolName, ok := splitTarget(args[0], names)
			if !ok {
				return &exitError{exitUsage, fmt.Errorf("no server %q in the configuration (servers: %s)", args[0], strings.Join(names, ", "))}
			}
			cfg := file.Servers[slices.IndexFunc(file.Servers, func(s config.Server) bool { return s.Name == server })]
			if cfg.Disabled {
				return &exitError{exitUsage, fmt.Errorf("server %q is disabled in the configuration; enable it to approve its tools", server)}
			}

			// Only this server, with pinning off: its quarantined tools
			// are listed like the others, and nothing is pinned on first
			// use behind the operator's back.
			only := *file
			only.Servers = []config.Server{cfg}
			only.Security.Pins = "off"
			// Told the client could answer every request a server may
			// make of it, as the gateway's clients and the terminal can,
			// the server lists the tools it offers only then (server-
			// everything's elicitation and sampling tools, say): they can
			// be approved too. Nothing is called, so nothing is asked.
			w, err := open(cmd.Context(), e, g, &only, &workspace.Options{Confirmer: refuseAll{},
				Relay: mcpclient.RelayCapabilities{Elicitation: true, Sampling: true}})
			if err != nil {
				return err
			}
			defer w.Close()
			store := w.Store().Pins()
			srv, _ := w.Manager().Server(server)
			defs := srv.Definitions()
			if toolName != "" {
				i := slices.IndexFunc(defs, func(d pins.Definition) bool { return d.Name == toolName })
				if i < 0 {
					return &exitError{exitUsage, fmt.Errorf("server %q does not list a tool %q (it lists: %s)", server, toolName, defNames(defs))}
				}
				defs = defs[i : i+1]
			}
			if len(defs) == 0 {
				return &exitError{exitToolErr, fmt.Errorf("server %q lists no tools to approve", server)}
			}

			before, err := store.ListContext(cmd.Context())
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			scope := mcpclient.PinScope(cfg)
			old := map[string]string{}
			for _, en := range before {
				// Its own pins, or those by name only that it adopts.
				if en.Server == server && (en.Identity == scope.Identity || en.Identity == "") {
					old[en.Tool] = en.Fingerprint
				}
			}
			if err := store.Approve(cmd.Context(), scope, defs, ""); err != nil {
				return &exitError{exitToolErr, err}
			}
			if len(old) == 0 && toolName != "" && len(srv.Definitions()) > 1 {
				fmt.Fprintf(e.stderr, "toolwire: note: %s had no pins, so its other tools now count as new (quarantined in enforce mode); approve them with: toolwire pins approve %s\n",
					termSafe(server), termSafe(server))
			}
			for _, d := range defs {
				fp, _ := pins.Fingerprint(d) // Approve fingerprinted it already
				what := "new"
				switch prev, ok := old[d.Name]; {
				case ok && prev == fp:
					what = "unchanged"
				case ok:
					what = "updated"
				}
				fmt.Fprintf(e.stdout, "approved %s %s (%s)\n", termSafe(server+"/"+d.Name), shortPrint(fp), what)
				w.Audit().Record(audit.Event{Kind: audit.ToolPinned, Source: server, Original: d.Name, Pinned: old[d.Name], Fingerprint: fp, Reason: "approved"})
			}
			return nil
		},
	}
}

func newPinsForgetCommand(e *env, g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "forget SERVER[/TOOL]",
		Short: "Drop the pins of a server, or of one of its tools",
		Long: `Drop the pins of a server, or of one of its tools. A server with no pins is
trusted again on its next start (its tools are pinned on first use); a
forgotten tool of a server that keeps other pins counts as new (in enforce
mode: quarantined until approved).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// With the audit log: the forgetting is recorded.
			st, file, err := openStore(cmd.Context(), e, g, nil, true)
			if err != nil {
				return err
			}
			defer st.Close()
			store := st.Pins()
			entries, err := store.ListContext(cmd.Context())
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			var names []string
			for _, en := range entries {
				names = append(names, en.Server)
			}
			for _, s := range file.Servers {
				names = append(names, s.Name)
			}
			slices.Sort(names)
			names = slices.Compact(names)
			server, toolName, ok := splitTarget(args[0], names)
			if !ok {
				return &exitError{exitUsage, fmt.Errorf("no server %q in the configuration or the pins %s", args[0], pinsWhere(st))}
			}
			// A configured server's own pins (and those by name only, which
			// it would adopt); a name not configured here, every scope of it.
			scope := pins.Scope{Server: server}
			if i := slices.IndexFunc(file.Servers, func(s config.Server) bool { return s.Name == server }); i >= 0 {
				scope = mcpclient.PinScope(file.Servers[i])
			}
			if err := store.Forget(cmd.Context(), scope, toolName); err != nil {
				if errors.Is(err, pins.ErrNotPinned) {
					return &exitError{exitUsage, fmt.Errorf("%s has no pin in %s", target(server, toolName), pinsPlace(st))}
				}
				return &exitError{exitToolErr, err}
			}
			n := 0
			for _, en := range entries {
				inScope := scope.Identity == "" || en.Identity == "" || en.Identity == scope.Identity
				if en.Server == server && inScope && (toolName == "" || en.Tool == toolName) {
					n++
				}
			}
			fmt.Fprintf(e.stdout, "forgot %d pin(s) of %s\n", n, termSafe(target(server, toolName)))
			if sink := st.Audit(); sink != nil {
				// The store closes the sink.
				if err := audit.NewLog(sink, nil).Record(audit.Event{Kind: audit.PinForgotten, Source: server, Original: toolName}); err != nil {
					return &exitError{exitToolErr, fmt.Errorf("pins forgotten, but not audited: %w", err)}
				}
			}
			return nil
		},
	}
}

// splitTarget splits a SERVER[/TOOL] argument. A server name may itself
// contain '/', so the argument is matched against the known names: the
// whole argument if it is one, else the longest name followed by '/'.
func splitTarget(arg string, servers []string) (server, tool string, ok bool) {
	for _, s := range servers {
		if s == arg {
			return s, "", true
		}
	}
	for _, s := range servers {
		if rest, found := strings.CutPrefix(arg, s+"/"); found && rest != "" && len(s) > len(server) {
			server, tool, ok = s, rest, true
		}
	}
	return server, tool, ok
}

// target names a server, or one of its tools, as the commands take it.
func target(server, tool string) string {
	if tool == "" {
		return "server " + fmt.Sprintf("%q", server)
	}
	return fmt.Sprintf("%s/%s", server, tool)
}

func defNames(defs []pins.Definition) string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = termSafe(d.Name)
	}
	return strings.Join(names, ", ")
}

// printQuarantined lists, under the servers table, the tools pinning keeps
// out of the registry and how to let each in.
func printQuarantined(e *env, servers []*mcpclient.Server) {
	for _, s := range servers {
		for _, q := range s.Quarantined() {
			why := q.Status.String()
			if len(q.Fields) > 0 {
				why = strings.Join(q.Fields, ", ") + " changed"
			}
			name := termSafe(s.Name() + "/" + q.Tool)
			fmt.Fprintf(e.stdout, "quarantined: %s (%s); approve with: toolwire pins approve %s\n", name, why, name)
		}
	}
}
