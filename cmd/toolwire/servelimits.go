package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/workspace"
)

// limitFlags are serve's flags for the limits, Origin, TLS and drain of
// the HTTP gateway; each but the insecure one has a gateway.limits (or
// gateway.tls, gateway.allowedOrigins) key, which a flag given replaces.
type limitFlags struct {
	sessionIdle, readHeader, readBody, idle, grace time.Duration
	delay                                          time.Duration
	maxSessions, maxSessionsPerCaller              int
	maxCallsPerSession, maxCallsPerCaller          int
	callRate                                       float64
	callBurst, maxHeaderBytes, maxListensPerCaller int
	origins                                        []string
	tlsCert, tlsKey                                string
	insecurePlainHTTP                              bool
}

var limitFlagNames = []string{
	"session-idle-timeout", "max-sessions", "max-sessions-per-caller", "max-calls-per-session", "max-calls-per-caller",
	"call-rate", "call-burst", "max-listens-per-caller", "read-header-timeout", "read-body-timeout", "idle-timeout", "max-header-bytes",
	"drain-grace", "drain-delay", "allow-origin", "tls-cert", "tls-key", "insecure-plain-http",
}

func (lf *limitFlags) register(cmd *cobra.Command) {
	d, s := gateway.DefaultLimits, gateway.DefaultServerOptions
	f := cmd.Flags()
	f.DurationVar(&lf.sessionIdle, "session-idle-timeout", d.SessionIdleTimeout, "with --http, end a session idle this long, cancelling its calls (gateway.limits.sessionIdleTimeout)")
	f.IntVar(&lf.maxSessions, "max-sessions", d.MaxSessions, "with --http, open sessions at most; more get 503 (0: no limit)")
	f.IntVar(&lf.maxSessionsPerCaller, "max-sessions-per-caller", d.MaxSessionsPerCaller, "with --http, open sessions per caller at most; more get 429 (0: no limit)")
	f.IntVar(&lf.maxCallsPerSession, "max-calls-per-session", d.MaxCallsPerSession, "with --http, tool calls in progress per session at most; more are refused (0: no limit)")
	f.IntVar(&lf.maxCallsPerCaller, "max-calls-per-caller", d.MaxCallsPerCaller, "with --http, tool calls in progress per caller at most; more are refused (0: no limit)")
	f.Float64Var(&lf.callRate, "call-rate", d.CallRate, "with --http, tool calls per second each caller may start (token bucket; 0: no limit)")
	f.IntVar(&lf.callBurst, "call-burst", d.CallBurst, "with --http, the token bucket's size for --call-rate")
	f.IntVar(&lf.maxListensPerCaller, "max-listens-per-caller", d.MaxListensPerCaller, "with --http, open subscriptions/listen streams (2026-07-28 clients) per caller at most; more are refused (0: no limit)")
	f.DurationVar(&lf.readHeader, "read-header-timeout", s.ReadHeaderTimeout, "with --http, time to read a request's headers")
	f.DurationVar(&lf.readBody, "read-body-timeout", s.ReadBodyTimeout, "with --http, time to read a request's body; a slower client is cut off")
	f.DurationVar(&lf.idle, "idle-timeout", s.IdleTimeout, "with --http, close a keep-alive connection idle this long")
	f.IntVar(&lf.maxHeaderBytes, "max-header-bytes", s.MaxHeaderBytes, "with --http, the largest request headers accepted (431 past it)")
	f.DurationVar(&lf.grace, "drain-grace", workspace.DefaultDrainGrace, "with --http, on SIGTERM or SIGINT, time calls in progress get before they are cancelled")
	f.DurationVar(&lf.delay, "drain-delay", workspace.DefaultDrainDelay, "with --http, on SIGTERM or SIGINT, time /readyz answers 503 while everything is still served, before the drain (for a load balancer to see it; 0: none)")
	f.StringArrayVar(&lf.origins, "allow-origin", nil, "with --http, a browser `ORIGIN` (https://host[:port]) whose requests are served (repeatable; replaces gateway.allowedOrigins)")
	f.StringVar(&lf.tlsCert, "tls-cert", "", "with --http, serve HTTPS with this PEM certificate `FILE` (reloaded when it changes)")
	f.StringVar(&lf.tlsKey, "tls-key", "", "with --http, the PEM private key `FILE` of --tls-cert")
	f.BoolVar(&lf.insecurePlainHTTP, "insecure-plain-http", false, "with --http and tokens, accept bearer tokens over plain HTTP on a non-loopback address (a TLS proxy in front)")
}

// changedAny returns the first limit flag given, or "".
func (lf *limitFlags) changedAny(changed func(string) bool) string {
	for _, n := range limitFlagNames {
		if changed(n) {
			return n
		}
	}
	return ""
}

// operations is what serve --http runs with, settled from the defaults,
// the configuration and the flags, in that order.
type operations struct {
	limits  gateway.Limits
	server  gateway.ServerOptions
	grace   time.Duration
	delay   time.Duration // readiness 503 before the drain
	origins []string
	maxBody int64 // from gateway.limits.maxBodyBytes; 0: not set
}

func (lf *limitFlags) resolve(gwc *config.Gateway, changed func(string) bool, log *slog.Logger) (operations, error) {
	ops, tlsCfg, err := lf.settle(gwc, changed)
	if err != nil {
		return ops, err
	}
	if tlsCfg.CertFile != "" {
		r, err := gateway.NewCertReloader(tlsCfg.CertFile, tlsCfg.KeyFile, func(err error) {
			log.Warn("keeping the TLS certificate in use", "error", err)
		})
		if err != nil {
			return ops, err
		}
		ops.server.TLS = r.TLSConfig()
	}
	return ops, nil
}

// settle is resolve without loading the certificate: the defaults, the
// configuration and the flags, checked. A reload takes its limits from it.
func (lf *limitFlags) settle(gwc *config.Gateway, changed func(string) bool) (operations, config.GatewayTLS, error) {
	sv := workspace.ServingOf(gwc)
	ops := operations{limits: sv.Limits, server: sv.Server, grace: sv.DrainGrace, delay: sv.DrainDelay, origins: sv.AllowedOrigins, maxBody: sv.MaxBodyBytes}
	tlsCfg := sv.TLS
	type flagVal struct {
		name string
		set  func()
	}
	for _, fv := range []flagVal{
		{"session-idle-timeout", func() { ops.limits.SessionIdleTimeout = lf.sessionIdle }},
		{"max-sessions", func() { ops.limits.MaxSessions = lf.maxSessions }},
		{"max-sessions-per-caller", func() { ops.limits.MaxSessionsPerCaller = lf.maxSessionsPerCaller }},
		{"max-calls-per-session", func() { ops.limits.MaxCallsPerSession = lf.maxCallsPerSession }},
		{"max-calls-per-caller", func() { ops.limits.MaxCallsPerCaller = lf.maxCallsPerCaller }},
		{"call-rate", func() { ops.limits.CallRate = lf.callRate }},
		{"call-burst", func() { ops.limits.CallBurst = lf.callBurst }},
		{"max-listens-per-caller", func() { ops.limits.MaxListensPerCaller = lf.maxListensPerCaller }},
		{"read-header-timeout", func() { ops.server.ReadHeaderTimeout = lf.readHeader }},
		{"read-body-timeout", func() { ops.server.ReadBodyTimeout = lf.readBody }},
		{"idle-timeout", func() { ops.server.IdleTimeout = lf.idle }},
		{"max-header-bytes", func() { ops.server.MaxHeaderBytes = lf.maxHeaderBytes }},
		{"drain-grace", func() { ops.grace = lf.grace }},
		{"drain-delay", func() { ops.delay = lf.delay }},
		{"allow-origin", func() { ops.origins = lf.origins }},
		{"tls-cert", func() { tlsCfg.CertFile = lf.tlsCert }},
		{"tls-key", func() { tlsCfg.KeyFile = lf.tlsKey }},
	} {
		if changed(fv.name) {
			fv.set()
		}
	}
	var errs []error
	for _, c := range []struct {
		name string
		v    int
	}{
		{"--max-sessions", ops.limits.MaxSessions}, {"--max-sessions-per-caller", ops.limits.MaxSessionsPerCaller},
		{"--max-calls-per-session", ops.limits.MaxCallsPerSession}, {"--max-calls-per-caller", ops.limits.MaxCallsPerCaller},
		{"--call-burst", ops.limits.CallBurst}, {"--max-header-bytes", ops.server.MaxHeaderBytes},
		{"--max-listens-per-caller", ops.limits.MaxListensPerCaller},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("%s %d: give a whole number, 0 or more (0: no limit)", c.name, c.v))
		}
	}
	if ops.limits.CallRate < 0 {
		errs = append(errs, fmt.Errorf("--call-rate %g: give calls per second, 0 or more (0: no limit)", ops.limits.CallRate))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--session-idle-timeout", ops.limits.SessionIdleTimeout}, {"--read-header-timeout", ops.server.ReadHeaderTimeout},
		{"--read-body-timeout", ops.server.ReadBodyTimeout}, {"--idle-timeout", ops.server.IdleTimeout}, {"--drain-grace", ops.grace},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %s: give a duration, 0 or more (0: no limit)", d.name, d.v))
		}
	}
	for _, o := range ops.origins {
		if err := gateway.ValidateOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("--allow-origin: %w", err))
		}
	}
	if (tlsCfg.CertFile == "") != (tlsCfg.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key (gateway.tls.certFile and keyFile) go together: give both"))
	}
	if len(errs) > 0 {
		return ops, tlsCfg, errors.Join(errs...)
	}
	return ops, tlsCfg, nil
}
