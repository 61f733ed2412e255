package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// FileSink appends events to a file as JSON Lines, one event per line,
// hash-chained: each line carries the SHA-256 of the line before it, and
// optionally an Ed25519 signature (the format is described in chain.go and
// checked by [Verify]). Each line is written with a single write to a file
// opened in append mode, so lines from several processes do not interleave.
//
// Several sinks, in one process or several, may append to the same file:
// each write takes an exclusive advisory lock on the file (flock(2) on
// Unix systems; on others there is none, see lock_none.go), checks the
// file's size, and when another writer has appended since this sink last
// wrote, reads the new last line to chain from it. A sink that is the only
// writer reads nothing back.
type FileSink struct {
	mu   sync.Mutex
	f    *os.File
	path string
	key  ed25519.PrivateKey
	buf  bytes.Buffer
	enc  *json.Encoder // writes into buf
	// w and durMS, backoffMS hold the event being encoded: fields of the
	// (heap-allocated) sink, reused under mu as buf is, so that encoding
	// an event does not allocate its wire form and durations anew.
	w                wireEvent
	durMS, backoffMS float64
	// prev is the hash of the file's last line when it was size bytes
	// long; size -1 means unknown, so the next write reads the tail.
	prev [sha256.Size]byte
	size int64

	// group collects the batches of concurrent WriteBatch calls; lines,
	// out and ends are the buffers their lines are built in, under mu.
	group            Group[*Event]
	lines, out, line []byte
	ends             []int
}

// FileSinkOptions configures a [FileSink]. The zero value is usable.
type FileSinkOptions struct {
	// SigningKey, if set, signs every line (see [ReadPrivateKey]).
	SigningKey ed25519.PrivateKey
}

// OpenFile opens the JSON Lines file at path for appending, as
// [OpenFileWith] does with no options.
func OpenFile(path string) (*FileSink, error) {
	return OpenFileWith(path, nil)
}

// OpenFileWith opens (creating if needed, with mode 0600) the JSON Lines
// file at path for appending. Its directory is created with mode 0700 if
// missing. The chain resumes from the file's last line; if that line is
// torn or is not an event, OpenFileWith fails with a [*LineError] naming it
// rather than extend a chain from bytes it cannot vouch for. A file written
// before chaining resumes from its last event as well.
func OpenFileWith(path string, opts *FileSinkOptions) (*FileSink, error) {
	s := &FileSink{path: path, size: -1}
	if opts != nil && opts.SigningKey != nil {
		if len(opts.SigningKey) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("audit file %s: signing key has %d bytes, want an Ed25519 private key of %d", path, len(opts.SigningKey), ed25519.PrivateKeySize)
		}
		s.key = opts.SigningKey
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit file %s: %w", path, err)
	}
	s.f = f
	s.enc = json.NewEncoder(&s.buf)
	if err := s.locked(s.catchUp); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// Write appends ev as one line, encoded (see encode) into a buffer the
// sink reuses.
func (s *FileSink) Write(ev *Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return fmt.Errorf("audit file %s: closed", s.path)
	}
	if err := s.encode(ev); err != nil {
		return err
	}
	return s.locked(func() error {
		if err := s.catchUp(); err != nil {
			return err
		}
		// Room for the chain members, so appending stays in the
		// buffer the sink reuses.
		s.buf.Grow(prevSuffixLen + sigSuffixLen)
		line := s.buf.Bytes()
		line = appendChain(line[:len(line)-1], &s.prev, s.key) // without the encoder's newline
		line = append(line, '\n')
		if err := s.append(line); err != nil {
			return err
		}
		s.prev = sha256.Sum256(line[:len(line)-1])
		return nil
	})
}

// WriteBatch appends evs, one line each, with one write to the file, and
// the batches of the callers that wrote meanwhile with it (see [Group]):
// under concurrent calls, many calls' events take one lock of the file
// and one write. It is safe for concurrent use.
func (s *FileSink) WriteBatch(evs []*Event) error {
	return s.group.Write(evs, s.writeLines)
}

// writeLines writes evs with one write, for WriteBatch's group.
func (s *FileSink) writeLines(evs []*Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return fmt.Errorf("audit file %s: closed", s.path)
	}
	// Encoded before the lock of the file, which other processes may
	// be waiting for; chained under it.
	lines, ends := s.lines[:0], s.ends[:0]
	for _, ev := range evs {
		if err := s.encode(ev); err != nil {
			return err
		}
		lines = append(lines, s.buf.Bytes()...)
		ends = append(ends, len(lines))
	}
	defer func() { s.lines, s.ends = lines[:0], ends[:0] }()
	return s.locked(func() error {
		if err := s.catchUp(); err != nil {
			return err
		}
		out := s.out[:0]
		defer func() { s.out = out[:0] }()
		start := 0
		for _, end := range ends {
			// Chained (and signed) on its own: a signature covers its
			// line only.
			line := appendChain(append(s.line[:0], lines[start:end-1]...), &s.prev, s.key) // without the encoder's newline
			s.line = line
			s.prev = sha256.Sum256(line)
			out = append(append(out, line...), '\n')
			start = end
		}
		return s.append(out)
	})
}

// encode encodes ev into s.buf, under s.mu: with appendLine, or from the
// reused wire struct when appendLine leaves the event to encoding/json.
func (s *FileSink) encode(ev *Event) error {
	s.buf.Reset()
	if line, ok := appendLine(s.buf.AvailableBuffer(), ev); ok {
		s.buf.Write(line)
		return nil
	}
	s.w = wireEvent{plainEvent: plainEvent(*ev)}
	if ev.Duration > 0 {
		s.durMS = durationMillis(ev.Duration)
		s.w.DurationMS = &s.durMS
	}
	if ev.Backoff > 0 {
		s.backoffMS = durationMillis(ev.Backoff)
		s.w.BackoffMS = &s.backoffMS
	}
	err := s.enc.Encode(&s.w)
	s.w = wireEvent{} // drop references to the event's data
	return err
}

// append writes the chained lines in b (each with its newline) with one
// write, under the file's lock, and moves the sink's view of the file's
// end past them (the caller keeps s.prev).
func (s *FileSink) append(b []byte) error {
	if _, err := s.f.Write(b); err != nil {
		s.size = -1 // part of the lines may be in the file
		return fmt.Errorf("audit file %s: %w", s.path, err)
	}
	s.size += int64(len(b))
	return nil
}

// locked runs fn holding the file's advisory lock.
func (s *FileSink) locked(fn func() error) error {
	if err := lockFile(s.f); err != nil {
		return fmt.Errorf("audit file %s: lock: %w", s.path, err)
	}
	err := fn()
	// Unlocking fails only for a bad descriptor, and closing the file
	// releases the lock anyway.
	_ = unlockFile(s.f)
	return err
}

// catchUp makes s.prev the hash of the file's last line, reading it only
// when the file's size is not the one this sink left it at.
func (s *FileSink) catchUp() error {
	// Seeking to the end tells the size without the allocation of Stat;
	// with O_APPEND the offset does not matter to writes.
	size, err := s.f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("audit file %s: %w", s.path, err)
	}
	if size == s.size {
		return nil
	}
	h, err := tailHash(s.f, size)
	if err != nil {
		return fmt.Errorf("audit file %s: %w; refusing to extend its hash chain (toolwire audit verify names what is wrong)", s.path, err)
	}
	s.prev, s.size = h, size
	return nil
}

// Close flushes the file to disk and closes it. Later writes fail.
func (s *FileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f = nil
	return err
}

// WriterSink writes events as JSON Lines to any writer, e.g. os.Stderr,
// without a hash chain: it cannot read back what came before.
type WriterSink struct {
	W io.Writer
}

// Write writes ev as one line.
func (s WriterSink) Write(ev *Event) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = s.W.Write(append(line, '\n'))
	return err
}

// Memory keeps events in memory, for tests and for programs that inspect
// their own audit trail. It is safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	events []Event
}

// Write stores a copy of ev.
func (m *Memory) Write(ev *Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, *ev)
	return nil
}

// Events returns a copy of the events stored so far, in order.
func (m *Memory) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events...)
}
