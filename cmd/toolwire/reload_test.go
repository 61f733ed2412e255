package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
)

// TestE2EServeReloadsOnSIGHUP runs the real binary, keeps a client's
// session open, and sends SIGHUP twice: after a configuration that
// removes a server, adds one and narrows the caller's role, the same
// session is told its tools changed and lists exactly the new ones, and
// the unchanged server's child is the same process; after a broken one,
// the reload is refused and the session goes on with what it had. Both
// reloads are audited.
func TestE2EServeReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	bin := e2eToolwire(t)
	dir := t.TempDir()
	marker := e2eMarker(t)
	token, hash := newToken(t)
	gatewaySection := func(globs string) string {
		return "gateway:\n  tokens:\n    - sha256: " + hash + "\n      subject: alice\n      role: staff\n  roles:\n    staff: " + globs + "\naudit:\n  file: audit.jsonl\nsecurity:\n  pins: off\n"
	}
	// One marker per server, so that each one's child can be told apart.
	servers := func(names ...string) string {
		out := "servers:\n"
		for _, n := range names {
			out += strings.TrimPrefix(e2eToolwireYAML(marker+"-"+n, n), "servers:\n")
		}
		return out
	}
	cfg := filepath.Join(dir, "toolwire.yaml")
	e2eWrite(t, cfg, servers("alpha", "beta")+gatewaySection(`["*"]`))

	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--config", cfg)
	cmd.Env = append(e2eEnv(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	await := func(prefix string) string {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("serve ended before saying %q:\n%s", prefix, strings.Join(seen, "\n"))
				}
				seen = append(seen, line)
				if strings.HasPrefix(line, prefix) {
					return line
				}
			case <-deadline:
				t.Fatalf("serve did not say %q within 60 s:\n%s", prefix, strings.Join(seen, "\n"))
			}
		}
	}
	url := strings.TrimPrefix(await("toolwire: serving MCP at "), "toolwire: serving MCP at ")

	changed := make(chan struct{}, 16)
	cs := connectHTTPWith(t, url, token, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	session := cs.ID()
	before := toolNames(t, cs)
	if !slices.Contains(before, "alpha__echo") || !slices.Contains(before, "beta__echo") {
		t.Fatalf("tools before the reload = %v, want alpha's and beta's", before)
	}
	alphaPID := childOf(t, marker, "alpha")

	// Beta goes, gamma comes, and staff now sees alpha's tools and
	// gamma's echo only.
	e2eWrite(t, cfg, servers("alpha", "gamma")+gatewaySection(`["alpha__*", "gamma__echo"]`))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if line := await("toolwire: reload"); line != "toolwire: reloaded the configuration: servers added gamma; removed beta; 1 unchanged" {
		t.Errorf("serve said %q", line)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the session was not told its tools changed")
	}
	want := []string{"gamma__echo"}
	for _, n := range before {
		if strings.HasPrefix(n, "alpha__") {
			want = append(want, n)
		}
	}
	slices.Sort(want)
	got := waitForTools(t, cs, want)
	if !slices.Equal(got, want) {
		t.Errorf("tools after the reload = %v, want %v", got, want)
	}
	if cs.ID() != session {
		t.Errorf("the session is %q after the reload, want it kept (%q)", cs.ID(), session)
	}
	if pid := childOf(t, marker, "alpha"); pid != alphaPID {
		t.Errorf("alpha's child is %d after the reload, want the same process (%d)", pid, alphaPID)
	}
	callEcho(t, cs, "gamma__echo", "after the reload")

	// A configuration that does not load changes nothing.
	e2eWrite(t, cfg, "servers: [this is not\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if line := await("toolwire: reload"); !strings.HasPrefix(line, "toolwire: reload refused; the running configuration stays: ") {
		t.Errorf("serve said %q after a broken configuration", line)
	}
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Errorf("tools after the refused reload = %v, want %v", got, want)
	}
	callEcho(t, cs, "alpha__echo", "after the refused reload")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("toolwire: draining")
	for range lines {
	}
	raw, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var reloads []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev audit.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind == audit.ConfigReloaded {
			reloads = append(reloads, strings.Join(ev.Added, ",")+"|"+strings.Join(ev.Removed, ",")+"|"+ev.Reason)
		}
	}
	if want := []string{"gamma|beta|", "||refused"}; !slices.Equal(reloads, want) {
		t.Errorf("config.reloaded events (added|removed|reason) = %q, want %q", reloads, want)
	}
}

// childOf returns the pid of the one demo server child of the configured
// server name (its marker is the test's, suffixed with the name).
func childOf(t *testing.T, marker, name string) int {
	t.Helper()
	pids := e2eMarked(marker + "-" + name)
	if len(pids) != 1 {
		t.Fatalf("children of server %q: %v, want one", name, pids)
	}
	return pids[0]
}

// waitForTools lists cs's tools until they are want (the listing changes
// when the served server has re-synced), at most for 30 s; it returns the
// last listing.
func waitForTools(t *testing.T, cs *mcp.ClientSession, want []string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := toolNames(t, cs)
		if slices.Equal(got, want) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
}

func callEcho(t *testing.T, cs *mcp.ClientSession, name, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": text}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s: %+v", name, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, text) {
		t.Errorf("%s answered %+v, want the text echoed", name, res.Content[0])
	}
}
