//go:build !unix

package mcpclient

import "os/exec"

func isolate(cmd *exec.Cmd) {}

func killGroup(pid int) {}
