//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package audit

import "os"

// On these systems (Windows, AIX, Solaris, wasm, ...) the standard library
// offers no advisory lock, and the audit package uses nothing else. A
// FileSink still orders its own writes, but two sinks or processes
// appending to one file can both chain from the same line; Verify then
// reports the chain broken there. Give each writer its own file.

func lockFile(*os.File) error   { return nil }
func unlockFile(*os.File) error { return nil }
