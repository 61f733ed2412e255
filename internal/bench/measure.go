//go:build unix

package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolwire/toolwire/internal/benchkit"
)

// callTimeout bounds one call beyond a block's or window's own length: a
// call that takes longer fails its row.
const callTimeout = 30 * time.Second

// callRun is a call row's target and what was measured of it.
type callRun struct {
	row *row
	t   *target
	err error // why the row stopped (setup or a failed call)

	lat            []time.Duration // sequential latencies, every block
	seqCalls       int
	seqCPU         time.Duration
	seqFront       time.Duration // of the first server process alone (the gateway, for gw and peer rows)
	cpuKnown       bool          // false once a server process's CPU could not be read
	bytes, mallocs uint64

	tput map[int]*window // by number of callers
}

// window sums the measured parts of a row's throughput windows.
type window struct {
	calls int
	wall  time.Duration
	front time.Duration // CPU of the first server process over the measured part
	// frontKnown is false once its CPU could not be read.
	frontKnown bool
}

// frontCPU returns the CPU used so far by the first of pids (the process
// the caller talks to), or false.
func frontCPU(pids []int) (time.Duration, bool) {
	if len(pids) == 0 {
		return 0, false
	}
	c, err := benchkit.ProcessCPU(pids[0])
	return c, err == nil
}

func (r *callRun) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// openCalls opens and warms up the call rows, one at a time.
func (b *bench) openCalls(ctx context.Context, sel []*row) []*callRun {
	var runs []*callRun
	for _, rw := range sel {
		if rw.call == nil {
			continue
		}
		r := &callRun{row: rw, cpuKnown: true, tput: map[int]*window{}}
		runs = append(runs, r)
		if ctx.Err() != nil {
			r.fail(context.Cause(ctx))
			continue
		}
		octx, cancel := context.WithTimeout(ctx, 60*time.Second)
		t, err := rw.call(octx, b)
		if err == nil {
			b.onClose(t.close)
			r.t = t
			err = warm(octx, t, b.opts.Warmup)
		}
		cancel()
		if err != nil {
			r.fail(fmt.Errorf("setup: %w", err))
			b.logf("%s: %v", rw.name, err)
			continue
		}
		b.logf("%s: open, %d warm-up calls made", rw.name, b.opts.Warmup)
	}
	return runs
}

// warm makes n calls, bounded by ctx.
func warm(ctx context.Context, t *target, n int) error {
	for range n {
		if err := t.call(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// live returns the runs that have not failed.
func live(runs []*callRun) []*callRun {
	return slices.DeleteFunc(slices.Clone(runs), func(r *callRun) bool { return r.err != nil })
}

// sequential runs -rounds rounds; in each, every live row makes a block of
// sequential calls, the order of rows reversed every round.
func (b *bench) sequential(ctx context.Context, runs []*callRun) {
	o := b.opts
	for _, r := range runs {
		r.lat = make([]time.Duration, 0, o.Rounds*o.BlockCalls)
	}
	for round := range o.Rounds {
		order := live(runs)
		if len(order) == 0 || ctx.Err() != nil {
			return
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, r := range order {
			b.block(ctx, r)
		}
		b.logf("sequential: round %d/%d done", round+1, o.Rounds)
	}
}

// block makes up to -block-calls sequential calls for up to -block-time,
// recording each call's latency, and the CPU (this process and the row's
// servers) and this process's allocation over the block.
func (b *bench) block(ctx context.Context, r *callRun) {
	bctx, cancel := context.WithTimeout(ctx, b.opts.BlockTime+callTimeout)
	defer cancel()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	bytes0, mallocs0 := ms.TotalAlloc, ms.Mallocs
	cpu0, cpuErr := cpuOf(r.t.pids)
	front0, okFront0 := frontCPU(r.t.pids)
	start := time.Now()
	n := 0
	for n < b.opts.BlockCalls {
		t0 := time.Now()
		if err := r.t.call(bctx); err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("call %d of a block: %w", n+1, err))
			}
			return
		}
		t1 := time.Now()
		r.lat = append(r.lat, t1.Sub(t0))
		n++
		if t1.Sub(start) >= b.opts.BlockTime {
			break
		}
	}
	cpu1, err := cpuOf(r.t.pids)
	front1, okFront1 := frontCPU(r.t.pids)
	runtime.ReadMemStats(&ms)
	r.seqCalls += n
	r.bytes += ms.TotalAlloc - bytes0
	r.mallocs += ms.Mallocs - mallocs0
	if cpuErr != nil || err != nil || !okFront0 || !okFront1 {
		r.cpuKnown = false
	}
	r.seqCPU += cpu1 - cpu0
	r.seqFront += front1 - front0
}

// throughput runs, for each caller count, -tput-rounds rounds of one
// window per live row, the order reversed every round.
func (b *bench) throughput(ctx context.Context, runs []*callRun) {
	o := b.opts
	for _, callers := range o.Callers {
		for round := range o.TputRounds {
			order := live(runs)
			if len(order) == 0 || ctx.Err() != nil {
				return
			}
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, r := range order {
				if err := b.window(ctx, r, callers); err != nil && ctx.Err() == nil {
					r.fail(fmt.Errorf("%d callers: %w", callers, err))
				}
			}
			b.logf("throughput: %d callers, round %d/%d done", callers, round+1, o.TputRounds)
		}
	}
}

// window runs callers goroutines calling r's target in a loop: -tput-ramp
// unmeasured, then -tput-window measured (or until -tput-max calls have
// been counted), then the callers stop and are waited for, bounded.
func (b *bench) window(ctx context.Context, r *callRun, callers int) error {
	o := b.opts
	wctx, cancel := context.WithTimeout(ctx, o.TputRamp+o.TputWindow+callTimeout)
	defer cancel()
	var (
		done    atomic.Int64
		stop    atomic.Bool
		errOnce sync.Once
		callErr error
		wg      sync.WaitGroup
	)
	// hardCap bounds the calls of the window by count even if the loop
	// below were to miss the measured limit.
	hardCap := int64(2 * o.TputMax)
	for range callers {
		wg.Go(func() {
			for !stop.Load() && done.Load() < hardCap {
				if err := r.t.call(wctx); err != nil {
					if !stop.Load() {
						errOnce.Do(func() { callErr = err })
					}
					stop.Store(true)
					return
				}
				done.Add(1)
			}
		})
	}
	finish := func() error {
		stop.Store(true)
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(callTimeout):
			cancel() // unblocks calls that honour their context
			select {
			case <-waited:
			case <-time.After(endGrace):
				return errors.New("callers did not stop")
			}
		}
		return callErr
	}
	if !sleepCtx(wctx, o.TputRamp) || stop.Load() {
		return finish()
	}
	front0, okFront0 := frontCPU(r.t.pids)
	n0 := done.Load()
	t0 := time.Now()
	deadline := t0.Add(o.TputWindow)
	for time.Now().Before(deadline) && done.Load()-n0 < int64(o.TputMax) && !stop.Load() {
		if !sleepCtx(wctx, min(5*time.Millisecond, time.Until(deadline))) {
			break
		}
	}
	n1 := done.Load()
	wall := time.Since(t0)
	front1, okFront1 := frontCPU(r.t.pids)
	if err := finish(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil // interrupted: the window is not counted
	}
	w := r.tput[callers]
	if w == nil {
		w = &window{frontKnown: true}
		r.tput[callers] = w
	}
	w.calls += int(n1 - n0)
	w.wall += wall
	w.front += front1 - front0
	w.frontKnown = w.frontKnown && okFront0 && okFront1
	return nil
}

// sleepCtx sleeps for d or until ctx ends, and reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
