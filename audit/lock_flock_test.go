//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package audit_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
)

// TestFileSinkWriteWaitsForTheFileLock holds the file's lock as another
// toolwire process would, appends a chained line under it, and checks that
// the sink waited and then chained from that line.
func TestFileSinkWriteWaitsForTheFileLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(testEvent(0)); err != nil {
		t.Fatal(err)
	}

	other, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Write(testEvent(2)) }()
	select {
	case err := <-done:
		t.Fatalf("Write returned (%v) while another holder had the lock", err)
	case <-time.After(100 * time.Millisecond):
	}
	// Line 2, chained to line 1, as the other holder would write it.
	first := rawLines(t, path)[0]
	line := `{"time":"2025-01-02T03:04:05Z","kind":"call.executed","index":1,"prev":"` + sha(first) + `"}` + "\n"
	if _, err := other.WriteString(line); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write still blocked after the lock was released")
	}
	lines := rawLines(t, path)
	data, _ := os.ReadFile(path)
	if rep, err := verifyBytes(data, nil); err != nil || rep.Lines != 3 {
		t.Errorf("Verify = %+v, %v; want 3 intact lines\n%s", rep, err, data)
	}
	if len(lines) != 3 || unsignedLine.FindSubmatch(lines[2]) == nil || string(unsignedLine.FindSubmatch(lines[2])[1]) != sha(lines[1]) {
		t.Errorf("the sink's line does not chain from the line written under the lock:\n%s", data)
	}
}
