// Command quickstart walks through toolwire in one run: it builds the
// toolwire CLI and the demo MCP server, writes a configuration, lists the
// demo server's tools, calls a read tool, calls a write and a destructive
// tool (which ask for confirmation first) and shows the audit log.
//
//	go run ./examples/quickstart
//
// Everything it makes goes into .toolwire-quickstart/ in the current
// directory, so the commands it prints can be run again by hand.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	q := &quickstart{
		dir:         ".toolwire-quickstart",
		stdin:       os.Stdin,
		stdout:      os.Stdout,
		interactive: term.IsTerminal(int(os.Stdin.Fd())),
	}
	if err := q.run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// quickstart holds where the walkthrough writes and how it talks.
type quickstart struct {
	dir         string
	stdin       io.Reader
	stdout      io.Writer
	interactive bool
}

const configTemplate = `# Written by the toolwire quick start.
servers:
  demo:
    command: ./demoserver
    env:
      DEMO_NOTES_FILE: ./data/notes.json   # the demo keeps its notes here between runs
    # On Linux the server runs confined: it may write only its own state
    # directory and the one named here, and reach no network.
    sandbox:
      write: [%s]
    tierOverrides:
      write_note: write               # the operator, not the server, decides tiers
    # delete_note needs no override: the server marks it destructiveHint,
    # and a hint may raise a tier (never lower it).
audit:
  file: ./audit.jsonl
security:
  pinsFile: ./pins.json   # fingerprints of the tools as first seen; a changed tool is flagged
`

func (q *quickstart) run(ctx context.Context) error {
	if err := os.MkdirAll(q.dir, 0o755); err != nil {
		return err
	}
	q.say("Building toolwire and the demo MCP server into %s/ ...", q.dir)
	if err := q.build(ctx); err != nil {
		return err
	}
	abs, err := filepath.Abs(q.dir)
	if err != nil {
		return err
	}
	data := filepath.Join(abs, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	config := fmt.Sprintf(configTemplate, strconv.Quote(data))
	cfg := filepath.Join(q.dir, "toolwire.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return err
	}
	// Each run starts from a clean slate, so the walkthrough reads the same.
	for _, f := range []string{"audit.jsonl", "data/notes.json", "pins.json"} {
		if err := os.Remove(filepath.Join(q.dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	q.say("Wrote %s:\n\n%s", cfg, indent(config))

	q.step("1. The demo server's tools, adapted into toolwire's registry (tiers from the config):")
	if _, err := q.toolwire(ctx, "tools"); err != nil {
		return err
	}

	q.say("   ...and the server as it runs: on Linux confined (SANDBOX: what it may touch, net: none):")
	if _, err := q.toolwire(ctx, "servers"); err != nil {
		return err
	}

	q.step("2. A read tool runs at once. Its arguments are checked against the tool's schema first:")
	if _, err := q.toolwire(ctx, "call", "demo__echo", "text=hello from toolwire"); err != nil {
		return err
	}
	q.say("   ...and a call that breaks the schema never reaches the server:")
	if _, err := q.toolwire(ctx, "call", "demo__add", "a=2"); err == nil {
		return errors.New("a call missing a required argument was not refused")
	}

	if q.interactive {
		q.step("3. A write tool asks before it runs. Answer y to save the note:")
	} else {
		q.step("3. A write tool asks before it runs. Stdin is not a terminal, so toolwire refuses rather than guess;\n   in a terminal you would be asked. Here --yes approves it explicitly:")
	}
	writeArgs := []string{"call", "demo__write_note", "title=groceries", "body=milk, eggs, coffee"}
	if !q.interactive {
		writeArgs = append(writeArgs, "--yes")
	}
	_, _ = q.toolwire(ctx, writeArgs...)

	q.step("4. A destructive tool asks too, showing the validated arguments:")
	_, _ = q.toolwire(ctx, "call", "demo__delete_note", "title=groceries")

	q.step("5. The audit log, one line per step of each call (" + filepath.Join(q.dir, "audit.jsonl") + "):")
	if err := q.showAudit(); err != nil {
		return err
	}

	bin := filepath.Join(q.dir, "toolwire")
	q.step("Try more yourself:")
	q.say("   %s --config %s call demo__add a=2 b=3", bin, cfg)
	q.say("   %s --config %s call demo__slow_count steps=3 interval_ms=300", bin, cfg)
	q.say("   %s --config %s call demo__tiny_image --json", bin, cfg)
	q.say("   %s --config %s tools --json", bin, cfg)
	return nil
}

// build compiles the CLI and the demo server with the go command that is
// running this program.
func (q *quickstart) build(ctx context.Context) error {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	out, err := filepath.Abs(q.dir)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out+string(filepath.Separator),
		"github.com/toolwire/toolwire/cmd/toolwire", "github.com/toolwire/toolwire/examples/demoserver")
	cmd.Stdout, cmd.Stderr = q.stdout, q.stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// toolwire runs the built CLI against the quick start's config, echoing the
// command line first. Its exit status is returned as an error.
func (q *quickstart) toolwire(ctx context.Context, args ...string) (int, error) {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = shellQuote(a)
	}
	fmt.Fprintf(q.stdout, "\n$ toolwire %s\n", strings.Join(shown, " "))
	bin, err := filepath.Abs(filepath.Join(q.dir, "toolwire"))
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--config", "toolwire.yaml"}, args...)...)
	cmd.Dir = q.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = q.stdin, q.stdout, q.stdout
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		fmt.Fprintf(q.stdout, "(exit status %d)\n", exit.ExitCode())
		return exit.ExitCode(), err
	}
	return 0, err
}

// showAudit prints each audit event as one short line.
func (q *quickstart) showAudit() error {
	f, err := os.Open(filepath.Join(q.dir, "audit.jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	batch, n := "", 0
	pinned := 0
	flushPinned := func() {
		if pinned > 0 {
			fmt.Fprintf(q.stdout, "   tool.pinned: %d tools fingerprinted on first use (see pins.json)\n", pinned)
			pinned = 0
		}
	}
	defer flushPinned()
	for sc.Scan() {
		var ev struct {
			Kind       string   `json:"kind"`
			Batch      string   `json:"batch"`
			Source     string   `json:"source"`
			Tools      int      `json:"tools"`
			Tool       string   `json:"tool"`
			Tier       string   `json:"tier"`
			DurationMS *float64 `json:"duration_ms"`
			Reason     string   `json:"reason"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("audit line %q: %w", sc.Text(), err)
		}
		if ev.Batch == "" { // a server's lifecycle event, not a call's
			if ev.Kind == "tool.pinned" { // one per tool: counted, shown once
				pinned++
				continue
			}
			flushPinned()
			line := fmt.Sprintf("   server %s: %s", ev.Source, ev.Kind)
			if ev.Tools > 0 {
				line += fmt.Sprintf(" (%d tools)", ev.Tools)
			}
			fmt.Fprintln(q.stdout, line)
			batch = ""
			continue
		}
		flushPinned()
		if ev.Batch != batch {
			batch, n = ev.Batch, n+1
			fmt.Fprintf(q.stdout, "   call %d: %s (%s)\n", n, ev.Tool, ev.Tier)
		}
		line := "      " + ev.Kind
		if ev.DurationMS != nil {
			line += fmt.Sprintf("  %.2f ms", *ev.DurationMS)
		}
		if ev.Reason != "" {
			line += "  reason=" + ev.Reason
		}
		fmt.Fprintln(q.stdout, line)
	}
	return sc.Err()
}

func (q *quickstart) step(s string) { fmt.Fprintf(q.stdout, "\n%s\n", s) }

func (q *quickstart) say(format string, args ...any) {
	fmt.Fprintf(q.stdout, format+"\n", args...)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// shellQuote quotes s for display when it holds spaces or shell syntax.
func shellQuote(s string) string {
	if strings.ContainsAny(s, " \t'\"$`\\,;&|<>()*?[]{}!#~") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
