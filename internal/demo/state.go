package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/toolwire/toolwire/internal/sharedfile"
)

// Causes with which the server cancels tool calls itself.
var (
	errSessionDeleted = errors.New("session deleted by client")
	errServerStopped  = errors.New("demo server stopped")
)

// maxNotes bounds the note store so that a misbehaving client cannot grow a
// long-running demo server without limit.
const maxNotes = 1000

// state holds everything one demo server remembers between tool calls. Each
// server built by NewServer owns its own state, so independent servers in one
// process never observe each other's notes or counters.
type state struct {
	mu        sync.Mutex
	notes     map[string]string
	calls     int
	cancelled int
	// cancelledChanged is closed and replaced whenever cancelled grows, so
	// waiters can block on a channel instead of polling the counter.
	cancelledChanged chan struct{}
	// running holds, per session ID, the cancel functions of tool calls in
	// progress; see track.
	running    map[string]map[uint64]context.CancelCauseFunc
	nextCallID uint64
	// stopped is set by stopAll, after which new calls start cancelled.
	stopped bool
	// notesFile, when set, is where notes are kept between runs.
	notesFile string
}

// newState returns an empty state ready for use.
func newState() *state {
	return &state{
		notes:            make(map[string]string),
		cancelledChanged: make(chan struct{}),
		running:          make(map[string]map[uint64]context.CancelCauseFunc),
	}
}

// track returns a context derived from ctx that is also cancelled by
// endSession(sessionID), and a release function the caller must call when
// the tool call ends.
//
// The SDK closes a Streamable HTTP session on DELETE by waiting for its
// in-flight calls, without cancelling them. A client that cancels a call and
// closes its session at once usually loses the race to deliver
// notifications/cancelled, so a call parked on ctx would block the close,
// and with it the HTTP server's shutdown, forever.
func (s *state) track(ctx context.Context, sessionID string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		cancel(errServerStopped)
		return ctx, func() {}
	}
	s.nextCallID++
	id := s.nextCallID
	calls := s.running[sessionID]
	if calls == nil {
		calls = make(map[uint64]context.CancelCauseFunc)
		s.running[sessionID] = calls
	}
	calls[id] = cancel
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		// After endSession the map may be gone, or be a new one for a later
		// call; either way id is only ever in the map this call joined.
		if current := s.running[sessionID]; current != nil {
			delete(current, id)
			if len(current) == 0 {
				delete(s.running, sessionID)
			}
		}
		s.mu.Unlock()
		cancel(nil)
	}
}

// endSession cancels every tracked tool call of the session sessionID.
func (s *state) endSession(sessionID string) {
	s.mu.Lock()
	calls := s.running[sessionID]
	delete(s.running, sessionID)
	s.mu.Unlock()
	// The removed map is no longer reachable by release, so ranging over it
	// without the lock is safe.
	for _, cancel := range calls {
		cancel(errSessionDeleted)
	}
}

// stopAll cancels every tracked tool call, and every call started later.
// Like a deleted HTTP session, a server shutting down waits for in-flight
// calls without cancelling them, so parked calls must be ended explicitly.
func (s *state) stopAll() {
	s.mu.Lock()
	running := s.running
	s.running = make(map[string]map[uint64]context.CancelCauseFunc)
	s.stopped = true
	s.mu.Unlock()
	for _, calls := range running {
		for _, cancel := range calls {
			cancel(errServerStopped)
		}
	}
}

// countCall records one tools/call request reaching a tool handler.
func (s *state) countCall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
}

// countCancelled records that a tool handler observed its context ending
// before it finished, and wakes every waitCancelled caller.
func (s *state) countCancelled() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelled++
	close(s.cancelledChanged)
	s.cancelledChanged = make(chan struct{})
}

// counters returns the number of tool calls served and cancellations
// observed so far.
func (s *state) counters() (calls, cancelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.cancelled
}

// waitCancelled blocks until at least n cancellations have been observed or
// ctx ends, whichever comes first, and returns ctx.Err() in the latter case.
func (s *state) waitCancelled(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		reached, changed := s.cancelled >= n, s.cancelledChanged
		s.mu.Unlock()
		if reached {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// errNotesFull is returned by putNote when a new title would exceed maxNotes.
var errNotesFull = fmt.Errorf("the limit of %d notes is reached", maxNotes)

// putNote stores body under title, replacing any note with that title. It
// fails if title is new and the store is already full, or if the notes file
// cannot be written (the change is then undone).
func (s *state) putNote(title, body string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.notes[title]
	if !exists && len(s.notes) >= maxNotes {
		return errNotesFull
	}
	s.notes[title] = body
	if err := s.saveNotes(); err != nil {
		if exists {
			s.notes[title] = old
		} else {
			delete(s.notes, title)
		}
		return err
	}
	return nil
}

// deleteNote removes the note titled title and reports whether it existed.
// A failure to write the notes file undoes the deletion.
func (s *state) deleteNote(title string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.notes[title]
	if !exists {
		return false, nil
	}
	delete(s.notes, title)
	if err := s.saveNotes(); err != nil {
		s.notes[title] = old
		return true, err
	}
	return true, nil
}

// loadNotes reads the notes file, if one is set and exists.
func (s *state) loadNotes() error {
	if s.notesFile == "" {
		return nil
	}
	raw, err := os.ReadFile(s.notesFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	notes := map[string]string{}
	if err := json.Unmarshal(raw, &notes); err != nil {
		return fmt.Errorf("notes file %s: %w", s.notesFile, err)
	}
	if len(notes) > maxNotes {
		return fmt.Errorf("notes file %s: more than %d notes", s.notesFile, maxNotes)
	}
	s.mu.Lock()
	s.notes = notes
	s.mu.Unlock()
	return nil
}

// saveNotes writes all notes to the notes file, if one is set, atomically
// (a reader never sees half a file). The caller holds s.mu.
func (s *state) saveNotes() error {
	if s.notesFile == "" {
		return nil
	}
	raw, err := json.MarshalIndent(s.notes, "", "  ")
	if err != nil {
		return err
	}
	if err := sharedfile.WriteAtomic(s.notesFile, raw); err != nil {
		return fmt.Errorf("save notes: %w", err)
	}
	return nil
}

// noteTitles returns the titles of all stored notes in sorted order, so
// listings are stable across calls.
func (s *state) noteTitles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	titles := make([]string, 0, len(s.notes))
	for title := range s.notes {
		titles = append(titles, title)
	}
	slices.Sort(titles)
	return titles
}
