//go:build unix

package benchkit

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// What toolwire-bench's -profile shares with the processes it profiles
// (internal/bench/profile.go) and with cmd/toolwire's fleet benchmark,
// which profiles its replicas when the bench runs it.
const (
	// ProfileDirEnv names the directory in which hooked processes write
	// their profiles, PID-N.pprof and its allocation profiles.
	ProfileDirEnv = "TOOLWIRE_BENCH_PROFILE_DIR"
	// OverlayEnv names the go build overlay that adds the hook to a main
	// package: the fleet benchmark builds its replicas with it.
	OverlayEnv = "TOOLWIRE_BENCH_OVERLAY"
	// FleetProfileIndex, in the profile directory, lists the fleet's
	// profiles: a line per sub-benchmark, tab-separated: its row name,
	// the calls, the wall time in ns, and the files.
	FleetProfileIndex = "fleet-profiles.tsv"
)

// Files returns the names of the files in dir, to tell a hook's next
// profile from those before it (see WaitProfile).
func Files(dir string) map[string]bool {
	names := map[string]bool{}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			names[e.Name()] = true
		}
	}
	return names
}

// WaitProfile waits (bounded) for a new PID-N.pprof of pid in dir, one
// not in before, which the hook renames into place last.
func WaitProfile(dir string, pid int, before map[string]bool) (string, error) {
	prefix := fmt.Sprintf("%d-", pid)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return "", err
		}
		for _, e := range ents {
			n := e.Name()
			if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ".pprof") && !before[n] {
				return n, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", fmt.Errorf("pid %d wrote no profile within 10s (is it a binary built by the bench with -profile?)", pid)
}
