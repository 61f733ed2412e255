package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// Manager owns many servers that share one registry: it starts them in
// parallel, supervises each (see [Server]) and closes them together.
type Manager struct {
	reg     *tool.Registry
	servers []*Server // in configuration order

	closeOnce sync.Once
	closeErr  error
}

// NewManager returns a manager for the configured servers, none started.
// Servers marked disabled are left out.
func NewManager(servers []config.Server, reg *tool.Registry, opts *Options) *Manager {
	m := &Manager{reg: reg}
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
	for _, s := range m.servers {
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
func (m *Manager) Servers() []*Server { return append([]*Server(nil), m.servers...) }

// Server returns the managed server with the given name.
func (m *Manager) Server(name string) (*Server, bool) {
	for _, s := range m.servers {
		if s.set.cfg.Name == name {
			return s, true
		}
	}
	return nil, false
}

// Status returns a snapshot of every server, in configuration order.
func (m *Manager) Status() []Status {
	out := make([]Status, len(m.servers))
	for i, s := range m.servers {
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
		var wg sync.WaitGroup
		errs := make([]error, len(m.servers))
		for i, s := range m.servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Close()
			}()
		}
		wg.Wait()
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

// String lists the servers and their states, for logs.
func (m *Manager) String() string {
	var parts []string
	for _, st := range m.Status() {
		parts = append(parts, st.Name+"="+st.State.String())
	}
	return strings.Join(parts, " ")
}
