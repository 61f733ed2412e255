package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServerRoots reads a server's roots, round-trips them and checks them
// when the server's settings are expanded: absolute, existing directories,
// each error naming the server, the field and the path.
func TestServerRoots(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	src := "servers:\n  fs:\n    command: mcp-fs\n    roots:\n      - " + dir + "\n      - ${WORK}/sub\n"
	f, err := Parse("t.yaml", []byte(src), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Servers[0].Roots, []string{dir, "${WORK}/sub"}; !slices.Equal(got, want) {
		t.Fatalf("roots = %q, want %q (placeholders kept)", got, want)
	}
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("t.yaml", out, "/cfg")
	if err != nil || !slices.Equal(back.Servers[0].Roots, f.Servers[0].Roots) {
		t.Fatalf("round trip: %v\n%s", err, out)
	}

	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, _, err := ExpandServer(f.Servers[0], Resolver{LookupEnv: lookupIn(map[string]string{"WORK": dir})})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{dir, dir + "/sub"}; !slices.Equal(got.Roots, want) {
		t.Errorf("expanded roots = %q, want %q", got.Roots, want)
	}
	if f.Servers[0].Roots[1] != "${WORK}/sub" {
		t.Error("ExpandServer changed the configuration's roots")
	}

	for _, tc := range []struct {
		desc, root string
		env        map[string]string
		want       string
	}{
		{"missing", filepath.Join(dir, "gone"), nil, `server "fs": roots[0]: "` + filepath.Join(dir, "gone") + `": no such directory`},
		{"a file", file, nil, `server "fs": roots[0]: "` + file + `" is not a directory`},
		{"relative after expansion", "${WORK}", map[string]string{"WORK": "src"}, `server "fs": roots[0]: want an absolute path to a directory, got "src"`},
		{"unset variable", "${WORK}/x", nil, `server "fs": roots[0]: variable WORK is not set`},
	} {
		s := Server{Name: "fs", Transport: TransportStdio, Command: "x", Roots: []string{tc.root}}
		_, _, err := ExpandServer(s, Resolver{LookupEnv: lookupIn(tc.env)})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.desc, err, tc.want)
		}
	}

	for _, tc := range []struct{ roots, want string }{
		{"[src]", `t.yaml:5: servers.fs.roots[0]: want an absolute path to a directory, got "src"`},
		{"[/a, ~/b]", `t.yaml:5: servers.fs.roots[1]: "~" is not expanded here; write ${HOME} instead`},
		{"[\"\"]", `t.yaml:5: servers.fs.roots[0]: must not be empty`},
		{"/a", `t.yaml:5: servers.fs.roots: want a list of strings`},
	} {
		full := "servers:\n  fs:\n    command: x\n    args: []\n    roots: " + tc.roots + "\n"
		_, err := Parse("t.yaml", []byte(full), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("roots %s: error %v, want it to contain %q", tc.roots, err, tc.want)
		}
	}
}
