package pins

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

var (
	proj1 = Scope{Server: "files", Identity: hash([]byte("npx server-filesystem /home/u/proj1"))}
	proj2 = Scope{Server: "files", Identity: hash([]byte("npx server-filesystem /home/u/proj2"))}
)

func statuses(rep *Report) string {
	var out []string
	for _, d := range rep.Decisions {
		out = append(out, d.Tool+"="+d.Status.String())
	}
	return strings.Join(out, " ")
}

func mustCheck(t *testing.T, s *Store, sc Scope, mode Mode, defs ...Definition) *Report {
	t.Helper()
	rep, err := s.Check(context.Background(), sc, defs, mode)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Issue 14: two servers that share a name but not an identity (two
// projects' "files") never share pins: neither quarantines nor warns about
// the other's tools.
func TestScopesDoNotSharePins(t *testing.T) {
	s := newTestStore(t)
	if got := statuses(mustCheck(t, s, proj1, Enforce, toolA)); got != "a=first-use" {
		t.Fatalf("proj1's first check: %s", got)
	}
	// proj2's "files" lists a different tool a and a tool b: a server of
	// its own, trusted on first use, not a rug pull of proj1's.
	if got := statuses(mustCheck(t, s, proj2, Enforce, toolA2, toolB)); got != "a=first-use b=first-use" {
		t.Errorf("proj2's first check: %s, want both first-use", got)
	}
	if got := statuses(mustCheck(t, s, proj1, Enforce, toolA)); got != "a=pinned" {
		t.Errorf("proj1 again: %s, want a=pinned", got)
	}
	if got := statuses(mustCheck(t, s, proj2, Enforce, toolA2, toolB)); got != "a=pinned b=pinned" {
		t.Errorf("proj2 again: %s", got)
	}
	entries, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("List = %+v, want proj1's a and proj2's a and b", entries)
	}
	for _, en := range entries {
		if en.Identity != proj1.Identity && en.Identity != proj2.Identity {
			t.Errorf("entry %+v has no scope's identity", en)
		}
	}
	// Forgetting proj1's pins leaves proj2's.
	if err := s.Forget(context.Background(), proj1, ""); err != nil {
		t.Fatal(err)
	}
	if entries, _ := s.List(); len(entries) != 2 {
		t.Errorf("after forgetting proj1: %+v, want proj2's two", entries)
	}
}

// An existing version 1 pins file keeps working: the first scoped check of
// a name adopts its pins (a rug pull is still caught), the file is
// rewritten in version 2, and another identity of the same name starts
// afresh.
func TestVersion1FileIsAdopted(t *testing.T) {
	s := newTestStore(t)
	pin, err := newPin(toolA, s.now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pin)
	writeFile(t, s.Path(), fmt.Sprintf(`{"version":1,"servers":{"files":{"a":%s}}}`, raw))

	if got := statuses(mustCheck(t, s, proj1, Enforce, toolA2)); got != "a=changed" {
		t.Errorf("proj1 against the adopted pins: %s, want a=changed", got)
	}
	data, _ := os.ReadFile(s.Path())
	var onDisk struct {
		Version int `json:"version"`
		Servers []struct {
			Server, Identity string
		} `json:"servers"`
	}
	if err := json.Unmarshal(data, &onDisk); err != nil || onDisk.Version != 2 || len(onDisk.Servers) != 1 || onDisk.Servers[0].Identity != proj1.Identity {
		t.Errorf("file after adoption = %s (%v); want version 2 with proj1's scope only", data, err)
	}
	if got := statuses(mustCheck(t, s, proj2, Enforce, toolA2)); got != "a=first-use" {
		t.Errorf("proj2 after proj1 adopted the pins: %s, want a=first-use", got)
	}
	// A library caller that scopes by name only still reads by name.
	if got := statuses(mustCheck(t, s, Scope{Server: "other"}, Enforce, toolB)); got != "b=first-use" {
		t.Errorf("unscoped check: %s", got)
	}
}

// Issue 14: a new tool is reported once, not at every check (every
// command); a change of its definition is reported again, and approving
// it forgets that it was noticed.
func TestWarnModeNoticesANewToolOnce(t *testing.T) {
	s := newTestStore(t)
	mustCheck(t, s, proj1, Warn, toolA)
	noticed := func(rep *Report) []bool {
		var out []bool
		for _, d := range rep.Decisions {
			out = append(out, d.Noticed)
		}
		return out
	}
	first := mustCheck(t, s, proj1, Warn, toolA, toolB)
	if got := statuses(first); got != "a=pinned b=added" || noticed(first)[1] {
		t.Fatalf("first check with b: %s, noticed %v; want b added and not yet noticed", got, noticed(first))
	}
	again := mustCheck(t, s, proj1, Warn, toolA, toolB)
	if d := again.Decisions[1]; d.Status != Added || !d.Noticed || d.Action != AllowWithWarning {
		t.Errorf("second check of b: %+v, want added, noticed, allowed with warning", d)
	}
	bChanged := toolB
	bChanged.Description = "Tool B, edited."
	if d := mustCheck(t, s, proj1, Warn, toolA, bChanged).Decisions[1]; d.Noticed {
		t.Errorf("b with another definition: %+v, want it reported again", d)
	}
	if d := mustCheck(t, s, proj2, Warn, toolA).Decisions[0]; d.Status != FirstUse {
		t.Errorf("proj2: %+v", d)
	}
	// Enforce mode keeps saying why a tool is withheld.
	if d := mustCheck(t, s, proj1, Enforce, toolA, bChanged).Decisions[1]; d.Noticed || d.Action != Quarantine {
		t.Errorf("enforce: %+v, want quarantined and not marked noticed", d)
	}
}

// A pin keeps the name its tool was registered under; a tool that would
// be registered under another name is Renamed (quarantined in enforce mode),
// and a pin from before names were kept learns its name.
func TestRegisteredNameIsKept(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	a := toolA
	if err := s.Approve(ctx, Scope{Server: "old"}, []Definition{a}, ""); err != nil {
		t.Fatal(err)
	}
	a.Registered = "files__a"
	mustCheck(t, s, proj1, Enforce, a)
	if got := statuses(mustCheck(t, s, Scope{Server: "old"}, Enforce, a)); got != "a=pinned" {
		t.Errorf("a pin without a name: %s, want pinned", got)
	}
	entries, _ := s.List()
	for _, en := range entries {
		if en.Registered != "files__a" {
			t.Errorf("entry %+v: want registered name files__a", en)
		}
	}
	moved := a
	moved.Registered = "other__a"
	rep := mustCheck(t, s, proj1, Enforce, moved)
	if d := rep.Decisions[0]; d.Status != Renamed || d.Action != Quarantine || d.Registered != "files__a" {
		t.Errorf("a under another name: %+v, want renamed, quarantined, approved as files__a", d)
	}
	if d := mustCheck(t, s, proj1, Warn, moved).Decisions[0]; d.Action != AllowWithWarning {
		t.Errorf("warn: %+v", d)
	}
}
