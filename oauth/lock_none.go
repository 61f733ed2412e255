//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package oauth

import (
	"context"
	"fmt"
)

// crossProcess says whether lock excludes other processes. Without flock
// (Windows, among others) it does not: two toolwire processes refreshing
// the same server at once may then both redeem the refresh token, and with
// a rotating authorization server the loser must log in again. Each write
// stays atomic, and one process is still serialized by sem.
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
