package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/safetext"
)

// PendingCall is what a [Confirmer] is shown: a call whose arguments have
// been validated against the tool's schema. Render confirmation prompts from
// these fields only, never from a model's raw output; [PendingCall.Render]
// does.
type PendingCall struct {
	Name        string
	Tier        Tier
	Args        json.RawMessage
	Description string
	// Source is the server the tool comes from (its Origin.Source), whose
	// words the description is; empty for a tool the program defined.
	Source string
	// Rule is the policy rule that asks for this call to be confirmed
	// (whatever its tier), and Reason the rule's reason; both empty when
	// the tier asks. A confirmer that approves calls by tier without
	// asking anyone (a gateway's "write: allow") must still ask a person
	// for a call a rule asks about: the rule is there to make sure one is.
	Rule, Reason string
	// Key is what a lasting approval of this call would be bound to,
	// for a confirmer that offers one (see [Approvals]); zero when the
	// executor has no approvals.
	Key ApprovalKey
}

// The bounds of what [PendingCall.Render] shows of text that others wrote.
const (
	// RenderDescriptionRunes is the most of a description shown: enough
	// for what a tool does, too little to bury the arguments.
	RenderDescriptionRunes = 300
	// RenderArgsBytes is the most of the indented arguments shown; a cut
	// says how much was left out, so that the user can decline.
	RenderArgsBytes = 8 << 10
)

// Render returns the call as a user must judge it, the same wherever it is
// asked about (the CLI's terminal, a gateway client's elicitation form):
// the tool and its tier, then the validated arguments, then the tool's
// description, marked as its server's words. The server and the model
// choose the description and the arguments, so both are bounded in length
// and have their control characters escaped: neither can rewrite, reorder
// or push out of sight what comes before it. The question itself ("Run
// it?") is the caller's to add.
func (c PendingCall) Render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is a %s tool", safetext.Line(c.Name, 128), c.Tier)
	if c.Source != "" {
		fmt.Fprintf(&b, " of server %q", safetext.Line(c.Source, 128))
	}
	b.WriteString(".\n")
	if c.Rule != "" {
		fmt.Fprintf(&b, "Policy rule %q asks for confirmation", safetext.Line(c.Rule, 128))
		if c.Reason != "" {
			fmt.Fprintf(&b, ": %s", safetext.Line(c.Reason, RenderDescriptionRunes))
		}
		b.WriteString(".\n")
	}
	b.WriteString("Arguments:\n")
	b.WriteString(renderArgs(c.Args))
	if d := strings.TrimSpace(c.Description); d != "" {
		d = safetext.Line(d, RenderDescriptionRunes)
		if c.Source != "" {
			fmt.Fprintf(&b, "\nThe server describes it as (its words, not toolwire's): %s", d)
		} else {
			fmt.Fprintf(&b, "\nDescription: %s", d)
		}
	}
	return b.String()
}

// renderArgs indents the arguments two spaces, escaped (JSON escapes
// control characters, but not direction overrides) and cut at
// RenderArgsBytes.
func renderArgs(raw json.RawMessage) string {
	var ind bytes.Buffer
	s := string(raw)
	if err := json.Indent(&ind, raw, "  ", "  "); err == nil {
		s = ind.String()
	}
	if strings.TrimSpace(s) == "" {
		s = "{}"
	}
	s = safetext.Escape(s)
	if len(s) > RenderArgsBytes {
		cut := RenderArgsBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("  %s\n  … %d more bytes not shown: decline unless you know what they hold", s[:cut], len(s)-cut)
	}
	return "  " + s
}

// Confirmer decides whether a write or destructive call may run.
//
// Confirm is called concurrently for the calls of one batch. It returns true
// to let the call run. False, an error, or a context ending all mean the call
// does not run; an error's text is shown to the caller as the reason.
type Confirmer interface {
	Confirm(ctx context.Context, call PendingCall) (bool, error)
}

type confirmNoteKey struct{}

// NoteConfirmation lets a [Confirmer] say what approved the call it is
// asked about (an operator's decision and who took it, a lasting approval
// it granted), before Confirm returns: the executor records the note as
// the Reason of the call's confirmation.accepted event, as it records a
// lasting approval's ID. It does nothing outside a call to Confirm.
func NoteConfirmation(ctx context.Context, note string) {
	if p, ok := ctx.Value(confirmNoteKey{}).(*string); ok {
		*p = note
	}
}

// ConfirmFunc adapts a function to a [Confirmer].
type ConfirmFunc func(ctx context.Context, call PendingCall) (bool, error)

// Confirm calls f(ctx, call).
func (f ConfirmFunc) Confirm(ctx context.Context, call PendingCall) (bool, error) {
	return f(ctx, call)
}
