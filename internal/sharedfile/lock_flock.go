//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package sharedfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// CrossProcess says whether [Lock] excludes other processes.
const CrossProcess = true

// Lock takes an exclusive advisory lock (flock) on the file at path,
// creating it 0600 if needed, and returns the function that releases it.
// flock belongs to the open file, so two holders in one process exclude
// each other as two processes do. It waits, polling, until the lock is
// free or ctx is done: a blocking flock could not be cancelled. The lock
// file is never removed, since removing it would let two processes lock
// different files of the same name.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
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
