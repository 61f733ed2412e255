package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/workspace"
)

// reloadOnHangup reloads the configuration into w each time the process
// gets SIGHUP, until ctx ends: the files are loaded again from where they
// were found, settle turns the new configuration (and the command's flags)
// into the reload's options, and workspace.Reload applies it without
// ending any session. A configuration that does not load, or that the
// running process cannot take, is refused and the running one stays; both
// outcomes are said on stderr. Call the returned function to stop.
func reloadOnHangup(ctx context.Context, e *env, g *globalFlags, log *slog.Logger, w *workspace.Workspace,
	settle func(*config.File) (*workspace.ReloadOptions, error)) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload(ctx, e, g, log, w, settle)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

func reload(ctx context.Context, e *env, g *globalFlags, log *slog.Logger, w *workspace.Workspace,
	settle func(*config.File) (*workspace.ReloadOptions, error)) {
	done, err := w.Reload(ctx, func() (*config.File, *workspace.ReloadOptions, error) {
		file, err := loadConfig(e, g)
		if err != nil {
			var xe *exitError
			if errors.As(err, &xe) {
				err = xe.err
			}
			return nil, nil, err
		}
		opts, err := settle(file)
		return file, opts, err
	})
	if err != nil {
		fmt.Fprintf(e.stderr, "toolwire: reload refused; the running configuration stays: %s\n", oneLine(err.Error(), 2000))
		return
	}
	ch := done.Servers
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", ch.Added}, {"removed", ch.Removed}, {"changed", ch.Changed}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+termSafe(strings.Join(p.names, ", ")))
		}
	}
	parts = append(parts, fmt.Sprintf("%d unchanged", len(ch.Unchanged)))
	fmt.Fprintf(e.stderr, "toolwire: reloaded the configuration: servers %s\n", strings.Join(parts, "; "))
	for name, why := range ch.Failed {
		log.Warn(fmt.Sprintf("server %q did not start: %s", name, why))
	}
}
