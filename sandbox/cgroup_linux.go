package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The kernel does not hold root to RLIMIT_NPROC. For root, a server's
// processes are bounded by a pids cgroup of its own instead: Command
// makes it beside toolwire's own cgroup, as
// toolwire-<toolwire's pid>-<server>-<random>, with pids.max set to the
// policy's MaxProcesses; the launcher moves itself into it before it
// execs the server, so that everything the server starts is counted from
// its first instruction; and the release Command returns ends what is
// left in it and removes it once the server has ended.

// pidsCgroupDir returns the directory in which this process may make
// pids cgroups: its own cgroup in the cgroup v2 hierarchy when the pids
// controller is enabled for that cgroup's children, else its own cgroup
// in a cgroup v1 hierarchy with the pids controller. It returns "" when
// there is neither, or when a cgroup made there as a trial cannot be
// given a pids.max.
func pidsCgroupDir() string {
	own, err := ownCgroups()
	if err != nil {
		return ""
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return ""
	}
	var candidates []string
	for _, m := range mounts {
		if m.v2 {
			if p, ok := own[""]; ok {
				dir := m.dir(p)
				if ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err == nil && hasWord(string(ctl), "pids") {
					candidates = append([]string{dir}, candidates...) // v2 first
				}
			}
			continue
		}
		if p, ok := own["pids"]; ok && m.pids {
			candidates = append(candidates, m.dir(p))
		}
	}
	for _, dir := range candidates {
		path, err := newCgroup(dir, "probe", 1)
		if err == nil && removeCgroup(path) == nil {
			return dir
		}
	}
	return ""
}

// ownCgroups maps each controller of /proc/self/cgroup (and "" for cgroup
// v2) to this process's cgroup path in it.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			own[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			own[c] = f[2]
		}
	}
	return own, nil
}

// cgroupMount is a cgroup hierarchy's mount.
type cgroupMount struct {
	root, point string
	v2, pids    bool // cgroup2; a v1 hierarchy with the pids controller
}

// dir is the directory of the cgroup at path (as /proc/self/cgroup names
// it) under this mount.
func (m cgroupMount) dir(path string) string {
	rel, err := filepath.Rel(m.root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = "."
	}
	return filepath.Join(m.point, rel)
}

// cgroupMounts lists the cgroup hierarchies mounted read-write, from
// /proc/self/mountinfo.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 6 || len(b) < 3 || !hasWord(strings.ReplaceAll(a[5], ",", " "), "rw") {
			continue
		}
		m := cgroupMount{root: a[3], point: a[4]}
		switch b[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			m.pids = hasWord(strings.ReplaceAll(b[2], ",", " "), "pids")
		default:
			continue
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// newCgroup makes a cgroup for the server name in dir with pids.max set
// to max, and returns its path.
func newCgroup(dir, name string, max uint64) (string, error) {
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	clean := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			return c
		}
		return '_'
	}, name)
	if len(clean) > 64 {
		clean = clean[:64]
	}
	path := filepath.Join(dir, fmt.Sprintf("toolwire-%d-%s-%s", os.Getpid(), clean, hex.EncodeToString(r[:])))
	if err := os.Mkdir(path, 0o755); err != nil {
		return "", fmt.Errorf("pids cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(path, "pids.max"), []byte(strconv.FormatUint(max, 10)), 0); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("pids cgroup: %w", err)
	}
	return path, nil
}

// joinCgroup moves this process, with all its threads, into the cgroup at
// path.
func joinCgroup(path string) error {
	if err := os.WriteFile(filepath.Join(path, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("join the pids cgroup: %w", err)
	}
	return nil
}

// releaseWait bounds how long removing a cgroup waits for the processes
// it killed to leave it.
const releaseWait = 5 * time.Second

// releaseCgroup kills every process still in the cgroup at path (a
// server's children that left its process group) and removes the cgroup
// once they are gone.
func releaseCgroup(path string) error {
	deadline := time.Now().Add(releaseWait)
	for {
		if data, err := os.ReadFile(filepath.Join(path, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		err := removeCgroup(path)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove the pids cgroup %s: %w", path, err)
		}
		// Killed processes leave the cgroup as they exit, shortly.
		time.Sleep(10 * time.Millisecond)
	}
}

// removeCgroup removes the cgroup at path: an empty cgroup's directory
// is removed as a whole, its control files with it.
func removeCgroup(path string) error { return syscall.Rmdir(path) }
