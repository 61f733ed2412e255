package workspace_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

// deadServer is a server that never answers: a process that only sleeps.
const deadServer = `  dead:
    command: sleep
    args: ["1000"]
    timeout: 10m
`

func parseConfig(t *testing.T, yaml string) *config.File {
	t.Helper()
	file, err := config.Parse("toolwire.yaml", []byte(yaml), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// With StartWait, a server that never answers does not hold up the
// others: Open returns with the demo server's tools registered while the
// dead one is still starting, and Close ends its start without reporting
// a failure afterwards.
func TestOpenWithStartWaitReturnsWhileADeadServerStarts(t *testing.T) {
	t.Parallel()
	file := parseConfig(t, demoServer+deadServer+"security:\n  pins: off\n")
	var mu sync.Mutex
	var failed []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{
		Confirmer: tool.ConfirmFunc(decline), StartWait: 10 * time.Millisecond,
		OnFailed: func(server, _ string) { mu.Lock(); failed = append(failed, server); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Registry().Lookup("demo__echo"); !ok {
		t.Errorf("demo__echo is not registered when Open returns")
	}
	dead, _ := w.Manager().Server("dead")
	if st := dead.State(); st == mcpclient.Ready || st == mcpclient.Failed {
		t.Errorf("the dead server is %s when Open returns; want it still starting", st)
	}
	if err := w.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("failures reported after Close: %v", failed)
	}
}

// A required server is waited for whatever StartWait says: Open fails
// when it does.
func TestOpenWithStartWaitWaitsForARequiredServer(t *testing.T) {
	t.Parallel()
	file := parseConfig(t, demoServer+`  dead:
    command: sleep
    args: ["1000"]
    timeout: 1s
    required: true
security:
  pins: off
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{Confirmer: tool.ConfirmFunc(decline), StartWait: 10 * time.Millisecond})
	if err == nil {
		w.Close()
		t.Fatal("Open returned a workspace although its required server never started")
	}
	if !errors.Is(err, workspace.ErrNotStarted) {
		t.Errorf("error %v does not match ErrNotStarted", err)
	}
}
