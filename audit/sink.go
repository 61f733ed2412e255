package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// FileSink appends events to a file as JSON Lines, one event per line. Each
// line is written with a single write to a file opened in append mode, so
// lines from several processes do not interleave.
type FileSink struct {
	mu   sync.Mutex
	f    *os.File
	path string
	buf  bytes.Buffer
	enc  *json.Encoder // writes into buf
}

// OpenFile opens (creating if needed, with mode 0600) the JSON Lines file at
// path for appending. Its directory is created with mode 0700 if missing.
func OpenFile(path string) (*FileSink, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit file %s: %w", path, err)
	}
	s := &FileSink{f: f, path: path}
	s.enc = json.NewEncoder(&s.buf)
	return s, nil
}

// Write appends ev as one line. The line is encoded into a buffer the sink
// reuses, straight from the wire struct (going through MarshalJSON would
// have encoding/json compact the bytes a second time).
func (s *FileSink) Write(ev *Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return fmt.Errorf("audit file %s: closed", s.path)
	}
	s.buf.Reset()
	if err := s.enc.Encode(ev.wire()); err != nil {
		return err
	}
	_, err := s.f.Write(s.buf.Bytes())
	return err
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

// WriterSink writes events as JSON Lines to any writer, e.g. os.Stderr.
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
