// Command toolwire connects MCP servers, lists their tools and calls them
// through toolwire's executor: validated, tiered, confirmed and audited.
//
// Usage:
//
//	toolwire tools [--json]
//	toolwire call NAME [--args JSON | key=value ...] [--yes] [--json]
//	toolwire servers [--json] [--watch]
//	toolwire run TASK | toolwire chat
//	toolwire serve (--stdio | --http ADDR)
//	toolwire login|logout SERVER, toolwire auth status
//	toolwire pins list|approve|forget
//	toolwire audit verify|keygen
//	toolwire config check|import FILE
//	toolwire token new|hash
//
// See docs/cli.md for every command and flag.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses, documented in docs/cli.md.
const (
	exitOK       = 0
	exitToolErr  = 1 // the tool ran and failed, or could not run
	exitUsage    = 2 // bad invocation, configuration, arguments or tool name
	exitDeclined = 3 // confirmation refused or impossible
)

// exitError carries an exit status up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	// SIGTERM ends the command; Ctrl-C (SIGINT) too, unless chat takes it
	// to cancel one turn (see interrupter).
	base, cancel := context.WithCancel(context.Background())
	ctx, stop := signal.NotifyContext(base, syscall.SIGTERM)
	e := defaultEnv()
	e.interrupts = &interrupter{cancel: cancel}
	sigint := make(chan os.Signal, 1)
	signal.Notify(sigint, os.Interrupt)
	go func() {
		for range sigint {
			e.interrupts.fire()
		}
	}()
	err := newRootCommand(e).ExecuteContext(ctx)
	signal.Stop(sigint)
	stop()
	cancel()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode reports err on stderr and returns the exit status it stands for.
// Errors that are not an *exitError come from cobra (an unknown flag, a
// missing argument) and mean a bad invocation.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "toolwire:", termSafe(err.Error()))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitUsage
}
