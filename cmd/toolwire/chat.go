package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

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
or you type "exit". Tool calls, confirmations and flags work as in
"toolwire run". Ctrl-C cancels what is in flight and ends the chat.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tuneGC(e.lookupEnv) // a long-running command
			// One reader for the chat's lines and the confirmations' answers:
			// two buffered readers on stdin would take each other's input.
			in := bufio.NewReader(e.stdin)
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

// chat reads messages line by line and sends each to one conversation.
// Failures the user can act on (a rate limit, the round limit, an
// unreachable endpoint) are reported and the chat goes on; a refused key
// or Ctrl-C ends it.
func chat(s *session, e *env, in *bufio.Reader) error {
	conv := s.agent.NewConversation()
	interactive := e.isTerminal()
	for {
		if interactive {
			fmt.Fprint(e.stderr, "> ")
		}
		line, err := readLine(s.ctx, in)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return agentError(err, s.anthropic)
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "exit", "quit":
			return nil
		}
		_, err = conv.Send(s.ctx, line)
		s.ui.endText()
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled), errors.Is(err, agent.ErrUnauthorized):
			return agentError(err, s.anthropic)
		default:
			fmt.Fprintf(e.stderr, "toolwire: %s\n", termSafe(agentError(err, s.anthropic).Error()))
		}
	}
}

// readLine reads one line, giving up when ctx ends (Ctrl-C at the prompt).
// The read runs apart so that the wait can end; after a cancel the chat
// ends, so the abandoned read never races a later one.
func readLine(ctx context.Context, in *bufio.Reader) (string, error) {
	type read struct {
		line string
		err  error
	}
	done := make(chan read, 1)
	go func() {
		line, err := in.ReadString('\n')
		done <- read{line, err}
	}()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case r := <-done:
		if r.err != nil && (r.line == "" || !errors.Is(r.err, io.EOF)) {
			return "", r.err
		}
		return r.line, nil
	}
}
