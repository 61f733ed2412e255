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

// fileVersion is the format of the pins file this package writes. It reads
// that and version 1 (pins by server name only, see [Scope]); a file of
// another version is refused rather than rewritten.
const fileVersion = 2

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
	// Registered is the name the tool was registered under when the pin
	// was written ([Definition.Registered]); empty for pins written before
	// names were kept.
	Registered string `json:"registered,omitempty"`
}

// Scope says whose pins a check reads and writes: the server's configured
// name and its identity, an opaque string (toolwire's is a hash of the
// command, arguments and working directory, or of the URL) that keeps
// apart two servers of one name, such as two projects' "files". Pins are
// never shared between scopes.
//
// An empty Identity means pins by name only, as pins files of version 1
// kept them. A scoped check that finds no pins of its own adopts the pins
// its name has by name only, if any: they move to the scope, so an
// existing pins file keeps working, and the next server of that name with
// another identity starts afresh (trusted on first use) instead of
// disturbing the first.
type Scope struct {
	Server   string
	Identity string
}

func (sc Scope) String() string {
	if sc.Identity == "" {
		return fmt.Sprintf("server %q", sc.Server)
	}
	return fmt.Sprintf("server %q (%s)", sc.Server, shortIdentity(sc.Identity))
}

// shortIdentity cuts an identity to a length fit for messages.
func shortIdentity(id string) string {
	if len(id) > len(hashPrefix)+12 {
		return id[:len(hashPrefix)+12]
	}
	return id
}

// Entry is one pin as [Store.List] returns it.
type Entry struct {
	Server   string
	Identity string // see [Scope]
	Tool     string
	Pin
}

// Store keeps pins in one JSON file shared by every toolwire process of a
// user. Each operation reads the file afresh; each change takes an advisory
// lock on a sidecar file (path + ".lock"), re-reads, changes and replaces
// the file atomically, so concurrent processes never lose one another's
// updates. Readers need no lock: a reader sees the old file or the new one,
// never a mix.
//
// A Store made by [NewStoreOn] keeps its pins in a [Backend] instead (a
// database shared by a fleet of gateways), with the same semantics.
//
// A Store is safe for concurrent use. It holds no state besides the path
// (or the backend) and its watchers.
type Store struct {
	path string
	b    Backend // nil for the pins file
	now  func() time.Time

	watchers watchers
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

// Path returns the absolute path of the pins file, or "" for a store on a
// [Backend].
func (s *Store) Path() string { return s.path }

// List returns every pin, ordered by server and then tool. It returns an
// error wrapping [ErrCorrupt] if the file cannot be trusted.
func (s *Store) List() ([]Entry, error) {
	return s.ListContext(context.Background())
}

// ListContext is List bounded by ctx, which a store on a [Backend] (a
// database) honours.
func (s *Store) ListContext(ctx context.Context) ([]Entry, error) {
	f, err := s.readAll(ctx)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for sc, set := range f.sets {
		for tool, pin := range set.Tools {
			out = append(out, Entry{Server: sc.Server, Identity: sc.Identity, Tool: tool, Pin: pin})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Identity, b.Identity), cmp.Compare(a.Tool, b.Tool))
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
func (s *Store) Approve(ctx context.Context, scope Scope, defs []Definition, tool string) error {
	server := scope.Server
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
	err := s.update(ctx, server, func(f *file) (bool, error) {
		set := f.scope(scope)
		for name, p := range approved {
			set.Tools[name] = p
			delete(set.Noticed, name)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pins: approve: %w", err)
	}
	return nil
}

// Forget removes the pins of scope's tool, or every pin of scope when tool
// is empty. A scope with an identity covers the pins its name has by name
// only too (it would adopt them); one without covers every scope of that
// name. A forgotten tool of a server that keeps other pins is new again (in
// enforce mode: quarantined until approved); a server with no pins left is
// trusted on its next use. Forgetting what has no pin is an error wrapping
// [ErrNotPinned].
func (s *Store) Forget(ctx context.Context, scope Scope, tool string) error {
	err := s.update(ctx, scope.Server, func(f *file) (bool, error) {
		found := false
		for sc, set := range f.sets {
			if sc.Server != scope.Server || (scope.Identity != "" && sc.Identity != "" && sc.Identity != scope.Identity) {
				continue
			}
			if tool == "" {
				delete(f.sets, sc)
				found = true
				continue
			}
			if _, ok := set.Tools[tool]; ok {
				delete(set.Tools, tool)
				delete(set.Noticed, tool)
				found = true
				if len(set.Tools) == 0 {
					delete(f.sets, sc)
				}
			}
		}
		if !found && tool == "" {
			return false, fmt.Errorf("server %q: %w", scope.Server, ErrNotPinned)
		}
		if !found {
			return false, fmt.Errorf("tool %q of server %q: %w", tool, scope.Server, ErrNotPinned)
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
	return Pin{Fingerprint: fp, Fields: fields, ApprovedAt: t, Snippet: snippet(d.Description), Registered: d.Registered}, nil
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

// file is the pins file's content, by scope.
type file struct {
	sets map[Scope]*set
}

// set is the pins of one scope.
type set struct {
	Tools map[string]Pin `json:"tools"`
	// Noticed maps a tool that a warn-mode check found new, and reported,
	// to the fingerprint it was reported with, so that later checks (later
	// commands) do not report the same definition again.
	Noticed map[string]string `json:"noticed,omitempty"`
}

// scope returns sc's pins, adopting its name's pins by name only when it
// has none (see [Scope]), or a new empty set.
func (f *file) scope(sc Scope) *set {
	st := f.sets[sc]
	if st == nil {
		legacy := Scope{Server: sc.Server}
		st = f.sets[legacy]
		if sc.Identity != "" && st != nil {
			delete(f.sets, legacy)
		} else {
			st = &set{Tools: map[string]Pin{}}
		}
	}
	if st.Noticed == nil {
		st.Noticed = map[string]string{}
	}
	f.sets[sc] = st
	return st
}

// fileV1 is the format of version 1: pins by server name only.
type fileV1 struct {
	Version int                       `json:"version"`
	Servers map[string]map[string]Pin `json:"servers"`
}

// fileV2 is the format written now: one entry per scope.
type fileV2 struct {
	Version int       `json:"version"`
	Servers []setJSON `json:"servers"`
}

type setJSON struct {
	Server   string `json:"server"`
	Identity string `json:"identity,omitempty"`
	set
}

// update runs change on the current pins under the lock and writes the
// result back if change reports a change. change sees and changes the pins
// of server's scopes only (with a backend, only those are loaded). A
// change is reported to the watchers once written.
func (s *Store) update(ctx context.Context, server string, change func(*file) (bool, error)) error {
	if s.b != nil {
		return s.b.Update(ctx, server, func(sets []Set) ([]Set, error) {
			f, err := fromSets(sets, server)
			if err != nil {
				return nil, err
			}
			changed, err := change(f)
			if err != nil || !changed {
				return sets, err
			}
			return f.toSets(), nil
		})
	}
	changed := false
	err := s.updateFile(ctx, func(f *file) (bool, error) {
		c, err := change(f)
		changed = c
		return c, err
	})
	if err == nil && changed {
		s.watchers.notify(Change{Server: server})
	}
	return err
}

// updateFile runs change on the file's current content under the file's
// lock and writes the result back if change reports a change.
func (s *Store) updateFile(ctx context.Context, change func(*file) (bool, error)) error {
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

// readAll returns every scope's pins, from the file or the backend.
func (s *Store) readAll(ctx context.Context) (*file, error) {
	if s.b == nil {
		return s.read()
	}
	sets, err := s.b.Sets(ctx)
	if err != nil {
		return nil, err
	}
	return fromSets(sets, "")
}

// read returns the file's content; a missing file is an empty one.
func (s *Store) read() (*file, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &file{sets: map[Scope]*set{}}, nil
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
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, err
	}
	f := &file{sets: map[Scope]*set{}}
	switch head.Version {
	case 1:
		var v1 fileV1
		if err := strict(data, &v1); err != nil {
			return nil, err
		}
		for server, tools := range v1.Servers {
			f.sets[Scope{Server: server}] = &set{Tools: tools}
		}
	case fileVersion:
		var v2 fileV2
		if err := strict(data, &v2); err != nil {
			return nil, err
		}
		for _, sj := range v2.Servers {
			sc := Scope{Server: sj.Server, Identity: sj.Identity}
			if sj.Identity != "" && !validHash(sj.Identity) {
				return nil, fmt.Errorf("server %q: malformed identity %q", sj.Server, sj.Identity)
			}
			if _, dup := f.sets[sc]; dup {
				return nil, fmt.Errorf("%s listed twice", sc)
			}
			st := sj.set
			f.sets[sc] = &st
		}
	default:
		return nil, fmt.Errorf("version %d, want 1 or %d", head.Version, fileVersion)
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	return f, nil
}

// check checks what decoding cannot: names present, every pin non-empty,
// every hash well formed.
func (f *file) check() error {
	for sc, st := range f.sets {
		server := sc.Server
		if server == "" {
			return errors.New("a server with an empty name")
		}
		if len(st.Tools) == 0 {
			return fmt.Errorf("%s: no pins", sc)
		}
		for tool, p := range st.Tools {
			if tool == "" {
				return fmt.Errorf("server %q: a tool with an empty name", server)
			}
			for _, h := range []string{p.Fingerprint, p.Fields.Name, p.Fields.Description, p.Fields.InputSchema, p.Fields.Annotations} {
				if !validHash(h) {
					return fmt.Errorf("server %q, tool %q: malformed hash %q", server, tool, h)
				}
			}
		}
		for tool, fp := range st.Noticed {
			if !validHash(fp) {
				return fmt.Errorf("server %q, noticed tool %q: malformed hash %q", server, tool, fp)
			}
		}
	}
	return nil
}

// strict decodes data into v, refusing unknown fields and trailing data.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the top-level object")
	}
	return nil
}

// write replaces the file atomically: a temporary file in the same
// directory, created 0600, written, synced, renamed over the file, and the
// directory synced so that the rename survives a crash.
func (s *Store) write(f *file) (err error) {
	out := fileV2{Version: fileVersion, Servers: make([]setJSON, 0, len(f.sets))}
	for sc, st := range f.sets {
		if len(st.Tools) == 0 {
			continue // a scope adopted or created, then left without pins
		}
		if len(st.Noticed) == 0 {
			st.Noticed = nil
		}
		out.Servers = append(out.Servers, setJSON{Server: sc.Server, Identity: sc.Identity, set: *st})
	}
	slices.SortFunc(out.Servers, func(a, b setJSON) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Identity, b.Identity))
	})
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	return sharedfile.WriteAtomic(s.path, data)
}
