package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/workspace"
	"golang.org/x/term"
)

// env is what commands take from the process, so tests can run them
// in-process with their own streams and a terminal or not.
type env struct {
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	isTerminal func() bool // whether stdin is an interactive terminal
	lookupEnv  func(string) (string, bool)
	// openBrowser opens an authorization URL for "toolwire login"; tests
	// replace it with a client that follows the URL.
	openBrowser func(ctx context.Context, url string) error
}

func defaultEnv() *env {
	return &env{
		stdin:       os.Stdin,
		stdout:      os.Stdout,
		stderr:      os.Stderr,
		isTerminal:  func() bool { return term.IsTerminal(int(os.Stdin.Fd())) },
		lookupEnv:   os.LookupEnv,
		openBrowser: browserOpener,
	}
}

// globalFlags are the flags every command shares.
type globalFlags struct {
	config  []string
	audit   string
	store   string // --store; see storeURL
	verbose bool
	strict  bool
	// logFormat is --log-format: text or json (see newLogger).
	logFormat string
}

func newRootCommand(e *env) *cobra.Command {
	var g globalFlags
	root := &cobra.Command{
		Use:           "toolwire",
		Short:         "Connect MCP servers and call their tools safely",
		Long:          "toolwire connects MCP servers, adapts their tools into one registry, and calls them with schema validation, risk tiers, confirmation and an audit log.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Version = buildVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.PersistentFlags().StringArrayVarP(&g.config, "config", "c", nil, "configuration file in any supported dialect; repeat to combine files (e.g. a Claude Desktop file and a VS Code one); default $TOOLWIRE_CONFIG (a list separated by '"+string(os.PathListSeparator)+"'), then ./toolwire.yaml")
	root.PersistentFlags().StringVar(&g.audit, "audit", "", "append audit events to this JSON Lines file (overrides the config's audit.file)")
	root.PersistentFlags().StringVar(&g.store, "store", "", "keep state (tool pins, OAuth tokens, the audit log) in this PostgreSQL database, postgres://USER@HOST:PORT/DATABASE, shared by a fleet (overrides the config's store; default $"+storeEnv+"; without either, the files of one machine)")
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log debug detail, including servers' stderr, to stderr")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", logText, "format of warnings and logs on stderr: text (\"toolwire: warning: ...\" lines) or json (one JSON object per line)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := checkLogFormat(g.logFormat); err != nil {
			return &exitError{exitUsage, err}
		}
		if err := checkStoreFlag(g.store); err != nil {
			return &exitError{exitUsage, err}
		}
		return nil
	}
	root.PersistentFlags().BoolVar(&g.strict, "strict", false, "the strict profile, as security.strict: true: remote servers reach only their own host and security.allowHosts, and tool pins are enforced (unless security.pins says otherwise)")
	root.AddCommand(newToolsCommand(e, &g), newCallCommand(e, &g), newServersCommand(e, &g), newConfigCommand(e, &g), newServeCommand(e, &g), newTokenCommand(e))
	root.AddCommand(newRunCommand(e, &g), newChatCommand(e, &g))
	root.AddCommand(newAuditCommand(e, &g))
	root.AddCommand(newLoginCommand(e, &g), newLogoutCommand(e, &g), newAuthCommand(e, &g), newOAuthCommand(e, &g))
	root.AddCommand(newPinsCommand(e, &g), newApprovalsCommand(e, &g))
	root.AddCommand(newVersionCommand(e))
	return root
}

// open starts the configuration's servers as workspace.Open does, with
// what the global flags and the terminal add to opts: the audit file and
// --strict, the logger, the environment, the prompt for ${input:ID}
// values, and on a terminal a line per server as it starts. file nil
// means the configuration the flags name. A failure to start is exit
// status 1; any other failure, one of the configuration, status 2.
func open(ctx context.Context, e *env, g *globalFlags, file *config.File, opts *workspace.Options) (*workspace.Workspace, error) {
	if file == nil {
		var err error
		if file, err = loadConfig(e, g); err != nil {
			return nil, err
		}
	}
	o := *opts
	o.AuditFile, o.Strict, o.StoreURL = g.audit, g.strict, storeURL(e, g)
	o.Logger = newLogger(e.stderr, g, nil) // the workspace masks its secrets in it
	o.LookupEnv, o.Input = e.lookupEnv, configInputPrompter(e)
	var lines *startLines
	if o.StateChanges == nil && stderrIsTerminal(e) && len(file.Servers) > 0 {
		lines = newStartLines(e.stderr, file.Servers)
		o.StateChanges = lines.changes
		// A failure shown on its line is not warned about again.
		o.OnFailed = func(server, reason string) {
			if !lines.finish()[server] {
				o.Logger.Warn(reason)
			}
		}
	}
	w, err := workspace.Open(ctx, file, &o)
	lines.finish()
	switch {
	case errors.Is(err, workspace.ErrNotStarted):
		return nil, &exitError{exitToolErr, err}
	case errors.Is(err, workspace.ErrNoAuditFile):
		return nil, &exitError{exitUsage, fmt.Errorf("%w (set audit.file or pass --audit)", workspace.ErrNoAuditFile)}
	case err != nil:
		return nil, &exitError{exitUsage, storeFlagHint(err)}
	}
	return w, nil
}

// startLines shows, on a terminal, one line per server as it starts: that
// it is starting, then its state and how long it took ("files ready in
// 1.2 s (5 tools)", "search failed: …"), so that a slow start (an npx
// download, say) is not silence.
type startLines struct {
	out     io.Writer
	start   time.Time
	changes chan mcpclient.Status
	done    chan map[string]bool
	stop    chan struct{}

	finishOnce sync.Once
	shown      map[string]bool
}

func newStartLines(out io.Writer, servers []config.Server) *startLines {
	l := &startLines{out: out, start: time.Now(), changes: make(chan mcpclient.Status, 16*len(servers)+16),
		done: make(chan map[string]bool, 1), stop: make(chan struct{})}
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = termSafe(s.Name)
	}
	fmt.Fprintf(out, "toolwire: starting %s…\n", strings.Join(names, ", "))
	go l.run()
	return l
}

func (l *startLines) run() {
	shown := map[string]bool{}
	show := func(st mcpclient.Status) {
		if shown[st.Name] {
			return
		}
		took := fmt.Sprintf("%.1f s", st.Since.Sub(l.start).Seconds())
		switch st.State {
		case mcpclient.Ready:
			fmt.Fprintf(l.out, "toolwire: %s ready in %s (%d tools)\n", termSafe(st.Name), took, st.Tools)
		case mcpclient.Failed:
			fmt.Fprintf(l.out, "toolwire: %s failed after %s: %s\n", termSafe(st.Name), took, oneLine(st.LastError, 300))
		default:
			return
		}
		shown[st.Name] = true
	}
	for {
		select {
		case st := <-l.changes:
			show(st)
		case <-l.stop:
			for {
				select {
				case st := <-l.changes:
					show(st)
				default:
					l.done <- shown
					return
				}
			}
		}
	}
}

// finish ends the lines once the servers have started, and reports the
// servers whose outcome was shown. Later calls report the same. A nil
// *startLines shows nothing.
func (l *startLines) finish() map[string]bool {
	if l == nil {
		return nil
	}
	l.finishOnce.Do(func() {
		close(l.stop)
		l.shown = <-l.done
	})
	return l.shown
}

// configPath picks the configuration file: the flag, then
// $TOOLWIRE_CONFIG, then ./toolwire.yaml if it exists.
func configPath(e *env, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p, ok := e.lookupEnv("TOOLWIRE_CONFIG"); ok && p != "" {
		return p, nil
	}
	if _, err := os.Stat("toolwire.yaml"); err == nil {
		return "toolwire.yaml", nil
	}
	return "", errors.New("no configuration: pass --config FILE, set TOOLWIRE_CONFIG, or create ./toolwire.yaml")
}

// loadConfig loads the configuration files the flags or environment name.
func loadConfig(e *env, g *globalFlags) (*config.File, error) {
	paths, err := configPaths(e, g.config)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	file, err := config.LoadAll(paths)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	return file, nil
}

// configPaths picks the configuration files: the flags, then the list in
// $TOOLWIRE_CONFIG, then ./toolwire.yaml if it exists.
func configPaths(e *env, flags []string) ([]string, error) {
	if len(flags) > 0 {
		return flags, nil
	}
	if list, ok := e.lookupEnv("TOOLWIRE_CONFIG"); ok && list != "" {
		return filepath.SplitList(list), nil
	}
	p, err := configPath(e, "")
	if err != nil {
		return nil, err
	}
	return []string{p}, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
