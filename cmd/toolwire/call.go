package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/internal/spelling"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

func newCallCommand(e *env, g *globalFlags) *cobra.Command {
	var (
		argsJSON string
		yes      bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "call NAME [key=value ...]",
		Short: "Call one tool through the executor",
		Long: `Call one tool by its registered name (see "toolwire tools").

Arguments come either as one JSON object (--args '{"text":"hi"}') or as
key=value pairs. A value is read as JSON when it parses (n=2, tags=[1,2]),
except for properties the tool's schema declares as strings, which keep the
text as written (zip=02134).

The arguments are validated against the tool's schema before anything is
sent. A write or destructive tool asks for confirmation on the terminal,
showing the validated arguments; --yes approves without asking. With no
terminal and no --yes, such calls are refused.

On a terminal, a server may also ask a question while it serves the call
(MCP elicitation: a form to fill in), which is shown as the server's words
and answered there; --yes does not answer it. With no terminal, servers are
not told they could ask.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{exitUsage, errors.New(`call needs the tool's registered name (see "toolwire tools"), then its arguments as key=value pairs or --args JSON; for example: toolwire call demo__echo text=hi`)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return callInterrupted(cmd.Context(), runCall(cmd, e, g, args, argsJSON, yes, asJSON))
		},
	}
	cmd.Flags().StringVar(&argsJSON, "args", "", "the arguments as one JSON object")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve a write or destructive call without asking")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole result as JSON")
	return cmd
}

// callInterrupted makes the error of a call that Ctrl-C ended exit with
// status 130, as run and chat do.
func callInterrupted(ctx context.Context, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	return &exitError{exitInterrupted, fmt.Errorf("interrupted: %w", err)}
}

// runCall is the call command: it starts the tool's server and calls it.
func runCall(cmd *cobra.Command, e *env, g *globalFlags, args []string, argsJSON string, yes, asJSON bool) error {
	name, pairs := args[0], args[1:]
	if argsJSON != "" && len(pairs) > 0 {
		return &exitError{exitUsage, errors.New("give arguments either with --args or as key=value pairs, not both")}
	}
	term := &terminalConfirmer{in: e.stdin, out: e.stderr, interactive: e.isTerminal()}
	var confirmer tool.Confirmer = term
	if yes {
		confirmer = approveAll{}
	}
	// On a terminal a server may ask its questions (elicitation);
	// elsewhere it is not told it could.
	var caller tool.Caller = &progressPrinter{out: e.stderr}
	wo := &workspace.Options{Confirmer: confirmer}
	if term.interactive {
		caller = &terminalCaller{progressPrinter: caller.(*progressPrinter), term: term}
		wo.Relay.Elicitation = true
	}
	// Only the server the name's prefix names is started: one that
	// never answers holds up only calls of its own tools.
	file, err := loadConfig(e, g)
	if err != nil {
		return err
	}
	servers, err := serversForTool(file, name)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	w, err := open(cmd.Context(), e, g, withServers(file, servers), wo)
	if err != nil {
		return err
	}
	defer w.Close()
	term.grants = w.Approvals()

	raw := json.RawMessage(argsJSON)
	if len(pairs) > 0 {
		raw, err = pairsToJSON(w.Registry(), name, pairs)
		if err != nil {
			return &exitError{exitUsage, err}
		}
	}
	ctx := tool.WithCaller(cmd.Context(), caller)
	res := w.Executor().Call(ctx, name, raw)
	if asJSON {
		if err := printJSON(e, res); err != nil {
			return err
		}
	} else {
		printResult(e, res)
	}
	return resultError(name, res, w)
}

// resultError maps an error result to the command's exit status.
func resultError(name string, res *tool.Result, w *workspace.Workspace) error {
	if !res.IsError {
		return nil
	}
	switch res.Reason {
	case tool.ReasonDeclined, tool.ReasonUnconfirmed:
		return &exitError{exitDeclined, errors.New(forPerson(res.Message))}
	case tool.ReasonCancelled, tool.ReasonTimeout, tool.ReasonFailed, tool.ReasonUnavailable:
		// The executor's message names the tool already.
		return &exitError{exitToolErr, errors.New(res.Message)}
	case tool.ReasonUnknownTool:
		msg := res.Message
		if near := closestNames(name, w.Registry().List(), 3); len(near) > 0 {
			msg += "; did you mean " + strings.Join(near, ", ") + "?"
		}
		if n := len(w.Manager().Failed()); n > 0 {
			msg += fmt.Sprintf(" (%d server(s) failed to start; see the warnings above)", n)
		}
		return &exitError{exitUsage, errors.New(msg)}
	case tool.ReasonInvalidArgs:
		return &exitError{exitUsage, errors.New(res.Message)}
	}
	return &exitError{exitToolErr, fmt.Errorf("%s: %s", name, res.Message)}
}

// closestNames returns up to n registered names close to name: those
// within a third of its length in edits (case-insensitive), or holding it
// (or its part after "__") whole, closest first.
func closestNames(name string, tools []*tool.Tool, n int) []string {
	type cand struct {
		name string
		dist int
	}
	want := strings.ToLower(name)
	_, short, _ := strings.Cut(want, "__")
	var cs []cand
	for _, t := range tools {
		got := strings.ToLower(t.Name)
		d := spelling.Distance(want, got)
		_, gotShort, _ := strings.Cut(got, "__")
		switch {
		case d <= max(1, len(want)/3):
		case strings.Contains(got, want), short != "" && strings.Contains(got, short), gotShort != "" && gotShort == want:
			d = len(got) // after the close spellings
		default:
			continue
		}
		cs = append(cs, cand{t.Name, d})
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Or(a.dist-b.dist, strings.Compare(a.name, b.name)) })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// pairsToJSON builds the arguments object from key=value pairs. A value is
// JSON when it parses as JSON, except where the tool's schema says the
// property is a string.
func pairsToJSON(reg *tool.Registry, name string, pairs []string) (json.RawMessage, error) {
	strs := map[string]bool{}
	if t, ok := reg.Lookup(name); ok {
		strs = stringProperties(t.Schema())
	}
	obj := make(map[string]json.RawMessage, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want key=value", p)
		}
		if _, dup := obj[k]; dup {
			return nil, fmt.Errorf("argument %q given twice", k)
		}
		if !strs[k] && json.Valid([]byte(v)) {
			obj[k] = json.RawMessage(v)
			continue
		}
		s, _ := json.Marshal(v)
		obj[k] = s
	}
	return json.Marshal(obj)
}

// stringProperties returns the top-level properties the schema types as
// strings and nothing else.
func stringProperties(schema json.RawMessage) map[string]bool {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	out := map[string]bool{}
	if json.Unmarshal(schema, &s) != nil {
		return out
	}
	for k, p := range s.Properties {
		if p.Type == "string" {
			out[k] = true
		}
	}
	return out
}

// printResult prints the text blocks as they are and one line for each
// other block. A result with no content but a structured value prints the
// value.
func printResult(e *env, res *tool.Result) {
	if res.IsError {
		// The reason goes with the exit status; the server's own text, if
		// any, is shown in full here.
		if text := res.Text(); text != "" && text != res.Message {
			fmt.Fprintln(e.stderr, termSafe(text))
		}
		return
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *tool.Text:
			fmt.Fprintln(e.stdout, termSafe(c.Text))
		case *tool.Image:
			fmt.Fprintf(e.stdout, "[image %s, %d bytes]\n", termSafe(c.MIMEType), len(c.Data))
		case *tool.Audio:
			fmt.Fprintf(e.stdout, "[audio %s, %d bytes]\n", termSafe(c.MIMEType), len(c.Data))
		case *tool.Resource:
			size := len(c.Blob)
			if size == 0 {
				size = len(c.Text)
			}
			fmt.Fprintf(e.stdout, "[resource %s %s, %d bytes]\n", termSafe(c.URI), termSafe(c.MIMEType), size)
		case *tool.ResourceLink:
			fmt.Fprintf(e.stdout, "[link %s %s]\n", termSafe(c.URI), termSafe(c.Name))
		}
	}
	if len(res.Content) == 0 && res.Structured != nil {
		b, err := json.MarshalIndent(res.Structured, "", "  ")
		if err == nil {
			fmt.Fprintln(e.stdout, termSafe(string(b)))
		}
	}
}

func printJSON(e *env, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// forPerson is a result's message as a person reads it: without the
// advice the executor gives a model ("do not retry it").
func forPerson(msg string) string {
	return strings.TrimSuffix(msg, "; do not retry it")
}
