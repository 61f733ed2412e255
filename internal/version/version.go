// Package version is toolwire's one version: what its client announces to
// servers, its gateway to clients, its demo server, and what
// "toolwire --version" prints.
package version

import (
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
)

// Base is the version of this source tree, announced by a build that
// carries no release version of its own (a build from a checkout).
const Base = "0.1.0"

// modulePath is toolwire's module.
const modulePath = "github.com/toolwire/toolwire"

var release = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// Of returns the release a binary with build information bi was built
// from ("v0.2.0", from "go install …@v0.2.0"), or "" for a build from a
// checkout or of another main module.
func Of(bi *debug.BuildInfo) string {
	if bi != nil && bi.Main.Path == modulePath && release.MatchString(bi.Main.Version) {
		return bi.Main.Version
	}
	return ""
}

// String returns the running binary's release without its "v", else
// [Base]: the version toolwire announces in MCP handshakes.
var String = sync.OnceValue(func() string {
	bi, _ := debug.ReadBuildInfo()
	if v := Of(bi); v != "" {
		return strings.TrimPrefix(v, "v")
	}
	return Base
})
