package pins

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Status is how a tool's current definition stands against its pin.
type Status uint8

const (
	// Unchecked: the mode is off, so nothing was compared.
	Unchecked Status = iota + 1
	// Pinned: the definition is the approved one.
	Pinned
	// FirstUse: the server had no pins at all, so the tool was trusted on
	// first use and pinned now.
	FirstUse
	// Added: the server has pins but none for this tool; it appeared after
	// the server was first trusted. It is not pinned by Check.
	Added
	// Changed: the definition differs from the pinned one. The pin is kept.
	Changed
	// Invalid: the definition cannot be fingerprinted (see [Fingerprint]),
	// so it can be neither compared nor pinned.
	Invalid
	// Renamed: the definition is the approved one, but the tool would be
	// registered under another name than the one it was approved under
	// ([Definition.Registered]): approvals, role globs and quarantine that
	// name it would not follow it. The pin is kept.
	Renamed
)

var statusNames = [...]string{
	Unchecked: "unchecked", Pinned: "pinned", FirstUse: "first-use",
	Added: "added", Changed: "changed", Invalid: "invalid", Renamed: "renamed",
}

// String returns the status's name, as audit events and logs show it.
func (s Status) String() string {
	if s < Unchecked || s > Renamed {
		return fmt.Sprintf("invalid-status(%d)", uint8(s))
	}
	return statusNames[s]
}

// Action is what the caller does with a tool.
type Action uint8

const (
	// Allow: register the tool.
	Allow Action = iota + 1
	// AllowWithWarning: register the tool, and log a warning and an audit
	// event, because it is not what the operator approved (warn mode).
	AllowWithWarning
	// Quarantine: do not register the tool; log a warning and an audit
	// event. It stays out until an operator approves it (enforce mode).
	Quarantine
)

var actionNames = [...]string{Allow: "allow", AllowWithWarning: "allow-with-warning", Quarantine: "quarantine"}

// String returns the action's name.
func (a Action) String() string {
	if a < Allow || a > Quarantine {
		return fmt.Sprintf("invalid-action(%d)", uint8(a))
	}
	return actionNames[a]
}

// Decision is the outcome of checking one tool.
type Decision struct {
	// Tool is the server's own name for the tool.
	Tool   string
	Status Status
	Action Action
	// New is the current definition's fingerprint (empty when Unchecked
	// or Invalid). Old is the pinned fingerprint and ApprovedAt when it was
	// pinned (zero unless the tool had a pin before this check).
	New, Old   string
	ApprovedAt time.Time
	// Fields names the parts of a Changed definition that differ from the
	// pinned one: "description", "inputSchema", "annotations".
	Fields []string
	// Err says why an Invalid definition cannot be fingerprinted.
	Err error
	// Registered is the name the tool was approved under, when the pin
	// kept it (see [Pin.Registered]).
	Registered string
	// Noticed is set on an Added tool in warn mode when an earlier check
	// already reported this very definition as new: the caller need not
	// warn about it again (issue: warn once, not on every command).
	Noticed bool
}

// Allowed reports whether the tool may be registered. Any action but
// Allow and AllowWithWarning, including the zero value, means no.
func (d Decision) Allowed() bool { return d.Action == Allow || d.Action == AllowWithWarning }

// Report is the outcome of checking one server's tools.
type Report struct {
	Server string
	Mode   Mode
	// Decisions has one entry per definition checked, in the same order.
	Decisions []Decision
	// Missing names the tools that have pins but were not among the
	// definitions, sorted. Their pins are kept: a tool that comes back
	// changed is still caught.
	Missing []string
}

// Check compares server's current tool definitions with their pins and
// decides, per tool, whether the caller registers it. The caller (a client
// connecting to the server, or applying a changed tool list) registers the
// tools whose [Decision.Allowed] is true, leaves the others out, and warns
// and audits every decision whose action is not Allow.
//
// With mode [Off] every tool is allowed and the store is not touched.
// Otherwise:
//
//   - A server with no pins at all is trusted on first use: every definition
//     that can be fingerprinted is pinned and allowed (FirstUse).
//   - A tool whose definition matches its pin is allowed (Pinned).
//   - A tool new to a server that has pins (Added), or whose definition
//     differs from its pin (Changed), or that cannot be fingerprinted
//     (Invalid), is quarantined in [Enforce] mode and allowed with a warning
//     in [Warn] mode.
//
// Only first use writes pins. In warn mode an added or changed tool is not
// pinned, so it is never silently accepted: a changed tool is reported at
// every check until an operator approves it ([Store.Approve]); a new tool is
// remembered as noticed, and a later check of the same definition sets
// [Decision.Noticed] so that the caller warns once, not at every command.
//
// A tool whose definition matches its pin but whose [Definition.Registered]
// differs from the name it was approved under is [Renamed]. A pin written
// before names were kept learns the name at its next matching check.
//
// Check returns an error, and no decisions, when mode is not valid, when a
// tool name appears twice in defs ([ErrDuplicateTool]), or when the store
// cannot be read or written ([ErrCorrupt] among others). The caller then
// registers nothing from the server in enforce mode.
func (s *Store) Check(ctx context.Context, scope Scope, defs []Definition, mode Mode) (*Report, error) {
	server := scope.Server
	if !mode.Valid() {
		return nil, fmt.Errorf("pins: check: invalid mode %s", mode)
	}
	if server == "" {
		return nil, errors.New("pins: check: empty server name")
	}
	if err := unique(server, defs); err != nil {
		return nil, fmt.Errorf("pins: check: %w", err)
	}
	rep := &Report{Server: server, Mode: mode, Decisions: make([]Decision, len(defs))}
	if mode == Off {
		for i, d := range defs {
			rep.Decisions[i] = Decision{Tool: d.Name, Status: Unchecked, Action: Allow}
		}
		return rep, nil
	}

	// Fingerprint outside the lock: schemas can be large.
	now := s.now().UTC()
	current := make([]Pin, len(defs))
	errs := make([]error, len(defs))
	for i, d := range defs {
		current[i], errs[i] = newPin(d, now)
	}

	err := s.update(ctx, server, func(f *file) (bool, error) {
		_, had := f.sets[scope]
		set := f.scope(scope)
		changed := !had && len(set.Tools) > 0 // adopted pins by name only
		pinned := set.Tools
		firstUse := len(pinned) == 0
		trusted := map[string]Pin{}
		for i, d := range defs {
			dec := Decision{Tool: d.Name}
			old, ok := pinned[d.Name]
			if ok {
				dec.Old, dec.ApprovedAt, dec.Registered = old.Fingerprint, old.ApprovedAt, old.Registered
			}
			cur := current[i]
			switch {
			case errs[i] != nil:
				dec.Status, dec.Err = Invalid, errs[i]
			case firstUse:
				dec.Status = FirstUse
				cur.FirstUse = true
				trusted[d.Name] = cur
			case !ok:
				dec.Status = Added
				if mode == Warn {
					dec.Noticed = set.Noticed[d.Name] == cur.Fingerprint
					if !dec.Noticed {
						set.Noticed[d.Name] = cur.Fingerprint
						changed = true
					}
				}
			case old.Fingerprint != cur.Fingerprint:
				dec.Status = Changed
				dec.Fields = old.Fields.Diff(cur.Fields)
			case old.Registered != "" && d.Registered != "" && old.Registered != d.Registered:
				dec.Status = Renamed
			default:
				dec.Status = Pinned
				if old.Registered == "" && d.Registered != "" {
					// A pin from before names were kept learns its name.
					old.Registered = d.Registered
					pinned[d.Name] = old
					changed = true
				}
			}
			dec.New = cur.Fingerprint
			dec.Action = action(dec.Status, mode)
			rep.Decisions[i] = dec
		}
		listed := make(map[string]bool, len(defs))
		for _, d := range defs {
			listed[d.Name] = true
		}
		for name := range pinned {
			if !listed[name] {
				rep.Missing = append(rep.Missing, name)
			}
		}
		slices.Sort(rep.Missing)
		if len(trusted) > 0 {
			set.Tools = trusted
			changed = true
		}
		return changed, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pins: check server %q: %w", server, err)
	}
	return rep, nil
}

// action maps a status to what the caller does with the tool in mode.
// Anything not known to be approved is quarantined in enforce mode.
func action(s Status, mode Mode) Action {
	switch {
	case s == Pinned || s == FirstUse || s == Unchecked:
		return Allow
	case mode == Warn:
		return AllowWithWarning
	default:
		return Quarantine
	}
}
