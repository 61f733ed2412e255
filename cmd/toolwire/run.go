package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/agent"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/tool"
	"golang.org/x/term"
)

// exitInterrupted is the status of a run ended by Ctrl-C (128 + SIGINT).
const exitInterrupted = 130

// agentFlags are the flags run and chat share. Provider, model, base URL
// and key variable fall back to TOOLWIRE_PROVIDER, TOOLWIRE_MODEL,
// TOOLWIRE_BASE_URL and TOOLWIRE_API_KEY_ENV.
type agentFlags struct {
	provider     string
	model        string
	baseURL      string
	apiKeyEnv    string
	system       string
	yes          bool
	maxRounds    int
	toolBudget   int
	resultBudget int
	maxTokens    int
	noImages     bool
	insecureHTTP bool
}

func (f *agentFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.provider, "provider", "", "LLM API: openai (OpenAI and compatible servers: Ollama, vLLM, LM Studio, llama.cpp) or anthropic (default $TOOLWIRE_PROVIDER, then openai)")
	fl.StringVar(&f.model, "model", "", "model name (default $TOOLWIRE_MODEL; required)")
	fl.StringVar(&f.baseURL, "base-url", "", "API base URL, e.g. http://127.0.0.1:11434/v1 for Ollama (default $TOOLWIRE_BASE_URL, then the provider's own)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (default $TOOLWIRE_API_KEY_ENV, then OPENAI_API_KEY or ANTHROPIC_API_KEY)")
	fl.StringVar(&f.system, "system", "", "system prompt")
	fl.BoolVarP(&f.yes, "yes", "y", false, "approve every write and destructive call without asking")
	fl.IntVar(&f.maxRounds, "max-rounds", agent.DefaultMaxToolRounds, "most rounds of tool calls per task")
	fl.IntVar(&f.toolBudget, "tool-budget", agent.DefaultToolBudget, "estimated tokens of tool definitions per request; above it the model searches tools with find_tools")
	fl.IntVar(&f.resultBudget, "result-budget", agent.DefaultResultBudget, "bytes of text of one tool result shown to the model; longer results are cut")
	fl.IntVar(&f.maxTokens, "max-tokens", agent.DefaultMaxTokens, "reply length limit (anthropic only)")
	fl.BoolVar(&f.noImages, "no-images", false, "describe images from tool results in text instead of sending them (openai only; for models without vision)")
	fl.BoolVar(&f.insecureHTTP, "insecure-http", false, "allow a plain http base URL on a host other than loopback (the key and the conversation travel unencrypted)")
}

// setting returns the flag's value, else the environment variable's.
func setting(e *env, flag, envVar string) string {
	if flag != "" {
		return flag
	}
	v, _ := e.lookupEnv(envVar)
	return strings.TrimSpace(v)
}

// newProvider builds the LLM provider the flags and environment describe.
// It returns the API key too, so that it can be kept out of the audit log.
func (f *agentFlags) newProvider(e *env, cfg config.Agent) (agent.Provider, string, error) {
	p, key, err := f.buildProvider(e, cfg)
	var ue *netpolicy.URLError
	if errors.As(err, &ue) && strings.HasPrefix(strings.ToLower(ue.URL), "http:") {
		err = fmt.Errorf("%w (--insecure-http allows it for a trusted network)", err)
	}
	return p, key, err
}

// Each setting is the flag's, else the TOOLWIRE_* variable's, else the
// configuration's agent section's.
func (f *agentFlags) buildProvider(e *env, cfg config.Agent) (agent.Provider, string, error) {
	name := firstNonEmpty(setting(e, f.provider, "TOOLWIRE_PROVIDER"), cfg.Provider, "openai")
	model := firstNonEmpty(setting(e, f.model, "TOOLWIRE_MODEL"), cfg.Model)
	if model == "" {
		return nil, "", errors.New("no model: pass --model NAME, set TOOLWIRE_MODEL, or set agent.model in the configuration")
	}
	baseURL := firstNonEmpty(setting(e, f.baseURL, "TOOLWIRE_BASE_URL"), cfg.BaseURL)
	keyEnv := firstNonEmpty(setting(e, f.apiKeyEnv, "TOOLWIRE_API_KEY_ENV"), cfg.APIKeyEnv)
	switch name {
	case "openai":
		keyEnv = firstNonEmpty(keyEnv, "OPENAI_API_KEY")
		key, _ := e.lookupEnv(keyEnv)
		p, err := agent.NewOpenAI(model, &agent.OpenAIOptions{
			BaseURL: baseURL, APIKey: key, APIKeyEnv: keyEnv, NoImages: f.noImages, AllowInsecureHTTP: f.insecureHTTP,
		})
		return p, key, err
	case "anthropic":
		keyEnv = firstNonEmpty(keyEnv, "ANTHROPIC_API_KEY")
		key, _ := e.lookupEnv(keyEnv)
		p, err := agent.NewAnthropic(model, &agent.AnthropicOptions{
			BaseURL: baseURL, APIKey: key, APIKeyEnv: keyEnv, MaxTokens: f.maxTokens, AllowInsecureHTTP: f.insecureHTTP,
		})
		return p, key, err
	}
	return nil, "", fmt.Errorf("unknown provider %q (want openai or anthropic)", name)
}

func newRunCommand(e *env, g *globalFlags) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "run TASK",
		Short: "Give a task to an LLM that uses the configured tools",
		Long: `Give one task to an LLM and let it call the configured tools until it
answers. The answer streams to stdout; each tool call is shown on stderr
with its tier. Write and destructive calls ask on the terminal first
(--yes approves all); without a terminal they are refused. Every call is
validated, confirmed and audited like "toolwire call".

Ctrl-C cancels the request to the model and the tool calls in flight, and
exits with status 130. See docs/agent.md for providers, local servers
(Ollama, vLLM) and budgets.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tuneGC(e.lookupEnv) // a long-running command
			s, err := startSession(cmd.Context(), e, g, &f, bufio.NewReader(e.stdin))
			if err != nil {
				return err
			}
			defer s.close()
			_, err = s.agent.Run(s.ctx, args[0])
			s.ui.endText()
			return agentError(err)
		},
	}
	f.register(cmd)
	return cmd
}

// session is a started workspace with an agent over its tools.
type session struct {
	ctx   context.Context // carries the progress display for tool calls
	w     *workspace
	agent *agent.Agent
	ui    *agentUI
}

// startSession builds the provider, starts the servers and the agent. in
// is the reader of stdin that confirmations (and chat's lines) share.
func startSession(ctx context.Context, e *env, g *globalFlags, f *agentFlags, in *bufio.Reader) (*session, error) {
	file, err := loadConfig(e, g)
	if err != nil {
		return nil, err
	}
	provider, key, err := f.newProvider(e, file.Agent)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	ui := &agentUI{out: e.stdout, errOut: e.stderr}
	var progress tool.Caller = &progressPrinter{out: e.stderr}
	if stderrIsTerminal(e) {
		ui.spin = &spinner{out: e.stderr}
		progress = ui.spin
	}
	var confirmer tool.Confirmer = &terminalConfirmer{in: e.stdin, out: e.stderr, interactive: e.isTerminal(), reader: in}
	if f.yes {
		confirmer = approveAll{}
	}
	w, err := open(ctx, e, g, openOptions{confirmer: ui.pausing(confirmer), file: file})
	if err != nil {
		return nil, err
	}
	s := &session{ctx: tool.WithCaller(ctx, progress), w: w, ui: ui}
	// The key joins the secrets the workspace masks, so that neither a log
	// line, nor the audit log of a call whose arguments a model filled
	// with it, nor an llm.failed event can carry it.
	w.secrets.Add(key)
	s.agent = agent.New(w.executor, provider, &agent.Options{
		System:        f.system,
		MaxToolRounds: f.maxRounds,
		ToolBudget:    f.toolBudget,
		ResultBudget:  f.resultBudget,
		Audit:         w.audit,
		OnText:        ui.text,
		OnToolCall:    ui.toolCall,
		OnToolResult:  ui.toolResult,
	})
	return s, nil
}

func (s *session) close() { s.w.close() }

// agentError maps the agent's error to the command's exit status.
func agentError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return &exitError{exitInterrupted, errors.New("interrupted: the model request and the tool calls in flight were cancelled")}
	case errors.Is(err, agent.ErrUnauthorized):
		return &exitError{exitUsage, err}
	}
	return &exitError{exitToolErr, err}
}

func stderrIsTerminal(e *env) bool {
	f, ok := e.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// agentUI shows a run: the model's text on stdout as it streams, and each
// tool call and its outcome on stderr.
type agentUI struct {
	out, errOut io.Writer
	spin        *spinner // nil unless stderr is a terminal

	mu      sync.Mutex
	midLine bool // stdout's last text did not end a line
}

func (u *agentUI) text(delta string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := termSafe(delta)
	if s == "" {
		return
	}
	fmt.Fprint(u.out, s)
	u.midLine = !strings.HasSuffix(s, "\n")
}

// endText ends the model's last line of text.
func (u *agentUI) endText() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.midLine {
		fmt.Fprintln(u.out)
		u.midLine = false
	}
}

func (u *agentUI) toolCall(call agent.ToolCall, t *tool.Tool) {
	u.endText()
	args := oneLine(call.Args, 160)
	switch {
	case t != nil:
		fmt.Fprintf(u.errOut, "→ %s [%s] %s\n", termSafe(call.Name), t.Tier, termSafe(args))
	case call.Name == agent.FindTools || call.Name == agent.FindToolsAlt:
		fmt.Fprintf(u.errOut, "→ %s %s\n", termSafe(call.Name), termSafe(args))
	default:
		fmt.Fprintf(u.errOut, "→ %s [unknown tool] %s\n", termSafe(call.Name), termSafe(args))
	}
}

func (u *agentUI) toolResult(call agent.ToolCall, res *tool.Result) {
	u.spin.clear()
	if res.IsError {
		fmt.Fprintf(u.errOut, "← %s: %s: %s\n", termSafe(call.Name), res.Reason, termSafe(oneLine(res.Message, 200)))
		return
	}
	fmt.Fprintf(u.errOut, "← %s: ok\n", termSafe(call.Name))
}

// pausing wraps c so that the spinner does not draw over a question.
func (u *agentUI) pausing(c tool.Confirmer) tool.Confirmer {
	if u.spin == nil {
		return c
	}
	return tool.ConfirmFunc(func(ctx context.Context, call tool.PendingCall) (bool, error) {
		u.spin.hold()
		defer u.spin.release()
		return c.Confirm(ctx, call)
	})
}

// spinner is the progress display on a terminal: one line on stderr,
// redrawn with the next frame at each progress report of a running call.
// It is a [tool.Caller]; while held (a question is on screen) it draws
// nothing. A nil *spinner does nothing.
type spinner struct {
	out io.Writer

	mu    sync.Mutex
	frame int
	held  int
	shown bool
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (s *spinner) Progress(_ context.Context, p tool.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\r\033[K")
	b.WriteString(spinnerFrames[s.frame%len(spinnerFrames)])
	s.frame++
	if p.Total > 0 {
		fmt.Fprintf(&b, " %g/%g", p.Progress, p.Total)
	} else {
		fmt.Fprintf(&b, " %g", p.Progress)
	}
	if p.Message != "" {
		b.WriteString(" " + termSafe(oneLine(p.Message, 60)))
	}
	fmt.Fprint(s.out, b.String())
	s.shown = true
}

// clear removes the spinner's line, if drawn.
func (s *spinner) clear() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
}

func (s *spinner) clearLocked() {
	if s.shown {
		fmt.Fprint(s.out, "\r\033[K")
		s.shown = false
	}
}

func (s *spinner) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held++
	s.clearLocked()
}

func (s *spinner) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
}
