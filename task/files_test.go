package task_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/task"
	"github.com/toolwire/toolwire/task/tasktest"
)

func TestFiles(t *testing.T) {
	t.Parallel()
	tasktest.Run(t, func(t *testing.T) (a, b task.Backend, end func(task.Backend)) {
		dir := t.TempDir()
		fa, err := task.OpenFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := task.OpenFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fa.Close(); fb.Close() })
		// In one process, the instance's lock released is what the
		// death of its process does (TestFilesKilledInstance kills one).
		return fa, fb, func(x task.Backend) { x.(*task.Files).Close() }
	})
}

// TestFilesKilledInstance: a process holding a plain call's task is
// killed (SIGKILL); the task is then failed, saying why, when read.
func TestFilesKilledInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFilesHelperProcess$")
	cmd.Env = append(os.Environ(), "TASK_HELPER_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the helper's task id: %v", err)
	}
	id := strings.TrimSpace(line)
	f, err := task.OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := task.NewStore(f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := s.Get(ctx, "subject:alice", id)
	if err != nil || r.Status != task.Working {
		t.Fatalf("while the helper runs: %+v, %v; want working", r, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	r, err = s.Get(ctx, "subject:alice", id)
	if err != nil || r.Status != task.Failed || !strings.Contains(r.Message, "was lost") {
		t.Fatalf("after the helper was killed: %+v, %v; want failed, saying its instance was lost", r, err)
	}
	// The killed process's lock file goes at the next prune; this one's stays.
	if _, err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir + "/instances")
	if len(left) != 1 || left[0].Name() != f.Instance()+".lock" {
		t.Errorf("instance lock files after a prune: %v; want this process's only", left)
	}
}

// TestFilesHelperProcess is the process TestFilesKilledInstance kills: it
// creates a task and waits.
func TestFilesHelperProcess(t *testing.T) {
	dir := os.Getenv("TASK_HELPER_DIR")
	if dir == "" {
		t.Skip("a helper process")
	}
	f, err := task.OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := task.NewStore(f, nil).Create(context.Background(), &task.Record{Owner: "subject:alice", Tool: "slow"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(r.ID + "\n")
	time.Sleep(time.Minute) // killed long before
}
