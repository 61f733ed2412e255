package pins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/sharedfile"
)

// helperEnv makes the test binary, re-executed, approve tools in the pins
// file it names instead of running tests: "PATH|PREFIX|COUNT".
const helperEnv = "TOOLWIRE_PINS_TEST_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		if err := approveMany(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func approveMany(spec string) error {
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		return fmt.Errorf("bad %s %q", helperEnv, spec)
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		return err
	}
	s, err := NewStore(parts[0])
	if err != nil {
		return err
	}
	for i := range n {
		d := Definition{Name: fmt.Sprintf("%s-%d", parts[1], i), InputSchema: json.RawMessage(`{}`)}
		if err := s.Approve(context.Background(), Scope{Server: "shared"}, []Definition{d}, ""); err != nil {
			return err
		}
	}
	return nil
}

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(filepath.Join(t.TempDir(), "config", "toolwire", "pins.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStoreRoundTrip(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	s.now = func() time.Time { return at }
	long := strings.Repeat("é", snippetRunes+5)
	withLong := Definition{Name: "long", Description: long, InputSchema: json.RawMessage(`{}`)}
	if err := s.Approve(ctx, Scope{Server: "srv2"}, []Definition{toolB, withLong}, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Approve(ctx, Scope{Server: "srv1"}, []Definition{toolA, toolB}, "a"); err != nil {
		t.Fatal(err)
	}

	fresh, err := NewStore(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	got, err := fresh.List()
	if err != nil {
		t.Fatal(err)
	}
	entry := func(server string, d Definition, snippet string) Entry {
		fp, fields, err := digest(d)
		if err != nil {
			t.Fatal(err)
		}
		return Entry{Server: server, Tool: d.Name, Pin: Pin{Fingerprint: fp, Fields: fields, ApprovedAt: at.UTC(), Snippet: snippet}}
	}
	want := []Entry{
		entry("srv1", toolA, toolA.Description),
		entry("srv2", toolB, toolB.Description),
		entry("srv2", withLong, strings.Repeat("é", snippetRunes)+"…"),
	}
	// srv2's tools sort as "b" < "long".
	if len(got) != len(want) {
		t.Fatalf("List = %+v\nwant %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Server != w.Server || g.Tool != w.Tool || g.Fingerprint != w.Fingerprint || g.Fields != w.Fields ||
			!g.ApprovedAt.Equal(w.ApprovedAt) || g.ApprovedAt.Location() != time.UTC || g.FirstUse || g.Snippet != w.Snippet {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, g, w)
		}
	}

	var onDisk struct {
		Version int `json:"version"`
	}
	data, _ := os.ReadFile(s.Path())
	if err := json.Unmarshal(data, &onDisk); err != nil || onDisk.Version != 2 {
		t.Errorf("file version %d, %v; want 2", onDisk.Version, err)
	}
}

func TestStoreEmpty(t *testing.T) {
	s := newTestStore(t)
	entries, err := s.List()
	if err != nil || len(entries) != 0 {
		t.Fatalf("List of a missing file = %v, %v; want nothing", entries, err)
	}
}

func TestStoreFileModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permission bits")
	}
	s := newTestStore(t)
	for i := range 3 {
		d := Definition{Name: fmt.Sprint("t", i), InputSchema: json.RawMessage(`{}`)}
		if err := s.Approve(context.Background(), Scope{Server: "s"}, []Definition{d}, ""); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Dir(s.Path())
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, s.Path(): 0o600, s.Path() + ".lock": 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range names {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, []string{"pins.json", "pins.json.lock"}) {
		t.Errorf("directory holds %v; want only the file and its lock (no temporary files)", got)
	}
}

// TestStoreConcurrentUpdates changes one file through two Stores from many
// goroutines: without the lock, read-modify-write cycles overlap and
// updates are lost.
func TestStoreConcurrentUpdates(t *testing.T) {
	a := newTestStore(t)
	b, err := NewStore(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				d := Definition{Name: fmt.Sprintf("w%d-%d", w, i), InputSchema: json.RawMessage(`{}`)}
				if err := s.Approve(context.Background(), Scope{Server: "s"}, []Definition{d}, ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	entries, err := a.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != workers*each {
		t.Fatalf("%d pins after %d approvals: updates were lost", len(entries), workers*each)
	}
}

// TestStoreConcurrentProcesses does the same from separate processes, the
// case the file lock exists for.
func TestStoreConcurrentProcesses(t *testing.T) {
	if !sharedfile.CrossProcess {
		t.Skip("no file lock between processes on this platform")
	}
	s := newTestStore(t)
	const procs, each = 3, 15
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|p%d|%d", helperEnv, s.Path(), p, each))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	entries, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != procs*each {
		t.Fatalf("%d pins after %d approvals from %d processes: updates were lost", len(entries), procs*each, procs)
	}
}

func TestStoreCorruptFile(t *testing.T) {
	h := fp(toolA)
	pin := fmt.Sprintf(`{"fingerprint":%q,"fields":{"name":%q,"description":%q,"inputSchema":%q,"annotations":%q},"approvedAt":"2026-01-01T00:00:00Z"}`, h, h, h, h, h)
	valid := `{"version":1,"servers":{"s":{"a":` + pin + `}}}`
	if _, err := decode([]byte(valid)); err != nil {
		t.Fatalf("the valid base case is refused: %v", err)
	}
	tests := map[string]string{
		"garbage":             "\x00\x01garbage",
		"empty":               "",
		"truncated":           valid[:len(valid)/2],
		"newer version":       `{"version":3,"servers":{}}`,
		"v2 with a v1 body":   `{"version":2,"servers":{"s":{"a":` + pin + `}}}`,
		"v2 bad identity":     `{"version":2,"servers":[{"server":"s","identity":"nope","tools":{"a":` + pin + `}}]}`,
		"v2 scope twice":      `{"version":2,"servers":[{"server":"s","tools":{"a":` + pin + `}},{"server":"s","tools":{"a":` + pin + `}}]}`,
		"v2 bad noticed":      `{"version":2,"servers":[{"server":"s","tools":{"a":` + pin + `},"noticed":{"b":"x"}}]}`,
		"no version":          `{"servers":{}}`,
		"unknown field":       `{"version":1,"servers":{},"extra":true}`,
		"duplicate server":    `{"version":1,"servers":{"s":{"a":` + pin + `},"s":{"a":` + pin + `}}}`,
		"malformed hash":      strings.Replace(valid, h[len(h)-4:], "XYZW", 1),
		"short hash":          strings.Replace(valid, `"fingerprint":"`+h, `"fingerprint":"sha256:abc`, 1),
		"empty tool name":     strings.Replace(valid, `"a":`, `"":`, 1),
		"server with no pins": `{"version":1,"servers":{"s":{}}}`,
		"two documents":       valid + valid,
		"array":               `[]`,
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t)
			writeFile(t, s.Path(), content)
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), s.Path()) {
					t.Errorf("%s: err %v; want ErrCorrupt naming %s", op, err, s.Path())
				}
			}
			_, err := s.List()
			check("List", err)
			_, err = s.Check(context.Background(), Scope{Server: "s"}, []Definition{toolA}, Enforce)
			check("Check", err)
			check("Approve", s.Approve(context.Background(), Scope{Server: "s"}, []Definition{toolA}, ""))
			check("Forget", s.Forget(context.Background(), Scope{Server: "s"}, ""))
			if data, _ := os.ReadFile(s.Path()); string(data) != content {
				t.Errorf("the corrupt file was rewritten: %q", data)
			}
		})
	}
}

func TestApproveRefuses(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	err := s.Approve(ctx, Scope{Server: "s"}, []Definition{toolA, toolB}, "nope")
	if !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown tool: %v, want ErrUnknownTool naming \"nope\"", err)
	}
	err = s.Approve(ctx, Scope{Server: "s"}, []Definition{toolA, broken}, "")
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), `"broken"`) {
		t.Errorf("broken definition: %v, want a syntax error naming \"broken\"", err)
	}
	if err := s.Approve(ctx, Scope{Server: "s"}, []Definition{toolA, toolA2}, "a"); !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("duplicate tool: %v, want ErrDuplicateTool", err)
	}
	if err := s.Approve(ctx, Scope{Server: ""}, []Definition{toolA}, ""); err == nil {
		t.Error("an empty server name was accepted")
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused approvals wrote the pins file: %v", err)
	}
}

func TestApproveReplacesPin(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	if _, err := s.Check(ctx, Scope{Server: "s"}, []Definition{toolA, toolB}, Enforce); err != nil {
		t.Fatal(err)
	}
	if err := s.Approve(ctx, Scope{Server: "s"}, []Definition{toolA2, toolB}, "a"); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx, Scope{Server: "s"}, []Definition{toolA2, toolB}, Enforce)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Decisions {
		if d.Status != Pinned {
			t.Errorf("%s after approval: %v, want pinned", d.Tool, d.Status)
		}
	}
}

func TestForget(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	if err := s.Approve(ctx, Scope{Server: "s"}, []Definition{toolA, toolB}, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Approve(ctx, Scope{Server: "t"}, []Definition{toolA}, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, Scope{Server: "s"}, "a"); err != nil {
		t.Fatal(err)
	}
	if got := pinsOf(t, s, "s"); len(got) != 1 || got["b"] == "" {
		t.Errorf("after forgetting s/a: %v, want only b", got)
	}
	// A forgotten tool of a server that keeps pins is new, not first use.
	rep, err := s.Check(ctx, Scope{Server: "s"}, []Definition{toolA, toolB}, Enforce)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Decisions[0]; d.Status != Added || d.Action != Quarantine {
		t.Errorf("forgotten tool: %v %v, want added quarantine", d.Status, d.Action)
	}

	for _, tt := range []struct{ server, tool string }{{"s", "a"}, {"nope", ""}, {"nope", "a"}} {
		err := s.Forget(ctx, Scope{Server: tt.server}, tt.tool)
		if !errors.Is(err, ErrNotPinned) || !strings.Contains(err.Error(), strconv.Quote(tt.server)) {
			t.Errorf("Forget(%q, %q) = %v; want ErrNotPinned naming the server", tt.server, tt.tool, err)
		}
	}

	if err := s.Forget(ctx, Scope{Server: "s"}, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, Scope{Server: "t"}, ""); err != nil {
		t.Fatal(err)
	}
	if entries, err := s.List(); err != nil || len(entries) != 0 {
		t.Fatalf("after forgetting everything: %v, %v", entries, err)
	}
	// With no pins left, the next check is first use again.
	rep, err = s.Check(ctx, Scope{Server: "s"}, []Definition{toolA2}, Enforce)
	if err != nil || rep.Decisions[0].Status != FirstUse {
		t.Fatalf("check after forgetting the server: %+v, %v; want first use", rep, err)
	}
}

func TestLockHonoursContext(t *testing.T) {
	s := newTestStore(t)
	if err := os.MkdirAll(filepath.Dir(s.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	unlock, err := sharedfile.Lock(context.Background(), s.Path()+".lock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = s.Approve(ctx, Scope{Server: "s"}, []Definition{toolA}, "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Approve while locked: %v, want the context's deadline", err)
	}
	unlock()
	if err := s.Approve(context.Background(), Scope{Server: "s"}, []Definition{toolA}, ""); err != nil {
		t.Errorf("Approve after unlock: %v", err)
	}
}

func TestDefaultPath(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("os.UserConfigDir follows XDG_CONFIG_HOME on Linux")
	}
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	s, err := NewStore("")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "toolwire", "pins.json"); s.Path() != want {
		t.Errorf("default path %s, want %s", s.Path(), want)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "")
	if _, err := NewStore(""); err == nil {
		t.Error("no config directory, yet NewStore(\"\") chose a path")
	}
}

func TestNewStoreMakesPathAbsolute(t *testing.T) {
	s, err := NewStore(filepath.Join("rel", "pins.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(s.Path()) || !strings.HasSuffix(s.Path(), filepath.Join("rel", "pins.json")) {
		t.Errorf("Path() = %s", s.Path())
	}
}
