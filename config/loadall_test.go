package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles returns a function writing a file of dir.
func writeFiles(t *testing.T, dir string) func(name, data string) string {
	return func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// The gateway section comes from the one file that has it; two are an
// error naming both files and lines.
func TestLoadAllGatewaySectionInTwoFiles(t *testing.T) {
	t.Parallel()
	write := writeFiles(t, t.TempDir())
	plain := write("plain.yaml", "servers:\n  a: {command: x}\n")
	first := write("first.yaml", "servers:\n  b: {command: x}\ngateway:\n  approvals: {write: deny}\n")
	second := write("second.yaml", "servers:\n  c: {command: x}\n\ngateway:\n  approvals: {write: allow}\n")

	section := func(paths ...string) (*Gateway, error) {
		f, err := LoadAll(paths)
		if err != nil {
			return nil, err
		}
		return f.Gateway, nil
	}
	// The one file with a section gives it, wherever it is in the list.
	g, err := section(plain, first)
	if err != nil || g == nil || g.Approvals.Write != "deny" {
		t.Errorf("section(plain, first) = %+v, %v", g, err)
	}
	if g, err := section(plain); err != nil || g != nil {
		t.Errorf("section(plain) = %+v, %v", g, err)
	}

	// Two are an error naming both files and lines.
	_, err = section(first, plain, second)
	want := second + ":4: gateway: also configured at " + first + ":3; only one configuration file may have a gateway section"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}

// TestLoadAllSectionsInTwoFilesAreRefused: audit, security and agent
// settings come from one file; two files with the same section are an
// error naming both, not a silent pick. An input declared alike in two
// files is fine; declared differently, it is an error.
func TestLoadAllSectionsInTwoFilesAreRefused(t *testing.T) {
	t.Parallel()
	write := writeFiles(t, t.TempDir())
	for _, section := range []string{"audit:\n  logArguments: true\n", "security:\n  strict: true\n", "agent:\n  model: m\n"} {
		a := write("a.yaml", "servers:\n  a: {command: x}\n"+section)
		b := write("b.yaml", "servers:\n  b: {command: x}\n"+section)
		_, err := LoadAll([]string{a, b})
		if err == nil || !strings.Contains(err.Error(), b) || !strings.Contains(err.Error(), "also configured in "+a) {
			t.Errorf("%q in two files: error %v; want one naming both files", section, err)
		}
		if f, err := LoadAll([]string{a, write("c.yaml", "servers:\n  c: {command: x}\n")}); err != nil || f.Audit == (Audit{}) && f.Security.Strict == false && f.Agent.Model == "" {
			t.Errorf("%q in one file of two: %v, section lost", section, err)
		}
	}
	in := "inputs:\n  key: {description: API key, password: true}\n"
	a := write("a.yaml", "servers:\n  a: {command: x}\n"+in)
	if _, err := LoadAll([]string{a, write("b.yaml", "servers:\n  b: {command: x}\n"+in)}); err != nil {
		t.Errorf("the same input in two files: %v", err)
	}
	other := write("d.yaml", "servers:\n  d: {command: x}\ninputs:\n  key: {description: Another key}\n")
	if _, err := LoadAll([]string{a, other}); err == nil || !strings.Contains(err.Error(), `input "key"`) {
		t.Errorf("an input redefined differently: error %v; want one naming it", err)
	}
}

// A server name in two files is an error naming both places; the servers
// of files of two dialects are combined in order, the dialect "mixed"; no
// file at all is an error.
func TestLoadAllServers(t *testing.T) {
	t.Parallel()
	write := writeFiles(t, t.TempDir())
	a := write("a.yaml", "servers:\n  one: {command: x}\n  two: {command: y}\n")
	b := write("b.json", `{"mcpServers": {"three": {"command": "z"}}}`)
	f, err := LoadAll([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range f.Servers {
		names = append(names, s.Name)
	}
	if strings.Join(names, " ") != "one two three" || f.Dialect != DialectMixed || f.Path != a+", "+b {
		t.Errorf("combined: servers %v, dialect %q, path %q", names, f.Dialect, f.Path)
	}
	c := write("c.yaml", "servers:\n  zero: {command: x}\n  two: {command: w}\n")
	_, err = LoadAll([]string{a, c})
	if want := c + `:3: server "two" is also defined at ` + a + ":3; rename one"; err == nil || err.Error() != want {
		t.Errorf("a name in two files: %v\nwant %s", err, want)
	}
	if _, err := LoadAll(nil); err == nil {
		t.Errorf("LoadAll(nil) gave no error")
	}
}
