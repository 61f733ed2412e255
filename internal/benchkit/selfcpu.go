//go:build unix

package benchkit

import (
	"fmt"
	"syscall"
	"time"
)

// SelfCPU returns this process's user+system CPU time so far, threads that
// have exited included (getrusage, microsecond resolution). It is CPU for
// code that has no testing.TB.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
