package mcpclient

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// The filesystem server, confined, reads in its roots, writes only in
// those the sandbox lets it write, whatever its own checks allow, and
// reads nothing outside.
func TestTheFilesystemServerConfined(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	node, script := npmServer(t, "@modelcontextprotocol/server-filesystem", "dist/index.js")
	readOnly, writable, outside := t.TempDir(), t.TempDir(), t.TempDir()
	for _, dir := range []string{readOnly, writable, outside} {
		if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("in "+filepath.Base(dir)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Its roots allow it the first two directories; the sandbox, to read
	// both and write the second.
	cfg := config.Server{Name: "fs", Transport: "stdio", Command: node, Args: []string{script}, DefaultTier: "read",
		Roots: []string{readOnly, writable}, Sandbox: &config.Sandbox{Write: []string{writable}}}
	reg := confirmingRegistry()
	watch := &stderrWatch{want: "Updated allowed directories from MCP roots: 2 valid directories", seen: make(chan struct{})}
	s := connect(t, cfg, reg, &Options{Logger: slog.New(watch), Sandbox: SandboxOptions{StateDir: t.TempDir()}})
	if !s.Status().Sandbox.Confined() {
		t.Fatalf("not confined: %v", s.Status().Sandbox)
	}
	select {
	case <-watch.seen:
	case <-boundedCtx(t, waitTime).Done():
		t.Fatalf("the server never took its roots; its stderr:\n%s", watch.text())
	}
	ex := tool.NewExecutor(reg, nil)
	read := func(dir string) *tool.Result {
		return call(t, ex, "fs__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "note.txt")))
	}
	write := func(dir string) *tool.Result {
		return call(t, ex, "fs__write_file", fmt.Sprintf(`{"path":%q,"content":"changed"}`, filepath.Join(dir, "new.txt")))
	}
	for _, dir := range []string{readOnly, writable} {
		if res := read(dir); res.IsError || res.Text() != "in "+filepath.Base(dir) {
			t.Errorf("reading in %s: %q (%s)", dir, res.Text(), res.Message)
		}
	}
	if res := write(writable); res.IsError {
		t.Errorf("writing in the writable root: %q (%s)", res.Text(), res.Message)
	}
	if data, err := os.ReadFile(filepath.Join(writable, "new.txt")); err != nil || string(data) != "changed" {
		t.Errorf("the written file: %q, %v", data, err)
	}
	// Allowed by the server's roots, refused by the sandbox.
	if res := write(readOnly); !res.IsError || !strings.Contains(res.Message+res.Text(), "EACCES") {
		t.Errorf("writing in the read-only root: %v %q (%s), want EACCES", res.IsError, res.Text(), res.Message)
	}
	if _, err := os.Stat(filepath.Join(readOnly, "new.txt")); err == nil {
		t.Error("the server wrote in its read-only root")
	}
	if res := read(outside); !res.IsError {
		t.Errorf("reading outside its roots: %q", res.Text())
	}
}

// The memory server keeps its file in the state directory the sandbox
// gives it; its default place, beside its own code, is not writable.
func TestTheMemoryServerKeepsItsFileInItsStateDirectory(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	node, script := npmServer(t, "@modelcontextprotocol/server-memory", "dist/index.js")
	states := t.TempDir()
	entity := `{"entities":[{"name":"toolwire","entityType":"project","observations":["confined"]}]}`
	for _, tc := range []struct {
		name  string
		env   map[string]string
		fails bool
	}{
		{"in its state directory", map[string]string{"MEMORY_FILE_PATH": filepath.Join(states, "mem1", "memory.jsonl")}, false},
		{"beside its code", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "mem1"
			if tc.fails {
				name = "mem2"
			}
			cfg := config.Server{Name: name, Transport: "stdio", Command: node, Args: []string{script}, Env: tc.env, DefaultTier: "read", TierOverrides: map[string]string{"create_entities": "read"}}
			reg := confirmingRegistry()
			connect(t, cfg, reg, &Options{Sandbox: SandboxOptions{StateDir: states}})
			res := call(t, tool.NewExecutor(reg, nil), name+"__create_entities", entity)
			if res.IsError != tc.fails {
				t.Fatalf("create_entities: error %v, want %v: %q (%s)", res.IsError, tc.fails, res.Text(), res.Message)
			}
			if tc.fails {
				if !strings.Contains(res.Message+res.Text(), "EACCES") {
					t.Errorf("create_entities beside its code: %q (%s), want EACCES", res.Text(), res.Message)
				}
				return
			}
			data, err := os.ReadFile(tc.env["MEMORY_FILE_PATH"])
			if err != nil || !strings.Contains(string(data), "confined") {
				t.Errorf("its memory file: %q, %v", data, err)
			}
		})
	}
}
