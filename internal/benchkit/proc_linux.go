package benchkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Process figures for benchmarks that span several processes: a client in
// the benchmark's process and servers in children. All of them read /proc
// and are Linux only; on other systems they return ErrNoProc.

// ErrNoProc is returned on systems without Linux's /proc.
var ErrNoProc = errors.New("process figures need Linux /proc")

// ProcessCPU returns the CPU time that the live threads of process pid have
// used so far, in nanoseconds of run time summed over
// /proc/PID/task/*/schedstat. That is finer than the 10 ms ticks of
// /proc/PID/stat, which matters for windows of a fraction of a second; a
// thread that has exited is no longer counted, which Go processes rarely
// do. Threads that exit while they are read are skipped.
func ProcessCPU(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread has exited
		}
		first, _, _ := bytes.Cut(raw, []byte(" "))
		ns, err := strconv.ParseInt(string(first), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("process %d: schedstat %q: %w", pid, raw, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// RSS returns the resident set size of process pid in bytes (VmRSS).
func RSS(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// AnonRSS returns the part of process pid's resident set that is its own
// memory (RssAnon: heap, stacks), in bytes. The rest of the resident set
// is mostly the executable's pages, which the kernel may map whole (on
// this machine's kernel a Go binary's code and tables are all resident
// once it has run): shared and clean, they say how large the binary is,
// not what the process holds.
func AnonRSS(pid int) (int64, error) { return statusBytes(pid, "RssAnon") }

// statusBytes reads field (a "NNN kB" line) of /proc/pid/status.
func statusBytes(pid int, field string) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("process %d: no %s in /proc status", pid, field)
}

// ProcessStat is what /proc/PID/stat says of a process that identifies it.
type ProcessStat struct {
	PID, PPID int
	// Start is the process's start time in clock ticks after boot: with the
	// PID, it names one process, even after the PID has been reused.
	Start uint64
}

// Stat reads /proc/PID/stat.
func Stat(pid int) (ProcessStat, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcessStat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields proper start after the last ')'. There, state is
	// field 3 of the file, ppid 4 and starttime 22.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return ProcessStat{}, fmt.Errorf("process %d: malformed stat", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 20 {
		return ProcessStat{}, fmt.Errorf("process %d: short stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return ProcessStat{}, fmt.Errorf("process %d: stat: %w", pid, err)
	}
	return ProcessStat{PID: pid, PPID: ppid, Start: start}, nil
}

// Descendants returns the processes below pid (children, their children and
// so on), found by scanning /proc. A process that ends during the scan may
// be missed.
func Descendants(pid int) ([]ProcessStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, ErrNoProc
	}
	children := map[int][]ProcessStat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := Stat(p)
		if err != nil {
			continue
		}
		children[st.PPID] = append(children[st.PPID], st)
	}
	var out []ProcessStat
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 1000 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.PID)
		}
	}
	return out, nil
}

// MachineBusy returns the CPU time that all processors of the machine have
// spent busy since boot (user, nice, system, irq, softirq and steal of the
// cpu line of /proc/stat, in USER_HZ ticks taken as 10 ms, the value on
// every Linux architecture Go supports).
func MachineBusy() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, ErrNoProc
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system _ _ irq softirq steal
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// CPUModel returns the processor's model name from /proc/cpuinfo, or "".
func CPUModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(raw)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
