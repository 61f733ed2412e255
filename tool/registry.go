package tool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Errors returned by [Registry.Register] and [Registry.RegisterAll], wrapped
// with the tool's name.
var (
	// ErrDuplicateName means a tool of that name is already registered, or
	// appears twice in one RegisterAll.
	ErrDuplicateName = errors.New("name already registered")
	// ErrNeedsConfirmer means a write or destructive tool was registered on
	// a registry that has no Confirmer: its calls could never be confirmed.
	ErrNeedsConfirmer = errors.New("write and destructive tools need a confirmer")
	// ErrInvalidTier means the tool's tier is not read, write or destructive.
	ErrInvalidTier = errors.New("invalid tier")
)

// RegistryOptions configures a [Registry].
type RegistryOptions struct {
	// Confirmer approves write and destructive calls. Without one, such
	// tools cannot be registered at all.
	Confirmer Confirmer
}

// Registry holds tools by name. It is safe for concurrent use.
type Registry struct {
	confirmer Confirmer

	mu     sync.RWMutex
	tools  map[string]*Tool
	owners map[string]*Source // the source holding each name; absent for tools registered directly

	watchMu  sync.Mutex
	watchers map[int]func()
	nextID   int
}

// NewRegistry returns an empty registry. A nil opts means no confirmer.
func NewRegistry(opts *RegistryOptions) *Registry {
	r := &Registry{tools: make(map[string]*Tool), owners: make(map[string]*Source)}
	if opts != nil {
		r.confirmer = opts.Confirmer
	}
	return r
}

// CanConfirm reports whether the registry has a confirmer, that is, whether
// write and destructive tools may be registered.
func (r *Registry) CanConfirm() bool { return r.confirmer != nil }

// Register adds one tool. See [Registry.RegisterAll].
func (r *Registry) Register(t *Tool) error {
	return r.RegisterAll([]*Tool{t})
}

// RegisterAll adds tools atomically: either every tool is registered, or
// none is and the error says why. A tool is refused when its name is invalid
// or taken ([ErrDuplicateName]), its tier is invalid ([ErrInvalidTier]) or
// needs a confirmer the registry lacks ([ErrNeedsConfirmer]), it has no
// handler, or its input schema does not compile.
func (r *Registry) RegisterAll(tools []*Tool) error {
	return r.Replace(nil, tools)
}

// Replace removes the tools named in remove and adds add, atomically: other
// goroutines see either the old set or the new one. The new tools are
// checked as RegisterAll checks them, except that a name being removed may
// be reused. Names in remove that are not registered are ignored. Sources use
// it to apply a changed tool listing in one step.
func (r *Registry) Replace(remove []string, add []*Tool) error {
	if err := r.check(add); err != nil {
		return err
	}
	leaving := make(map[string]bool, len(remove))
	for _, n := range remove {
		leaving[n] = true
	}
	if err := r.swap(remove, add, leaving); err != nil {
		return err
	}
	r.notify()
	return nil
}

// check applies RegisterAll's checks to a batch, without the lock.
func (r *Registry) check(add []*Tool) error {
	var errs []error
	batch := make(map[string]bool, len(add))
	for i, t := range add {
		if t == nil {
			errs = append(errs, fmt.Errorf("tool %d of %d is nil", i+1, len(add)))
			continue
		}
		if err := t.check(); err != nil {
			errs = append(errs, err)
			continue
		}
		if t.Tier.NeedsConfirmation() && r.confirmer == nil {
			errs = append(errs, fmt.Errorf("tool %q (%s): %w", t.Name, t.Tier, ErrNeedsConfirmer))
		}
		if batch[t.Name] {
			errs = append(errs, fmt.Errorf("tool %q: %w", t.Name, ErrDuplicateName))
		}
		batch[t.Name] = true
	}
	return errors.Join(errs...)
}

// swap applies a checked Replace under the lock.
func (r *Registry) swap(remove []string, add []*Tool, leaving map[string]bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, t := range add {
		if _, taken := r.tools[t.Name]; taken && !leaving[t.Name] {
			errs = append(errs, fmt.Errorf("tool %q: %w", t.Name, ErrDuplicateName))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range remove {
		r.deleteLocked(n)
	}
	for _, t := range add {
		r.tools[t.Name] = t
	}
	return nil
}

// deleteLocked removes the named tool, and its name from the source that
// held it, and reports whether it was registered.
func (r *Registry) deleteLocked(name string) bool {
	if _, ok := r.tools[name]; !ok {
		return false
	}
	delete(r.tools, name)
	if src := r.owners[name]; src != nil {
		delete(src.names, name)
		delete(r.owners, name)
	}
	return true
}

// Watch makes fn run after every change to the registry (tools registered,
// replaced or deregistered), on the goroutine that made the change, after
// the change is visible and with none of the registry's locks held, so fn
// may call back into the registry (and into the source that made the
// change, see [Source]). A sink such as the gateway uses it to tell its
// clients that the tool list changed. fn must not block for long. The
// returned function stops the watching; it too may be called from fn.
func (r *Registry) Watch(fn func()) (stop func()) {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.watchers == nil {
		r.watchers = make(map[int]func())
	}
	id := r.nextID
	r.nextID++
	r.watchers[id] = fn
	return func() {
		r.watchMu.Lock()
		defer r.watchMu.Unlock()
		delete(r.watchers, id)
	}
}

func (r *Registry) notify() {
	r.watchMu.Lock()
	fns := make([]func(), 0, len(r.watchers))
	for _, fn := range r.watchers {
		fns = append(fns, fn)
	}
	r.watchMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Deregister removes the named tools, ignoring names that are not
// registered, and returns how many it removed.
func (r *Registry) Deregister(names ...string) int {
	r.mu.Lock()
	n := 0
	for _, name := range names {
		if r.deleteLocked(name) {
			n++
		}
	}
	r.mu.Unlock()
	if n > 0 {
		r.notify()
	}
	return n
}

// Lookup returns the tool registered under name.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool {
	_, ok := r.Lookup(name)
	return ok
}

// List returns the registered tools sorted by name.
func (r *Registry) List() []*Tool {
	r.mu.RLock()
	out := make([]*Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Len returns how many tools are registered.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.tools)
}
