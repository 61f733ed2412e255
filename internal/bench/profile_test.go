//go:build unix

package bench

import (
	"go/parser"
	"go/token"
	"testing"
)

// The hook is added by overlay to the main packages of demoserver and
// toolwire, so it must be a main package of its own, whatever package the
// bench's machinery lives in.
func TestProfileHookIsMainPackage(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), profileHookFile, profileHookSource, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("parsing the profile hook: %v", err)
	}
	if f.Name.Name != "main" {
		t.Errorf("profile hook is package %q, want main", f.Name.Name)
	}
}
