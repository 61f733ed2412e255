package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Resolver looks up the addresses of a host. *net.Resolver implements it.
// network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialerOptions configures NewDialer. A nil *DialerOptions means defaults:
// any host, public addresses only.
type DialerOptions struct {
	// Allow, when not empty, lists the only hosts that may be dialed. An
	// entry is a host name ("mcp.example.com", any case, a trailing dot
	// ignored), an IP address, or "*." and a domain ("*.example.com"),
	// which matches every name below the domain but not the domain
	// itself. Internationalized names are written in their ASCII form
	// (xn--...), as http.Transport dials them.
	//
	// A host named exactly (not through "*.") may resolve to loopback,
	// private and shared (CGNAT) addresses: naming it is how an operator
	// says an internal server is meant.
	Allow []string
	// AllowLoopback lets any allowed host resolve to a loopback address.
	AllowLoopback bool
	// Resolver looks host names up; nil means net.DefaultResolver.
	Resolver Resolver
	// Dial connects to the checked address, always an IP address and a
	// port; nil means a zero net.Dialer's DialContext.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Dialer guards egress at dial time: it resolves the host itself, checks
// every address against the rules below, then connects to an address it
// checked, so that a name cannot be checked as one address and reached as
// another (DNS rebinding). Set its DialContext as http.Transport's and
// leave the transport's Proxy nil: through a proxy, the dialer would see
// only the proxy.
//
// These addresses are never dialed: unspecified (0.0.0.0/8, ::), link-local
// (169.254.0.0/16, fe80::/10), cloud metadata endpoints (169.254.169.254,
// fd00:ec2::254, 100.100.100.200), multicast and reserved (240.0.0.0/4).
// Loopback (127.0.0.0/8, ::1), private (RFC 1918, fc00::/7, fec0::/10) and
// shared (100.64.0.0/10) addresses are dialed only for a host named
// exactly in the allowlist, and loopback also with AllowLoopback. An
// IPv4-mapped IPv6 address, or one in the NAT64 prefix 64:ff9b::/96, is
// judged by the IPv4 address inside it. A host that resolves to any refused
// address is refused as a whole.
type Dialer struct {
	exact         map[string]bool // lowercased, no trailing dot
	exactAddrs    map[netip.Addr]bool
	suffixes      []string // ".example.com" for "*.example.com"
	restricted    bool     // an allowlist was given
	allowLoopback bool
	resolver      Resolver
	dial          func(ctx context.Context, network, address string) (net.Conn, error)
}

// NewDialer validates the options and returns a Dialer. An allowlist entry
// that is not a host name, an IP address or "*." and a domain is an error
// naming it.
func NewDialer(opts *DialerOptions) (*Dialer, error) {
	if opts == nil {
		opts = &DialerOptions{}
	}
	d := &Dialer{
		exact:         make(map[string]bool),
		exactAddrs:    make(map[netip.Addr]bool),
		restricted:    len(opts.Allow) > 0,
		allowLoopback: opts.AllowLoopback,
		resolver:      opts.Resolver,
		dial:          opts.Dial,
	}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	if d.dial == nil {
		d.dial = (&net.Dialer{}).DialContext
	}
	for _, e := range opts.Allow {
		name := normalHost(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"))
		if a, err := netip.ParseAddr(name); err == nil && a.Zone() == "" {
			d.exactAddrs[a.Unmap()] = true
			continue
		}
		domain, glob := strings.CutPrefix(name, "*.")
		if !validName(domain) {
			return nil, fmt.Errorf(`egress allowlist entry %q: want a host name (internationalized ones as xn--...), an IP address, or "*." and a domain`, e)
		}
		if glob {
			d.suffixes = append(d.suffixes, "."+domain)
		} else {
			d.exact[domain] = true
		}
	}
	return d, nil
}

// validName reports whether s can be an ASCII host name: letters, digits,
// '-' and '_' in non-empty dot-separated labels, and not a number (which
// some resolvers would take as an address).
func validName(s string) bool {
	if s == "" || endsInNumber(s) {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normalHost lowercases a host name and drops one trailing dot.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// EgressError reports a dial the Dialer refused.
type EgressError struct {
	Host string     // the host as given to DialContext
	Addr netip.Addr // the refused address; invalid when the host itself was refused
	Rule string     // the rule that refused it
}

// Error names the host, the address and the rule.
func (e *EgressError) Error() string {
	if e.Addr.IsValid() {
		return fmt.Sprintf("egress to %q refused: %s is %s", e.Host, e.Addr, e.Rule)
	}
	return fmt.Sprintf("egress to %q refused: %s", e.Host, e.Rule)
}

// DialContext connects to address ("host:port") over network ("tcp",
// "tcp4" or "tcp6") if the host and every address it resolves to pass the
// Dialer's rules, trying the checked addresses in order. A refusal is an
// *EgressError.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var ipNetwork string
	switch network {
	case "tcp":
		ipNetwork = "ip"
	case "tcp4":
		ipNetwork = "ip4"
	case "tcp6":
		ipNetwork = "ip6"
	default:
		return nil, fmt.Errorf("egress to %q: network %q is not supported (want tcp)", address, network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress to %q: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress to %q: port %q is not a number from 0 to 65535", address, portStr)
	}

	var addrs []netip.Addr
	listed, exact := false, false
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
		exact = d.exactAddrs[a.Unmap()]
		listed = exact || !d.restricted
	} else {
		if endsInNumber(host) {
			return nil, &EgressError{Host: host, Rule: "an IPv4 address in a non-standard form; write it as four decimal numbers"}
		}
		listed, exact = d.match(normalHost(host))
	}
	if !listed {
		return nil, &EgressError{Host: host, Rule: "the host is not in the egress allowlist"}
	}
	if addrs == nil {
		addrs, err = d.resolver.LookupNetIP(ctx, ipNetwork, host)
		if err != nil {
			return nil, fmt.Errorf("egress to %q: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("egress to %q: no addresses found", host)
		}
	}
	for _, a := range addrs {
		if rule := d.refuses(a, exact); rule != "" {
			return nil, &EgressError{Host: host, Addr: a, Rule: rule}
		}
	}
	var errs []error
	for _, a := range addrs {
		conn, err := d.dial(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// match reports whether the allowlist lets name be dialed, and whether it
// names it exactly.
func (d *Dialer) match(name string) (listed, exact bool) {
	if d.exact[name] {
		return true, true
	}
	for _, s := range d.suffixes {
		if strings.HasSuffix(name, s) {
			return true, false
		}
	}
	return !d.restricted, false
}

// rangeRule is one address range the Dialer refuses.
type rangeRule struct {
	prefix netip.Prefix
	name   string
	// exempt says whether a host named exactly in the allowlist may
	// reach the range anyway.
	exempt bool
}

// rangeRules are checked in order, so that a metadata address is reported
// as one rather than as the link-local, private or shared address it also is.
var rangeRules = []rangeRule{
	{netip.MustParsePrefix("169.254.169.254/32"), "a cloud metadata address", false},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address", false},
	{netip.MustParsePrefix("100.100.100.200/32"), "a cloud metadata address", false},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address (0.0.0.0/8)", false},
	{netip.MustParsePrefix("::/128"), "the unspecified address (::)", false},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (169.254.0.0/16)", false},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address (fe80::/10)", false},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address (224.0.0.0/4)", false},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address (ff00::/8)", false},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address (240.0.0.0/4)", false},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address (127.0.0.0/8)", true},
	{netip.MustParsePrefix("::1/128"), "the loopback address (::1)", true},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address (10.0.0.0/8)", true},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address (172.16.0.0/12)", true},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address (192.168.0.0/16)", true},
	{netip.MustParsePrefix("fc00::/7"), "a private address (fc00::/7)", true},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address (fec0::/10)", true},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address (100.64.0.0/10)", true},
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refuses returns why a may not be dialed, or "" when it may. exact says
// whether the host was named exactly in the allowlist.
func (d *Dialer) refuses(a netip.Addr, exact bool) string {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, r := range rangeRules {
		if !r.prefix.Contains(a) {
			continue
		}
		loopback := a.IsLoopback()
		if r.exempt && (exact || loopback && d.allowLoopback) {
			return ""
		}
		if !r.exempt {
			return r.name
		}
		hint := "; name the host exactly in the egress allowlist to reach it"
		if loopback {
			hint += ", or allow loopback"
		}
		return r.name + hint
	}
	return ""
}
