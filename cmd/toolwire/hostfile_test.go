package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVSCodeFileWithoutTypeAsksBeforeWriting is issue 23.2: a
// .vscode/mcp.json whose servers carry no "type" is VS Code's, not
// toolwire's own: config check says so and why, every tool is at least
// "write", and a write tool does not run without being confirmed.
func TestVSCodeFileWithoutTypeAsksBeforeWriting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.json")
	path := writeConfigFixture(t, "proj/.vscode/mcp.json", `{
  "servers": {
    "demo": {
      "command": `+quoteYAML(os.Args[0])+`,
      "env": {"TOOLWIRE_TEST_SERVER": "demo", "DEMO_NOTES_FILE": `+quoteYAML(notes)+`}
    }
  }
}
`)
	f := &fixture{dir: dir, config: path}

	o := f.run(t, "", false, "config", "check", path)
	o.expect(t, exitOK)
	mustContain(t, "config check", o.stdout, "a VS Code .vscode/mcp.json file (dialect vscode)", "read as a VS Code .vscode/mcp.json file because", "fail-closed",
		"write (the default for a host file")

	o = f.run(t, "", false, "tools")
	o.expect(t, exitOK)
	for _, line := range strings.Split(strings.TrimSpace(o.stdout), "\n")[1:] {
		if fields := strings.Fields(line); len(fields) > 1 && fields[1] == "read" {
			t.Errorf("a tool of a host file is read-only: %q", line)
		}
	}
	mustContain(t, "tools", o.stdout, "demo__write_note")

	o = f.run(t, "", false, "call", "demo__write_note", "title=t", "body=b")
	o.expect(t, exitDeclined)
	if _, err := os.Stat(notes); err == nil {
		t.Errorf("the write tool ran without being confirmed")
	}
}
