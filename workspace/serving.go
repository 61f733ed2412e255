package workspace

import (
	"time"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
)

// DefaultDrainGrace is how long calls in progress may run after the
// signal to stop: with the drain's bound after it (gateway.DrainBound),
// the exit comes well inside a container runtime's usual 10 s between
// SIGTERM and SIGKILL.
const DefaultDrainGrace = 5 * time.Second

// DefaultDrainDelay is how long readiness answers 503, after the signal
// to stop, while the gateway still serves everything, before the drain:
// a load balancer polling every second or two sees it and stops sending
// new requests first (a Kubernetes preStop pause does the same).
const DefaultDrainDelay = 2 * time.Second

// Serving is what a gateway section says of serving over HTTP, each value
// the section's or else the default: the limits of sessions and calls, the
// listener's, the drain's grace, the browser origins allowed, the body
// limit, and the TLS files.
type Serving struct {
	Limits         gateway.Limits
	Server         gateway.ServerOptions
	DrainGrace     time.Duration
	DrainDelay     time.Duration
	AllowedOrigins []string
	// MaxBodyBytes is gateway.limits.maxBodyBytes: 0 when not set (the
	// handler's default), -1 for no limit (0 in the file).
	MaxBodyBytes int64
	TLS          config.GatewayTLS // the files; empty for none
}

// ServingOf returns what gwc (nil for none) says of serving over HTTP.
func ServingOf(gwc *config.Gateway) Serving {
	s := Serving{Limits: gateway.DefaultLimits, Server: gateway.DefaultServerOptions, DrainGrace: DefaultDrainGrace, DrainDelay: DefaultDrainDelay}
	if gwc == nil {
		return s
	}
	if l := gwc.Limits; l != nil {
		setD(&s.Limits.SessionIdleTimeout, l.SessionIdleTimeout)
		setI(&s.Limits.MaxSessions, l.MaxSessions)
		setI(&s.Limits.MaxSessionsPerCaller, l.MaxSessionsPerCaller)
		setI(&s.Limits.MaxCallsPerSession, l.MaxCallsPerSession)
		setI(&s.Limits.MaxCallsPerCaller, l.MaxCallsPerCaller)
		if l.CallRate != nil {
			s.Limits.CallRate = *l.CallRate
		}
		setI(&s.Limits.CallBurst, l.CallBurst)
		setI(&s.Limits.MaxListensPerCaller, l.MaxListensPerCaller)
		setI(&s.Limits.MaxListenResources, l.MaxListenResources)
		setD(&s.Server.ReadHeaderTimeout, l.ReadHeaderTimeout)
		setD(&s.Server.ReadBodyTimeout, l.ReadBodyTimeout)
		setD(&s.Server.IdleTimeout, l.IdleTimeout)
		setI(&s.Server.MaxHeaderBytes, l.MaxHeaderBytes)
		setD(&s.DrainGrace, l.DrainGrace)
		setD(&s.DrainDelay, l.DrainDelay)
		if l.MaxBodyBytes != nil {
			s.MaxBodyBytes = int64(*l.MaxBodyBytes)
			if s.MaxBodyBytes == 0 {
				s.MaxBodyBytes = -1 // 0 in the file means no limit
			}
		}
	}
	s.AllowedOrigins = gwc.AllowedOrigins
	if gwc.TLS != nil {
		s.TLS = *gwc.TLS
	}
	return s
}

func setD(dst *time.Duration, v *time.Duration) {
	if v != nil {
		*dst = *v
	}
}

func setI(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}
