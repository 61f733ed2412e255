package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// Manager owns many servers that share one registry: it starts them in
// parallel, supervises each (see [Server]) and closes them together.
type Manager struct {
	reg  *tool.Registry
	opts *Options // for the servers Apply adds

	// applying serializes Apply and Close, which start and stop servers;
	// mu guards the list alone, so Status never waits on a server's start.
	applying sync.Mutex
	mu       sync.Mutex
	servers  []*Server // in configuration order
	closed   bool

	stopCtx context.Context // ends when Close begins: aborts Apply's starts
	stop    context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// NewManager returns a manager for the configured servers, none started.
// Servers marked disabled are left out.
func NewManager(servers []config.Server, reg *tool.Registry, opts *Options) *Manager {
	m := &Manager{reg: reg, opts: opts}
	m.stopCtx, m.stop = context.WithCancel(context.Background())
	for _, cfg := range servers {
		if cfg.Disabled {
			continue
		}
		m.servers = append(m.servers, newServer(cfg, reg, opts))
	}
	return m
}

// Start starts every server in parallel and returns once each is Ready or
// Failed. A server that fails is visible in [Manager.Status] and the others
// keep running, unless it is marked required: then the others are stopped
// too, and Start returns an error naming every required server that failed.
// Start must be called once.
func (m *Manager) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		required []error
	)
	for _, s := range m.list() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.start(ctx)
			if err == nil || !s.set.cfg.Required {
				return
			}
			mu.Lock()
			required = append(required, err)
			mu.Unlock()
			cancel() // a required server is down: the rest need not start
		}()
	}
	wg.Wait()
	if len(required) > 0 {
		_ = m.Close()
		return fmt.Errorf("required server failed: %w", errors.Join(required...))
	}
	return nil
}

// Servers returns the managed servers in configuration order.
func (m *Manager) Servers() []*Server { return m.list() }

func (m *Manager) list() []*Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.servers)
}

// Server returns the managed server with the given name.
func (m *Manager) Server(name string) (*Server, bool) {
	for _, s := range m.list() {
		if s.set.cfg.Name == name {
			return s, true
		}
	}
	return nil, false
}

// Status returns a snapshot of every server, in configuration order.
func (m *Manager) Status() []Status {
	servers := m.list()
	out := make([]Status, len(servers))
	for i, s := range servers {
		out[i] = s.Status()
	}
	return out
}

// Failed returns the servers that are in the Failed state, with their
// errors, for reporting.
func (m *Manager) Failed() map[string]string {
	out := map[string]string{}
	for _, st := range m.Status() {
		if st.State == Failed {
			out[st.Name] = st.LastError
		}
	}
	return out
}

// Close closes every server in parallel: their tools are deregistered and
// no child process is left running. It is safe to call more than once.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.stop()
		m.applying.Lock()
		defer m.applying.Unlock()
		m.mu.Lock()
		servers := m.servers
		m.closed = true
		m.mu.Unlock()
		m.closeErr = closeAll(servers)
	})
	return m.closeErr
}

// closeAll closes servers in parallel.
func closeAll(servers []*Server) error {
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Changes is what [Manager.Apply] did, by server name.
type Changes struct {
	Added, Removed, Changed, Unchanged []string
	// Failed are the added or changed servers that did not start, with
	// why; they stay managed (see [Manager.Status]), as after Start.
	Failed map[string]string
}

// Apply makes the managed servers those of servers (a reloaded
// configuration), keeping every server whose configuration is the same
// exactly as it is: its session, its child process and its tools are not
// touched. A server no longer configured (or now disabled) is closed and
// its tools deregistered; a new one is started; a changed one is closed
// and started again with its new configuration, since its session, its
// child and its tools' names may all depend on it (its tools are absent
// while it restarts, and a call of one then fails as unknown). New and
// changed servers start in parallel and Apply returns once each is Ready
// or Failed; a server that fails is reported in Changes.Failed, the others
// keep running, whatever Required says (a reload does not stop a running
// gateway). Apply after Close does nothing and returns [ErrManagerClosed].
func (m *Manager) Apply(ctx context.Context, servers []config.Server) (Changes, error) {
	m.applying.Lock()
	defer m.applying.Unlock()
	m.mu.Lock()
	closed, current := m.closed, slices.Clone(m.servers)
	m.mu.Unlock()
	if closed {
		return Changes{}, ErrManagerClosed
	}
	ch := Changes{Failed: map[string]string{}}
	byName := map[string]*Server{}
	for _, s := range current {
		byName[s.Name()] = s
	}
	var (
		next    []*Server
		stopped []*Server
		started []*Server
	)
	wanted := map[string]bool{}
	for _, cfg := range servers {
		if cfg.Disabled {
			continue
		}
		wanted[cfg.Name] = true
		old, ok := byName[cfg.Name]
		switch {
		case ok && sameServer(old.set.cfg, cfg):
			ch.Unchanged = append(ch.Unchanged, cfg.Name)
			next = append(next, old)
			continue
		case ok:
			ch.Changed = append(ch.Changed, cfg.Name)
			stopped = append(stopped, old)
		default:
			ch.Added = append(ch.Added, cfg.Name)
		}
		s := newServer(cfg, m.reg, m.opts)
		next = append(next, s)
		started = append(started, s)
	}
	for _, s := range current {
		if !wanted[s.Name()] {
			ch.Removed = append(ch.Removed, s.Name())
			stopped = append(stopped, s)
		}
	}
	// Gone first, so that a changed server's names are free for its
	// successor.
	err := closeAll(stopped)
	m.mu.Lock()
	m.servers = next
	m.mu.Unlock()
	ctx, cancel := contextOf(ctx, m.stopCtx)
	defer cancel()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, s := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if serr := s.start(ctx); serr != nil {
				mu.Lock()
				ch.Failed[s.Name()] = serr.Error()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ch, err
}

// ErrManagerClosed is returned by [Manager.Apply] after [Manager.Close].
var ErrManagerClosed = errors.New("manager closed")

// sameServer reports whether two configurations of a server are the same,
// apart from where in the file they were written.
func sameServer(a, b config.Server) bool {
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b)
}

// String lists the servers and their states, for logs.
func (m *Manager) String() string {
	var parts []string
	for _, st := range m.Status() {
		parts = append(parts, st.Name+"="+st.State.String())
	}
	return strings.Join(parts, " ")
}
