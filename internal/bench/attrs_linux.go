package bench

import (
	"os/exec"
	"syscall"
)

// childAttrs puts a child in its own process group, so that a Ctrl-C at
// the terminal reaches only the benchmark, which then ends its children in
// order; and asks the kernel to kill the child should the benchmark die
// without ending it (SIGKILL from outside).
func childAttrs(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
