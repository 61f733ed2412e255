//go:build unix

package bench

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// The sandbox's rows (issue 25): what confining a stdio server costs, at
// start-up and per call. tw-stdio and gw-serve run their demo confined, as
// toolwire does by default on Linux; these rows set the same against the
// sandbox turned off. They are added here rather than in rows.go's list,
// after the rows there; their stack, "sandbox", keeps them out of issue
// 8's targets.
func init() {
	rows = append(rows,
		&row{name: "tw-stdio-open", floor: "floor-pipe", stack: "sandbox", transport: "stdio", bare: "stock-stdio", call: openToolwireStdioOpen,
			what: "tw-stdio with the sandbox off (tw-stdio's demo is confined: Landlock, seccomp, rlimits, on Linux)"},
		&row{name: "start-open", stack: "floor", list: openStart(config.SandboxOff),
			what: "start-up of a stdio server, sandbox off: mcpclient.Connect (spawn, handshake, list 13 tools, register) + Close of the demo child"},
		&row{name: "start-sandbox", floor: "start-open", stack: "sandbox", list: openStart(config.SandboxOn),
			what: "the same start-up confined: through the launcher (re-exec, user namespace, Landlock, seccomp, then exec)"},
	)
}

// openToolwireStdioOpen opens tw-stdio's stack with the sandbox off.
func openToolwireStdioOpen(ctx context.Context, b *bench) (*target, error) {
	if b.demoErr != nil {
		return nil, b.demoErr
	}
	cfg := config.Server{Name: "demo", Transport: "stdio", Command: b.demoBin, Env: passedEnv(), DefaultTier: "read"}
	ex, srv, err := b.toolwireStack(ctx, "tw-stdio-open", cfg, func(o *mcpclient.Options) {
		o.Sandbox.Mode = config.SandboxOff
	})
	if err != nil {
		return nil, err
	}
	pid := srv.PID()
	b.procs.adopt(pid)
	return &target{call: toolwireCaller(ex, "demo__echo"), pids: []int{pid}, roles: []string{"demo"}, close: func() { _ = srv.Close() }}, nil
}

// openStart returns the opener of a start-up row: each operation
// connects to a new demo child with the sandbox in mode and closes it.
func openStart(mode string) func(context.Context, *bench) (*listTarget, error) {
	return func(ctx context.Context, b *bench) (*listTarget, error) {
		if b.demoErr != nil {
			return nil, b.demoErr
		}
		name := "start-open"
		if mode != config.SandboxOff {
			name = "start-sandbox"
		}
		alog, secrets, err := b.auditLog(name)
		if err != nil {
			return nil, err
		}
		opts := &mcpclient.Options{Logger: b.quiet, Secrets: secrets, Audit: alog,
			Sandbox: mcpclient.SandboxOptions{Mode: mode, StateDir: filepath.Join(b.dir, "state")}}
		op := func(ctx context.Context, _ int) error {
			reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: denyAll})
			cfg := config.Server{Name: "demo", Transport: "stdio", Command: b.demoBin, Env: passedEnv(), DefaultTier: "read"}
			s, err := mcpclient.Connect(ctx, cfg, reg, opts)
			if err != nil {
				return err
			}
			if st := s.Status().Sandbox; st == nil || st.Confined() == (mode == config.SandboxOff) {
				_ = s.Close()
				return fmt.Errorf("%s: the demo's sandbox is %v", name, st)
			}
			return s.Close()
		}
		return &listTarget{prepare: func(context.Context, int) error { return nil }, op: op}, nil
	}
}
