package version

import (
	"runtime/debug"
	"testing"
)

// Only a release tag of toolwire's own module is a release; a checkout
// build, a pseudo-version or another main module is not.
func TestOf(t *testing.T) {
	for _, c := range []struct {
		path, version, want string
	}{
		{modulePath, "v0.3.0", "v0.3.0"},
		{modulePath, "v1.2.3-rc.1", "v1.2.3-rc.1"},
		{modulePath, "(devel)", ""},
		{modulePath, "", ""},
		{"example.com/other", "v0.3.0", ""},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Path: c.path, Version: c.version}}
		if got := Of(bi); got != c.want {
			t.Errorf("Of(%s@%s) = %q, want %q", c.path, c.version, got, c.want)
		}
	}
	if Of(nil) != "" {
		t.Error("Of(nil) is a release")
	}
}
