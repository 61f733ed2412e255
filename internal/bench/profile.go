//go:build unix

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/internal/benchkit"
)

// Profiles (-profile DIR). After the measured phases, each MCP call row is
// run once more, unmeasured, for -profile-time of sequential calls and
// -profile-time with 8 callers, while CPU and allocation profiles are
// taken of this process and of the row's server processes; then each
// listing row but the floor runs -profile-lists more listings under
// profiles of this process. The figures of the table are not taken while profiling.
// breakdown.go then splits every profile into parts, per operation.
//
// The servers are the demo server and toolwire built by the bench: with
// -profile they are built with one more file in their main package (by
// go build -overlay; the sources are not touched), which starts a CPU
// profile on SIGUSR1 and ends it on SIGUSR2, writing an allocation
// profile at each, when profileDirEnv names a directory. Children inherit
// that variable as they do GOGC (passedEnv).
//
// Every CPU profile is named ROW-PHASE-PROCESS.pprof, and DIR/profiles.md
// lists them with the calls each covers, so that samples can be turned
// into time per call: go tool pprof -top DIR/gw-serve-seq-serve.pprof.
// Beside each, ROW-PHASE-PROCESS.allocs-start.pb.gz and .allocs.pb.gz are
// the process's allocation profiles at the start and the end, whose
// difference is what the calls allocated:
//
//	go tool pprof -sample_index=alloc_space -base X.allocs-start.pb.gz X.allocs.pb.gz

// profileDirEnv names the directory in which hooked children write their
// profiles.
const profileDirEnv = benchkit.ProfileDirEnv

// profileHookFile is the name under which the hook is added to a main
// package; profileHookSource is its text.
const profileHookFile = "zz_toolwire_bench_profile.go"

const profileHookSource = `//go:build unix

// Added by toolwire-bench -profile (go build -overlay); not in the sources.

package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
)

// init installs the handler before main runs, so that the bench's first
// SIGUSR1 cannot find the default action (which ends the process).
func init() {
	dir := os.Getenv("` + profileDirEnv + `")
	if dir == "" {
		return
	}
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		n := 0
		for s := range c {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				n++
				base := filepath.Join(dir, fmt.Sprintf("%d-%d", os.Getpid(), n))
				toolwireBenchWriteAllocs(base + ".allocs-start")
				var err error
				if f, err = os.Create(base + ".tmp"); err != nil {
					f = nil
					continue
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					f = nil
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				tmp := f.Name()
				f.Close()
				f = nil
				base := tmp[:len(tmp)-len(".tmp")]
				toolwireBenchWriteAllocs(base + ".allocs")
				// Renamed last: the bench waits for this name.
				os.Rename(tmp, base+".pprof")
			}
		}
	}()
}

// toolwireBenchWriteAllocs writes the allocation profile so far to name+".pb.gz".
func toolwireBenchWriteAllocs(name string) {
	f, err := os.Create(name + ".pb.gz")
	if err != nil {
		return
	}
	pprof.Lookup("allocs").WriteTo(f, 0)
	f.Close()
}
`

// overlayArgs writes the hook and an overlay file adding it to each of
// the main packages pkgs (directories relative to root), and returns the
// go build flags that use it; none without -profile.
func (b *bench) overlayArgs(root string, pkgs ...string) ([]string, error) {
	if b.opts.ProfileDir == "" {
		return nil, nil
	}
	hook := filepath.Join(b.dir, profileHookFile)
	if err := os.WriteFile(hook, []byte(profileHookSource), 0o600); err != nil {
		return nil, err
	}
	replace := map[string]string{}
	for _, p := range pkgs {
		replace[filepath.Join(root, p, profileHookFile)] = hook
	}
	raw, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return nil, err
	}
	overlay := filepath.Join(b.dir, "profile-overlay.json")
	if err := os.WriteFile(overlay, raw, 0o600); err != nil {
		return nil, err
	}
	return []string{"-overlay", overlay}, nil
}

// passedEnv returns the variables every child gets from this process, and
// passes on to its own children: GOGC and GOMEMLIMIT as set here, and the
// profile directory while profiling.
func passedEnv() map[string]string {
	m := gcEnv()
	if v, ok := os.LookupEnv(profileDirEnv); ok {
		m[profileDirEnv] = v
	}
	return m
}

// profileWritable returns the directories a confined child (a demo under
// toolwire's sandbox) must be able to write for the hook to write its
// profiles: the profile directory when profiling, else none.
func profileWritable() []string {
	if dir := os.Getenv(profileDirEnv); dir != "" {
		return []string{dir}
	}
	return nil
}

// profiled is one profiling window: the row and phase, the operations it
// covered, and the CPU profiles written (file names in the directory).
type profiled struct {
	row, phase string
	calls      int
	wall       time.Duration
	files      []string
	err        error
}

// profileCalls profiles every live MCP call row (not the floors, whose
// children have no hook): sequential calls, then 8 callers.
func (b *bench) profileCalls(ctx context.Context, runs []*callRun) []profiled {
	var out []profiled
	for _, r := range live(runs) {
		if r.row.stack == "floor" || ctx.Err() != nil {
			continue
		}
		for _, callers := range []int{1, 8} {
			phase := "seq"
			if callers > 1 {
				phase = fmt.Sprintf("c%d", callers)
			}
			p := b.profileRow(ctx, r, phase, callers)
			if p.err != nil {
				b.logf("profile %s %s: %v", r.row.name, phase, p.err)
			} else {
				b.logf("profile %s %s: %d calls in %s", r.row.name, phase, p.calls, p.wall.Round(time.Millisecond))
			}
			out = append(out, p)
		}
	}
	return out
}

// profileRow runs callers goroutines calling r's target for -profile-time
// under CPU profiles of this process and of the row's servers.
func (b *bench) profileRow(ctx context.Context, r *callRun, phase string, callers int) profiled {
	p := profiled{row: r.row.name, phase: phase}
	stop, err := b.startProfiles(r.row.name+"-"+phase, r.t.pids, r.t.roles)
	if err != nil {
		p.err = err
		return p
	}
	pctx, cancel := context.WithTimeout(ctx, b.opts.ProfileTime+callTimeout)
	defer cancel()
	var (
		n       atomic.Int64
		halt    atomic.Bool
		errOnce sync.Once
		callErr error
		wg      sync.WaitGroup
	)
	t0 := time.Now()
	deadline := t0.Add(b.opts.ProfileTime)
	for range callers {
		wg.Go(func() {
			for !halt.Load() && time.Now().Before(deadline) {
				if err := r.t.call(pctx); err != nil {
					errOnce.Do(func() { callErr = err })
					halt.Store(true)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	p.wall = time.Since(t0)
	p.calls = int(n.Load())
	p.files, p.err = stop()
	p.err = errors.Join(callErr, p.err)
	return p
}

// profileLists profiles the toolwire listing rows that were measured: a
// few more iterations each, this process only (the listing server is not
// toolwire's).
func (b *bench) profileLists(ctx context.Context, runs []*listRun) []profiled {
	var out []profiled
	for _, r := range runs {
		if r.err != nil || r.t == nil || r.row.stack == "floor" || ctx.Err() != nil {
			continue
		}
		p := profiled{row: r.row.name, phase: "list"}
		stop, err := b.startProfiles(r.row.name+"-list", nil, nil)
		if err != nil {
			p.err = err
			out = append(out, p)
			continue
		}
		t0 := time.Now()
		var opErr error
		for i := range b.opts.ProfileLists {
			// Iterations past the measured ones: new salts for cold rows.
			iter := b.opts.ListIters + i
			octx, cancel := context.WithTimeout(ctx, 60*time.Second)
			if opErr = r.t.prepare(octx, iter); opErr == nil {
				opErr = r.t.op(octx, iter)
			}
			cancel()
			if opErr != nil {
				break
			}
			p.calls++
		}
		p.wall = time.Since(t0)
		p.files, p.err = stop()
		p.err = errors.Join(opErr, p.err)
		b.logf("profile %s: %d listings in %s", r.row.name, p.calls, p.wall.Round(time.Millisecond))
		out = append(out, p)
	}
	return out
}

// startProfiles starts a CPU profile of this process and signals pids
// (named by roles, same order) to start theirs. stop ends them all and
// returns the files written, DIR/NAME-ROLE.pprof.
func (b *bench) startProfiles(name string, pids []int, roles []string) (stop func() ([]string, error), err error) {
	dir := b.opts.ProfileDir
	self := filepath.Join(dir, name+"-bench.pprof")
	f, err := os.Create(self)
	if err != nil {
		return nil, err
	}
	if err := writeAllocs(filepath.Join(dir, name+"-bench.allocs-start.pb.gz")); err != nil {
		f.Close()
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	// The children's next file is PID-N.pprof; their counters are not
	// known here, so the files present before are remembered instead.
	before := benchkit.Files(dir)
	var signalled []int
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
			errs = append(errs, fmt.Errorf("pid %d: %w", pid, err))
			continue
		}
		signalled = append(signalled, pid)
	}
	stop = func() ([]string, error) {
		pprof.StopCPUProfile()
		errs := slices.Clone(errs)
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := writeAllocs(filepath.Join(dir, name+"-bench.allocs.pb.gz")); err != nil {
			errs = append(errs, err)
		}
		files := []string{filepath.Base(self)}
		for _, pid := range signalled {
			if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
				errs = append(errs, fmt.Errorf("pid %d: %w", pid, err))
				continue
			}
			got, err := benchkit.WaitProfile(dir, pid, before)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			role := fmt.Sprint(pid)
			if i := slices.Index(pids, pid); i < len(roles) {
				role = roles[i]
			}
			final := name + "-" + role
			from := strings.TrimSuffix(got, ".pprof")
			for _, suffix := range []string{".allocs-start.pb.gz", ".allocs.pb.gz", ".pprof"} {
				if err := os.Rename(filepath.Join(dir, from+suffix), filepath.Join(dir, final+suffix)); err != nil {
					errs = append(errs, err)
				}
			}
			files = append(files, final+".pprof")
		}
		return files, errors.Join(errs...)
	}
	return stop, nil
}

// writeAllocs writes this process's allocation profile so far to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeProfileIndex writes DIR/profiles.md: what each profile covers, and
// the breakdowns of the profiles.
func (b *bench) writeProfileIndex(ctx context.Context, ps []profiled) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# toolwire-bench profiles, %s\n\n", b.started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&sb, "GOMAXPROCS %d. Samples at 100 Hz; time per call = a function's time ÷ the calls.\n", runtime.GOMAXPROCS(0))
	fmt.Fprintf(&sb, "Call rows: -profile-time %v each, sequential (seq) and 8 callers (c8); ops are calls. "+
		"Listing rows: ops are connects with their listing, each after its untimed preparation, which the profile includes "+
		"(for list-tw-warm, one more connect to fill the schema cache). "+
		"Fleet rows (fleet_…, c64): each replica (serve1, serve2, …) of BenchmarkFleetThroughput during its measured calls from 64 callers; "+
		"ops are the calls through the whole fleet, so a replica's CPU per call is its share, and the replicas' shares add up.\n\n", b.opts.ProfileTime)
	rows := [][]string{{"row", "phase", "ops", "wall", "µs wall per op", "files", "error"}}
	for _, p := range ps {
		per := "–"
		if p.calls > 0 {
			per = sig3(float64(p.wall.Microseconds()) / float64(p.calls))
		}
		errText := ""
		if p.err != nil {
			errText = oneLine(p.err)
		}
		rows = append(rows, []string{p.row, p.phase, fmt.Sprint(p.calls), p.wall.Round(time.Millisecond).String(), per, strings.Join(p.files, " "), errText})
	}
	writeTable(&sb, rows)
	b.logf("profiles: breaking them down")
	b.breakdowns(ctx, &sb, ps)
	return os.WriteFile(filepath.Join(b.opts.ProfileDir, "profiles.md"), []byte(sb.String()), 0o644)
}
