package workspace_test

import (
	"testing"
	"time"

	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/workspace"
)

// ServingOf takes each value the gateway section gives and the default for
// the rest; a body limit of 0 in the file means none.
func TestServingOf(t *testing.T) {
	t.Parallel()
	if got := workspace.ServingOf(nil); got.Limits != gateway.DefaultLimits || got.Server != gateway.DefaultServerOptions || got.DrainGrace != workspace.DefaultDrainGrace || got.DrainDelay != workspace.DefaultDrainDelay || got.MaxBodyBytes != 0 {
		t.Errorf("ServingOf(nil) = %+v, want the defaults", got)
	}
	f := newFixture(t)
	file := f.load(t, demoServer+"gateway:\n  allowedOrigins: [\"https://app.example.com\"]\n  limits:\n    maxSessions: 7\n    callRate: 2.5\n    readBodyTimeout: 3s\n    drainGrace: 1s\n    drainDelay: 250ms\n    maxBodyBytes: 0\n")
	got := workspace.ServingOf(file.Gateway)
	want := gateway.DefaultLimits
	want.MaxSessions, want.CallRate = 7, 2.5
	if got.Limits != want {
		t.Errorf("limits = %+v, want %+v", got.Limits, want)
	}
	if got.Server.ReadBodyTimeout != 3*time.Second || got.Server.IdleTimeout != gateway.DefaultServerOptions.IdleTimeout {
		t.Errorf("server options = %+v", got.Server)
	}
	if got.DrainDelay != 250*time.Millisecond {
		t.Errorf("drain delay %v, want gateway.limits.drainDelay's 250ms", got.DrainDelay)
	}
	if got.DrainGrace != time.Second || got.MaxBodyBytes != -1 || len(got.AllowedOrigins) != 1 {
		t.Errorf("grace %v, body %d, origins %v; want 1s, -1 (no limit) and the one origin", got.DrainGrace, got.MaxBodyBytes, got.AllowedOrigins)
	}
}
