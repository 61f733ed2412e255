//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package oauth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// crossProcess says whether lock excludes other processes.
const crossProcess = true

// lock takes an exclusive flock on the file at path (created 0600 if
// missing) and returns its release. flock belongs to the open file, so two
// Stores of one process exclude each other just as two processes do. The
// wait polls, because a blocking flock cannot be cancelled; ctx ends it.
// The lock file is never removed: removing it would let two processes hold
// locks on two different files of the same name.
func lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	wait := time.Millisecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(fd, syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
