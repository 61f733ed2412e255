//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package sharedfile

import (
	"context"
	"fmt"
)

// CrossProcess says whether [Lock] excludes other processes. Where the
// standard library offers no flock (Windows, AIX, Solaris, Plan 9, wasm, …)
// it does not: two toolwire processes changing one file at the same moment
// can lose one of the changes. Each write is still atomic, so the file is
// never torn, and holders within one process are serialized.
const CrossProcess = false

var sem = make(chan struct{}, 1)

// Lock serializes the holders of this process (see [CrossProcess]).
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
	}
}
