//go:build unix

package mcpclient

import (
	"os/exec"
	"syscall"
)

// isolate starts the child in a process group of its own. Then a Ctrl-C at
// the terminal reaches toolwire alone, which closes its servers in order,
// and Close can end whatever the server itself spawned (an npx wrapper's
// node process, say). Where the system can, the child also dies with
// toolwire (see dieWithParent).
func isolate(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	dieWithParent(cmd.SysProcAttr)
}

// killGroup ends what is left of the child's process group after the child
// itself has been waited for. The group id is the child's pid, which stays
// reserved while any member of the group is alive.
func killGroup(pid int) {
	if pid <= 0 {
		return
	}
	// ESRCH, the usual answer, means the group is already empty.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
