//go:build unix

package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/benchkit"
)

// The fleet's part of a run: cmd/toolwire's BenchmarkFleetThroughput,
// whose harness starts PostgreSQL (internal/pgtest), HAProxy and the
// replicas, run from its test binary (Options.FleetTest, which
// scripts/bench.sh builds) after the rows, and its figures put beside the
// single gateway's: the same benchmark's store=files/replicas=1, one
// `toolwire serve` on the files of one machine with its audit to a file,
// behind the same HAProxy, called by the same 64 callers.

// fleetRow is one sub-benchmark's figures.
type fleetRow struct {
	name     string // "store=files/replicas=1", "replicas=2"
	files    bool
	replicas int
	callsPS  float64
	// CPU per call, µs: the replicas with their demo servers, PostgreSQL's
	// backends, HAProxy, the callers (the test process).
	replicaCPU, pgCPU, haproxyCPU, callersCPU float64
	xacts                                     float64 // database transactions per call; -1 on files
}

// fleetRun is the fleet's part of a run.
type fleetRun struct {
	rows         []fleetRow
	calls        int
	load0, load1 string // /proc/loadavg's first three fields before and after
	wall         time.Duration
	err          error
	output       string // the benchmark's output, for a failure
	bgCores      float64
	profiles     []profiled // with -profile: the replicas', during the measured calls
	profileErr   error      // why they could not be read
}

// fleet runs the fleet benchmark from o.FleetTest.
func (b *bench) fleet(ctx context.Context) *fleetRun {
	fr := &fleetRun{calls: b.opts.FleetCalls, load0: loadAverage()}
	start := time.Now()
	defer func() { fr.wall, fr.load1 = time.Since(start), loadAverage() }()
	root, err := moduleRoot(ctx)
	if err != nil {
		fr.err = err
		return fr
	}
	b.logf("fleet: %s -test.bench FleetThroughput, %d calls each (PostgreSQL, HAProxy and 1 to 3 replicas)", b.opts.FleetTest, fr.calls)
	m := b.startLoad()
	cmd := exec.CommandContext(ctx, b.opts.FleetTest, "-test.run", "^$", "-test.bench", "^BenchmarkFleetThroughput$",
		"-test.benchtime", strconv.Itoa(fr.calls)+"x", "-test.timeout", "20m")
	// The harness finds the example HAProxy configuration relative to
	// its package's directory, as go test runs it.
	cmd.Dir = filepath.Join(root, "cmd", "toolwire")
	cmd.WaitDelay = 10 * time.Second
	if b.opts.ProfileDir != "" {
		// The replicas built with the profiling hook, and profiled during
		// the measured calls (cmd/toolwire's profileReplicas).
		overlay, err := b.overlayArgs(root, "examples/demoserver", "cmd/toolwire", "internal/bench/benchproxy")
		if err != nil {
			fr.err = err
			return fr
		}
		cmd.Env = append(os.Environ(), profileDirEnv+"="+b.opts.ProfileDir, benchkit.OverlayEnv+"="+overlay[1])
		// An earlier run's index in the same directory is not this one's.
		if err := os.Remove(filepath.Join(b.opts.ProfileDir, benchkit.FleetProfileIndex)); err != nil && !errors.Is(err, os.ErrNotExist) {
			fr.err = err
			return fr
		}
	}
	out, err := cmd.CombinedOutput()
	fr.bgCores = m.cores()
	fr.output = string(out)
	if err != nil {
		fr.err = fmt.Errorf("%s: %w", filepath.Base(b.opts.FleetTest), err)
		return fr
	}
	fr.rows, fr.err = parseFleet(out)
	if b.opts.ProfileDir != "" && fr.err == nil {
		// The figures stand without the profiles: a failure to read
		// these is the profiles' (a note), not the fleet's.
		fr.profiles, fr.profileErr = readFleetProfiles(filepath.Join(b.opts.ProfileDir, benchkit.FleetProfileIndex))
	}
	return fr
}

// readFleetProfiles reads the fleet benchmark's index of its profiles. A
// sub-benchmark that ran more than once (go test runs one first with a
// single iteration) is listed once a run, and its profiles' files were
// overwritten each time: its last line is the one that counts.
func readFleetProfiles(path string) ([]profiled, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the fleet's profiles: %w", err)
	}
	var out []profiled
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 4 {
			return nil, fmt.Errorf("%s:%d: want a row, calls, wall and files, tab-separated", path, i+1)
		}
		calls, err1 := strconv.Atoi(f[1])
		wall, err2 := strconv.ParseInt(f[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil || calls <= 0 {
			return nil, fmt.Errorf("%s:%d: calls %q, wall %q: want counts", path, i+1, f[1], f[2])
		}
		p := profiled{row: f[0], phase: "c64", calls: calls, wall: time.Duration(wall), files: f[3:]}
		if i := slices.IndexFunc(out, func(q profiled) bool { return q.row == p.row }); i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
	}
	return out, nil
}

// parseFleet reads BenchmarkFleetThroughput's result lines.
func parseFleet(out []byte) ([]fleetRow, error) {
	var rows []fleetRow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkFleetThroughput/") {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkFleetThroughput/")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		r := fleetRow{name: name, files: strings.HasPrefix(name, "store=files/"), xacts: -1}
		n, ok := strings.CutPrefix(name[strings.LastIndexByte(name, '/')+1:], "replicas=")
		var err error
		if r.replicas, err = strconv.Atoi(n); !ok || err != nil {
			return nil, fmt.Errorf("fleet benchmark %q: no replica count in its name", f[0])
		}
		seen := 0
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("fleet benchmark %s: %q is not a figure", name, f[i])
			}
			switch f[i+1] {
			case "calls/s":
				r.callsPS = v
			case "replicas-cpu-µs/call":
				r.replicaCPU = v
			case "postgres-cpu-µs/call":
				r.pgCPU = v
			case "haproxy-cpu-µs/call":
				r.haproxyCPU = v
			case "callers-cpu-µs/call":
				r.callersCPU = v
			case "db-xacts/call":
				r.xacts = v
			default:
				continue
			}
			seen++
		}
		if seen < 5 || r.callsPS <= 0 {
			return nil, fmt.Errorf("fleet benchmark %s: its line lacks figures: %s", name, sc.Text())
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, errors.New("the fleet benchmark printed no result")
	}
	return rows, nil
}

// loadAverage returns /proc/loadavg's three load averages, "" if unknown.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

// fleetTargets are issue 26's fleet targets.
const (
	fleetMaxCPU = 1.5 // a call through a replica on PostgreSQL: at most this times the CPU of one through the gateway on files
)

// markdown renders the fleet's table beside the single gateway, and the
// targets.
func (fr *fleetRun) markdown() string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	p("\n### The fleet beside the single gateway\n\n")
	if fr.err != nil {
		p("**Failed**: %s.\n", oneLine(fr.err))
		if tail := lastLines(fr.output, 15); tail != "" {
			p("\n```\n%s\n```\n", tail)
		}
		return w.String()
	}
	p("`BenchmarkFleetThroughput` (cmd/toolwire), %d calls per row after a warm-up: 64 callers (half on 2025-11-25 sessions, "+
		"half sending 2026-07-28 requests) call `demo__echo` through HAProxy; each replica is `toolwire serve --http` with its demo "+
		"server over stdio. `files` is the single gateway: one replica on the files of one machine, its audit to a file. "+
		"CPU per call is each process's own CPU time over the calls. Load average %s before, %s after; other processes "+
		"used %s while it ran (%s).\n\n", fr.calls, cmpOr(fr.load0, "unknown"), cmpOr(fr.load1, "unknown"), cores(fr.bgCores), fr.wall.Round(time.Second))
	var files *fleetRow
	for i := range fr.rows {
		if fr.rows[i].files {
			files = &fr.rows[i]
		}
	}
	p("| store | replicas | calls/s | replicas' CPU per call (with their demo) | PostgreSQL's | replicas + PostgreSQL | ÷ files | HAProxy's | callers' | database transactions per call |\n")
	p("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range fr.rows {
		store, ratio, xacts := "PostgreSQL", "–", fmt.Sprintf("%.2f", r.xacts)
		if r.files {
			store, xacts = "files", "–"
		} else if files != nil && files.replicaCPU > 0 {
			ratio = fmt.Sprintf("%.2f×", (r.replicaCPU+r.pgCPU)/files.replicaCPU)
		}
		p("| %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", store, r.replicas, r.callsPS, micros(r.replicaCPU), micros(r.pgCPU),
			micros(r.replicaCPU+r.pgCPU), ratio, micros(r.haproxyCPU), micros(r.callersCPU), xacts)
	}
	one, three := fr.find(1), fr.find(3)
	p("\n| fleet target | this run | met |\n|---|---|---|\n")
	if one != nil && files != nil && files.replicaCPU > 0 {
		ratio := (one.replicaCPU + one.pgCPU) / files.replicaCPU
		p("| a call through a replica on PostgreSQL at most %.1f× the CPU of one through the gateway on files | %.2f× (%s + %s against %s) | %s |\n",
			fleetMaxCPU, ratio, micros(one.replicaCPU), micros(one.pgCPU), micros(files.replicaCPU), yesNo(ratio <= fleetMaxCPU))
	}
	if one != nil && three != nil {
		ratio := three.callsPS / one.callsPS
		p("| three replicas behind HAProxy carry at least what one does | %.2f× (%.0f against %.0f calls/s) | %s |\n",
			ratio, three.callsPS, one.callsPS, yesNo(ratio >= 1))
	}
	return w.String()
}

func (fr *fleetRun) find(replicas int) *fleetRow {
	for i := range fr.rows {
		if !fr.rows[i].files && fr.rows[i].replicas == replicas {
			return &fr.rows[i]
		}
	}
	return nil
}

func micros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func cores(c float64) string {
	if c < 0 {
		return "an unknown share of the cores"
	}
	return fmt.Sprintf("%.2f cores", c)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
