package warm

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond, yielding, until it holds or a second has passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 1s: %s", what)
		}
		runtime.Gosched()
	}
}

func (p *Pool) waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// runEachOnce hands p n functions, yielding after every burst of them,
// and fails unless each ran exactly once.
func runEachOnce(t *testing.T, p *Pool, n, burst int) {
	t.Helper()
	runs := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		p.Go(func() {
			defer wg.Done()
			runs[i].Add(1)
		})
		if i%burst == 0 {
			runtime.Gosched()
		}
	}
	wg.Wait()
	for i := range runs {
		if got := runs[i].Load(); got != 1 {
			t.Fatalf("function %d ran %d times, want once", i, got)
		}
	}
}

func TestEveryFunctionRunsOnce(t *testing.T) {
	var p Pool
	runEachOnce(t, &p, 2000, 2000)
	if w := p.waiting(); w > DefaultIdle {
		t.Fatalf("%d goroutines wait, more than DefaultIdle (%d)", w, DefaultIdle)
	}
}

// TestFunctionsRaceTheLinger: with goroutines that wait a microsecond,
// Go keeps handing functions to goroutines whose wait is ending (bursts
// of 64, a yield between them for waits to run out); each function still
// runs once.
func TestFunctionsRaceTheLinger(t *testing.T) {
	runEachOnce(t, &Pool{Idle: 4, Linger: time.Microsecond}, 20000, 64)
}

func TestAFinishedGoroutineRunsTheNextFunction(t *testing.T) {
	var p Pool
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	waitFor(t, "the goroutine waits for work", func() bool { return p.waiting() == 1 })
	before := runtime.NumGoroutine()
	ran := make(chan int, 1)
	p.Go(func() { ran <- runtime.NumGoroutine() })
	if during := <-ran; during != before {
		t.Fatalf("%d goroutines while the second function ran, %d before: a new goroutine ran it", during, before)
	}
	waitFor(t, "the goroutine waits again", func() bool { return p.waiting() == 1 })
}

func TestGoroutinesBeyondIdleEnd(t *testing.T) {
	before := runtime.NumGoroutine()
	p := Pool{Idle: 2}
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(5)
	for range 5 {
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	close(release)
	// At most: a goroutine another test's pool left waiting may end
	// meanwhile.
	waitFor(t, "two goroutines wait and the three others end", func() bool {
		return p.waiting() == 2 && runtime.NumGoroutine() <= before+2
	})
}

func TestAWaitingGoroutineEndsAfterLinger(t *testing.T) {
	before := runtime.NumGoroutine()
	p := Pool{Linger: 20 * time.Millisecond}
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	waitFor(t, "the goroutine ends after Linger", func() bool { return p.waiting() == 0 && runtime.NumGoroutine() <= before })
	// And the pool still runs what it is given.
	again := make(chan struct{})
	p.Go(func() { close(again) })
	<-again
}

// deep uses about n KiB of stack.
//
//go:noinline
func deep(n int) int {
	var pad [1024]byte
	pad[n%1024] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%1024])
}

// BenchmarkDeepFunction compares a new goroutine per function with the
// pool's, for a function that needs 64 KiB of stack.
func BenchmarkDeepFunction(b *testing.B) {
	b.Run("go", func(b *testing.B) {
		done := make(chan struct{})
		for b.Loop() {
			go func() { deep(64); done <- struct{}{} }()
			<-done
		}
	})
	b.Run("pool", func(b *testing.B) {
		var p Pool
		done := make(chan struct{})
		for b.Loop() {
			p.Go(func() { deep(64); done <- struct{}{} })
			<-done
		}
	})
}
