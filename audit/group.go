package audit

import (
	"errors"
	"sync"
)

// BatchSink is a [Sink] that can store several events at once, and is
// safe for concurrent use. A [Log] whose sink is a BatchSink writes the
// events of different calls at the same time (a FileSink or the store's
// table then writes what was queued meanwhile together, see [Group]),
// and writes a call's call.requested together with the event that
// follows it.
type BatchSink interface {
	Sink
	// WriteBatch stores evs in order, after everything it stored
	// before. It returns only once all of them are stored, or with an
	// error when they may not be: a sink never keeps an event back
	// past its return. It keeps no reference to evs or to the events
	// once it has returned (a Log reuses them).
	WriteBatch(evs []*Event) error
}

// Group has the batches of concurrent writers written together: a
// caller whose batch finds no write in progress writes it, and the
// batches queued while a write is in progress are written by the next
// one, all in one call of the write function, in the order they came.
// Every caller returns once the write that carried its batch returned,
// with that write's error. Nothing waits for company: a batch that finds
// the way free is written at once, so one caller alone pays no delay,
// and many callers share each write.
//
// The zero Group is ready to use; it must not be copied after first use.
type Group[T any] struct {
	mu    sync.Mutex
	queue []*groupEntry[T]
	busy  bool // a writer is writing
	items []T  // reused by the writer, under busy
}

type groupEntry[T any] struct {
	items []T
	done  chan error
}

// entries keeps groupEntry values (any T) with their channels for reuse:
// a caller's entry is put back once its answer is received, when nothing
// refers to it any more.
var entries sync.Pool

// errLead tells a waiting caller that it writes the next group.
var errLead = errors.New("audit: lead the next write")

// Write has items written by write, together with the items of the
// callers queued beside it, and returns the error of the write that
// carried them. write is called by one caller at a time; the slice it is
// given is valid only during the call.
func (g *Group[T]) Write(items []T, write func([]T) error) error {
	e, _ := entries.Get().(*groupEntry[T])
	if e == nil {
		e = &groupEntry[T]{done: make(chan error, 1)}
	}
	e.items = items
	defer func() { e.items = nil; entries.Put(e) }()
	g.mu.Lock()
	g.queue = append(g.queue, e)
	if g.busy {
		g.mu.Unlock()
		if err := <-e.done; err != errLead {
			return err
		}
		g.mu.Lock()
	} else {
		g.busy = true
	}
	// This caller writes: everything queued, its own batch included.
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	all := g.items[:0]
	for _, x := range batch {
		all = append(all, x.items...)
	}
	err := write(all)
	clear(all) // drop references to the items
	g.items = all[:0]
	var mine error
	for _, x := range batch {
		if x == e {
			mine = err
		} else {
			x.done <- err
		}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- errLead // busy stays set: that caller writes next
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return mine
}
