package main

import (
	"bufio"
	"context"
	"io"
	"sync"
)

// interrupter delivers Ctrl-C (SIGINT) to whoever handles it now: chat
// cancels its turn; otherwise it cancels the command's context. A nil
// *interrupter handles nothing.
type interrupter struct {
	mu      sync.Mutex
	cancel  context.CancelFunc // the command's context
	handler func()             // set by handle; nil means cancel
}

// fire is Ctrl-C.
func (i *interrupter) fire() {
	i.mu.Lock()
	h := i.handler
	if h == nil {
		h = i.cancel
	}
	i.mu.Unlock()
	if h != nil {
		h()
	}
}

// handle makes f the handler of Ctrl-C until restore is called.
func (i *interrupter) handle(f func()) (restore func()) {
	if i == nil {
		return func() {}
	}
	i.mu.Lock()
	prev := i.handler
	i.handler = f
	i.mu.Unlock()
	return func() {
		i.mu.Lock()
		i.handler = prev
		i.mu.Unlock()
	}
}

// lineReader reads lines of one input for everyone who asks for one:
// chat's prompt, the confirmations, a server's questions, one at a time.
// A read whose caller gave up (Ctrl-C) is not lost: the line it gets
// goes to the next caller, so no two reads of the input ever race.
type lineReader struct {
	r *bufio.Reader

	mu      sync.Mutex
	pending chan lineRead // a read in progress, nil when none
}

type lineRead struct {
	line string
	err  error
}

func newLineReader(in io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReader(in)}
}

// read returns the next line with its newline, as bufio.Reader.ReadString
// does, or ctx's error when ctx ends first.
func (l *lineReader) read(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	l.mu.Lock()
	ch := l.pending
	if ch == nil {
		ch = make(chan lineRead, 1)
		l.pending = ch
		go func() {
			line, err := l.r.ReadString('\n')
			ch <- lineRead{line, err}
		}()
	}
	l.mu.Unlock()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case r := <-ch:
		l.mu.Lock()
		l.pending = nil
		l.mu.Unlock()
		return r.line, r.err
	}
}
