//go:build unix && !linux

package pgtest

import "syscall"

// guard puts the server in a process group of its own, so that stop
// reaches its children. These systems have no parent-death signal: a
// test binary killed by SIGKILL leaves its server running until the next
// cluster's start removes its directory, which stops it.
func guard(a *syscall.SysProcAttr) {
	a.Setpgid = true
}
