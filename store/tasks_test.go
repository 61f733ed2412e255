package store

import (
	"context"
	"testing"

	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/task"
	"github.com/toolwire/toolwire/task/tasktest"
)

// TestTasksTable runs the task rules on toolwire.tasks, two replicas
// sharing it. An instance is made lost as a replica's recovery of a
// killed one makes it (recovered_at); TestFleetTaskOfAKilledReplica in
// cmd/toolwire kills a real one.
func TestTasksTable(t *testing.T) {
	t.Parallel()
	tasktest.Run(t, func(t *testing.T) (a, b task.Backend, end func(task.Backend)) {
		url := pgtest.DB(t)
		sa, sb := openPG(t, url, nil), openPG(t, url, nil)
		ta, err := sa.Tasks()
		if err != nil {
			t.Fatal(err)
		}
		tb, err := sb.Tasks()
		if err != nil {
			t.Fatal(err)
		}
		pool := sb.pool
		return ta.Backend(), tb.Backend(), func(x task.Backend) {
			if _, err := pool.Exec(context.Background(), "UPDATE toolwire.instances SET recovered_at = now() WHERE id = $1::int", x.Instance()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestTasksFiles: a files store keeps its tasks in its directory.
func TestTasksFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := testOptions()
	o.TasksDir = dir
	s := openFileStore(t, o)
	ts, err := s.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	r, err := ts.Create(context.Background(), &task.Record{Owner: "subject:alice", Tool: "x"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.Tasks()
	if again != ts {
		t.Error("Tasks made a second store")
	}
	f, err := task.OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := task.NewStore(f, nil).Get(context.Background(), "subject:alice", r.ID); err != nil || got.Tool != "x" {
		t.Errorf("the task read from %s: %+v, %v", dir, got, err)
	}
}
