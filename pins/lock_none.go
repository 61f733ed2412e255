//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package pins

import (
	"context"
	"fmt"
)

// crossProcess says whether lock excludes other processes. Where the
// standard library offers no flock (Windows, AIX, Solaris, Plan 9, wasm, …)
// it does not: two toolwire processes changing pins at the same moment can
// lose one of the changes. Each write is still atomic, so the file is never
// torn, and changes within one process are serialized by sem.
const crossProcess = false

var sem = make(chan struct{}, 1)

func lock(ctx context.Context, path string) (unlock func(), err error) {
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
	}
}
