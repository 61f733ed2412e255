package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	// Without the hold, notes would be due at 20, 60, 140, 300 and 620 ms
	// (and demo's line as soon as it is ready): give them the chance.
	time.Sleep(time.Second)
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
	mustContain(t, "after the answer", after, "toolwire: demo ready in ", "toolwire: still waiting for ")
}
