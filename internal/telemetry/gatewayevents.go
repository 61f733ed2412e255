package telemetry

import (
	"context"

	"github.com/toolwire/toolwire/gateway"
)

// GatewayEvents returns the function a gateway's HTTP handler calls for
// what its limits and lifecycle do ([gateway.HTTPOptions].Observe), counting
// each in m: sessions refused and expired, and every limit hit. Sessions
// opened and closed are counted by the server middleware already, so they
// are not counted twice. The caller is never a label: it may be an address.
func (m *Metrics) GatewayEvents() func(gateway.Event) {
	if m == nil {
		return nil
	}
	ctx := context.Background() // counters take no values from a request's context
	return func(ev gateway.Event) {
		switch ev.Kind {
		case gateway.SessionRefused:
			m.SessionRefused(ctx, ev.Limit)
			m.LimitHit(ctx, ev.Limit)
		case gateway.CallRefused:
			m.LimitHit(ctx, ev.Limit)
		case gateway.SessionClosed:
			if ev.End == gateway.EndExpired {
				m.SessionExpired(ctx)
			}
		}
	}
}
