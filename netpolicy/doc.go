// Package netpolicy holds the rules for toolwire's network traffic to MCP
// servers and OAuth endpoints, in three parts that share one remote-URL rule:
//
//   - CheckURL, the rule itself: https anywhere, plain http only to
//     loopback. The configuration applies it to every server URL.
//   - NewClient, an *http.Client that applies the rule to every request and
//     redirect hop, refuses a downgrade to http, caps redirects and keeps
//     credentials on the request's origin; and HeaderTransport, which adds
//     configured headers to requests for one origin only.
//   - Dialer, an egress guard for http.Transport that checks every
//     address a host resolves to (no private, link-local or metadata
//     addresses unless allowed) and dials only an address it checked.
//
// The egress guard is off unless configured; the rest always applies. A
// sketch of a client for one configured server:
//
//	if _, err := netpolicy.CheckURL(endpoint); err != nil {
//		return err
//	}
//	tr := http.DefaultTransport.(*http.Transport).Clone()
//	if guard {
//		d, err := netpolicy.NewDialer(&netpolicy.DialerOptions{Allow: allow})
//		if err != nil {
//			return err
//		}
//		tr.Proxy = nil // the guard must see the destination, not a proxy
//		tr.DialContext = d.DialContext
//	}
//	ht, err := netpolicy.NewHeaderTransport(endpoint, headers, tr)
//	if err != nil {
//		return err
//	}
//	client := netpolicy.NewClient(&netpolicy.ClientOptions{
//		Transport:     ht,
//		SecretHeaders: slices.Collect(maps.Keys(headers)),
//	})
package netpolicy
