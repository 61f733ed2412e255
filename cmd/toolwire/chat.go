package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/agent"
)

func newChatCommand(e *env, g *globalFlags) *cobra.Command {
	var f agentFlags
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk with an LLM that uses the configured tools",
		Long: `Talk with an LLM that can call the configured tools. Each line read from
stdin is one message; the conversation keeps its history until stdin ends
(Ctrl-D) or you type "exit". Tool calls, confirmations and flags work as in
"toolwire run". Ctrl-C cancels the turn in flight (the model request and
its tool calls), or the line being typed, and the chat goes on with its
history.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tuneGC(e.lookupEnv) // a long-running command
			// One reader for the chat's lines and the confirmations' answers:
			// two readers on stdin would take each other's input.
			in := newLineReader(e.stdin)
			s, err := startSession(cmd.Context(), e, g, &f, in)
			if err != nil {
				return err
			}
			defer s.close()
			return chat(s, e, in)
		},
	}
	f.register(cmd)
	return cmd
}

// leaveHint says how to leave a chat.
const leaveHint = `type "exit" or press Ctrl-D to leave`

// chat reads messages line by line and sends each to one conversation.
// Failures the user can act on (a rate limit, the round limit, an
// unreachable endpoint) are reported and the chat goes on; so does Ctrl-C,
// which cancels the turn (or the line being typed) when the process's
// interrupts come to the chat (env.interrupts). A refused key, or the
// command's context ending (SIGTERM), ends it.
func chat(s *session, e *env, in *lineReader) error {
	conv := s.agent.NewConversation()
	interactive := e.isTerminal()
	if interactive && e.interrupts != nil {
		fmt.Fprintf(e.stderr, "toolwire: Ctrl-C cancels a turn; %s\n", leaveHint)
	}
	// Ctrl-C is the chat's for its whole life, between turns too: one
	// that comes before the next turn began cancels that turn (at its
	// prompt), never the command.
	var turns turnInterrupts
	defer e.interrupts.handle(turns.fire)()
	for {
		turn, endTurn := turns.begin(s.ctx)
		if interactive {
			fmt.Fprint(e.stderr, "> ")
		}
		line, err := readLine(turn, in)
		if err != nil {
			endTurn()
			switch {
			case errors.Is(err, io.EOF):
				if interactive {
					fmt.Fprintln(e.stderr) // the shell's prompt on a line of its own
				}
				return nil
			case s.ctx.Err() == nil && errors.Is(err, context.Canceled):
				fmt.Fprintf(e.stderr, "\ntoolwire: Ctrl-C; %s\n", leaveHint)
				continue
			}
			return agentError(err, s.anthropic)
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			endTurn()
			continue
		case "exit", "quit":
			endTurn()
			return nil
		}
		_, err = conv.Send(turn, line)
		endTurn()
		s.ui.endText()
		switch {
		case err == nil:
		case s.ctx.Err() == nil && errors.Is(err, context.Canceled):
			fmt.Fprintf(e.stderr, "toolwire: turn cancelled; the conversation so far is kept (%s)\n", leaveHint)
		case errors.Is(err, context.Canceled), errors.Is(err, agent.ErrUnauthorized):
			return agentError(err, s.anthropic)
		default:
			fmt.Fprintf(e.stderr, "toolwire: %s\n", termSafe(agentError(err, s.anthropic).Error()))
		}
	}
}

// turnInterrupts passes Ctrl-C to the chat's turn in progress, or keeps
// it for the next one when none is.
type turnInterrupts struct {
	mu     sync.Mutex
	cancel context.CancelFunc // the turn in progress; nil between turns
	fired  bool               // a Ctrl-C came between turns
}

func (t *turnInterrupts) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
		return
	}
	t.fired = true
}

// begin starts a turn: its context, a child of parent, is cancelled at
// once for a Ctrl-C that came before, and by one that comes while it is
// in progress. end ends the turn and cancels its context.
func (t *turnInterrupts) begin(parent context.Context) (turn context.Context, end func()) {
	turn, cancel := context.WithCancel(parent)
	t.mu.Lock()
	t.cancel = cancel
	if t.fired {
		t.fired = false
		cancel()
	}
	t.mu.Unlock()
	return turn, func() {
		t.mu.Lock()
		t.cancel = nil
		t.mu.Unlock()
		cancel()
	}
}

// readLine reads one line, giving up when ctx ends (Ctrl-C at the prompt);
// a line typed after that goes to the next read.
func readLine(ctx context.Context, in *lineReader) (string, error) {
	line, err := in.read(ctx)
	if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
		return "", err
	}
	return line, nil
}
