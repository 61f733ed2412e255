package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/telemetry"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
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
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log debug detail, including servers' stderr, to stderr")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", logText, "format of warnings and logs on stderr: text (\"toolwire: warning: ...\" lines) or json (one JSON object per line)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := checkLogFormat(g.logFormat); err != nil {
			return &exitError{exitUsage, err}
		}
		return nil
	}
	root.PersistentFlags().BoolVar(&g.strict, "strict", false, "the strict profile, as security.strict: true: remote servers reach only their own host and security.allowHosts, and tool pins are enforced (unless security.pins says otherwise)")
	root.AddCommand(newToolsCommand(e, &g), newCallCommand(e, &g), newServersCommand(e, &g), newConfigCommand(e, &g), newServeCommand(e, &g), newTokenCommand(e))
	root.AddCommand(newRunCommand(e, &g), newChatCommand(e, &g))
	root.AddCommand(newAuditCommand(e))
	root.AddCommand(newLoginCommand(e, &g), newLogoutCommand(e, &g), newAuthCommand(e), newOAuthCommand(e, &g))
	root.AddCommand(newPinsCommand(e, &g))
	root.AddCommand(newVersionCommand(e))
	return root
}

// workspace is a loaded configuration with its servers started.
type workspace struct {
	file     *config.File
	registry *tool.Registry
	executor *tool.Executor
	manager  *mcpclient.Manager
	sink     *audit.FileSink
	audit    *audit.Log     // nil without an audit file
	secrets  *audit.Secrets // masked in logs and audit events; add more to it
}

// openOptions tunes open for one command.
type openOptions struct {
	confirmer    tool.Confirmer
	stateChanges chan<- mcpclient.Status // for servers --watch
	file         *config.File            // already loaded (by serve); nil: open loads it
	relay        mcpclient.RelayCapabilities
	oauth        mcpclient.OAuthFunc  // nil: handlers that cannot prompt (login required)
	telemetry    *telemetry.Telemetry // nil: none
}

// open loads the configuration, opens the audit log and starts every server
// in parallel. A server that fails is reported and left out; open fails
// when a required server fails, or when no server starts at all.
func open(ctx context.Context, e *env, g *globalFlags, oo openOptions) (*workspace, error) {
	file := oo.file
	if file == nil {
		var err error
		if file, err = loadConfig(e, g); err != nil {
			return nil, err
		}
	}
	secrets := audit.NewSecrets()
	logger := newLogger(e.stderr, g, secrets)
	for _, w := range file.Warnings {
		logger.Warn(w)
	}

	w := &workspace{file: file}
	var auditLog *audit.Log
	p := firstNonEmpty(g.audit, file.Audit.File)
	if p == "" && file.Audit.Required {
		return nil, &exitError{exitUsage, errors.New("audit.required: no audit file to write (set audit.file or pass --audit)")}
	}
	if p != "" {
		var err error
		var sinkOpts audit.FileSinkOptions
		if file.Audit.SigningKey != "" {
			if sinkOpts.SigningKey, err = audit.ReadPrivateKey(file.Audit.SigningKey); err != nil {
				return nil, &exitError{exitUsage, fmt.Errorf("audit.signingKey: %w", err)}
			}
		}
		w.sink, err = audit.OpenFileWith(p, &sinkOpts)
		if err != nil {
			return nil, &exitError{exitUsage, err}
		}
		auditLog = audit.NewLog(oo.telemetry.Metrics().Sink(w.sink), &audit.LogOptions{Redactor: secrets, Logger: logger, Required: file.Audit.Required})
	}
	w.audit, w.secrets = auditLog, secrets
	w.registry = tool.NewRegistry(&tool.RegistryOptions{Confirmer: oo.confirmer})
	// Every result goes to a terminal, a model or a gateway's client: all
	// are masked, by the executor, in one place.
	w.executor = tool.NewExecutor(w.registry, &tool.ExecutorOptions{Audit: auditLog, LogArguments: file.Audit.LogArguments, Logger: logger, Mask: secrets, Observer: oo.telemetry.Observer()})

	sec := effectiveSecurity(file, g)
	var egress *mcpclient.EgressPolicy
	if sec.Strict {
		egress = &mcpclient.EgressPolicy{AllowHosts: sec.AllowHosts}
	}
	pinStore, pinMode, err := pinOptions(sec)
	if err != nil {
		if w.sink != nil {
			_ = w.sink.Close()
		}
		return nil, &exitError{exitUsage, err}
	}
	oauthFunc := oo.oauth
	if oauthFunc == nil {
		store, err := tokenStore(e)
		if err != nil {
			if w.sink != nil {
				_ = w.sink.Close()
			}
			return nil, &exitError{exitUsage, err}
		}
		oauthFunc = oauthHandlers(e, store, nil)
	}
	changes, lines := oo.stateChanges, (*startLines)(nil)
	if changes == nil && stderrIsTerminal(e) && len(file.Servers) > 0 {
		lines = newStartLines(e.stderr, file.Servers)
		changes = lines.changes
	}
	middleware, wrapTransport := clientHooks(oo.telemetry)
	w.manager = mcpclient.NewManager(file.Servers, w.registry, &mcpclient.Options{
		Egress: egress, OAuth: oauthFunc,
		Pins: pinStore, PinMode: pinMode, MaxDescription: sec.DescriptionLimit(), MaxTools: sec.ToolLimit(),
		Logger: logger, LookupEnv: e.lookupEnv, Input: configInputPrompter(e), Secrets: secrets, Audit: auditLog, StateChanges: changes,
		Relay: oo.relay, Middleware: middleware, WrapTransport: wrapTransport,
	})
	startErr := w.manager.Start(ctx)
	shown := lines.finish()
	if startErr != nil {
		w.close()
		return nil, &exitError{exitToolErr, startErr}
	}
	failed := w.manager.Failed()
	for _, st := range w.manager.Status() {
		if msg, ok := failed[st.Name]; ok && !shown[st.Name] {
			logger.Warn(msg)
		}
	}
	if n := len(w.manager.Servers()); n > 0 && len(failed) == n {
		w.close()
		return nil, &exitError{exitToolErr, errors.New("no server could be started")}
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

// finish ends the lines once Start returned, and reports the servers
// whose outcome was shown. A nil *startLines shows nothing.
func (l *startLines) finish() map[string]bool {
	if l == nil {
		return nil
	}
	close(l.stop)
	return <-l.done
}

// auditCloseWait bounds how long closing waits for calls still running to
// record their outcomes; those that do not are recorded as ended by the
// shutdown (audit.Log.Close).
const auditCloseWait = 5 * time.Second

// close ends every server (and child process), which ends the calls still
// running on them, then the audit log, once each call's outcome is in it.
func (w *workspace) close() {
	_ = w.manager.Close()
	if w.audit != nil {
		ctx, cancel := context.WithTimeout(context.Background(), auditCloseWait)
		defer cancel()
		_ = w.audit.Close(ctx)
	} else if w.sink != nil {
		_ = w.sink.Close()
	}
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
	file, err := loadConfigs(paths)
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

// loadConfigs loads each file and combines their servers, in order, into
// one. A server name defined in two files is an error naming both; the
// audit settings come from the first file that has any. Only one file may
// have a gateway section: a second is an error naming both, since silently
// preferring one file's tokens or approvals over another's is how a
// gateway ends up open.
func loadConfigs(paths []string) (*config.File, error) {
	if len(paths) == 1 {
		return config.Load(paths[0])
	}
	merged := &config.File{Path: strings.Join(paths, ", "), Inputs: map[string]config.Input{}}
	where := map[string]string{}
	gatewayFrom, securityFrom, agentFrom, auditFrom := "", "", "", ""
	var errs []error
	for _, p := range paths {
		f, err := config.Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if merged.Dialect == "" {
			merged.Dialect = f.Dialect
		} else if merged.Dialect != f.Dialect {
			merged.Dialect = "mixed"
		}
		for _, s := range f.Servers {
			at := fmt.Sprintf("%s:%d", p, s.Line)
			if first, dup := where[s.Name]; dup {
				errs = append(errs, fmt.Errorf("%s: server %q is also defined at %s; rename one", at, s.Name, first))
				continue
			}
			where[s.Name] = at
			merged.Servers = append(merged.Servers, s)
		}
		if f.Audit != (config.Audit{}) {
			if auditFrom != "" {
				errs = append(errs, fmt.Errorf("%s: audit: also configured in %s; only one configuration file may have an audit section", p, auditFrom))
			} else {
				merged.Audit, auditFrom = f.Audit, p
			}
		}
		if f.Gateway != nil {
			if merged.Gateway != nil {
				errs = append(errs, fmt.Errorf("%s:%d: gateway: also configured at %s:%d; only one configuration file may have a gateway section",
					p, f.Gateway.Line, gatewayFrom, merged.Gateway.Line))
			} else {
				merged.Gateway, gatewayFrom = f.Gateway, p
			}
		}
		if f.Agent != (config.Agent{}) {
			if agentFrom != "" {
				errs = append(errs, fmt.Errorf("%s: agent: also configured in %s; only one configuration file may have an agent section", p, agentFrom))
			} else {
				merged.Agent, agentFrom = f.Agent, p
			}
		}
		if !reflect.DeepEqual(f.Security, config.Security{}) {
			if securityFrom != "" {
				errs = append(errs, fmt.Errorf("%s: security: also configured in %s; only one configuration file may have a security section", p, securityFrom))
			} else {
				merged.Security, securityFrom = f.Security, p
			}
		}
		for id, in := range f.Inputs {
			if prev, dup := merged.Inputs[id]; dup && prev != in {
				errs = append(errs, fmt.Errorf("%s: input %q is also declared, differently, in an earlier file; declare it once", p, id))
				continue
			}
			merged.Inputs[id] = in
		}
		merged.Warnings = append(merged.Warnings, f.Warnings...)
		merged.WarningDetails = append(merged.WarningDetails, f.WarningDetails...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return merged, nil
}

// maskAttr masks known secrets in every string a log line carries.
func maskAttr(s *audit.Secrets) func([]string, slog.Attr) slog.Attr {
	return func(_ []string, a slog.Attr) slog.Attr {
		switch a.Value.Kind() {
		case slog.KindString:
			a.Value = slog.StringValue(s.String(a.Value.String()))
		case slog.KindAny:
			if err, ok := a.Value.Any().(error); ok {
				a.Value = slog.StringValue(s.String(err.Error()))
			}
		}
		return a
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// effectiveSecurity is the configuration's security section with --strict
// applied.
func effectiveSecurity(file *config.File, g *globalFlags) config.Security {
	sec := file.Security
	if g.strict {
		sec.Strict = true
	}
	return sec
}
