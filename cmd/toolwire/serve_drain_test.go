package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/gateway"
)

// The listener's refusals (gateway.CheckExposure's rules, tested there)
// say which flag or setting would make the address acceptable.
func TestListenGatewayRefusalsSayWhatToDo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    gateway.Exposure
		want []string
	}{
		{gateway.Exposure{Authenticated: true}, []string{"--tls-cert", "--insecure-plain-http"}},
		{gateway.Exposure{}, []string{"gateway.tokens", "--insecure-no-auth"}},
	} {
		ln, err := listenGateway("10.0.0.5:8443", c.e)
		if err == nil {
			ln.Close()
			t.Errorf("listenGateway(10.0.0.5:8443, %+v) listened, want a refusal", c.e)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("listenGateway(%+v) = %v, want it to name %s", c.e, err, w)
			}
		}
	}
}

// TestE2EServeHTTPDrainsOnSIGTERM runs the real binary with hung calls in
// flight, sends SIGTERM and checks the exit: within the container budget,
// status 0, no child left, every requested call with an outcome in an
// audit file that verifies.
func TestE2EServeHTTPDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := e2eToolwire(t)
	dir := t.TempDir()
	marker := e2eMarker(t)
	cfg := filepath.Join(dir, "toolwire.yaml")
	e2eWrite(t, cfg, e2eToolwireYAML(marker, "alpha"))
	auditPath := filepath.Join(dir, "audit.jsonl")
	const grace = 300 * time.Millisecond

	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--config", cfg, "--audit", auditPath, "--drain-grace", grace.String())
	cmd.Env = append(e2eEnv(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	urls := make(chan string, 1)
	var errLines strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			errLines.WriteString(line + "\n")
			if _, u, ok := strings.Cut(line, "serving MCP at "); ok {
				urls <- u
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var url string
	select {
	case url = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}

	started := make(chan struct{}, 8)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { started <- struct{}{} },
	}).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const hung = 3
	for i := range hung {
		go func() {
			p := &mcp.CallToolParams{Name: "alpha__wait_for_cancel", Arguments: map[string]any{}}
			p.SetProgressToken(i + 1)
			_, _ = cs.CallTool(context.Background(), p)
		}()
	}
	for range hung {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the hung calls did not start upstream")
		}
	}
	children := e2eMarked(marker)
	if len(children) == 0 {
		t.Fatal("no demo server child found")
	}

	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		took := time.Since(t0)
		t.Logf("SIGTERM with %d hung calls: exit after %v (grace %v)", hung, took, grace)
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM, want status 0\n%s", err, errLines.String())
		}
		if took > 10*time.Second {
			t.Errorf("serve took %v to exit after SIGTERM, past a container's 10 s stop", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit within 30 s of SIGTERM\n%s", errLines.String())
	}
	if left := e2eMarked(marker); len(left) > 0 {
		t.Errorf("after serve exited, its server children still run: %v", left)
	}

	// Every call.requested has its outcome, and the chain verifies.
	raw, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	outcome := map[string]string{}
	var requested []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev struct {
			Kind   string `json:"kind"`
			Batch  string `json:"batch"`
			Tool   string `json:"tool"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		switch ev.Kind {
		case "call.requested":
			requested = append(requested, ev.Batch)
		case "call.executed", "call.errored", "call.refused", "validation.failed", "confirmation.rejected":
			outcome[ev.Batch] = ev.Reason
		}
	}
	if len(requested) != hung {
		t.Errorf("audit has %d call.requested, want %d", len(requested), hung)
	}
	for _, b := range requested {
		if r, ok := outcome[b]; !ok || r != "cancelled" {
			t.Errorf("call %s: outcome %q (recorded %v), want cancelled", b, r, ok)
		}
	}
	out, err := exec.Command(bin, "audit", "verify", auditPath).CombinedOutput()
	if err != nil {
		t.Errorf("audit verify: %v\n%s", err, out)
	}
}

// TestE2EServeKilledLeavesNoChild: SIGKILL gives toolwire no chance to
// end its servers (a container runtime's after its stop timeout, the OOM
// killer's); its stdio children die with it all the same, even one that
// does not end at the end of its stdin.
func TestE2EServeKilledLeavesNoChild(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	bin := e2eToolwire(t)
	dir := t.TempDir()
	marker := e2eMarker(t)
	cfg := filepath.Join(dir, "toolwire.yaml")
	e2eWrite(t, cfg, strings.Replace(e2eToolwireYAML(marker, "alpha"), "    env:\n", "    env:\n      DEMO_IGNORE_EOF: \"1\"\n", 1))

	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--config", cfg)
	cmd.Env = append(e2eEnv(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving MCP at ") {
				close(serving)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case <-serving:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	children := e2eMarked(marker)
	if len(children) == 0 {
		t.Fatal("no demo server child found")
	}
	t.Cleanup(func() {
		for _, pid := range e2eMarked(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	deadline := time.Now().Add(10 * time.Second)
	for len(e2eMarked(marker)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after serve was killed, its server children still run: %v", e2eMarked(marker))
		}
		time.Sleep(20 * time.Millisecond) // polling /proc for a condition, bounded by the deadline
	}
}
