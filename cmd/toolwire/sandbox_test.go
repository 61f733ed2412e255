package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/sandbox"
)

// "servers" shows how each stdio server is confined, and warns of one
// whose sandbox is off, as does the audit log.
func TestServersShowTheSandbox(t *testing.T) {
	t.Parallel()
	if k := sandbox.Probe(); k.LandlockABI == 0 || !k.Seccomp {
		t.Skipf("no sandbox here (%+v)", k)
	}
	f := newFixture(t, `  loose:
    command: `+quoteYAML(os.Args[0])+`
    env:
      TOOLWIRE_TEST_SERVER: demo
    sandbox: off
`)
	o := f.run(t, "", false, "servers")
	o.expect(t, exitOK)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "SANDBOX") {
		t.Fatalf("servers table:\n%s", o.stdout)
	}
	if !strings.HasPrefix(lines[1], "demo ") || !strings.Contains(lines[1], "landlock v") || !strings.Contains(lines[1], "seccomp, net: none") {
		t.Errorf("demo row = %q, want its confinement", lines[1])
	}
	// As root, the bound on processes is a pids cgroup's where one can be
	// made, and the row says nothing is missing.
	if k := sandbox.Probe(); k.Root && k.PidsCgroup != "" && strings.Contains(lines[1], "not applied") {
		t.Errorf("demo row = %q, and a pids cgroup bounds its processes", lines[1])
	}
	if !strings.HasPrefix(lines[2], "loose ") || !strings.Contains(lines[2], "OFF (sandbox: off)") {
		t.Errorf("loose row = %q, want OFF", lines[2])
	}
	if !strings.Contains(o.stderr, `server "loose" runs unconfined`) {
		t.Errorf("no warning for the unconfined server:\n%s", o.stderr)
	}

	o = f.run(t, "", false, "servers", "--json")
	o.expect(t, exitOK)
	var sts []struct {
		Name    string
		Sandbox *struct {
			Landlock int
			Seccomp  bool
			Network  string
			Off      bool
		}
	}
	if err := json.Unmarshal([]byte(o.stdout), &sts); err != nil {
		t.Fatalf("servers --json: %v\n%s", err, o.stdout)
	}
	if len(sts) != 2 || sts[0].Sandbox == nil || sts[1].Sandbox == nil {
		t.Fatalf("servers --json = %s", o.stdout)
	}
	if s := sts[0].Sandbox; s.Landlock < 1 || !s.Seccomp || s.Network != "none" || s.Off {
		t.Errorf("demo's sandbox = %+v", *s)
	}
	if s := sts[1].Sandbox; !s.Off || s.Landlock != 0 || s.Seccomp {
		t.Errorf("loose's sandbox = %+v, want off", *s)
	}

	audit, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	var sawOff, sawConfined bool
	for _, line := range strings.Split(strings.TrimSpace(string(audit)), "\n") {
		var ev struct{ Kind, Source, Sandbox string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Kind != "server.started" {
			continue
		}
		switch ev.Source {
		case "loose":
			sawOff = sawOff || strings.HasPrefix(ev.Sandbox, "off")
		case "demo":
			sawConfined = sawConfined || strings.HasPrefix(ev.Sandbox, "landlock v")
		}
	}
	if !sawOff || !sawConfined {
		t.Errorf("audit log: server.started with the sandbox off %v, confined %v; want both\n%s", sawOff, sawConfined, audit)
	}
}
