// Package warm runs functions on goroutines whose stacks have already
// grown.
//
// A new goroutine starts with a small stack, and a function that runs
// deep (a gateway's call goes through a middleware chain, the executor,
// the audit log's encoder and an upstream client) makes the runtime copy
// the stack to a larger one, then a larger one again: on a busy gateway
// that copying was a tenth of its CPU (docs/performance.md). A [Pool]
// keeps the goroutines that finished a function waiting, for a while,
// for the next one, so that the stack one function grew serves the next.
package warm

import (
	"slices"
	"sync"
	"time"
)

// A Pool runs functions on goroutines it keeps. The zero Pool keeps at
// most [DefaultIdle] goroutines waiting, each for at most [DefaultLinger].
// A Pool must not be copied after first use.
type Pool struct {
	// Idle is how many goroutines may wait for work at once; 0 means
	// DefaultIdle. A goroutine that finds as many waiting ends.
	Idle int
	// Linger is how long a goroutine waits for work before it ends; 0
	// means DefaultLinger.
	Linger time.Duration

	mu   sync.Mutex
	idle []*worker // waiting, the most recently busy last
}

const (
	// DefaultIdle bounds the goroutines a Pool keeps waiting.
	DefaultIdle = 64
	// DefaultLinger is how long a goroutine waits for its next function.
	DefaultLinger = 10 * time.Second
)

type worker struct {
	work chan func() // holds one function: Go never waits on it
}

// Go runs f on a goroutine of the pool: one that waits for work, the one
// most recently busy (its stack the likeliest to be grown and in cache),
// or else a new one. It does not wait for f.
func (p *Pool) Go(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.work <- f
		return
	}
	p.mu.Unlock()
	go p.run(&worker{work: make(chan func(), 1)}, f)
}

// run runs f, then every function handed to w, until w has waited
// Linger for one or the pool has enough goroutines waiting.
func (p *Pool) run(w *worker, f func()) {
	linger := p.Linger
	if linger <= 0 {
		linger = DefaultLinger
	}
	var timer *time.Timer
	for {
		f()
		f = nil // not kept alive while waiting
		if !p.wait(w) {
			return
		}
		if timer == nil {
			timer = time.NewTimer(linger)
		} else {
			timer.Reset(linger)
		}
		select {
		case f = <-w.work:
			timer.Stop()
		case <-timer.C:
			if !p.leave(w) {
				// Go took w as the timer fired: its function is on
				// the way.
				f = <-w.work
			} else {
				return
			}
		}
	}
}

// wait puts w among the waiting goroutines, unless there are enough of
// them already.
func (p *Pool) wait(w *worker) bool {
	max := p.Idle
	if max <= 0 {
		max = DefaultIdle
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= max {
		return false
	}
	p.idle = append(p.idle, w)
	return true
}

// leave takes w from the waiting goroutines and reports whether it was
// still there (no function handed to it).
func (p *Pool) leave(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.idle, w); i >= 0 {
		p.idle = slices.Delete(p.idle, i, i+1) // clears the slot it frees
		return true
	}
	return false
}
