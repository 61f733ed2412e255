package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/sharedfile"
	"github.com/toolwire/toolwire/tool"
	"golang.org/x/term"
)

// newConfigCommand groups the commands that read a configuration file
// without starting any server: check and import.
func newConfigCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a configuration file, or convert one to toolwire's own",
		Long: "config reads a configuration in any dialect toolwire understands (toolwire's own file, " +
			"the mcpServers file of Claude Desktop, Claude Code and Cursor, VS Code's .vscode/mcp.json, " +
			"and plain lists or maps of servers) without starting any server.",
	}
	cmd.AddCommand(newConfigCheckCommand(e, g), newConfigImportCommand(e, g))
	return cmd
}

func newConfigCheckCommand(e *env, g *globalFlags) *cobra.Command {
	var asJSON, withTools, failOnWarnings bool
	cmd := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Show what toolwire understands of a configuration file, or every error in it",
		Long: "check prints the file's dialect and, for each server, its transport, its command or URL " +
			"(placeholders shown as written, never expanded), its tiers and filters, every warning " +
			"(fields ignored and why), and every problem of the environment: a placeholder whose variable " +
			"is unset and has no default (named, never a value), which would stop the server, and each policy rule " +
			"(with --tools, the servers are started and each rule is checked against the tools it applies to). FILE defaults to --config, $TOOLWIRE_CONFIG, then ./toolwire.yaml. " +
			"Exit status 0 when the file is valid (warnings allowed), 2 when it is not; with --fail-on-warnings, 1 when it is valid " +
			"but has a warning or a problem.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configFileArg(cmd, e, args)
			if err != nil {
				return err
			}
			f, err := config.Load(path)
			if errors.Is(err, fs.ErrNotExist) {
				return &exitError{exitUsage, err} // no file, not an invalid one
			}
			if err != nil {
				return reportConfigErrors(e, path, err, asJSON)
			}
			pol, err := checkConfigPolicy(cmd.Context(), e, g, f, withTools)
			if err != nil {
				return reportConfigErrors(e, path, err, asJSON)
			}
			if asJSON {
				r := configCheckJSON(f, e.lookupEnv)
				r.Policy = pol
				if err := writeConfigJSON(e.stdout, r); err != nil {
					return err
				}
			} else {
				printConfigCheck(e.stdout, f, e.lookupEnv)
				printConfigPolicy(e.stdout, pol)
			}
			if failOnWarnings {
				return checkFindings(f, e.lookupEnv)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&withTools, "tools", false, "start the servers and check each policy rule against the tools it applies to")
	cmd.Flags().BoolVar(&failOnWarnings, "fail-on-warnings", false, "exit with status 1 when the file has a warning (an ignored or unknown field) or a problem (an unset variable), for CI")
	return cmd
}

func newConfigImportCommand(e *env, g *globalFlags) *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "import [FILE]",
		Short: "Write the equivalent toolwire YAML file for a configuration in any dialect",
		Long: "import converts FILE to toolwire's own YAML, on stdout or, with -o, into a new file " +
			"(mode 0600, written atomically). Placeholders stay placeholders: ${VAR} and ${input:ID} are " +
			"written as they are, so no secret ends up in the file; the inputs are declared under \"inputs\". " +
			"Comments note the fields of the original that do not carry over. Relative paths become absolute.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configFileArg(cmd, e, args)
			if err != nil {
				return err
			}
			f, err := config.Load(path)
			if err != nil {
				return reportConfigErrors(e, path, err, false)
			}
			data, err := config.Marshal(f)
			if err != nil {
				return &exitError{exitToolErr, fmt.Errorf("converting %s: %w", path, err)}
			}
			log := newLogger(e.stderr, g, nil)
			for _, w := range f.Warnings {
				log.Warn(w)
			}
			if out == "" {
				_, err := e.stdout.Write(data)
				return err
			}
			if err := writeConfigAtomically(out, data, force); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "toolwire: wrote %s (%s, from %s)\n", out, configPlural(len(f.Servers), "server"), config.DescribeDialect(f.Dialect))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of stdout; it must not exist yet unless --force")
	cmd.Flags().BoolVar(&force, "force", false, "with -o, replace the file if it exists")
	return cmd
}

// configFileArg picks the file: the argument, else the global --config flag,
// $TOOLWIRE_CONFIG or ./toolwire.yaml, as for every other command.
func configFileArg(cmd *cobra.Command, e *env, args []string) (string, error) {
	if len(args) == 1 {
		return args[0], nil
	}
	flag := ""
	if flags, err := cmd.Flags().GetStringArray("config"); err == nil {
		if len(flags) > 1 {
			return "", &exitError{exitUsage, fmt.Errorf("%s checks one file at a time; name it as the argument", cmd.CommandPath())}
		}
		if len(flags) == 1 {
			flag = flags[0]
		}
	}
	path, err := configPath(e, flag)
	if err != nil {
		return "", &exitError{exitUsage, err}
	}
	return path, nil
}

// reportConfigErrors prints every problem of an invalid file, one per line
// (on stderr, or in the JSON report on stdout), and returns the exit status
// 2 with a one-line summary.
func reportConfigErrors(e *env, path string, err error, asJSON bool) error {
	var lines []string
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, err := range joined.Unwrap() {
			lines = append(lines, err.Error())
		}
	} else {
		lines = []string{err.Error()}
	}
	if asJSON {
		if err := writeConfigJSON(e.stdout, configReport{File: path, Valid: false, Errors: lines}); err != nil {
			return err
		}
	} else {
		for _, l := range lines {
			fmt.Fprintln(e.stderr, l)
		}
	}
	return &exitError{exitUsage, fmt.Errorf("%s is not a valid configuration (%s)", path, configPlural(len(lines), "problem"))}
}

func configPlural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// configReport is the --json shape of config check.
type configReport struct {
	File    string `json:"file"`
	Valid   bool   `json:"valid"`
	Dialect string `json:"dialect,omitempty"`
	// DialectReason says why the file was read as Dialect.
	DialectReason string              `json:"dialectReason,omitempty"`
	Inputs        []configInputJSON   `json:"inputs,omitempty"`
	Servers       []configServerJSON  `json:"servers,omitempty"`
	Warnings      []configWarningJSON `json:"warnings,omitempty"` // about the file, not one server
	Errors        []string            `json:"errors,omitempty"`
	Policy        *configPolicyJSON   `json:"policy,omitempty"`
}

type configInputJSON struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Password    bool   `json:"password,omitempty"`
	Default     string `json:"default,omitempty"`
}

// configServerJSON shows a server as written: placeholders are not
// expanded, and env and header values are left out (only their names are
// shown) because a file may hold a literal secret there.
type configServerJSON struct {
	Name        string           `json:"name"`
	Line        int              `json:"line"`
	Transport   config.Transport `json:"transport"`
	Command     string           `json:"command,omitempty"`
	Args        []string         `json:"args,omitempty"`
	URL         string           `json:"url,omitempty"`
	EnvNames    []string         `json:"envNames,omitempty"`
	EnvFile     string           `json:"envFile,omitempty"`
	Cwd         string           `json:"cwd,omitempty"`
	HeaderNames []string         `json:"headerNames,omitempty"`
	BearerToken bool             `json:"bearerToken,omitempty"`
	Prefix      string           `json:"prefix,omitempty"`
	DefaultTier string           `json:"defaultTier"`
	// DefaultTierSource is "defaultTier" when the file sets it, "default"
	// when it is the dialect's default.
	DefaultTierSource string              `json:"defaultTierSource"`
	TierOverrides     map[string]string   `json:"tierOverrides,omitempty"`
	OnlyTools         []string            `json:"onlyTools"` // null: all tools; []: none
	ExcludeTools      []string            `json:"excludeTools,omitempty"`
	Timeout           string              `json:"timeout,omitempty"`
	Required          bool                `json:"required,omitempty"`
	Disabled          bool                `json:"disabled,omitempty"`
	Inputs            []string            `json:"inputs,omitempty"`
	Warnings          []configWarningJSON `json:"warnings,omitempty"`
	// Problems are what would stop the server from starting here: for
	// now, placeholders whose variable is unset and has no default.
	Problems []configProblemJSON `json:"problems,omitempty"`
}

type configProblemJSON struct {
	Field    string `json:"field"`
	Variable string `json:"variable"`
	Message  string `json:"message"`
}

// configProblems returns s's unset variables, for a server that is
// started (a disabled one is not, so its placeholders do not matter).
func configProblems(s config.Server, lookup func(string) (string, bool)) []configProblemJSON {
	if s.Disabled {
		return nil
	}
	var out []configProblemJSON
	for _, u := range config.UnsetVariables(s, lookup) {
		out = append(out, configProblemJSON{Field: u.Field, Variable: u.Var, Message: fmt.Sprintf("variable %s is not set and the placeholder has no default", u.Var)})
	}
	return out
}

type configWarningJSON struct {
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

func configCheckJSON(f *config.File, lookup func(string) (string, bool)) configReport {
	r := configReport{File: f.Path, Valid: true, Dialect: f.Dialect, DialectReason: f.DialectReason}
	for _, id := range configSortedKeys(f.Inputs) {
		in := f.Inputs[id]
		r.Inputs = append(r.Inputs, configInputJSON{ID: id, Description: in.Description, Password: in.Password, Default: in.Default})
	}
	for _, w := range f.WarningDetails {
		if w.Server == "" {
			r.Warnings = append(r.Warnings, configWarningJSON{w.Line, w.Field, w.Message})
		}
	}
	for _, s := range f.Servers {
		js := configServerJSON{
			Name: s.Name, Line: s.Line, Transport: s.Transport,
			Command: s.Command, Args: s.Args, URL: s.URL,
			EnvNames: configSortedKeys(s.Env), EnvFile: s.EnvFile, Cwd: s.Cwd,
			HeaderNames: configSortedKeys(s.Headers), BearerToken: s.BearerToken != "",
			Prefix: s.Prefix, DefaultTier: s.DefaultTier, DefaultTierSource: string(defaultTierSource(s)), TierOverrides: s.TierOverrides,
			OnlyTools: s.OnlyTools, ExcludeTools: s.ExcludeTools,
			Required: s.Required, Disabled: s.Disabled, Inputs: configSortedKeys(s.Inputs),
		}
		if s.Timeout > 0 {
			js.Timeout = s.Timeout.String()
		}
		js.Problems = configProblems(s, lookup)
		for _, w := range f.WarningDetails {
			if w.Server == s.Name {
				js.Warnings = append(js.Warnings, configWarningJSON{w.Line, w.Field, w.Message})
			}
		}
		r.Servers = append(r.Servers, js)
	}
	return r
}

// defaultTierSource says whether the operator chose s's default tier.
func defaultTierSource(s config.Server) tool.TierSource {
	if s.DefaultTierImplied {
		return tool.TierDefault
	}
	return tool.TierOperator
}

// defaultTierText is the defaultTier row of the text report: the tier and
// where it came from.
func defaultTierText(dialect string, s config.Server) string {
	if !s.DefaultTierImplied {
		return s.DefaultTier + " (set by defaultTier)"
	}
	if dialect == config.DialectToolwire {
		return s.DefaultTier + " (the default: no defaultTier)"
	}
	return s.DefaultTier + " (the default for a host file, which has no tiers: calls are confirmed; import the file to choose tiers)"
}

func writeConfigJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// checkFindings is the error of config check --fail-on-warnings: exit
// status 1 counting the file's warnings and problems, nil without any.
func checkFindings(f *config.File, lookup func(string) (string, bool)) error {
	problems := 0
	for _, s := range f.Servers {
		problems += len(configProblems(s, lookup))
	}
	if len(f.Warnings) == 0 && problems == 0 {
		return nil
	}
	return &exitError{exitToolErr, fmt.Errorf("%s: %s and %s (--fail-on-warnings)", f.Path, configPlural(len(f.Warnings), "warning"), configPlural(problems, "problem"))}
}

// printConfigCheck prints the text report: the dialect, the inputs, then
// one block per server with its warnings under it.
func printConfigCheck(w io.Writer, f *config.File, lookup func(string) (string, bool)) {
	fmt.Fprintf(w, "%s: %s (dialect %s), %s\n", f.Path, config.DescribeDialect(f.Dialect), f.Dialect, configPlural(len(f.Servers), "server"))
	if f.DialectReason != "" {
		fmt.Fprintf(w, "  read as %s because %s\n", config.DescribeDialect(f.Dialect), f.DialectReason)
	}
	for _, d := range f.WarningDetails {
		if d.Server == "" {
			fmt.Fprintf(w, "  warning: line %d: %s: %s\n", d.Line, d.Field, d.Message)
		}
	}
	if len(f.Inputs) > 0 {
		fmt.Fprintln(w, "\ninputs (asked for on the terminal when a server using them starts)")
		for _, id := range configSortedKeys(f.Inputs) {
			in := f.Inputs[id]
			var notes []string
			if in.Password {
				notes = append(notes, "hidden")
			}
			if in.Default != "" {
				notes = append(notes, "default "+strconv.Quote(in.Default))
			}
			line := "  " + id
			if in.Description != "" {
				line += ": " + strconv.Quote(in.Description)
			}
			if len(notes) > 0 {
				line += " (" + strings.Join(notes, ", ") + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
	for _, s := range f.Servers {
		fmt.Fprintf(w, "\nserver %s (line %d)\n", s.Name, s.Line)
		row := func(label, value string) { fmt.Fprintf(w, "  %-13s %s\n", label, value) }
		row("transport", configTransportText(s.Transport))
		if s.Command != "" {
			row("command", configCommandLine(s.Command, s.Args))
		}
		if s.URL != "" {
			row("url", s.URL)
		}
		if len(s.Env) > 0 {
			row("env", strings.Join(configSortedKeys(s.Env), ", "))
		}
		if s.EnvFile != "" {
			row("envFile", s.EnvFile)
		}
		if s.Cwd != "" {
			row("cwd", s.Cwd)
		}
		if len(s.Headers) > 0 {
			row("headers", strings.Join(configSortedKeys(s.Headers), ", "))
		}
		if s.BearerToken != "" {
			row("bearerToken", "set")
		}
		if len(s.Inputs) > 0 {
			row("inputs", strings.Join(configSortedKeys(s.Inputs), ", "))
		}
		if s.Prefix != "" {
			row("prefix", s.Prefix)
		}
		row("defaultTier", defaultTierText(f.Dialect, s))
		if len(s.TierOverrides) > 0 {
			var parts []string
			for _, k := range configSortedKeys(s.TierOverrides) {
				parts = append(parts, k+"="+s.TierOverrides[k])
			}
			row("tierOverrides", strings.Join(parts, ", "))
		}
		switch {
		case s.OnlyTools == nil:
		case len(s.OnlyTools) == 0:
			row("onlyTools", "none (the empty list registers no tools)")
		default:
			row("onlyTools", strings.Join(s.OnlyTools, ", "))
		}
		if len(s.ExcludeTools) > 0 {
			row("excludeTools", strings.Join(s.ExcludeTools, ", "))
		}
		if s.Timeout > 0 {
			row("timeout", s.Timeout.String())
		}
		if s.Required {
			row("required", "yes")
		}
		if s.Disabled {
			row("disabled", "yes: listed but not started")
		}
		for _, d := range f.WarningDetails {
			if d.Server == s.Name {
				row("warning", fmt.Sprintf("line %d: %s: %s", d.Line, d.Field, d.Message))
			}
		}
		for _, p := range configProblems(s, lookup) {
			row("problem", fmt.Sprintf("server %q: %s: %s", s.Name, p.Field, p.Message))
		}
	}
}

func configTransportText(t config.Transport) string {
	switch t {
	case config.TransportStdio:
		return "stdio"
	case config.TransportHTTP:
		return "http (Streamable HTTP)"
	case config.TransportSSE:
		return "sse (legacy HTTP+SSE)"
	}
	return string(t)
}

// configCommandLine shows a command and its arguments as one line, quoting the
// words a shell would split or misread.
func configCommandLine(command string, args []string) string {
	words := append([]string{command}, args...)
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n\"'\\|&;<>()*?[]#~`") {
			words[i] = strconv.Quote(w)
		}
	}
	return strings.Join(words, " ")
}

func configSortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// writeConfigAtomically writes data to path so that a reader never sees
// half a file (sharedfile's atomic writes), mode 0600: it describes
// credentials even if it holds none. Without force an existing file is
// never replaced, even one created meanwhile.
func writeConfigAtomically(path string, data []byte, force bool) error {
	write := sharedfile.CreateAtomic
	if force {
		write = sharedfile.WriteAtomic
	}
	switch err := write(path, data); {
	case errors.Is(err, fs.ErrExist):
		return &exitError{exitUsage, fmt.Errorf("%s already exists; pass --force to replace it", path)}
	case err != nil:
		return &exitError{exitToolErr, err}
	}
	return nil
}

// configInputPrompter returns a config.Resolver Input function that asks
// for ${input:ID} values on the terminal, once per ID however many servers
// use it and one question at a time, hiding what is typed for password
// inputs. It returns nil when stdin is not a terminal, so that expansion
// fails with a message saying how to provide the input.
func configInputPrompter(e *env) func(id string, in config.Input) (string, error) {
	if !e.isTerminal() {
		return nil
	}
	var mu sync.Mutex
	answers := map[string]string{}
	return func(id string, in config.Input) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if v, ok := answers[id]; ok {
			return v, nil
		}
		ask := in.Description
		if ask == "" {
			ask = "Value"
		}
		fmt.Fprintf(e.stderr, "%s (input %q)", ask, id)
		if in.Default != "" && !in.Password {
			fmt.Fprintf(e.stderr, " [%s]", in.Default)
		}
		fmt.Fprint(e.stderr, ": ")
		var v string
		var err error
		if f, ok := e.stdin.(*os.File); ok && in.Password && term.IsTerminal(int(f.Fd())) {
			var b []byte
			b, err = term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(e.stderr)
			v = string(b)
		} else {
			v, err = configReadLine(e.stdin)
		}
		if err != nil {
			return "", fmt.Errorf("reading the answer: %w", err)
		}
		if v == "" {
			v = in.Default
		}
		answers[id] = v
		return v, nil
	}
}

// configReadLine reads one line a byte at a time, so that nothing after
// it is taken from a stdin that other readers share.
func configReadLine(r io.Reader) (string, error) {
	var b []byte
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n == 1 {
			if one[0] == '\n' {
				return strings.TrimSuffix(string(b), "\r"), nil
			}
			b = append(b, one[0])
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(b) > 0 {
				return string(b), nil
			}
			return "", err
		}
	}
}
