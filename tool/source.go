package tool

import (
	"errors"
	"fmt"
	"slices"
)

// ErrSourceClosed is returned by [Source.Replace] once the source is closed.
var ErrSourceClosed = errors.New("tool source closed")

// Source is one provider's share of a [Registry], such as one MCP server's
// tools: the names it holds and nothing else. Several sources share a
// registry without a lock of their own: choosing whether a name is free and
// registering it is one step under the registry's lock, so two sources that
// want one name at once cannot both get it, and a source never takes a name
// another holds (see [Source.Replace]).
//
// A Source is safe for concurrent use. Its tools are those of the registry;
// watchers ([Registry.Watch]) see its changes like any other.
type Source struct {
	reg *Registry
	// Guarded by reg.mu.
	names  map[string]bool
	closed bool
}

// Conflict is a tool that [Source.Replace] left out because another
// source, or a tool registered directly, holds its name.
type Conflict struct {
	Tool   *Tool  // the tool left out
	Holder Origin // where the tool that holds the name came from
}

func (c Conflict) String() string {
	return fmt.Sprintf("tool %q of %q: its name %q is held by tool %q of %q", c.Tool.Origin.Name, c.Tool.Origin.Source, c.Tool.Name, c.Holder.Name, c.Holder.Source)
}

// NewSource returns a source that holds no names yet.
func (r *Registry) NewSource() *Source {
	return &Source{reg: r, names: map[string]bool{}}
}

// Replace makes tools the source's registered tools, in one step: the
// source's previous tools are deregistered and tools registered under
// their names. A name held by anything other than this source is never
// taken over: that tool is left out and returned as a [Conflict], and the
// others are registered. The source's own names are free to reuse, so a
// tool keeps its name from one Replace to the next.
//
// tools are checked as [Registry.RegisterAll] checks them; any failure
// (including two tools of one name) changes nothing and returns the error.
// After [Source.Close] it returns [ErrSourceClosed] and changes nothing.
func (s *Source) Replace(tools []*Tool) ([]Conflict, error) {
	r := s.reg
	if err := r.check(tools); err != nil {
		return nil, err
	}
	conflicts, changed, err := s.swap(tools)
	if changed {
		r.notify() // after the lock: a watcher may call back
	}
	return conflicts, err
}

func (s *Source) swap(tools []*Tool) (conflicts []Conflict, changed bool, err error) {
	r := s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.closed {
		return nil, false, ErrSourceClosed
	}
	for name := range s.names {
		r.deleteLocked(name)
		changed = true
	}
	for _, t := range tools {
		if holder, taken := r.tools[t.Name]; taken {
			conflicts = append(conflicts, Conflict{Tool: t, Holder: holder.Origin})
			continue
		}
		r.tools[t.Name] = t
		r.owners[t.Name] = s
		s.names[t.Name] = true
		changed = true
	}
	return conflicts, changed, nil
}

// Names returns the names the source holds, sorted.
func (s *Source) Names() []string {
	s.reg.mu.RLock()
	defer s.reg.mu.RUnlock()
	names := make([]string, 0, len(s.names))
	for n := range s.names {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Close deregisters the source's tools and makes every later Replace fail
// with [ErrSourceClosed], so that a registration racing with Close cannot
// leave tools behind. It returns how many tools it removed and is safe to
// call more than once.
func (s *Source) Close() int {
	r := s.reg
	r.mu.Lock()
	n := 0
	for name := range s.names {
		if r.deleteLocked(name) {
			n++
		}
	}
	s.closed = true
	r.mu.Unlock()
	if n > 0 {
		r.notify()
	}
	return n
}
