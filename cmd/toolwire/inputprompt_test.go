package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/config"
)

// TestInputPromptIsNotCutIntoByStartUpLines is issue 23.10: while a
// person is asked for an ${input:ID} value, the other servers' start-up
// lines (and the "still waiting" notes, due every few tens of
// milliseconds here) wait, and appear once the question is answered.
func TestInputPromptIsNotCutIntoByStartUpLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolwire.yaml")
	server := func(name, env string) string {
		return "  " + name + ":\n    command: " + quoteYAML(os.Args[0]) + "\n    env:\n      TOOLWIRE_TEST_SERVER: demo\n" + env
	}
	data := "servers:\n" + server("demo", "") + server("asked", "      TOKEN: ${input:tok}\n") +
		"inputs:\n  tok:\n    description: Team token\nsecurity:\n  pins: off\n"
	if err := os.WriteFile(cfg, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	screen := newPTY(t, 200)
	stdin, typed := io.Pipe()
	defer typed.Close()
	e := &env{
		stdin: stdin, stdout: &syncBuffer{}, stderr: screen.tty,
		isTerminal: func() bool { return true },
		lookupEnv:  func(string) (string, bool) { return "", false },
		waitNote:   20 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		root := newRootCommand(e)
		root.SetArgs([]string{"--config", cfg, "tools"})
		done <- exitCode(root.ExecuteContext(ctx), io.Discard)
	}()
	const prompt = `Team token (input "tok"): `
	screen.wait(t, prompt)
	// That nothing written meanwhile reaches the screen is
	// TestHeldWriterHoldsWhileAPersonIsAsked's; here, that the question is
	// the last thing shown when it appears, and the rest comes after it.
	if shown := screen.String(); !strings.HasSuffix(shown, prompt) {
		t.Errorf("output cut into the question:\n%q", shown[strings.Index(shown, prompt):])
	}
	fmt.Fprintln(typed, "abc")
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("tools exited %d\n%s", code, screen.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tools did not end\n%s", screen.String())
	}
	screen.wait(t, "toolwire: asked ready in ")
	after := screen.String()[strings.Index(screen.String(), prompt):]
	mustContain(t, "after the answer", after, "toolwire: demo ready in ")
}

// While a person is asked, what the start-up lines write waits, and goes
// out, in order, once the answer is in; outside a question it goes out at
// once.
func TestHeldWriterHoldsWhileAPersonIsAsked(t *testing.T) {
	t.Parallel()
	var screen bytes.Buffer
	out := &heldWriter{out: &screen}
	fmt.Fprint(out, "before\n")
	ask := holdWhileAsking(out, func(string, config.Input) (string, error) {
		screen.WriteString("Question? ")
		fmt.Fprint(out, "demo ready\n")
		fmt.Fprint(out, "still waiting\n")
		if got := screen.String(); got != "before\nQuestion? " {
			t.Errorf("while asking the screen shows %q, want only the question after the earlier line", got)
		}
		screen.WriteString("abc\n")
		return "abc", nil
	})
	if v, err := ask("tok", config.Input{}); err != nil || v != "abc" {
		t.Fatalf("ask = %q, %v", v, err)
	}
	if got, want := screen.String(), "before\nQuestion? abc\ndemo ready\nstill waiting\n"; got != want {
		t.Errorf("after the answer the screen shows %q, want %q", got, want)
	}
	fmt.Fprint(out, "after\n")
	if !strings.HasSuffix(screen.String(), "still waiting\nafter\n") {
		t.Errorf("a line after the question was held: %q", screen.String())
	}
}
