package main

import (
	"runtime/debug"
)

// Garbage collection for long-running commands (serve, run, chat, servers
// --watch). The SDK allocates ~130 KB per call, and with Go's default
// GOGC=100 collection takes a third or more of a busy gateway's CPU
// (docs/performance.md); letting the heap grow to three times the live
// data before collecting halves that. A soft memory limit keeps the larger
// heap in check: past it the collector works harder instead of growing.
const (
	longRunGCPercent   = 200
	longRunMemoryLimit = 1 << 30 // 1 GiB, soft
)

// tuneGC applies the long-running settings, each unless its environment
// variable (GOGC, GOMEMLIMIT) is set: an operator's choice wins. It
// returns what it changed, for the verbose log.
func tuneGC(lookupEnv func(string) (string, bool)) (changed []string) {
	if _, set := lookupEnv("GOGC"); !set {
		debug.SetGCPercent(longRunGCPercent)
		changed = append(changed, "GOGC=200")
	}
	if _, set := lookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(longRunMemoryLimit)
		changed = append(changed, "GOMEMLIMIT=1GiB")
	}
	return changed
}
