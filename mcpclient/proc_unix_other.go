//go:build unix && !linux

package mcpclient

import "syscall"

// dieWithParent is Linux's parent-death signal; other systems have none,
// and a child that outlives its stdin outlives a killed toolwire there.
func dieWithParent(*syscall.SysProcAttr) {}
