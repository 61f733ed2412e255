package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/console"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/workspace"
)

// consoleFlags are serve's flags of the operator console.
type consoleFlags struct {
	addr              string
	insecurePlainHTTP bool
}

func (cf *consoleFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&cf.addr, "console", "", "offer the operator console at http://`ADDR`/, a listener of its own (default: gateway.console.listen; loopback only unless TLS or --console-insecure-plain-http)")
	cmd.Flags().BoolVar(&cf.insecurePlainHTTP, "console-insecure-plain-http", false, "accept a non-loopback --console address without TLS (for a TLS proxy in front): the operator token crosses the network as the proxy sends it")
}

// serveConsole is the console of one serve: its listener and, once
// serving, how to stop it. A nil *serveConsole is no console; its
// methods then do nothing.
type serveConsole struct {
	con    *console.Console
	ln     net.Listener
	secure bool
	cancel context.CancelFunc
	done   chan struct{}
}

// open checks the console's settings and binds its listener, or returns
// nil when no console is asked for. tlsOn says the gateway's TLS is
// configured, which the console serves with too.
func (cf *consoleFlags) open(e *env, gwc *config.Gateway, tlsOn bool, log *slog.Logger) (*serveConsole, error) {
	var cc config.GatewayConsole
	if gwc != nil && gwc.Console != nil {
		cc = *gwc.Console
	}
	addr := cc.Listen
	if cf.addr != "" {
		addr = cf.addr
	}
	if addr == "" {
		if cf.insecurePlainHTTP {
			return nil, &exitError{exitUsage, errors.New("--console-insecure-plain-http goes with --console ADDR or gateway.console.listen")}
		}
		return nil, nil
	}
	where := "--console"
	if cf.addr == "" {
		where = "gateway.console.listen"
	}
	varName := cc.TokenEnv
	if varName == "" {
		varName = config.DefaultConsoleTokenEnv
	}
	token, _ := e.lookupEnv(varName)
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, &exitError{exitUsage, fmt.Errorf("%s %q: the console needs the operator token in $%s (\"toolwire token new\" makes one; set gateway.console.tokenEnv to use another variable)", where, addr, varName)}
	}
	if gwc != nil {
		hashes := make([]string, 0, len(gwc.Tokens))
		for _, t := range gwc.Tokens {
			hashes = append(hashes, t.SHA256)
		}
		if console.SameAsCallerToken(token, hashes) {
			return nil, &exitError{exitUsage, fmt.Errorf("$%s: the operator token is one of gateway.tokens: the console needs a token of its own, or that caller could approve its own calls", varName)}
		}
	}
	// Behind a TLS proxy (--console-insecure-plain-http) the browser
	// still speaks HTTPS.
	con, err := console.New(&console.Options{Token: token, Secure: tlsOn || cf.insecurePlainHTTP, Logger: log})
	if err != nil {
		return nil, &exitError{exitUsage, fmt.Errorf("$%s: %w", varName, err)}
	}
	switch err := console.CheckExposure(addr, tlsOn, cf.insecurePlainHTTP); {
	case errors.Is(err, console.ErrPlainExposure):
		return nil, &exitError{exitUsage, fmt.Errorf("%s %q: without TLS only loopback addresses (127.0.0.1, ::1, localhost) are served, or the operator token would cross the network in the clear; "+
			"give --tls-cert and --tls-key (or gateway.tls), or pass --console-insecure-plain-http when a TLS proxy in front terminates TLS", where, addr)}
	case err != nil:
		return nil, &exitError{exitUsage, fmt.Errorf("%s %q: %w", where, addr, err)}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &exitError{exitUsage, fmt.Errorf("%s: %w", where, err)}
	}
	return &serveConsole{con: con, ln: ln, secure: tlsOn}, nil
}

// watchAudit has the console follow the audit log the workspace opens.
func (sc *serveConsole) watchAudit(wo *workspace.Options) {
	if sc == nil {
		return
	}
	prev := wo.Telemetry.AuditSink
	wo.Telemetry.AuditSink = func(s audit.Sink) audit.Sink {
		if prev != nil {
			s = prev(s)
		}
		return sc.con.AuditSink(s)
	}
}

// observe returns an observer of the gateway's events that tells next
// and the console.
func (sc *serveConsole) observe(next func(gateway.Event)) func(gateway.Event) {
	if sc == nil {
		return next
	}
	if next == nil {
		return sc.con.Observe
	}
	return func(ev gateway.Event) {
		next(ev)
		sc.con.Observe(ev)
	}
}

// serve starts serving the console over src until ctx ends or stop.
func (sc *serveConsole) serve(ctx context.Context, e *env, src *console.Sources, tlsConfig *tls.Config) {
	if sc == nil {
		return
	}
	ctx, sc.cancel = context.WithCancel(ctx)
	sc.done = make(chan struct{})
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	fmt.Fprintf(e.stderr, "toolwire: operator console at %s://%s/\n", scheme, sc.ln.Addr())
	go func() {
		defer close(sc.done)
		if err := sc.con.Serve(ctx, sc.ln, src, tlsConfig); err != nil {
			fmt.Fprintf(e.stderr, "toolwire: the operator console stopped: %v\n", err)
		}
	}()
}

// stop ends the console and waits for it; safe when it never served.
func (sc *serveConsole) stop() {
	if sc == nil {
		return
	}
	if sc.cancel == nil {
		sc.con.Close()
		return
	}
	sc.cancel()
	<-sc.done
}

// warnConsoleChanged says, at a reload, that a changed gateway.console
// waits for the next start: the console's listener and token are settled
// when serve starts.
func warnConsoleChanged(log *slog.Logger, before, after *config.Gateway) {
	var b, a config.GatewayConsole
	if before != nil && before.Console != nil {
		b = *before.Console
	}
	if after != nil && after.Console != nil {
		a = *after.Console
	}
	if a != b {
		log.Warn("gateway.console changed: the operator console keeps its address and token until serve starts again")
	}
}
