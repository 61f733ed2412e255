//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package audit

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) lock on f, waiting for it. flock,
// unlike fcntl locks, belongs to the open file, so it also keeps apart two
// sinks of one process that opened the same path.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
