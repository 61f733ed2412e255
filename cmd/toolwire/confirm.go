package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/tool"
)

// errNoTerminal is why a call that needs confirmation is refused when
// nobody is there to ask.
var errNoTerminal = fmt.Errorf("%w: no terminal (pass --yes to approve)", tool.ErrNobodyToAsk)

// terminalConfirmer asks on the terminal before a write or destructive call,
// showing the call as tool.PendingCall.Render does (the gateway's approvals
// show the same). Only an explicit "y" or "yes" approves.
type terminalConfirmer struct {
	in          io.Reader
	out         io.Writer
	interactive bool

	mu    sync.Mutex // one question at a time
	lines *lineReader

	// grants, when set, keeps the lasting approvals the person may give
	// instead of a plain yes (see approvalScopes).
	grants approval.Grants
}

// The lasting approvals the terminal offers: these arguments for a day,
// or the tool, whatever its arguments, for a quarter of an hour.
const (
	argsApprovalTTL = 24 * time.Hour
	toolApprovalTTL = 15 * time.Minute
)

func (c *terminalConfirmer) Confirm(ctx context.Context, call tool.PendingCall) (bool, error) {
	if !c.interactive {
		return false, errNoTerminal
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A question queued behind one that Ctrl-C ended must not be asked:
	// the earlier read may still be waiting on the terminal.
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if c.lines == nil {
		c.lines = newLineReader(c.in)
	}
	offer := c.grants != nil && call.Key.Tool != ""
	fmt.Fprintf(c.out, "\n%s\n", call.Render())
	if offer {
		fmt.Fprintf(c.out, "Answer a to also approve these arguments for %s, t to approve this tool for %s (toolwire approvals list, revoke).\n",
			argsApprovalTTL, toolApprovalTTL)
	}
	fmt.Fprint(c.out, "Run it? [y/N] ")
	// A cancelled context (Ctrl-C) ends the wait.
	line, err := c.lines.read(ctx)
	if ctxErr := ctx.Err(); ctxErr != nil {
		fmt.Fprintln(c.out)
		return false, ctxErr
	}
	_ = err // the end of input answers no
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	case "a":
		if offer {
			c.grant(ctx, approval.Args, call.Key, argsApprovalTTL)
			return true, nil
		}
	case "t":
		if offer {
			c.grant(ctx, approval.Tool, call.Key, toolApprovalTTL)
			return true, nil
		}
	}
	return false, nil
}

// grant keeps an approval the person gave; the call they approved runs
// either way, and a failure to keep it is said.
func (c *terminalConfirmer) grant(ctx context.Context, scope approval.Scope, key tool.ApprovalKey, ttl time.Duration) {
	g, err := c.grants.Grant(ctx, scope, key, ttl)
	if err != nil {
		fmt.Fprintf(c.out, "toolwire: the approval could not be kept: %v\n", err)
		return
	}
	fmt.Fprintf(c.out, "toolwire: approval %s kept until %s\n", g.ID, g.Expires.Local().Format("2006-01-02 15:04"))
}

// approveAll is the confirmer of --yes.
type approveAll struct{}

func (approveAll) Confirm(context.Context, tool.PendingCall) (bool, error) { return true, nil }

// progressPrinter shows a server's progress reports for the running call on
// stderr, one line each.
type progressPrinter struct {
	mu    sync.Mutex
	out   io.Writer
	label bool // name the call each report belongs to (run and chat, whose calls run together)
}

func (p *progressPrinter) Progress(ctx context.Context, pr tool.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	b.WriteString("progress ")
	if ci, ok := tool.CallInfoFrom(ctx); ok && p.label {
		b.WriteString(termSafe(ci.Name) + " ")
	}
	if pr.Total > 0 {
		fmt.Fprintf(&b, "%g/%g", pr.Progress, pr.Total)
	} else {
		fmt.Fprintf(&b, "%g", pr.Progress)
	}
	if pr.Message != "" {
		b.WriteString(": " + oneLine(pr.Message, 100))
	}
	fmt.Fprintln(p.out, b.String())
}
