package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/agent/agenttest"
)

// TestChatCtrlCCancelsTheTurnNotTheChat is issue 23.6 for chat, on a
// terminal: Ctrl-C during a turn cancels that turn and Ctrl-C at the
// prompt drops the line; the chat goes on with its history, says how to
// leave, and after Ctrl-D (the end of stdin) the shell's prompt starts on
// a line of its own. Ctrl-C comes as main's SIGINT handler delivers it.
func TestChatCtrlCCancelsTheTurnNotTheChat(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	screen := newPTY(t, 200)
	inTurn := make(chan struct{})
	srv := agenttest.NewServer(t,
		func(w http.ResponseWriter, r *http.Request) {
			close(inTurn)
			<-r.Context().Done() // answers only once the turn is cancelled
		},
		agenttest.OpenAIReply("second answer"))

	stdin, typed := io.Pipe()
	stdout := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ints := &interrupter{cancel: cancel}
	e := &env{
		stdin: stdin, stdout: stdout, stderr: screen.tty,
		isTerminal: func() bool { return true },
		lookupEnv:  func(string) (string, bool) { return "", false },
		interrupts: ints,
	}
	done := make(chan int, 1)
	go func() {
		root := newRootCommand(e)
		root.SetArgs([]string{"--config", f.config, "chat", "--model", "scripted", "--base-url", srv.URL + "/v1"})
		var errOut bytes.Buffer
		done <- exitCode(root.ExecuteContext(ctx), &errOut)
	}()
	screen.wait(t, "> ")
	fmt.Fprintln(typed, "first question")
	select {
	case <-inTurn:
	case <-time.After(30 * time.Second):
		t.Fatal("the first turn never reached the model")
	}
	ints.fire() // Ctrl-C during the turn
	screen.wait(t, "toolwire: turn cancelled; the conversation so far is kept")
	screen.wait(t, "kept (type \"exit\" or press Ctrl-D to leave)\r\n> ")
	ints.fire() // Ctrl-C at the prompt
	screen.wait(t, "toolwire: Ctrl-C; type \"exit\" or press Ctrl-D to leave\r\n> ")
	fmt.Fprintln(typed, "second question")
	screen.wait(t, "> ")
	deadline := time.After(30 * time.Second)
	for !strings.Contains(stdout.String(), "second answer") {
		select {
		case code := <-done:
			t.Fatalf("chat ended with %d before the second answer\n%s", code, screen.String())
		case <-deadline:
			t.Fatalf("no second answer\n%s", screen.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	typed.Close() // Ctrl-D
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("chat exited %d, want 0\n%s", code, screen.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("chat did not end at the end of stdin")
	}
	if ctx.Err() != nil {
		t.Errorf("Ctrl-C in chat cancelled the command's context")
	}
	shown := screen.String()
	if !strings.HasSuffix(shown, "> \r\n") {
		t.Errorf("after Ctrl-D the screen ends %q, want the prompt then a new line", shown[max(0, len(shown)-40):])
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model asked %d times, want 2", len(reqs))
	}
	var users []string
	for _, m := range agenttest.Messages(reqs[1]) {
		if m["role"] == "user" {
			users = append(users, fmt.Sprint(m["content"]))
		}
	}
	if len(users) != 2 || users[0] != "first question" || users[1] != "second question" {
		t.Errorf("second request's user messages = %q, want the cancelled turn's kept before the new one", users)
	}
}

// TestCtrlCBetweenTurnsCancelsTheNextTurn: a Ctrl-C that comes while no
// turn is in progress (the prompt is being shown) is the next turn's, not
// the command's, and a turn that has ended is not cancelled again.
func TestCtrlCBetweenTurnsCancelsTheNextTurn(t *testing.T) {
	t.Parallel()
	commandCancelled := false
	ints := &interrupter{cancel: func() { commandCancelled = true }}
	var turns turnInterrupts
	restore := ints.handle(turns.fire)
	defer restore()

	ints.fire() // between turns
	first, end := turns.begin(context.Background())
	if first.Err() == nil {
		t.Fatal("a Ctrl-C before the turn began did not cancel it")
	}
	end()
	second, end := turns.begin(context.Background())
	if second.Err() != nil {
		t.Fatal("a Ctrl-C already delivered cancelled the turn after")
	}
	ints.fire() // during the turn
	if second.Err() == nil {
		t.Fatal("a Ctrl-C during the turn did not cancel it")
	}
	end()
	third, end := turns.begin(context.Background())
	defer end()
	if third.Err() != nil || commandCancelled {
		t.Fatalf("third turn cancelled %v, command cancelled %v; want neither", third.Err(), commandCancelled)
	}
}
