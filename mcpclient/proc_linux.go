//go:build linux

package mcpclient

import "syscall"

// dieWithParent asks the kernel to kill the child when toolwire dies, so
// that a SIGKILL (a container runtime's after its stop timeout, the OOM
// killer's) leaves no stdio server behind, even one that does not end at
// the end of its stdin. The signal is tied to the thread that started the
// child; the Go runtime ends threads only when a goroutine locked to one
// exits, which toolwire does not do.
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
