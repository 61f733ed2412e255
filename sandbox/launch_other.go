//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
	"runtime"
)

var supported = false

var goos = runtime.GOOS

// Probe returns what this kernel offers: nothing, off Linux.
func Probe() Kernel { return Kernel{} }

// Command fails off Linux, where nothing can be applied: see Plan.
func Command(launcher string, p Policy, k Kernel, name, path string, args, env []string) (*exec.Cmd, func() error, error) {
	return nil, func() error { return nil }, errors.New("sandbox: no sandbox on " + goos)
}
