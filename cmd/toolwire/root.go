package main

import (
	"bytes"
	"cmp"
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
	// startWait is how long run and chat wait for every server before
	// the model starts on the tools of those ready (0: agentStartWait);
	// waitNote, when the first "still waiting" line shows on a terminal
	// (0: defaultWaitNote). Tests shorten them.
	startWait, waitNote time.Duration
	// interrupts delivers Ctrl-C to chat, which cancels a turn with it
	// rather than the whole command; nil when the command's context is
	// all Ctrl-C ends (in tests that do not say otherwise).
	interrupts *interrupter
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
	root.AddCommand(newTasksCommand(e, &g))
	root.AddCommand(newVersionCommand(e))
	strictCommands(root)
	addExamples(root)
	return root
}

// open starts the configuration's servers as workspace.Open does, with
// what the global flags and the terminal add to opts: the audit file and
// --strict, the logger, the environment, the prompt for ${input:ID}
// values, and on a terminal a line per server as it starts and, while
// some have not, which. file nil means the configuration the flags name.
// A failure to start is exit status 1; any other failure, one of the
// configuration, status 2.
func open(ctx context.Context, e *env, g *globalFlags, file *config.File, opts *workspace.Options) (*workspace.Workspace, error) {
	if file == nil {
		var err error
		if file, err = loadConfig(e, g); err != nil {
			return nil, err
		}
	}
	o := *opts
	o.AuditFile, o.Strict, o.StoreURL = g.audit, g.strict, storeURL(e, g)
	// While a person is asked for an ${input:ID} value, start-up lines
	// and warnings wait, so that none cuts into the question.
	out := &heldWriter{out: e.stderr}
	o.Logger = newLogger(out, g, nil) // the workspace masks its secrets in it
	o.LookupEnv, o.Input = e.lookupEnv, holdWhileAsking(out, configInputPrompter(e))
	var lines *startLines
	if o.StateChanges == nil && stderrIsTerminal(e) && len(file.Servers) > 0 {
		lines = newStartLines(out, file.Servers, e.waitNote)
		o.StateChanges = lines.changes
		// A failure shown on its line is not warned about again.
		o.OnFailed = func(server, reason string) {
			if !lines.shownNow(server) {
				o.Logger.Warn(reason)
			}
		}
	}
	w, err := workspace.Open(ctx, file, &o)
	if err != nil {
		lines.finish()
	}
	switch {
	case errors.Is(err, workspace.ErrNotStarted):
		return nil, &exitError{exitToolErr, err}
	case errors.Is(err, workspace.ErrNoAuditFile):
		return nil, &exitError{exitUsage, fmt.Errorf("%w (set audit.file or pass --audit)", workspace.ErrNoAuditFile)}
	case err != nil:
		return nil, &exitError{exitUsage, storeFlagHint(err)}
	}
	lines.opened(w.Manager().Status())
	return w, nil
}

// heldWriter writes to out, except while a question is on screen (hold):
// what is written then waits, and goes out at release.
type heldWriter struct {
	out io.Writer

	mu    sync.Mutex
	held  int
	queue bytes.Buffer
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held > 0 {
		return h.queue.Write(p)
	}
	return h.out.Write(p)
}

func (h *heldWriter) hold() {
	h.mu.Lock()
	h.held++
	h.mu.Unlock()
}

func (h *heldWriter) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held--; h.held == 0 && h.queue.Len() > 0 {
		_, _ = h.out.Write(h.queue.Bytes())
		h.queue.Reset()
	}
}

// holdWhileAsking wraps ask (nil: none) so that out holds its other
// writers while a person is asked.
func holdWhileAsking(out *heldWriter, ask func(string, config.Input) (string, error)) func(string, config.Input) (string, error) {
	if ask == nil {
		return nil
	}
	return func(id string, in config.Input) (string, error) {
		out.hold()
		defer out.release()
		return ask(id, in)
	}
}

// startLines shows, on a terminal, one line per server as it starts: that
// it is starting, then its state and how long it took ("files ready in
// 1.2 s (5 tools)", "search failed: …"), so that a slow start (an npx
// download, say) is not silence; while some have not started, a line
// now and then names them and how long they have had. When the
// workspace opens with servers still starting (run and chat), the lines
// say so and go on showing each of those as it ends.
type startLines struct {
	out     io.Writer
	start   time.Time
	changes chan mcpclient.Status
	names   []string                 // the servers started, in order
	timeout map[string]time.Duration // each one's start timeout
	every   time.Duration            // the first wait before a "still waiting" line; the gap doubles

	stop chan struct{} // closed by finish
	done chan struct{} // closed when run returns

	mu      sync.Mutex
	settled map[string]bool // ready, failed or stopped
	shown   map[string]bool // its outcome has a line
	late    bool            // the workspace opened: no more "still waiting" lines

	finishOnce sync.Once
}

// defaultWaitNote is when the first "still waiting" line is shown.
const defaultWaitNote = 3 * time.Second

func newStartLines(out io.Writer, servers []config.Server, every time.Duration) *startLines {
	if every <= 0 {
		every = defaultWaitNote
	}
	l := &startLines{out: out, start: time.Now(), changes: make(chan mcpclient.Status, 16*len(servers)+16),
		timeout: map[string]time.Duration{}, every: every, stop: make(chan struct{}), done: make(chan struct{}),
		settled: map[string]bool{}, shown: map[string]bool{}}
	for _, s := range servers {
		if s.Disabled {
			continue
		}
		l.names = append(l.names, s.Name)
		l.timeout[s.Name] = cmp.Or(s.Timeout, mcpclient.DefaultTimeout)
	}
	safe := make([]string, len(l.names))
	for i, n := range l.names {
		safe[i] = termSafe(n)
	}
	fmt.Fprintf(out, "toolwire: starting %s…\n", strings.Join(safe, ", "))
	go l.run()
	return l
}

func (l *startLines) run() {
	defer close(l.done)
	note := time.NewTimer(l.every)
	defer note.Stop()
	gap := l.every
	for {
		select {
		case st := <-l.changes:
			if l.show(st) {
				return
			}
		case <-note.C:
			l.stillWaiting()
			gap *= 2
			note.Reset(gap)
		case <-l.stop:
			l.drain()
			return
		}
	}
}

// show shows a server's outcome, once, and reports whether every server
// has settled.
func (l *startLines) show(st mcpclient.Status) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st.State {
	case mcpclient.Ready, mcpclient.Failed, mcpclient.Stopped:
	default:
		return false
	}
	if !l.settled[st.Name] {
		l.settled[st.Name] = true
		took := fmt.Sprintf("%.1f s", st.Since.Sub(l.start).Seconds())
		clear := ""
		if l.late {
			clear = "\r\033[K" // a run's live line may be on screen
		}
		switch st.State {
		case mcpclient.Ready:
			fmt.Fprintf(l.out, "%stoolwire: %s ready in %s (%d tools)\n", clear, termSafe(st.Name), took, st.Tools)
			l.shown[st.Name] = true
		case mcpclient.Failed:
			fmt.Fprintf(l.out, "%stoolwire: %s failed after %s: %s\n", clear, termSafe(st.Name), took, oneLine(st.LastError, 300))
			l.shown[st.Name] = true
		}
	}
	return len(l.settled) >= len(l.names)
}

// waitingLocked lists the servers not settled, with how long they have
// had of their timeouts.
func (l *startLines) waitingLocked() []string {
	var out []string
	since := time.Since(l.start)
	for _, n := range l.names {
		if !l.settled[n] {
			out = append(out, fmt.Sprintf("%s (%.0f s of %.0f s)", termSafe(n), since.Seconds(), l.timeout[n].Seconds()))
		}
	}
	return out
}

func (l *startLines) stillWaiting() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.waitingLocked(); len(w) > 0 && !l.late {
		fmt.Fprintf(l.out, "toolwire: still waiting for %s\n", strings.Join(w, ", "))
	}
}

// drain shows the changes already sent.
func (l *startLines) drain() {
	for {
		select {
		case st := <-l.changes:
			l.show(st)
		default:
			return
		}
	}
}

// shownNow reports whether server's failure has its line, after showing
// the changes already sent.
func (l *startLines) shownNow(server string) bool {
	l.drain()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shown[server]
}

// opened is told that the workspace has opened, and the servers' states
// as it returned them. With every server settled the lines end; otherwise
// one line says which servers are still starting, and each gets its line
// when it ends. The states are shown first: a server's change of state
// may still be on its way through the channel, and a server Open waited
// for is not one it went on without.
func (l *startLines) opened(now []mcpclient.Status) {
	if l == nil {
		return
	}
	l.drain()
	for _, st := range now {
		l.show(st)
	}
	l.mu.Lock()
	w := l.waitingLocked()
	l.late = true
	if len(w) > 0 {
		fmt.Fprintf(l.out, "toolwire: going on without %s; their tools join when they are ready\n", strings.Join(w, ", "))
	}
	l.mu.Unlock()
	if len(w) == 0 {
		l.finish()
	}
}

// finish ends the lines and waits until they have. A nil *startLines
// shows nothing; later calls do nothing.
func (l *startLines) finish() {
	if l == nil {
		return
	}
	l.finishOnce.Do(func() { close(l.stop) })
	<-l.done
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
