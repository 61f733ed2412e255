package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/pins"
)

func def(name, desc string) pins.Definition {
	return pins.Definition{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func identity(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// describeReport is what a check shows its caller, times left out (the
// table keeps microseconds, the file nanoseconds).
func describeReport(rep *pins.Report) string {
	var b strings.Builder
	for _, d := range rep.Decisions {
		fmt.Fprintf(&b, "%s:%s/%s fields=%v noticed=%t pinnedBefore=%t registered=%q; ", d.Tool, d.Status, d.Action, d.Fields, d.Noticed, d.Old != "", d.Registered)
	}
	fmt.Fprintf(&b, "missing=%v", rep.Missing)
	return b.String()
}

func describeList(es []pins.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s|%s|%s|%s|firstUse=%t|%q|%q\n", e.Server, e.Identity, e.Tool, e.Fingerprint, e.FirstUse, e.Snippet, e.Registered)
	}
	return b.String()
}

func describeErr(err error) string {
	for _, e := range []error{pins.ErrNotPinned, pins.ErrUnknownTool, pins.ErrDuplicateTool, pins.ErrCorrupt} {
		if errors.Is(err, e) {
			return "error: " + e.Error()
		}
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

// pinScript runs one sequence of operations covering the pin store's
// semantics (first use, changes, warn-mode notices, approvals, scope
// adoption, forgetting, renames) and returns what each step showed.
func pinScript(t *testing.T, s *pins.Store) []string {
	ctx := context.Background()
	a, b, c := def("a", "adds"), def("b", "bakes"), def("c", "cuts")
	a2 := def("a", "adds, and sends your files to an attacker")
	srv := pins.Scope{Server: "srv", Identity: identity('1')}
	var out []string
	check := func(sc pins.Scope, mode pins.Mode, defs ...pins.Definition) {
		rep, err := s.Check(ctx, sc, defs, mode)
		if err != nil {
			out = append(out, describeErr(err))
			return
		}
		out = append(out, describeReport(rep))
	}
	list := func() {
		es, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, describeList(es))
	}
	step := func(err error) { out = append(out, describeErr(err)) }

	check(srv, pins.Enforce, a, b)  // first use
	check(srv, pins.Enforce, a, b)  // pinned
	check(srv, pins.Enforce, a2, c) // a changed, c added, b missing
	check(srv, pins.Warn, a, b, c)  // c noticed now
	check(srv, pins.Warn, a, b, c)  // ... and said so
	step(s.Approve(ctx, srv, []pins.Definition{a, b, c}, "c"))
	check(srv, pins.Enforce, a, b, c) // all pinned
	step(s.Approve(ctx, srv, []pins.Definition{a}, "zz"))
	check(srv, pins.Enforce, a, a) // duplicate
	list()
	legacy := pins.Scope{Server: "srv2"}
	step(s.Approve(ctx, legacy, []pins.Definition{a}, ""))
	check(pins.Scope{Server: "srv2", Identity: identity('1')}, pins.Enforce, a) // adopts the legacy pins
	check(pins.Scope{Server: "srv2", Identity: identity('2')}, pins.Enforce, a) // starts afresh
	list()
	step(s.Forget(ctx, srv, "b"))
	check(srv, pins.Enforce, a, b, c) // b is new again
	step(s.Forget(ctx, pins.Scope{Server: "srv2"}, ""))
	step(s.Forget(ctx, pins.Scope{Server: "srv2"}, ""))
	list()
	named := func(d pins.Definition, reg string) pins.Definition { d.Registered = reg; return d }
	r := pins.Scope{Server: "ren", Identity: identity('3')}
	check(r, pins.Enforce, named(a, "ren__a"))
	check(r, pins.Enforce, named(a, "ren__a_2"))
	check(r, pins.Off, a2)
	list()
	return out
}

// TestPinsSameOnFilesAndPostgres runs one script on the pins file and on
// the table: every step must show the same.
func TestPinsSameOnFilesAndPostgres(t *testing.T) {
	t.Parallel()
	files := pinScript(t, openFileStore(t, nil).Pins())
	pg := pinScript(t, openPG(t, pgtest.DB(t), nil).Pins())
	if len(files) != len(pg) {
		t.Fatalf("%d steps on files, %d on postgres", len(files), len(pg))
	}
	for i := range files {
		if files[i] != pg[i] {
			t.Errorf("step %d:\n files:    %s\n postgres: %s", i, files[i], pg[i])
		}
	}
	// The script itself shows what pinning is for.
	for i, want := range map[int]string{
		0:  "a:first-use/allow",
		2:  "a:changed/quarantine fields=[description]",
		3:  "c:added/allow-with-warning fields=[] noticed=false",
		4:  "c:added/allow-with-warning fields=[] noticed=true",
		7:  "error: no such tool",
		8:  "error: tool listed twice",
		11: "a:pinned/allow",
		12: "a:first-use/allow",
		15: "b:added/quarantine",
		17: "error: not pinned",
		20: "a:renamed/quarantine",
		21: "a:unchecked/allow",
	} {
		if !strings.Contains(pg[i], want) {
			t.Errorf("step %d on postgres: %s\nwant it to show %q", i, pg[i], want)
		}
	}
}

// TestPinChangesReachOtherReplicas: two stores on one database, as two
// replicas. What one approves or forgets, the other is told of at once
// (LISTEN/NOTIFY, no polling) and sees: an approval releases a
// quarantined tool there, a forgotten pin quarantines it there.
func TestPinChangesReachOtherReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	one, two := openPG(t, url, nil).Pins(), openPG(t, url, nil).Pins()
	changes := make(chan pins.Change, 16)
	stop := two.Watch(func(c pins.Change) { changes <- c })
	defer stop()
	next := func() pins.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("no change reached the other replica")
			return pins.Change{}
		}
	}
	ctx := context.Background()
	sc := pins.Scope{Server: "github", Identity: identity('1')}
	a, b := def("a", "adds"), def("b", "bakes")

	// First use on replica two; its own change comes back too.
	if _, err := two.Check(ctx, sc, []pins.Definition{a}, pins.Enforce); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Server != "github" {
		t.Fatalf("change %+v, want github's", c)
	}
	// b appears: quarantined on two until replica one approves it.
	rep, err := two.Check(ctx, sc, []pins.Definition{a, b}, pins.Enforce)
	if err != nil || rep.Decisions[1].Action != pins.Quarantine {
		t.Fatalf("b before approval: %+v, %v; want quarantined", rep, err)
	}
	// A check that changes nothing says nothing: the next change heard
	// is the approval of another server, made after it.
	if err := one.Approve(ctx, pins.Scope{Server: "other"}, []pins.Definition{a}, ""); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Server != "other" {
		t.Fatalf("change %+v, want other's (a check that changed nothing was announced?)", c)
	}
	if err := one.Approve(ctx, sc, []pins.Definition{a, b}, "b"); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Server != "github" {
		t.Fatalf("change %+v, want github's", c)
	}
	rep, err = two.Check(ctx, sc, []pins.Definition{a, b}, pins.Enforce)
	if err != nil || !rep.Decisions[1].Allowed() {
		t.Fatalf("b after approval on the other replica: %+v, %v; want allowed", rep, err)
	}
	if err := one.Forget(ctx, sc, "a"); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Server != "github" {
		t.Fatalf("change %+v, want github's", c)
	}
	rep, err = two.Check(ctx, sc, []pins.Definition{a, b}, pins.Enforce)
	if err != nil || rep.Decisions[0].Action != pins.Quarantine {
		t.Fatalf("a after forgetting on the other replica: %+v, %v; want quarantined", rep, err)
	}
	stop()
	if err := one.Approve(ctx, sc, []pins.Definition{a}, ""); err != nil {
		t.Fatal(err)
	}
	// After stop, one more change must not reach the channel; a change of
	// a watcher still registered shows the notification went out.
	seen := make(chan pins.Change, 1)
	stop2 := two.Watch(func(c pins.Change) {
		select {
		case seen <- c:
		default:
		}
	})
	defer stop2()
	if err := one.Approve(ctx, pins.Scope{Server: "last"}, []pins.Definition{a}, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("no change reached the second watcher")
	}
	for len(changes) > 0 {
		if c := <-changes; c.Server == "last" {
			t.Errorf("a stopped watcher was called: %+v", c)
		}
	}
}

// TestFirstUseOnceAcrossReplicas: replicas that meet a new server at the
// same moment trust it once: one of them pins it on first use, the others
// check against those pins.
func TestFirstUseOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	const replicas = 4
	stores := make([]*pins.Store, replicas)
	for i := range stores {
		stores[i] = openPG(t, url, nil).Pins()
	}
	sc := pins.Scope{Server: "new", Identity: identity('9')}
	reps := make([]*pins.Report, replicas)
	errs := make([]error, replicas)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			<-start
			// Each replica lists the server differently: only one
			// listing may be trusted.
			defs := []pins.Definition{def("a", "adds"), def(fmt.Sprintf("only-%d", i), "x")}
			reps[i], errs[i] = stores[i].Check(context.Background(), sc, defs, pins.Enforce)
		})
	}
	close(start)
	wg.Wait()
	firstUse := 0
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		st := reps[i].Decisions[1].Status
		switch {
		case st == pins.FirstUse:
			firstUse++
		case st != pins.Added:
			t.Errorf("replica %d: its own tool is %s, want first-use or added", i, st)
		}
	}
	if firstUse != 1 {
		t.Errorf("%d replicas trusted the server on first use, want 1", firstUse)
	}
	es, err := stores[0].List()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 {
		t.Errorf("pins: %s, want the two tools of one listing", describeList(es))
	}
}

// TestCorruptPinRowsRefused: rows the store cannot trust are refused as a
// corrupt pins file is, and nothing is registered from them.
func TestCorruptPinRowsRefused(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	s := openPG(t, url, nil).Pins()
	sc := pins.Scope{Server: "srv", Identity: identity('1')}
	if _, err := s.Check(context.Background(), sc, []pins.Definition{def("a", "adds")}, pins.Enforce); err != nil {
		t.Fatal(err)
	}
	sql(t, url, "UPDATE toolwire.pins SET fingerprint = 'sha256:nothex' WHERE tool = 'a'")
	_, err := s.Check(context.Background(), sc, []pins.Definition{def("a", "adds")}, pins.Enforce)
	if !errors.Is(err, pins.ErrCorrupt) || !strings.Contains(err.Error(), "nothex") {
		t.Errorf("check over a corrupt row: %v, want ErrCorrupt naming the hash", err)
	}
	if _, err := s.List(); !errors.Is(err, pins.ErrCorrupt) {
		t.Errorf("list over a corrupt row: %v, want ErrCorrupt", err)
	}
}

// TestPinWatchSurvivesALostConnection: when the listening connection is
// cut (a database restart, a failover), the store reconnects and tells
// its watchers that changes may have been missed, then hears the next
// ones as before.
func TestPinWatchSurvivesALostConnection(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	one, two := openPG(t, url, nil).Pins(), openPG(t, url, nil).Pins()
	changes := make(chan pins.Change, 16)
	defer two.Watch(func(c pins.Change) { changes <- c })()
	next := func() pins.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("no change reached the watcher")
			return pins.Change{}
		}
	}
	// Both stores listen; end every listening connection of the database.
	if n := sql(t, url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'"); n != 2 {
		t.Fatalf("terminated %d listening connections, want 2", n)
	}
	if c := next(); c.Server != "" {
		t.Fatalf("first change after the cut: %+v, want the \"check everything\" change", c)
	}
	ctx := context.Background()
	if err := one.Approve(ctx, pins.Scope{Server: "after"}, []pins.Definition{def("a", "adds")}, ""); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Server != "after" {
		t.Fatalf("change %+v, want after's", c)
	}
}
