package netpolicy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fakeResolver answers each host from a list of answers, one per lookup,
// the last repeating, and counts the lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups map[string]int
}

func newFakeResolver(answers map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, lookups: map[string]int{}}
	for host, list := range answers {
		var seq [][]netip.Addr
		for _, answer := range list {
			var addrs []netip.Addr
			for _, a := range strings.Fields(answer) {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			seq = append(seq, addrs)
		}
		r.answers[host] = seq
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	n := r.lookups[host]
	r.lookups[host]++
	return seq[min(n, len(seq)-1)], nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// recordingDial records the addresses it is asked for and connects to
// nothing: tests reach no network but 127.0.0.1.
type recordingDial struct {
	mu    sync.Mutex
	addrs []string
}

func (d *recordingDial) dial(_ context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, address)
	c1, c2 := net.Pipe()
	c2.Close()
	return c1, nil
}

func (d *recordingDial) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

func TestDialerRules(t *testing.T) {
	tests := []struct {
		name   string
		opts   DialerOptions
		host   string // dialed at port 443
		answer string // the resolver's addresses, space-separated
		want   string // "" to dial, else a part of the refusal
	}{
		{"public", DialerOptions{}, "mcp.example.com", "203.0.113.7", ""},
		{"public IPv6", DialerOptions{}, "mcp.example.com", "2001:db8::7", ""},
		{"RFC 1918 10/8", DialerOptions{}, "h.example", "10.0.0.1", "a private address (10.0.0.0/8)"},
		{"RFC 1918 172.16/12", DialerOptions{}, "h.example", "172.31.255.1", "a private address (172.16.0.0/12)"},
		{"RFC 1918 192.168/16", DialerOptions{}, "h.example", "192.168.1.1", "a private address (192.168.0.0/16)"},
		{"unique local", DialerOptions{}, "h.example", "fd12::1", "a private address (fc00::/7)"},
		{"loopback", DialerOptions{}, "h.example", "127.0.0.1", "a loopback address (127.0.0.0/8)"},
		{"loopback IPv6", DialerOptions{}, "h.example", "::1", "the loopback address (::1)"},
		{"loopback allowed", DialerOptions{AllowLoopback: true}, "h.example", "127.0.0.1 ::1", ""},
		{"loopback allowed is not private allowed", DialerOptions{AllowLoopback: true}, "h.example", "10.0.0.1", "private"},
		{"link-local", DialerOptions{}, "h.example", "169.254.1.1", "a link-local address (169.254.0.0/16)"},
		{"link-local IPv6", DialerOptions{}, "h.example", "fe80::1", "a link-local address (fe80::/10)"},
		{"metadata", DialerOptions{}, "h.example", "169.254.169.254", "a cloud metadata address"},
		{"metadata IPv6", DialerOptions{}, "h.example", "fd00:ec2::254", "a cloud metadata address"},
		{"metadata Alibaba", DialerOptions{}, "h.example", "100.100.100.200", "a cloud metadata address"},
		{"metadata even when named", DialerOptions{Allow: []string{"h.example"}}, "h.example", "169.254.169.254", "a cloud metadata address"},
		{"metadata even with loopback allowed", DialerOptions{AllowLoopback: true}, "h.example", "169.254.169.254", "metadata"},
		{"CGNAT", DialerOptions{}, "h.example", "100.64.0.1", "a shared (CGNAT) address (100.64.0.0/10)"},
		{"CGNAT when named", DialerOptions{Allow: []string{"h.example"}}, "h.example", "100.127.255.254", ""},
		{"private when named", DialerOptions{Allow: []string{"h.example"}}, "h.example", "10.0.0.1 fd12::1", ""},
		{"loopback when named", DialerOptions{Allow: []string{"h.example"}}, "h.example", "127.0.0.1", ""},
		{"unspecified", DialerOptions{}, "h.example", "0.0.0.0", "unspecified"},
		{"this network", DialerOptions{Allow: []string{"h.example"}}, "h.example", "0.1.2.3", "unspecified"},
		{"unspecified IPv6", DialerOptions{}, "h.example", "::", "unspecified"},
		{"multicast", DialerOptions{}, "h.example", "224.0.0.1", "a multicast address"},
		{"multicast IPv6", DialerOptions{}, "h.example", "ff02::1", "a multicast address"},
		{"broadcast", DialerOptions{}, "h.example", "255.255.255.255", "a reserved address"},
		{"IPv4-mapped private", DialerOptions{}, "h.example", "::ffff:10.0.0.1", "private"},
		{"IPv4-mapped metadata", DialerOptions{}, "h.example", "::ffff:169.254.169.254", "metadata"},
		{"NAT64 metadata", DialerOptions{}, "h.example", "64:ff9b::a9fe:a9fe", "metadata"},
		{"NAT64 public", DialerOptions{}, "h.example", "64:ff9b::cb00:7107", ""},
		{"one bad address refuses all", DialerOptions{}, "h.example", "203.0.113.7 10.0.0.1", "private"},
		{"address literal", DialerOptions{}, "10.0.0.1", "", "private"},
		{"address literal named", DialerOptions{Allow: []string{"10.0.0.1"}}, "10.0.0.1", "", ""},
		{"IPv6 literal named", DialerOptions{Allow: []string{"[fd12::1]"}}, "fd12::1", "", ""},
		{"decimal IPv4", DialerOptions{}, "2130706433", "", "non-standard form"},
		{"octal IPv4", DialerOptions{AllowLoopback: true}, "0177.0.0.1", "", "non-standard form"},
		{"hex IPv4", DialerOptions{}, "0x7f.1", "", "non-standard form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := newFakeResolver(map[string][]string{tt.host: {tt.answer}})
			var rec recordingDial
			tt.opts.Resolver, tt.opts.Dial = res, rec.dial
			d, err := NewDialer(&tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(tt.host, "443"))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("dial %s (%s): %v", tt.host, tt.answer, err)
				}
				conn.Close()
				first := strings.Fields(tt.answer + " " + tt.host)[0]
				if got, want := rec.dialed(), []string{net.JoinHostPort(first, "443")}; strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("dialed %v, want %v", got, want)
				}
				return
			}
			var ee *EgressError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), tt.want) || ee.Host != tt.host {
				t.Fatalf("dial %s (%s): error %v, want an *EgressError for the host containing %q", tt.host, tt.answer, err, tt.want)
			}
			if got := rec.dialed(); len(got) != 0 {
				t.Errorf("dialed %v after refusing", got)
			}
		})
	}
}

func TestDialerAllowlist(t *testing.T) {
	res := newFakeResolver(map[string][]string{
		"MCP.Example.COM.": {"10.0.0.8"},
		"api.corp.example": {"203.0.113.9"},
		"a.b.corp.example": {"203.0.113.9"},
		"db.corp.example":  {"10.0.0.9"},
		"corp.example":     {"203.0.113.9"},
		"xcorp.example":    {"203.0.113.9"},
		"evil.example":     {"203.0.113.9"},
	})
	var rec recordingDial
	d, err := NewDialer(&DialerOptions{
		Allow:    []string{"mcp.example.com", "*.corp.example", "10.1.2.3"},
		Resolver: res, Dial: rec.dial,
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ host, want string }{
		{"MCP.Example.COM.", ""}, // named exactly: a private address is fine
		{"api.corp.example", ""},
		{"a.b.corp.example", ""},
		{"db.corp.example", "a private address"}, // through "*.": public only
		{"corp.example", "not in the egress allowlist"},
		{"xcorp.example", "not in the egress allowlist"},
		{"evil.example", "not in the egress allowlist"},
		{"10.1.2.3", ""},
		{"10.1.2.4", "not in the egress allowlist"},
	}
	for _, tt := range tests {
		conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(tt.host, "443"))
		if tt.want == "" {
			if err != nil {
				t.Errorf("dial %s: %v", tt.host, err)
			} else {
				conn.Close()
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("dial %s: error %v, want %q", tt.host, err, tt.want)
		}
		if strings.Contains(tt.want, "allowlist") && res.count(tt.host) != 0 {
			t.Errorf("dial %s: looked up a host the allowlist refuses", tt.host)
		}
	}
}

func TestNewDialerRejectsBadEntries(t *testing.T) {
	for _, e := range []string{"", "*", "*.", "a*b.com", "*.*.com", "ex*.com", "h:443", "http://h", "h/x",
		"bücher.example", "2130706433", "a..b", ".a", "fe80::1%eth0", "a b"} {
		if _, err := NewDialer(&DialerOptions{Allow: []string{"ok.example", e}}); err == nil || !strings.Contains(err.Error(), "allowlist entry") {
			t.Errorf("entry %q: error %v, want one naming the entry", e, err)
		}
	}
	if _, err := NewDialer(&DialerOptions{Allow: []string{"OK.Example.", "*.Example.COM", "xn--bcher-kva.example", "::1", "[::1]", "127.0.0.1", "a_b.example"}}); err != nil {
		t.Errorf("valid entries: %v", err)
	}
}

// A name that answers a public address when checked and a private one
// afterwards reaches the public one: the dialer connects to the address it
// checked, by number, and looks the name up once per dial.
func TestDialerDefeatsRebinding(t *testing.T) {
	res := newFakeResolver(map[string][]string{"rebind.example": {"203.0.113.7", "127.0.0.1"}})
	var rec recordingDial
	d, err := NewDialer(&DialerOptions{Resolver: res, Dial: rec.dial})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := d.DialContext(context.Background(), "tcp", "rebind.example:443")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := rec.dialed(); len(got) != 1 || got[0] != "203.0.113.7:443" {
		t.Fatalf("dialed %v, want [203.0.113.7:443]", got)
	}
	if n := res.count("rebind.example"); n != 1 {
		t.Fatalf("%d lookups for one dial, want 1", n)
	}

	_, err = d.DialContext(context.Background(), "tcp", "rebind.example:443")
	var ee *EgressError
	if !errors.As(err, &ee) || ee.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("second dial: error %v, want a refusal of 127.0.0.1", err)
	}
	if got := rec.dialed(); len(got) != 1 {
		t.Errorf("dialed %v after the refusal", got)
	}
}

// End to end over a real socket: http.Transport with the dialer reaches a
// server on 127.0.0.1 by a name only when the name is allowed.
func TestDialerWithHTTPTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	target := "http://mcp.test:" + u.Port() + "/"
	res := newFakeResolver(map[string][]string{"mcp.test": {"127.0.0.1"}})

	get := func(opts DialerOptions) error {
		opts.Resolver = res
		d, err := NewDialer(&opts)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{DialContext: d.DialContext}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(target)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(DialerOptions{Allow: []string{"mcp.test"}}); err != nil {
		t.Errorf("named host: %v", err)
	}
	err := get(DialerOptions{})
	want := `egress to "mcp.test" refused: 127.0.0.1 is a loopback address (127.0.0.0/8); name the host exactly in the egress allowlist to reach it, or allow loopback`
	var ee *EgressError
	if !errors.As(err, &ee) || ee.Error() != want {
		t.Errorf("unnamed host: error %v, want %s", err, want)
	}
}

func TestDialerBadInput(t *testing.T) {
	d, err := NewDialer(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ network, address, want string }{
		{"udp", "h.example:53", `network "udp" is not supported`},
		{"tcp", "h.example", "missing port"},
		{"tcp", "h.example:https", `port "https" is not a number`},
	} {
		if _, err := d.DialContext(context.Background(), tt.network, tt.address); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("dial %s %s: error %v, want %q", tt.network, tt.address, err, tt.want)
		}
	}
}
