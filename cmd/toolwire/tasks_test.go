package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/task"
)

// TestTasksCommands: an operator lists, shows and cancels every caller's
// tasks in a PostgreSQL store, as tables and as JSON; a task that ended
// cannot be cancelled, and an id of the wrong form is a usage error.
func TestTasksCommands(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := st.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	running, err := ts.Create(ctx, &task.Record{Owner: "subject:alice", Tool: "demo__slow"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	done, err := ts.Create(ctx, &task.Record{Owner: "subject:bob", Tool: "demo__echo"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Finish(ctx, done.ID, task.Outcome{Status: task.Completed, Result: json.RawMessage(`{"content":[{"type":"text","text":"echoed \u001b[31mred"}]}`)}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) outcome {
		return runIn(t, map[string]string{"TOOLWIRE_STORE": dbURL}, nil, append([]string{"tasks"}, args...)...) // no configuration: the store is all it needs
	}

	o := run("list")
	o.expect(t, 0)
	if !strings.Contains(o.stdout, running.ID) || !strings.Contains(o.stdout, done.ID) || !strings.Contains(o.stdout, "subject:alice") {
		t.Errorf("tasks list:\n%s", o.stdout)
	}
	o = run("list", "--owner", "subject:alice", "--json")
	o.expect(t, 0)
	var list []taskJSON
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 1 || list[0].ID != running.ID || list[0].Status != "working" {
		t.Errorf("tasks list --owner --json: %v\n%s", err, o.stdout)
	}
	o = run("list", "--status", "completed", "--json")
	o.expect(t, 0)
	if err := json.Unmarshal([]byte(o.stdout), &list); err != nil || len(list) != 1 || list[0].ID != done.ID || list[0].Result != nil {
		t.Errorf("tasks list --status completed --json (no results in a list): %v\n%s", err, o.stdout)
	}
	run("list", "--status", "done").expect(t, exitUsage)

	o = run("get", done.ID)
	o.expect(t, 0)
	if !strings.Contains(o.stdout, "completed") || !strings.Contains(o.stdout, "echoed") || strings.Contains(o.stdout, "\x1b") {
		t.Errorf("tasks get: want its status and its result's text, without escapes:\n%q", o.stdout)
	}
	o = run("get", done.ID, "--json")
	o.expect(t, 0)
	var one taskJSON
	if err := json.Unmarshal([]byte(o.stdout), &one); err != nil || one.Result == nil || one.Owner != "subject:bob" {
		t.Errorf("tasks get --json: %v\n%s", err, o.stdout)
	}
	run("get", "../../etc/passwd").expect(t, exitUsage)
	run("get", task.NewID()).expect(t, exitUsage)

	o = run("cancel", running.ID)
	o.expect(t, 0)
	if r, _ := ts.Lookup(ctx, running.ID); r.Status != task.Cancelled || !strings.Contains(r.Message, "operator") {
		t.Errorf("after tasks cancel: %+v; want cancelled by an operator", r)
	}
	o = run("cancel", done.ID)
	o.expect(t, exitToolErr)
	if !strings.Contains(o.stderr, "already ended (completed)") {
		t.Errorf("cancelling a completed task: %s", o.stderr)
	}
}
