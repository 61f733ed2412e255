//go:build unix

package bench

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/benchkit"
)

// report is what one run measured, and renders it as markdown.
type report struct {
	opts    Options
	started time.Time
	wall    time.Duration
	machine []string
	bg      map[string]float64 // background load by phase, in cores

	calls []*callRun
	lists []*listRun
	mems  []*memRun
	notes []string

	binary string // what makes up the toolwire binary, markdown; "" if not read

	fleet *fleetRun // the fleet beside the single gateway; nil unless Options.FleetTest
}

// machine describes the machine, the toolchain and the GC settings.
func (b *bench) machine() []string {
	model := cmp.Or(benchkit.CPUModel(), "unknown CPU")
	mem := ""
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(raw)) {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(rest); len(f) == 2 {
					if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
						mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
					}
				}
			}
		}
	}
	sdk, rev := "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/modelcontextprotocol/go-sdk" {
				sdk = d.Version
				if d.Replace != nil {
					sdk += " => " + d.Replace.Path + " " + d.Replace.Version
				}
			}
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value[:min(len(s.Value), 12)]
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" && modified {
			rev += " with uncommitted changes"
		}
	}
	if rev == "" {
		rev = gitRevision()
	}
	gc := "GOGC and GOMEMLIMIT unset (GOGC=100, no limit)"
	if env := gcEnv(); len(env) > 0 {
		var parts []string
		for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
			if v, ok := env[k]; ok {
				parts = append(parts, k+"="+v)
			}
		}
		gc = strings.Join(parts, ", ")
	}
	return []string{
		fmt.Sprintf("Machine: %s, %d cores (GOMAXPROCS %d)%s, %s/%s.", model, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, runtime.GOOS, runtime.GOARCH),
		fmt.Sprintf("Software: %s, go-sdk %s, toolwire %s.", runtime.Version(), sdk, cmp.Or(rev, "revision unknown")),
		fmt.Sprintf("GC: %s in this process and every child; toolwire serve applies its own defaults where they are unset (cmd/toolwire/gc.go).", gc),
	}
}

// gitRevision describes the working tree's commit, read-only, or "".
func gitRevision() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += " with uncommitted changes"
	}
	return rev
}

func (r *report) callRun(name string) *callRun {
	for _, c := range r.calls {
		if c.row.name == name {
			return c
		}
	}
	return nil
}

func (r *report) listRun(name string) *listRun {
	for _, l := range r.lists {
		if l.row.name == name {
			return l
		}
	}
	return nil
}

// Figures of a call row; ok is false when there is none.

func (c *callRun) p(q float64) (time.Duration, bool) {
	if c == nil || c.err != nil || len(c.lat) == 0 {
		return 0, false
	}
	return benchkit.Percentile(c.lat, q), true // sorts c.lat, which is fine
}

func (c *callRun) cpuPerCall() (time.Duration, bool) {
	if c == nil || c.err != nil || c.seqCalls == 0 || !c.cpuKnown {
		return 0, false
	}
	return c.seqCPU / time.Duration(c.seqCalls), true
}

// frontPerCall is the CPU per call of the row's first server process (the
// gateway of a gw or peer row): sequential with callers 0, else in the
// throughput windows with that many callers.
func (c *callRun) frontPerCall(callers int) (time.Duration, bool) {
	if c == nil || c.err != nil || len(c.t.pids) == 0 {
		return 0, false
	}
	if callers == 0 {
		if c.seqCalls == 0 || !c.cpuKnown {
			return 0, false
		}
		return c.seqFront / time.Duration(c.seqCalls), true
	}
	w := c.tput[callers]
	if w == nil || w.calls == 0 || !w.frontKnown {
		return 0, false
	}
	return w.front / time.Duration(w.calls), true
}

func (c *callRun) rate(callers int) (float64, bool) {
	if c == nil || c.err != nil {
		return 0, false
	}
	w := c.tput[callers]
	if w == nil || w.wall <= 0 {
		return 0, false
	}
	return float64(w.calls) / w.wall.Seconds(), true
}

func (l *listRun) p50() (time.Duration, bool) {
	if l == nil || l.err != nil || len(l.wall) == 0 {
		return 0, false
	}
	return median(l.wall), true
}

func (l *listRun) max() (time.Duration, bool) {
	if l == nil || l.err != nil || len(l.wall) == 0 {
		return 0, false
	}
	return slices.Max(l.wall), true
}

func (l *listRun) cpuPerOp() (time.Duration, bool) {
	if l == nil || l.err != nil || l.ops == 0 || !l.cpuKnown {
		return 0, false
	}
	return l.cpu / time.Duration(l.ops), true
}

// ratioCaller is the caller count of the throughput ratio column: 8 when
// measured, else the largest.
func (r *report) ratioCaller() int {
	if slices.Contains(r.opts.Callers, 8) {
		return 8
	}
	return slices.Max(r.opts.Callers)
}

// markdown renders the report.
func (r *report) markdown() string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	w("## toolwire-bench, %s\n\n", r.started.Format("2006-01-02 15:04 MST"))
	for _, m := range r.machine {
		w("%s\n", m)
	}
	w("Background load (CPU of other processes while measuring):")
	phases := []string{"sequential calls", "concurrent calls", "listings", "sessions"}
	first := true
	for _, ph := range phases {
		if v, ok := r.bg[ph]; ok && v >= 0 {
			sep := ","
			if first {
				sep, first = "", false
			}
			w("%s %s %.2f cores", sep, ph, v)
		}
	}
	if first {
		w(" not measured")
	}
	w(".\n")
	parts := []string{cmp.Or(strings.Join(r.opts.Args, " "), "default flags")}
	if len(r.calls) > 0 {
		parts = append(parts, fmt.Sprintf("%d rounds of up to %d sequential calls or %v per row", r.opts.Rounds, r.opts.BlockCalls, r.opts.BlockTime), r.tputSummary())
	}
	if len(r.lists) > 0 {
		parts = append(parts, fmt.Sprintf("%d listing iterations of %d tools (the first discarded)", r.opts.ListIters, r.opts.ListTools))
	}
	if len(r.mems) > 0 {
		parts = append(parts, fmt.Sprintf("%d sessions", r.opts.Sessions))
	}
	w("Run: %s. Took %s.\n\n", strings.Join(parts, "; "), r.wall.Round(time.Second))

	r.mainTable(&sb)
	r.legend(&sb)
	r.memTable(&sb)
	r.targets(&sb)
	r.gateways(&sb)
	if r.fleet != nil {
		sb.WriteString(r.fleet.markdown())
	}
	if r.binary != "" {
		w("\n%s", r.binary)
	}
	for _, n := range r.notes {
		w("\n%s\n", n)
	}
	return sb.String()
}

func (r *report) tputSummary() string {
	if r.opts.TputRounds == 0 {
		return "no throughput windows"
	}
	var cs []string
	for _, c := range r.opts.Callers {
		cs = append(cs, strconv.Itoa(c))
	}
	return fmt.Sprintf("throughput with %s callers, %d windows of %v after %v each", strings.Join(cs, "/"), r.opts.TputRounds, r.opts.TputWindow, r.opts.TputRamp)
}

func (r *report) mainTable(sb *strings.Builder) {
	rc := r.ratioCaller()
	head := []string{"row", "op", "p50", "p99", "CPU/op", "alloc/op", "allocs/op"}
	for _, c := range r.opts.Callers {
		head = append(head, fmt.Sprintf("calls/s, %d caller%s", c, plural(c)))
	}
	head = append(head, "floor", "p50 ÷ floor", "CPU ÷ floor", fmt.Sprintf("calls/s ÷ floor, %d", rc))
	table := [][]string{head}
	dash := "–"
	for _, c := range r.calls {
		cells := []string{"`" + c.row.name + "`", opCell("call", c.err, c.seqCalls)}
		p50, ok50 := c.p(0.50)
		p99, ok99 := c.p(0.99)
		cpu, okCPU := c.cpuPerCall()
		cells = append(cells, fmtDur(p50, ok50), fmtDur(p99, ok99), fmtDur(cpu, okCPU))
		if c.err == nil && c.seqCalls > 0 {
			cells = append(cells, fmtBytes(float64(c.bytes)/float64(c.seqCalls)), fmtNum(float64(c.mallocs)/float64(c.seqCalls)))
		} else {
			cells = append(cells, dash, dash)
		}
		for _, n := range r.opts.Callers {
			v, ok := c.rate(n)
			cells = append(cells, fmtRate(v, ok))
		}
		f := r.callRun(c.row.floor)
		fp50, okf50 := f.p(0.50)
		fcpu, okfCPU := f.cpuPerCall()
		rate, okRate := c.rate(rc)
		frate, okfRate := f.rate(rc)
		cells = append(cells, floorName(c.row.floor),
			fmtRatio(float64(p50), float64(fp50), ok50 && okf50),
			fmtRatio(float64(cpu), float64(fcpu), okCPU && okfCPU),
			fmtRatio(rate, frate, okRate && okfRate))
		table = append(table, cells)
	}
	for _, l := range r.lists {
		cells := []string{"`" + l.row.name + "`", opCell("listing", l.err, l.ops)}
		p50, ok50 := l.p50()
		mx, okMax := l.max()
		cpu, okCPU := l.cpuPerOp()
		cells = append(cells, fmtDur(p50, ok50), fmtDur(mx, okMax)+maxMark(okMax), fmtDur(cpu, okCPU))
		if l.err == nil && l.ops > 0 {
			cells = append(cells, fmtBytes(float64(l.bytes)/float64(l.ops)), fmtNum(float64(l.mallocs)/float64(l.ops)))
		} else {
			cells = append(cells, dash, dash)
		}
		for range r.opts.Callers {
			cells = append(cells, dash)
		}
		f := r.listRun(l.row.floor)
		fp50, okf50 := f.p50()
		fcpu, okfCPU := f.cpuPerOp()
		cells = append(cells, floorName(l.row.floor),
			fmtRatio(float64(p50), float64(fp50), ok50 && okf50),
			fmtRatio(float64(cpu), float64(fcpu), okCPU && okfCPU), dash)
		table = append(table, cells)
	}
	if len(table) > 1 {
		writeTable(sb, table)
	}
}

// opCell is the op column: the operation, or what became of the row.
func opCell(op string, err error, measured int) string {
	switch {
	case err == nil && measured > 0:
		return op
	case err == nil, errors.Is(err, errStopped):
		return "not measured"
	}
	return "failed"
}

func maxMark(ok bool) string {
	if ok {
		return " (max)"
	}
	return ""
}

func floorName(name string) string {
	if name == "" {
		return "–"
	}
	return "`" + name + "`"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// legend says what each row measured, how much, and how the columns are
// made.
func (r *report) legend(sb *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(sb, format, args...) }
	if len(r.calls)+len(r.lists) == 0 {
		return
	}
	w("\n")
	for _, c := range r.calls {
		w("- `%s`: %s.", c.row.name, c.row.what)
		if errors.Is(c.err, errStopped) {
			w(" Not measured: the run was stopped.")
		} else if c.err != nil {
			w(" **Failed**: %s.", oneLine(c.err))
		} else {
			w(" %d sequential calls.", c.seqCalls)
		}
		w("\n")
	}
	for _, l := range r.lists {
		w("- `%s`: %s.", l.row.name, l.row.what)
		if errors.Is(l.err, errStopped) {
			w(" Not measured: the run was stopped.")
		} else if l.err != nil {
			w(" **Failed**: %s.", oneLine(l.err))
		} else {
			w(" %d measured.", l.ops)
		}
		w("\n")
	}
	w("\nCPU/op is the user+system CPU of this process (getrusage) and of the row's server processes "+
		"(/proc/PID/task/*/schedstat: the demo child, toolwire serve and its upstream, the floors' children) per call. "+
		"alloc/op and allocs/op are runtime.MemStats deltas of this process only: the client side "+
		"(for `gw-serve`, the caller of the gateway). p50 and p99 pool every sequential call of every round. "+
		"Throughput: the callers share the row's one session; HTTP clients keep up to %d idle connections per host. "+
		"Listing rows: one connect and listing per iteration, the heap collected before each; p99 shows the slowest iteration. "+
		"Ratios divide by the floor row of the same run: above 1× for time and CPU is slower than the floor, below 1× for calls/s.\n",
		maxIdlePerHost)
}

func (r *report) memTable(sb *strings.Builder) {
	if len(r.mems) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(sb, format, args...) }
	w("\nMemory per open downstream session on the gateway (%d sessions opened by a go-sdk client in a child process: initialize, the standalone GET stream, one call each):\n\n", r.opts.Sessions)
	table := [][]string{{"row", "idle RSS", "of it anonymous", "live heap / session", "stacks / session", "goroutines / session", "RSS / session", "how"}}
	for _, m := range r.mems {
		if errors.Is(m.err, errStopped) {
			table = append(table, []string{"`" + m.row.name + "`", "–", "–", "–", "–", "–", "–", "not measured: the run was stopped"})
			continue
		}
		if m.err != nil {
			table = append(table, []string{"`" + m.row.name + "`", "–", "–", "–", "–", "–", "–", "**failed**: " + oneLine(m.err)})
			continue
		}
		table = append(table, []string{"`" + m.row.name + "`", fmtBytes(m.res.idle), fmtBytes(m.res.idleAnon),
			fmtBytes(m.res.heap), fmtBytes(m.res.stacks), fmtOpt(m.res.goroutines, "%.1f"), fmtBytes(m.res.rss), m.row.what})
	}
	writeTable(sb, table)
}

// targets checks issue 8's targets against this run's figures.
func (r *report) targets(sb *strings.Builder) {
	var table [][]string
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	has8 := slices.Contains(r.opts.Callers, 8)
	for _, c := range r.calls {
		if c.err != nil {
			continue
		}
		switch c.row.stack {
		case "tw":
			if c.row.transport != "stdio" {
				continue
			}
			p50, ok := c.p(0.5)
			fp50, okf := r.callRun(c.row.floor).p(0.5)
			if ok && okf {
				x := float64(p50) / float64(fp50)
				table = append(table, []string{fmt.Sprintf("`%s` p50 at most 2× `%s`", c.row.name, c.row.floor), fmt.Sprintf("%.2f×", x), yes(x <= 2)})
			}
			if has8 {
				rate, ok := c.rate(8)
				brate, okb := r.callRun(c.row.bare).rate(8)
				if ok && okb {
					x := rate / brate
					table = append(table, []string{fmt.Sprintf("`%s` calls/s at 8 callers at least 3× `%s`", c.row.name, c.row.bare), fmt.Sprintf("%.2f× (%s vs %s)", x, fmtRate(rate, true), fmtRate(brate, true)), yes(x >= 3)})
				}
			}
		case "gw":
			if c.row.name != "gw-serve" {
				continue
			}
			p50, ok := c.p(0.5)
			dp50, okd := r.callRun(c.row.bare).p(0.5)
			if ok && okd {
				added := p50 - dp50
				extra := ""
				relay, okr := r.callRun("floor-relay").p(0.5)
				pipe, okp := r.callRun("floor-pipe").p(0.5)
				if okr && okp {
					extra = fmt.Sprintf("; the relay floor adds %s over the pipe floor", signedDur(relay-pipe))
				}
				table = append(table, []string{fmt.Sprintf("`%s` adds at most 400 µs p50 over `%s` (the same call made directly)", c.row.name, c.row.bare), signedDur(added) + extra, yes(added <= 400*time.Microsecond)})
			}
			if has8 {
				if rate, ok := c.rate(8); ok {
					table = append(table, []string{fmt.Sprintf("`%s` at least 3,000 calls/s at 8 callers", c.row.name), fmtRate(rate, true), yes(rate >= 3000)})
				}
			}
		}
	}
	for _, l := range r.lists {
		if l.row.stack != "tw" || l.err != nil {
			continue
		}
		p50, ok := l.p50()
		bp50, okb := r.listRun(l.row.bare).p50()
		if ok && okb {
			d := p50 - bp50
			table = append(table, []string{fmt.Sprintf("adapting %d tools under 50 ms: `%s` − `%s`", r.opts.ListTools, l.row.name, l.row.bare), signedDur(d), yes(d < 50*time.Millisecond)})
		}
	}
	if len(table) == 0 {
		return
	}
	fmt.Fprintf(sb, "\nIssue 8's targets, from this run's figures (p50s, ratios of the same run):\n\n")
	writeTable(sb, append([][]string{{"target", "this run", "met"}}, table...))
}

// gateways renders the gateway rows side by side, with the CPU of the
// gateway process alone, and checks issue 26's targets.
func (r *report) gateways(sb *strings.Builder) {
	var gws []*callRun
	for _, c := range r.calls {
		if c.row.stack == "gw" || c.row.stack == "peer" || c.row.name == "floor-relay" {
			gws = append(gws, c)
		}
	}
	if !slices.ContainsFunc(gws, func(c *callRun) bool { return c.row.stack == "gw" }) {
		return
	}
	head := []string{"row", "p50"}
	for _, n := range r.opts.Callers {
		head = append(head, fmt.Sprintf("calls/s, %d", n))
	}
	head = append(head, "gateway CPU/call, sequential", "gateway CPU/call, 8 callers", "all processes' CPU/call, sequential")
	table := [][]string{head}
	for _, c := range gws {
		p50, ok := c.p(0.5)
		cells := []string{"`" + c.row.name + "`", fmtDur(p50, ok)}
		for _, n := range r.opts.Callers {
			v, ok := c.rate(n)
			cells = append(cells, fmtRate(v, ok))
		}
		f0, ok0 := c.frontPerCall(0)
		f8, ok8 := c.frontPerCall(8)
		all, okAll := c.cpuPerCall()
		cells = append(cells, fmtDur(f0, ok0), fmtDur(f8, ok8), fmtDur(all, okAll))
		table = append(table, cells)
	}
	fmt.Fprintf(sb, "\nThe gateways (issue 26): gateway CPU is the CPU of the process the caller talks to (toolwire serve, the proxy, the relay floor), without its upstream or the caller; the last column adds every process, the caller's included.\n\n")
	writeTable(sb, table)

	var t [][]string
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	ratio := func(a, b float64) string { return sig3(a/b) + "×" }
	relay := r.callRun("floor-relay")
	for _, c := range gws {
		if c.row.stack != "gw" || c.row.peer == "" {
			continue
		}
		peer := r.callRun(c.row.peer)
		name, pname := "`"+c.row.name+"`", "`"+c.row.peer+"`"
		if p50, ok := c.p(0.5); ok {
			if pp50, okp := peer.p(0.5); okp {
				x := float64(p50) / float64(pp50)
				t = append(t, []string{fmt.Sprintf("%s p50 at most 0.8× %s", name, pname), fmt.Sprintf("%s (%s vs %s)", ratio(float64(p50), float64(pp50)), fmtDur(p50, true), fmtDur(pp50, true)), yes(x <= 0.8)})
			}
		}
		for _, n := range []int{8, 64} {
			v, ok := c.rate(n)
			pv, okp := peer.rate(n)
			if ok && okp {
				t = append(t, []string{fmt.Sprintf("%s calls/s at %d callers at least 1.2× %s", name, n, pname), fmt.Sprintf("%s (%s vs %s)", ratio(v, pv), fmtRate(v, true), fmtRate(pv, true)), yes(v/pv >= 1.2)})
			}
		}
		if f, ok := c.frontPerCall(8); ok {
			if pf, okp := peer.frontPerCall(8); okp {
				t = append(t, []string{fmt.Sprintf("%s gateway CPU per call (8 callers) at most %s's", name, pname), fmt.Sprintf("%s (%s vs %s)", ratio(float64(f), float64(pf)), fmtDur(f, true), fmtDur(pf, true)), yes(f <= pf)})
			}
		}
		if p50, ok := c.p(0.5); ok {
			if rp50, okr := relay.p(0.5); okr {
				t = append(t, []string{fmt.Sprintf("%s p50 at most 2.5× `floor-relay`", name), fmt.Sprintf("%s (%s vs %s)", ratio(float64(p50), float64(rp50)), fmtDur(p50, true), fmtDur(rp50, true)), yes(float64(p50) <= 2.5*float64(rp50))})
			}
		}
		if cpu, ok := c.cpuPerCall(); ok {
			if rcpu, okr := relay.cpuPerCall(); okr {
				t = append(t, []string{fmt.Sprintf("%s CPU per call (all processes, sequential) at most 2.5× `floor-relay`", name), fmt.Sprintf("%s (%s vs %s)", ratio(float64(cpu), float64(rcpu)), fmtDur(cpu, true), fmtDur(rcpu, true)), yes(float64(cpu) <= 2.5*float64(rcpu))})
			}
		}
	}
	var serve, bare *memRun
	for _, m := range r.mems {
		switch m.row.name {
		case "mem-serve":
			serve = m
		case "mem-sdk-proxy":
			bare = m
		}
	}
	if serve != nil && bare != nil && serve.err == nil && bare.err == nil {
		s, b := serve.res, bare.res
		t = append(t, []string{"`mem-serve` idle RSS at most 1.5× `mem-sdk-proxy`'s", fmt.Sprintf("%s (%s vs %s)", ratio(s.idle, b.idle), fmtBytes(s.idle), fmtBytes(b.idle)), yes(s.idle <= 1.5*b.idle)})
		t = append(t, []string{"(not a target) `mem-serve` idle anonymous memory (heap, stacks; the rest is the executable's pages) beside `mem-sdk-proxy`'s", fmt.Sprintf("%s (%s vs %s)", ratio(s.idleAnon, b.idleAnon), fmtBytes(s.idleAnon), fmtBytes(b.idleAnon)), "–"})
		t = append(t, []string{"`mem-serve` RSS per open session at most `mem-sdk-proxy`'s", fmt.Sprintf("%s vs %s", fmtBytes(s.rss), fmtBytes(b.rss)), yes(s.rss <= b.rss)})
	}
	if len(t) > 0 {
		fmt.Fprintf(sb, "\nIssue 26's targets, from this run's figures (ratios of the same run):\n\n")
		writeTable(sb, append([][]string{{"target", "this run", "met"}}, t...))
	}
}

// failed returns the rows that failed, each with why; rows that the run's
// end cut short are not among them.
func (r *report) failed() []string {
	var out []string
	add := func(name string, err error) {
		if err != nil && !errors.Is(err, errStopped) {
			out = append(out, name+": "+oneLine(err))
		}
	}
	for _, c := range r.calls {
		add(c.row.name, c.err)
	}
	for _, l := range r.lists {
		add(l.row.name, l.err)
	}
	for _, m := range r.mems {
		add(m.row.name, m.err)
	}
	if r.fleet != nil {
		add("fleet", r.fleet.err)
	}
	return out
}

// writeTable writes a markdown table; the first row is the header.
func writeTable(sb *strings.Builder, rows [][]string) {
	for i, row := range rows {
		sb.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			sep := make([]string, len(row))
			for j := range sep {
				sep[j] = "---"
			}
			sb.WriteString("|" + strings.Join(sep, "|") + "|\n")
		}
	}
}

// oneLine shortens an error for a table cell or a legend line.
func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// sig3 formats v with about three significant digits, without exponent.
func sig3(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func fmtDur(d time.Duration, ok bool) string {
	if !ok {
		return "–"
	}
	switch {
	case d < time.Millisecond:
		return sig3(float64(d)/1e3) + " µs"
	case d < time.Second:
		return sig3(float64(d)/1e6) + " ms"
	default:
		return sig3(d.Seconds()) + " s"
	}
}

func signedDur(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d, true)
	}
	return "+" + fmtDur(d, true)
}

func fmtBytes(b float64) string {
	switch {
	case math.IsNaN(b):
		return "–"
	case b < 0:
		return "−" + fmtBytes(-b)
	case b < 1024:
		return sig3(b) + " B"
	case b < 1<<20:
		return sig3(b/1024) + " KiB"
	default:
		return sig3(b/(1<<20)) + " MiB"
	}
}

func fmtNum(v float64) string {
	if v >= 10000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return sig3(v)
}

func fmtOpt(v float64, format string) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func fmtRate(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func fmtRatio(a, b float64, ok bool) string {
	if !ok || b == 0 {
		return "–"
	}
	return sig3(a/b) + "×"
}
