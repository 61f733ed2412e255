package pgtest

import "syscall"

// guard puts the server in a process group of its own, so that stop
// reaches its children, and has the kernel send it SIGKILL when this
// process dies (Go sets PR_SET_PDEATHSIG after changing the credentials,
// which would clear it).
func guard(a *syscall.SysProcAttr) {
	a.Setpgid = true
	a.Pdeathsig = syscall.SIGKILL
}
