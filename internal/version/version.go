// Package version is toolwire's one version: what its client announces to
// servers, its gateway to clients, and its demo server.
package version

import (
	"regexp"
	"runtime/debug"
	"sync"
)

// Base is the version of this source tree, announced by a build that
// carries no release version of its own (a build from a checkout).
const Base = "0.1.0"

var release = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// String returns the module's release version without its "v" when the
// binary was built from one ("go install …@v0.2.0"), else [Base].
var String = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && release.MatchString(bi.Main.Version) && bi.Main.Path == "github.com/toolwire/toolwire" {
		return bi.Main.Version[1:]
	}
	return Base
})
