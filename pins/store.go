package pins

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/toolwire/toolwire/internal/sharedfile"
)

var (
	// ErrCorrupt means the pins file exists but cannot be trusted as it is.
	// The store never resets such a file: an operator fixes or removes it.
	ErrCorrupt = errors.New("corrupt pins file")
	// ErrUnknownTool is returned by [Store.Approve] for a tool name that is
	// not among the definitions it was given.
	ErrUnknownTool = errors.New("no such tool")
	// ErrNotPinned is returned by [Store.Forget] for a server or tool that
	// has no pin.
	ErrNotPinned = errors.New("not pinned")
	// ErrDuplicateTool is returned by [Store.Check] and [Store.Approve]
	// when the definitions name one tool twice: which of them a call would
	// reach is up to the server, so neither can be pinned.
	ErrDuplicateTool = errors.New("tool listed twice")
)

// fileVersion is the format of the pins file this package reads and writes.
// A file of another version is refused rather than rewritten.
const fileVersion = 1

// snippetRunes bounds the description kept beside a pin for display.
const snippetRunes = 80

// Pin is the approved state of one tool of one server.
type Pin struct {
	// Fingerprint is the approved definition's [Fingerprint].
	Fingerprint string `json:"fingerprint"`
	// Fields are the hashes of the approved definition's parts.
	Fields Fields `json:"fields"`
	// ApprovedAt is when the pin was written, in UTC.
	ApprovedAt time.Time `json:"approvedAt"`
	// FirstUse is set when the pin was written by trust on first use
	// rather than by an operator's approval.
	FirstUse bool `json:"firstUse,omitempty"`
	// Snippet is the start of the approved description, for listings. It
	// is the server's text: render it as untrusted.
	Snippet string `json:"snippet,omitempty"`
}

// Entry is one pin as [Store.List] returns it.
type Entry struct {
	Server string
	Tool   string
	Pin
}

// Store keeps pins in one JSON file shared by every toolwire process of a
// user. Each operation reads the file afresh; each change takes an advisory
// lock on a sidecar file (path + ".lock"), re-reads, changes and replaces
// the file atomically, so concurrent processes never lose one another's
// updates. Readers need no lock: a reader sees the old file or the new one,
// never a mix.
//
// A Store is safe for concurrent use. It holds no state besides the path.
type Store struct {
	path string
	now  func() time.Time
}

// DefaultPath returns where pins are kept unless configured otherwise:
// pins.json in the toolwire directory under [os.UserConfigDir].
func DefaultPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("pins: default path: %w", err)
	}
	return filepath.Join(dir, "toolwire", "pins.json"), nil
}

// NewStore returns a store for the pins file at path, or at [DefaultPath]
// when path is empty. It does no I/O: a missing file is an empty store, and
// the file and its directory (mode 0700) are created by the first change.
func NewStore(path string) (*Store, error) {
	if path == "" {
		p, err := DefaultPath()
		if err != nil {
			return nil, err
		}
		path = p
	}
	// Absolute, so that a later chdir does not move the store.
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pins: path %q: %w", path, err)
	}
	return &Store{path: abs, now: time.Now}, nil
}

// Path returns the absolute path of the pins file.
func (s *Store) Path() string { return s.path }

// List returns every pin, ordered by server and then tool. It returns an
// error wrapping [ErrCorrupt] if the file cannot be trusted.
func (s *Store) List() ([]Entry, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for server, tools := range f.Servers {
		for tool, pin := range tools {
			out = append(out, Entry{Server: server, Tool: tool, Pin: pin})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Tool, b.Tool))
	})
	return out, nil
}

// Approve pins the definitions of server's tools as the operator approved
// them, replacing any earlier pins of those tools. defs are the server's
// current definitions, as fetched just before; tool names the one tool to
// approve, or is empty to approve every tool in defs. Pins of tools not in
// defs are kept.
//
// Approving a tool that is not in defs is an error wrapping
// [ErrUnknownTool]. Nothing is written unless every definition to approve
// can be fingerprinted.
func (s *Store) Approve(ctx context.Context, server string, defs []Definition, tool string) error {
	if server == "" {
		return errors.New("pins: approve: empty server name")
	}
	if err := unique(server, defs); err != nil {
		return fmt.Errorf("pins: approve: %w", err)
	}
	pick := defs
	if tool != "" {
		i := slices.IndexFunc(defs, func(d Definition) bool { return d.Name == tool })
		if i < 0 {
			return fmt.Errorf("pins: approve: server %q: %w %q", server, ErrUnknownTool, tool)
		}
		pick = defs[i : i+1]
	}
	now := s.now().UTC()
	approved := make(map[string]Pin, len(pick))
	for _, d := range pick {
		p, err := newPin(d, now)
		if err != nil {
			return fmt.Errorf("pins: approve: server %q: %w", server, err)
		}
		approved[d.Name] = p
	}
	if len(approved) == 0 {
		return nil
	}
	err := s.update(ctx, func(f *file) (bool, error) {
		tools := f.Servers[server]
		if tools == nil {
			tools = make(map[string]Pin, len(approved))
			f.Servers[server] = tools
		}
		for name, p := range approved {
			tools[name] = p
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pins: approve: %w", err)
	}
	return nil
}

// Forget removes the pin of server's tool, or every pin of server when tool
// is empty. A forgotten tool of a server that keeps other pins is new again
// (in enforce mode: quarantined until approved); a server with no pins left
// is trusted on its next use. Forgetting what has no pin is an error
// wrapping [ErrNotPinned].
func (s *Store) Forget(ctx context.Context, server, tool string) error {
	err := s.update(ctx, func(f *file) (bool, error) {
		tools, ok := f.Servers[server]
		if !ok {
			return false, fmt.Errorf("server %q: %w", server, ErrNotPinned)
		}
		if tool == "" {
			delete(f.Servers, server)
			return true, nil
		}
		if _, ok := tools[tool]; !ok {
			return false, fmt.Errorf("tool %q of server %q: %w", tool, server, ErrNotPinned)
		}
		delete(tools, tool)
		if len(tools) == 0 {
			delete(f.Servers, server)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pins: forget: %w", err)
	}
	return nil
}

// newPin fingerprints d for a pin approved at t.
func newPin(d Definition, t time.Time) (Pin, error) {
	fp, fields, err := digest(d)
	if err != nil {
		return Pin{}, err
	}
	return Pin{Fingerprint: fp, Fields: fields, ApprovedAt: t, Snippet: snippet(d.Description)}, nil
}

func snippet(s string) string {
	if utf8.RuneCountInString(s) <= snippetRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == snippetRunes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// unique checks that no tool is named twice in defs.
func unique(server string, defs []Definition) error {
	seen := make(map[string]bool, len(defs))
	for _, d := range defs {
		if seen[d.Name] {
			return fmt.Errorf("server %q: %w: %q", server, ErrDuplicateTool, d.Name)
		}
		seen[d.Name] = true
	}
	return nil
}

// file is the pins file's content.
type file struct {
	Version int                       `json:"version"`
	Servers map[string]map[string]Pin `json:"servers"`
}

// update runs change on the file's current content under the lock and
// writes the result back if change reports a change.
func (s *Store) update(ctx context.Context, change func(*file) (bool, error)) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	unlock, err := sharedfile.Lock(ctx, s.path+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	changed, err := change(f)
	if err != nil || !changed {
		return err
	}
	return s.write(f)
}

// read returns the file's content; a missing file is an empty one.
func (s *Store) read() (*file, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &file{Version: fileVersion, Servers: map[string]map[string]Pin{}}, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v (fix or remove it; toolwire does not reset it)", ErrCorrupt, s.path, err)
	}
	return f, nil
}

// decode parses and checks a pins file strictly: anything it does not
// understand is an error, so that a hand edit or a newer format is never
// half-read and then overwritten.
func decode(data []byte) (*file, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("file is empty")
	}
	// Duplicate keys would make the file mean different things to
	// different readers; CanonicalJSON refuses them.
	if _, err := CanonicalJSON(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the top-level object")
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, want %d", f.Version, fileVersion)
	}
	if f.Servers == nil {
		f.Servers = map[string]map[string]Pin{}
	}
	for server, tools := range f.Servers {
		if server == "" {
			return nil, errors.New("a server with an empty name")
		}
		if len(tools) == 0 {
			return nil, fmt.Errorf("server %q: no pins", server)
		}
		for tool, p := range tools {
			if tool == "" {
				return nil, fmt.Errorf("server %q: a tool with an empty name", server)
			}
			for _, h := range []string{p.Fingerprint, p.Fields.Name, p.Fields.Description, p.Fields.InputSchema, p.Fields.Annotations} {
				if !validHash(h) {
					return nil, fmt.Errorf("server %q, tool %q: malformed hash %q", server, tool, h)
				}
			}
		}
	}
	return &f, nil
}

// write replaces the file atomically: a temporary file in the same
// directory, created 0600, written, synced, renamed over the file, and the
// directory synced so that the rename survives a crash.
func (s *Store) write(f *file) (err error) {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	return sharedfile.WriteAtomic(s.path, data)
}
