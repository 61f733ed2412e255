package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/agent"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
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
	idleTimeout  time.Duration
}

func (f *agentFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.provider, "provider", "", "LLM API: openai (OpenAI and compatible servers: Ollama, vLLM, LM Studio, llama.cpp) or anthropic (default $TOOLWIRE_PROVIDER, then openai)")
	fl.StringVar(&f.model, "model", "", "model name (default $TOOLWIRE_MODEL; required)")
	fl.StringVar(&f.baseURL, "base-url", "", "API base URL, e.g. http://127.0.0.1:11434/v1 for Ollama (default $TOOLWIRE_BASE_URL, then the provider's own)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (default $TOOLWIRE_API_KEY_ENV, then OPENAI_API_KEY or ANTHROPIC_API_KEY)")
	fl.StringVar(&f.system, "system", "", "system prompt")
	fl.BoolVarP(&f.yes, "yes", "y", false, "approve every write and destructive call without asking")
	fl.IntVar(&f.maxRounds, "max-rounds", agent.DefaultMaxToolRounds, "most rounds of tool calls per task (at least 1)")
	fl.IntVar(&f.toolBudget, "tool-budget", agent.DefaultToolBudget, "estimated tokens of tool definitions per request; above it the model searches tools with find_tools")
	fl.IntVar(&f.resultBudget, "result-budget", agent.DefaultResultBudget, "bytes of text of one tool result shown to the model; longer results are cut")
	fl.IntVar(&f.maxTokens, "max-tokens", agent.DefaultMaxTokens, "reply length limit (anthropic only)")
	fl.BoolVar(&f.noImages, "no-images", false, "describe images from tool results in text instead of sending them (openai only; for models without vision)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", agent.DefaultIdleTimeout, "give up on a reply stream that sends nothing this long, the wait for its first byte included (0: wait forever)")
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
// configuration's agent section's (workspace.NewProvider).
func (f *agentFlags) buildProvider(e *env, cfg config.Agent) (agent.Provider, string, error) {
	if f.maxRounds < 1 {
		return nil, "", fmt.Errorf("--max-rounds %d: want at least 1 (a round is one reply's tool calls; with none the model could not use a tool)", f.maxRounds)
	}
	if f.idleTimeout < 0 {
		return nil, "", fmt.Errorf("--idle-timeout %v: want a duration of 0 (no limit) or more", f.idleTimeout)
	}
	idle := f.idleTimeout
	if idle == 0 {
		idle = -1 // the agent's "no limit"
	}
	p, key, err := workspace.NewProvider(cfg, &workspace.ProviderOptions{
		Provider:  setting(e, f.provider, "TOOLWIRE_PROVIDER"),
		Model:     setting(e, f.model, "TOOLWIRE_MODEL"),
		BaseURL:   setting(e, f.baseURL, "TOOLWIRE_BASE_URL"),
		APIKeyEnv: setting(e, f.apiKeyEnv, "TOOLWIRE_API_KEY_ENV"),
		MaxTokens: f.maxTokens, NoImages: f.noImages, AllowInsecureHTTP: f.insecureHTTP, IdleTimeout: idle,
		LookupEnv: e.lookupEnv,
	})
	if errors.Is(err, workspace.ErrNoModel) {
		err = errors.New("no model: pass --model NAME, set TOOLWIRE_MODEL, or set agent.model in the configuration")
	}
	return p, key, err
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
			s, err := startSession(cmd.Context(), e, g, &f, newLineReader(e.stdin))
			if err != nil {
				return err
			}
			defer s.close()
			_, err = s.agent.Run(s.ctx, args[0])
			s.ui.endText()
			return agentError(err, s.anthropic)
		},
	}
	f.register(cmd)
	return cmd
}

// agentStartWait is how long run and chat wait for every server to start
// before the model starts on the tools of the servers that are ready.
const agentStartWait = 3 * time.Second

// session is a started workspace with an agent over its tools.
type session struct {
	ctx   context.Context // carries the progress display for tool calls
	w     *workspace.Workspace
	agent *agent.Agent
	ui    *agentUI
	// anthropic says the model is Anthropic's, whose reply limit
	// --max-tokens sets.
	anthropic bool
}

// startSession builds the provider, starts the servers and the agent. in
// is the reader of stdin that confirmations (and chat's lines) share.
func startSession(ctx context.Context, e *env, g *globalFlags, f *agentFlags, in *lineReader) (*session, error) {
	file, err := loadConfig(e, g)
	if err != nil {
		return nil, err
	}
	provider, key, err := f.newProvider(e, file.Agent)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	// A refused key is found before any server starts (some take a minute
	// to): the provider lists the models with it, which costs no tokens.
	if kc, ok := provider.(interface{ CheckKey(context.Context) error }); ok {
		if err := kc.CheckKey(ctx); err != nil {
			return nil, &exitError{exitUsage, err}
		}
	}
	ui := &agentUI{out: e.stdout, errOut: e.stderr}
	var progress tool.Caller = &progressPrinter{out: e.stderr, label: true}
	if stderrIsTerminal(e) {
		ui.spin = &spinner{out: e.stderr}
		ui.wait = &waitLine{out: e.stderr}
		progress = ui.spin
	}
	term := &terminalConfirmer{in: e.stdin, out: e.stderr, interactive: e.isTerminal(), lines: in}
	var confirmer tool.Confirmer = term
	if f.yes {
		confirmer = approveAll{}
	}
	// A server slow to start, or one that never answers, does not hold up
	// the model: it starts on the tools of the servers ready, and the
	// others' tools join as they become ready.
	w, err := open(ctx, e, g, file, &workspace.Options{Confirmer: ui.pausing(confirmer), StartWait: cmp.Or(e.startWait, agentStartWait)})
	if err != nil {
		return nil, err
	}
	term.grants = w.Approvals()
	_, anthropic := provider.(*agent.Anthropic)
	s := &session{ctx: tool.WithCaller(ctx, progress), w: w, ui: ui, anthropic: anthropic}
	s.agent = w.Agent(provider, key, &agent.Options{
		System:        f.system,
		MaxToolRounds: f.maxRounds,
		ToolBudget:    f.toolBudget,
		ResultBudget:  f.resultBudget,
		OnText:        ui.text,
		OnToolCall:    ui.toolCall,
		OnToolResult:  ui.toolResult,
		OnWait:        ui.waiting,
	})
	return s, nil
}

func (s *session) close() {
	s.ui.wait.stop()
	s.w.Close()
}

// agentError maps the agent's error to the command's exit status.
func agentError(err error, anthropic bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return &exitError{exitInterrupted, errors.New("interrupted: the model request and the tool calls in flight were cancelled")}
	case errors.Is(err, agent.ErrUnauthorized):
		return &exitError{exitUsage, err}
	case errors.Is(err, agent.ErrCut) && anthropic:
		return &exitError{exitToolErr, fmt.Errorf("%w (the text above is cut off; --max-tokens raises the limit)", err)}
	case errors.Is(err, agent.ErrCut):
		return &exitError{exitToolErr, fmt.Errorf("%w (the text above is cut off at the model's own reply limit; ask for a shorter answer, or use a model with a larger one)", err)}
	case errors.Is(err, agent.ErrStalled):
		return &exitError{exitToolErr, fmt.Errorf("%w (--idle-timeout sets how long to wait)", err)}
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
	spin        *spinner  // nil unless stderr is a terminal
	wait        *waitLine // nil unless stderr is a terminal

	mu      sync.Mutex
	midLine bool // stdout's last text did not end a line
}

func (u *agentUI) text(delta string) {
	u.wait.stop()
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
	u.wait.stop()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.midLine {
		fmt.Fprintln(u.out)
		u.midLine = false
	}
}

func (u *agentUI) toolCall(call agent.ToolCall, t *tool.Tool) {
	u.endText()
	if call.Cut {
		fmt.Fprintf(u.errOut, "→ %s [cut off by the token limit: not run]\n", termSafe(call.Name))
		return
	}
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

// toolResult shows a call's outcome as soon as it ends, with the start of
// what it returned.
func (u *agentUI) toolResult(call agent.ToolCall, res *tool.Result) {
	u.spin.clear()
	if res.IsError {
		fmt.Fprintf(u.errOut, "← %s: %s: %s\n", termSafe(call.Name), res.Reason, oneLine(forPerson(res.Message), 200))
		return
	}
	if p := resultPreview(res); p != "" {
		fmt.Fprintf(u.errOut, "← %s: ok: %s\n", termSafe(call.Name), p)
		return
	}
	fmt.Fprintf(u.errOut, "← %s: ok\n", termSafe(call.Name))
}

// resultPreview is the start of a result on one line: its text, else a
// stand-in for its first other block.
func resultPreview(res *tool.Result) string {
	if t := strings.TrimSpace(res.Text()); t != "" {
		return oneLine(t, 80)
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *tool.Image:
			return fmt.Sprintf("[image %s, %d bytes]", termSafe(c.MIMEType), len(c.Data))
		case *tool.Audio:
			return fmt.Sprintf("[audio %s, %d bytes]", termSafe(c.MIMEType), len(c.Data))
		case *tool.Resource:
			return "[resource " + oneLine(c.URI, 60) + "]"
		case *tool.ResourceLink:
			return "[link " + oneLine(c.URI, 60) + "]"
		}
	}
	return ""
}

// waiting is the agent's OnWait: on a terminal, a line that says the
// model is being waited for, or counts down to a retry; elsewhere a line
// for each retry.
func (u *agentUI) waiting(attempt int, retry time.Duration, err error) {
	if u.wait == nil {
		// Without a terminal, each retry is one line: a log shows why
		// the run took longer.
		if retry > 0 {
			u.endText()
			fmt.Fprintf(u.errOut, "toolwire: %s; retrying in %.1f s (attempt %d)\n", termSafe(oneLine(err.Error(), 300)), retry.Seconds(), attempt+1)
		}
		return
	}
	u.endText()
	u.spin.clear()
	if retry > 0 {
		u.wait.begin(fmt.Sprintf("%s; retrying", oneLine(err.Error(), 120)), retry)
		return
	}
	what := "waiting for the model"
	if attempt > 1 {
		what = fmt.Sprintf("waiting for the model (attempt %d)", attempt)
	}
	u.wait.begin(what, 0)
}

// waitLine is a line on stderr, redrawn every tenth of a second while the
// run waits: for the model's first token (with the time waited so far),
// or for a retry (with the time left). Text, a tool call or the end of the
// run removes it. A nil *waitLine does nothing.
type waitLine struct {
	out io.Writer

	mu    sync.Mutex
	done  chan struct{} // closed to stop the drawing goroutine; nil when idle
	ended chan struct{} // closed by the goroutine once the line is cleared
}

func (l *waitLine) begin(what string, countdown time.Duration) {
	if l == nil {
		return
	}
	l.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	done, ended := make(chan struct{}), make(chan struct{})
	l.done, l.ended = done, ended
	start := time.Now()
	go func() {
		defer close(ended)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for frame := 0; ; frame++ {
			since := time.Since(start)
			line := fmt.Sprintf("%s %s… %.0f s", spinnerFrames[frame%len(spinnerFrames)], what, since.Seconds())
			if countdown > 0 {
				line = fmt.Sprintf("%s %s in %.1f s", spinnerFrames[frame%len(spinnerFrames)], what, max(countdown-since, 0).Seconds())
			}
			fmt.Fprint(l.out, "\r\033[K"+line)
			select {
			case <-done:
				fmt.Fprint(l.out, "\r\033[K")
				return
			case <-tick.C:
			}
		}
	}()
}

// stop removes the line and waits until it is gone.
func (l *waitLine) stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		return
	}
	close(l.done)
	<-l.ended
	l.done, l.ended = nil, nil
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

func (s *spinner) Progress(ctx context.Context, p tool.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 {
		return
	}
	var b strings.Builder
	b.WriteString("\r\033[K")
	b.WriteString(spinnerFrames[s.frame%len(spinnerFrames)])
	s.frame++
	if ci, ok := tool.CallInfoFrom(ctx); ok {
		// Calls of one reply run together: say whose progress this is.
		b.WriteString(" " + termSafe(ci.Name))
	}
	if p.Total > 0 {
		fmt.Fprintf(&b, " %g/%g", p.Progress, p.Total)
	} else {
		fmt.Fprintf(&b, " %g", p.Progress)
	}
	if p.Message != "" {
		b.WriteString(" " + oneLine(p.Message, 60))
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
