package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCtrlCEndsCallWithStatus130 is issue 23.6 with the real binary: a
// SIGINT while call runs ends it with status 130, as run and chat.
func TestCtrlCEndsCallWithStatus130(t *testing.T) {
	t.Parallel()
	bin := e2eToolwire(t)
	marker := e2eMarker(t)
	cfg := filepath.Join(t.TempDir(), "toolwire.yaml")
	e2eWrite(t, cfg, e2eToolwireYAML(marker, "demo")+"security:\n  pins: off\n")
	cmd := exec.Command(bin, "--config", cfg, "call", "demo__wait_for_cancel")
	cmd.Env = e2eEnv()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Interrupt once the server has started (the call is then starting or
	// in flight: Ctrl-C at either is status 130).
	deadline := time.Now().Add(30 * time.Second)
	for len(e2eMarked(marker)) == 0 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the demo server never started\nstderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Errorf("call after SIGINT: %v, want exit status %d\nstderr:\n%s", err, exitInterrupted, stderr.String())
		}
		if !strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("stderr does not say the call was interrupted:\n%s", stderr.String())
		}
	case <-time.After(e2eExitTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("call did not exit within %s of SIGINT\nstderr:\n%s", e2eExitTimeout, stderr.String())
	}
}
