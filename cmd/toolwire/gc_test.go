package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTuneGCLeavesOperatorSettingsAlone(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	defer func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}()

	// GOGC set by the operator: only the memory limit is applied.
	changed := tuneGC(func(k string) (string, bool) { return "150", k == "GOGC" })
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GOGC was set by the operator, yet the percent became %d", got)
	}
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(-1); got != longRunMemoryLimit || len(changed) != 1 {
		t.Errorf("memory limit %d, changed %v; want %d and only the limit", got, changed, longRunMemoryLimit)
	}

	// Neither set: both applied.
	debug.SetMemoryLimit(math.MaxInt64)
	changed = tuneGC(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(-1); got != longRunGCPercent || len(changed) != 2 {
		t.Errorf("percent %d, changed %v; want %d and both", got, changed, longRunGCPercent)
	}
}
