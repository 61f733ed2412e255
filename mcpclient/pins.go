package mcpclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/tool"
)

// ErrPinsUnavailable, wrapped, is returned by [Connect] when pinning is in
// enforce mode and the server's tools cannot be checked against their pins:
// the pins file cannot be read or written (the error names it, and wraps
// [pins.ErrCorrupt] when the file is corrupt), or the server lists one tool
// name twice. Nothing of the server's is registered: tools that cannot be
// checked are not trusted. In warn mode the same failure is logged and
// audited (pins.failed) and the tools are registered unchecked.
var ErrPinsUnavailable = errors.New("tool pins cannot be checked")

// Quarantine is a tool of a server's latest listing that pinning keeps out
// of the registry (enforce mode) until an operator approves it.
type Quarantine struct {
	// Tool is the server's own name for the tool.
	Tool string
	// Status says why: [pins.Added] (new on a server whose tools are
	// pinned), [pins.Changed] or [pins.Invalid] (cannot be fingerprinted).
	Status pins.Status
	// Pinned is the approved fingerprint (empty for an added tool) and
	// Current the fingerprint of the definition the server lists now
	// (empty for an invalid one).
	Pinned, Current string
	// Fields names the parts of a changed definition that differ from the
	// approved one: "description", "inputSchema", "annotations".
	Fields []string
	// Err says why an invalid definition cannot be fingerprinted.
	Err error
}

// pinning is what the server's latest listing showed, kept for
// [Server.Definitions], [Server.Quarantined] and for reporting each problem
// once. Guarded by toolSet.mu.
type pinning struct {
	// listing is the latest listing as prepared (see prepare), and defs
	// its definitions: what a recheck checks again when the pins change.
	listing     []*mcp.Tool
	defs        []pins.Definition
	quarantined []Quarantine
	// reported maps a tool found unapproved to the fingerprint it was
	// reported with, so that reconnects and re-listings do not repeat the
	// warning for a definition already reported.
	reported map[string]string
	// listed is how many tools the latest listing held, so that a server
	// over MaxTools is reported when it crosses the limit, not at every
	// re-listing.
	listed int
	// unchecked is set when the latest check failed and warn mode let
	// every tool in unchecked.
	unchecked bool
}

// definitions returns the latest listing's definitions (see
// [Server.Definitions]).
func (ts *toolSet) definitions() []pins.Definition {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.pin.defs)
}

// quarantined returns the tools the latest pin check keeps out (see
// [Server.Quarantined]).
func (ts *toolSet) quarantined() []Quarantine {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := slices.Clone(ts.pin.quarantined)
	for i := range out {
		out[i].Fields = slices.Clone(out[i].Fields)
	}
	return out
}

// withoutQuarantined returns tools less those the latest pin check
// quarantined.
func (ts *toolSet) withoutQuarantined(tools []*tool.Tool) []*tool.Tool {
	ts.mu.Lock()
	held := make(map[string]bool, len(ts.pin.quarantined))
	for _, q := range ts.pin.quarantined {
		held[q.Tool] = true
	}
	ts.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(tools), func(t *tool.Tool) bool { return held[t.Origin.Name] })
}

// prepare readies a listing for adaptation and pinning. It returns the
// listing as the model is to see it (schemas encoded once, descriptions
// over limit runes cut) and the definitions pins fingerprint.
//
// A definition holds what toolwire shows the model and what decides how a
// call is made: the name; the server's text toolwire shows as the
// description (the title when the description is empty, see shownText),
// without the surrounding space it does not show; the input schema as
// registered; and the annotations in a fixed encoding (see
// pinnedAnnotations). The description is fingerprinted whole, before it is
// cut: an edit past the cut reaches the model as soon as the limit is
// raised, so it is a change like any other.
func prepare(cfg config.Server, listing []*mcp.Tool, limit int) ([]*mcp.Tool, []pins.Definition) {
	shown := make([]*mcp.Tool, 0, len(listing))
	var defs []pins.Definition
	for _, mt := range listing {
		if mt == nil {
			continue
		}
		t := *mt // the SDK's value stays as the server sent it
		if t.InputSchema != nil {
			// Encoded once here for both the fingerprint and the registry;
			// an error is left for adapt to report.
			if raw, err := inputSchema(&t); err == nil {
				t.InputSchema = raw
			}
		}
		text := shownText(&t)
		if cut, ok := cutDescription(text, limit); ok {
			t.Description = cut
		}
		shown = append(shown, &t)
		if t.Name == "" || !selected(cfg, t.Name) {
			continue
		}
		var schema json.RawMessage
		if raw, err := inputSchema(&t); err == nil {
			schema = raw
		}
		defs = append(defs, pins.Definition{
			Name:        t.Name,
			Registered:  registeredName(prefixOf(cfg), t.Name),
			Description: text,
			InputSchema: schema,
			Annotations: annotationsJSON(t.Annotations),
		})
	}
	return shown, defs
}

// shownText is the server's text that describe shows for a tool: its
// description, or its title when the description is empty.
func shownText(t *mcp.Tool) string {
	if d := strings.TrimSpace(t.Description); d != "" {
		return d
	}
	return strings.TrimSpace(t.Title)
}

// cutDescription cuts s to limit runes, at a rune boundary, and says how
// much was cut. It reports false when s is within the limit (or limit is
// not positive).
func cutDescription(s string, limit int) (string, bool) {
	if limit <= 0 || len(s) <= limit { // a rune is at least one byte
		return s, false
	}
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, false
	}
	i, count := 0, 0
	for i = range s {
		if count == limit {
			break
		}
		count++
	}
	return fmt.Sprintf("%s… [cut by toolwire: %d more characters]", s[:i], n-limit), true
}

// pinnedAnnotations is the form annotations are fingerprinted in: every
// field the SDK decodes, under fixed names and omission rules. Encoding
// mcp.ToolAnnotations itself would not do: its encoding changes with
// MCPGODEBUG (hintomitempty) and could change with the SDK, and either
// would look like a changed tool. The conversion from mcp.ToolAnnotations
// stops compiling when the SDK adds a field, so a field that pins would
// miss cannot arrive unnoticed.
type pinnedAnnotations struct {
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	Title           string `json:"title,omitempty"`
}

// annotationsJSON encodes a tool's annotations for its fingerprint; nil
// when the tool has none.
func annotationsJSON(a *mcp.ToolAnnotations) json.RawMessage {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(pinnedAnnotations(*a))
	if err != nil { // bools, pointers to bools and a string always encode
		panic(fmt.Sprintf("mcpclient: encoding annotations: %v", err))
	}
	return b
}

// descriptionLimit is the effective Options.MaxDescription.
func (ts *toolSet) descriptionLimit() int {
	if ts.set.opts.MaxDescription > 0 {
		return ts.set.opts.MaxDescription
	}
	return config.DefaultMaxDescription
}

// noteToolCount reports a listing of more than MaxTools tools (a warning
// and a tools.exceeded event) when the server crosses the limit: at its
// first listing or when a re-listing grows past it.
func (ts *toolSet) noteToolCount(n int) {
	limit := ts.set.opts.MaxTools
	if limit <= 0 {
		limit = config.DefaultMaxTools
	}
	ts.mu.Lock()
	before := ts.pin.listed
	ts.pin.listed = n
	ts.mu.Unlock()
	if n <= limit || before > limit {
		return
	}
	ts.set.logger.Warn("server lists more tools than the limit; every tool is still registered (raise security.maxTools or filter with onlyTools/excludeTools)",
		"server", ts.set.cfg.Name, "tools", n, "limit", limit)
	ts.set.record(audit.Event{Kind: audit.ToolsExceeded, Tools: n, Limit: limit})
}

// PinScope is the scope of cfg's pins (see [pins.Scope]): the server's
// name and its identity, a SHA-256 over what says which server it is: the
// transport and, for stdio, the command, arguments and working directory,
// or the URL of a remote server. Placeholders count as written, unexpanded,
// so no secret's value goes into the hash, and a server keeps its pins
// while the value of a ${VAR} changes. Two projects that start the same
// command with the same arguments from different directories share an
// identity unless the configuration sets cwd (or an absolute path).
func PinScope(cfg config.Server) pins.Scope {
	id := struct {
		Transport string   `json:"transport"`
		Command   string   `json:"command,omitempty"`
		Args      []string `json:"args,omitempty"`
		Cwd       string   `json:"cwd,omitempty"`
		URL       string   `json:"url,omitempty"`
	}{Transport: string(cfg.Transport), URL: cfg.URL}
	if cfg.Transport == config.TransportStdio || cfg.URL == "" {
		id.Command, id.Args, id.Cwd = cfg.Command, cfg.Args, cfg.Cwd
	}
	b, err := json.Marshal(id)
	if err != nil { // strings only
		panic(fmt.Sprintf("mcpclient: encoding a server's identity: %v", err))
	}
	sum := sha256.Sum256(b)
	return pins.Scope{Server: cfg.Name, Identity: "sha256:" + hex.EncodeToString(sum[:])}
}

// pinningOn reports whether the server's tools are checked against pins.
func (ts *toolSet) pinningOn() bool {
	return ts.set.opts.Pins != nil && ts.set.opts.PinMode != pins.Off
}

// checkPins checks a listing's definitions against the pins and returns the
// tools to keep out of the registry, by the server's name for them. It
// logs and audits what the check found: tools pinned on first use, tools
// quarantined (enforce) or let in unapproved (warn), each once per
// definition. With pinning off it does nothing.
//
// When the check itself fails, enforce mode returns an error wrapping
// [ErrPinsUnavailable]; warn mode logs it, records pins.failed, and lets
// every tool in.
func (ts *toolSet) checkPins(ctx context.Context, defs []pins.Definition) (map[string]Quarantine, error) {
	if !ts.pinningOn() {
		ts.setQuarantined(nil, nil)
		return nil, nil
	}
	mode := ts.set.opts.PinMode
	rep, err := ts.set.opts.Pins.Check(ctx, PinScope(ts.set.cfg), defs, mode)
	if err != nil {
		if mode == pins.Enforce {
			ts.set.record(audit.Event{Kind: audit.PinsFailed, Reason: "withheld", Error: err.Error()})
			return nil, fmt.Errorf("server %q: %w: %w", ts.set.cfg.Name, ErrPinsUnavailable, err)
		}
		ts.set.logger.Error("tool pins cannot be checked; registering the server's tools UNCHECKED (pins mode warn; in enforce mode the server would not start)",
			"server", ts.set.cfg.Name, "error", ts.set.secrets.String(err.Error()))
		ts.set.record(audit.Event{Kind: audit.PinsFailed, Reason: "unchecked", Error: err.Error()})
		ts.setQuarantined(nil, nil)
		ts.mu.Lock()
		ts.pin.unchecked = true
		ts.mu.Unlock()
		return nil, nil
	}

	held := map[string]Quarantine{}
	var quarantined []Quarantine
	current := map[string]string{} // unapproved tools, for the next report
	ts.mu.Lock()
	reported := ts.pin.reported
	ts.mu.Unlock()
	for _, d := range rep.Decisions {
		switch d.Action {
		case pins.Allow:
			if d.Status == pins.FirstUse {
				ts.set.logger.Info("tool pinned on first use", "server", ts.set.cfg.Name, "tool", d.Tool, "fingerprint", d.New)
				ts.set.record(audit.Event{Kind: audit.ToolPinned, Original: d.Tool, Fingerprint: d.New, Reason: "first-use"})
			}
			continue
		case pins.Quarantine:
			q := Quarantine{Tool: d.Tool, Status: d.Status, Pinned: d.Old, Current: d.New, Fields: d.Fields, Err: d.Err}
			held[d.Tool] = q
			quarantined = append(quarantined, q)
		}
		current[d.Tool] = d.New
		if fp, ok := reported[d.Tool]; ok && fp == d.New {
			continue
		}
		ts.reportUnapproved(d)
	}
	ts.setQuarantined(quarantined, current)
	return held, nil
}

// setQuarantined records the latest check's outcome.
func (ts *toolSet) setQuarantined(q []Quarantine, reported map[string]string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.pin.quarantined, ts.pin.reported, ts.pin.unchecked = q, reported, false
}

// markPins gives each of tools its pin state after the latest check, for
// the policy rules that read it (tool.Tool.Pin): unapproved for a tool
// let in by warn mode though it is not what was approved (or when the
// check itself failed), approved otherwise; nothing with pinning off.
func (ts *toolSet) markPins(tools []*tool.Tool) {
	if !ts.pinningOn() {
		return
	}
	ts.mu.Lock()
	unapproved, unchecked := ts.pin.reported, ts.pin.unchecked
	ts.mu.Unlock()
	for _, t := range tools {
		t.Pin = tool.PinApproved
		if _, ok := unapproved[t.Origin.Name]; ok || unchecked {
			t.Pin = tool.PinUnapproved
		}
	}
}

// reportUnapproved logs and audits one tool that is not what the operator
// approved: quarantined in enforce mode, registered anyway in warn mode.
func (ts *toolSet) reportUnapproved(d pins.Decision) {
	var why string
	switch d.Status {
	case pins.Added:
		why = "it is new on a server whose tools are pinned"
	case pins.Changed:
		why = "its " + strings.Join(d.Fields, ", ") + " changed since it was approved"
	case pins.Invalid:
		why = "its definition cannot be fingerprinted: " + d.Err.Error()
	case pins.Renamed:
		why = fmt.Sprintf("it was approved as %q, and would now be registered as %q (its prefix changed?)", d.Registered, registeredName(prefixOf(ts.set.cfg), d.Tool))
	default:
		why = "it is not approved (" + d.Status.String() + ")"
	}
	approve := fmt.Sprintf("toolwire pins approve %s/%s", ts.set.cfg.Name, d.Tool)
	ev := audit.Event{Original: d.Tool, Reason: d.Status.String(), Pinned: d.Old, Fingerprint: d.New, Fields: d.Fields}
	if d.Err != nil {
		ev.Error = d.Err.Error()
	}
	attrs := []any{"server", ts.set.cfg.Name, "tool", d.Tool, "status", d.Status.String()}
	if len(d.Fields) > 0 {
		attrs = append(attrs, "changed", strings.Join(d.Fields, ","))
	}
	if d.Old != "" {
		attrs = append(attrs, "pinned", d.Old)
	}
	if d.New != "" {
		attrs = append(attrs, "current", d.New)
	}
	// The names are in the attributes; the message says what happened
	// and what to run.
	switch {
	case d.Action == pins.Quarantine:
		ev.Kind = audit.ToolQuarantined
		ts.set.logger.Warn("tool quarantined (not registered): "+why+"; if the change is expected, approve it with: "+approve, attrs...)
	case d.Noticed:
		// An earlier command already warned about this very definition
		// of a new tool; the audit still records that it runs unapproved.
		ev.Kind = audit.ToolUnapproved
		ts.set.logger.Debug("tool registered though not approved (pins mode warn), as reported before: "+why, attrs...)
	default:
		ev.Kind = audit.ToolUnapproved
		ts.set.logger.Warn("tool registered though not approved (pins mode warn): "+why+"; if the change is expected, approve it with: "+approve, attrs...)
	}
	ts.set.record(ev)
}
