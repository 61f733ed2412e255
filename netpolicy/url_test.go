package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	const (
		plain    = "plain http is allowed only to a loopback address"
		scheme   = "is not allowed; want https, or http to a loopback address"
		numeric  = "non-standard form"
		userinfo = "must not contain a user name or password"
		fragment = "must not have a fragment"
		noHost   = "has no host"
		badPort  = "port must be a number from 1 to 65535"
		invalid  = "not a valid URL"
	)
	tests := []struct {
		url  string
		want string // "" to accept, else a part of the reason
	}{
		// Schemes.
		{"https://example.com/mcp", ""},
		{"HTTPS://Example.COM/mcp", ""},
		{"http://example.com/mcp", plain},
		{"ftp://example.com/x", scheme},
		{"ws://localhost/x", scheme},
		{"wss://example.com/x", scheme},
		{"file:///etc/passwd", scheme},
		{"javascript:alert(1)", scheme},
		{"//example.com/mcp", "missing scheme"},
		{"example.com/mcp", "missing scheme"},
		{"", "missing scheme"},
		{"https:example.com", noHost},
		{"http:localhost", noHost},
		{"https:///mcp", noHost},
		{"https://:443/mcp", noHost},

		// Loopback names and addresses.
		{"http://localhost/mcp", ""},
		{"http://LOCALHOST:8080/mcp", ""},
		{"http://localhost./mcp", ""},
		{"http://LocalHost.:9000", ""},
		{"http://localhost../mcp", plain},
		{"http://127.0.0.1:8080/mcp", ""},
		{"http://127.255.255.254/", ""},
		{"http://126.0.0.1/", plain},
		{"http://128.0.0.1/", plain},
		{"http://0.0.0.0/", plain},
		{"http://localhost.evil.com/", plain},
		{"https://localhost.evil.com/", ""},
		{"http://127.0.0.1.nip.io/", plain},
		{"https://127.0.0.1.nip.io/", ""},
		{"http://evil.localhost/", plain},
		{"http://localhost-1/", plain},
		{"http://lоcalhost/", plain}, // Cyrillic о

		// IPv6.
		{"http://[::1]/mcp", ""},
		{"http://[::1]:8080/mcp", ""},
		{"http://[0:0:0:0:0:0:0:1]/", ""},
		{"http://[::ffff:127.0.0.1]/", plain},
		{"https://[::ffff:127.0.0.1]/", ""},
		{"http://[::1%25lo]/", plain},
		{"http://[::2]/", plain},
		{"http://[fe80::1]/", plain},
		{"https://[2001:db8::1]:8443/mcp", ""},
		{"http://::1/", invalid},
		{"https://[1.2.3.4]/", invalid},

		// IPv4 in other forms is refused under either scheme.
		{"http://2130706433/", numeric},
		{"https://2130706433/", numeric},
		{"http://0177.0.0.1/", numeric},
		{"http://0x7f.1/", numeric},
		{"http://0x7F000001/", numeric},
		{"http://127.1/", numeric},
		{"http://127.0.1/", numeric},
		{"http://127.0.0.1./", numeric},
		{"https://1.2.3.4./", numeric},
		{"https://1.2.3.04/", numeric},
		{"https://example.0x/", numeric},
		{"https://1.2.3.4/", ""},
		{"https://example.0xg/", ""},
		{"https://123.example/", ""},

		// Internationalized names.
		{"https://bücher.example/mcp", ""},
		{"https://例え.テスト/mcp", ""},
		{"https://xn--bcher-kva.example/mcp", ""},
		{"http://bücher.example/mcp", plain},

		// Ports.
		{"https://example.com:8443/mcp", ""},
		{"http://localhost:65535/", ""},
		{"https://example.com:/mcp", ""},
		{"https://example.com:0/", badPort},
		{"https://example.com:65536/", badPort},
		{"https://example.com:99999999999999999999/", badPort},
		{"https://example.com:x/", invalid},

		// User information, fragments, broken URLs.
		{"https://user:secret@example.com/", userinfo},
		{"https://user@example.com/", userinfo},
		{"https://@example.com/", userinfo},
		{"http://user:secret@localhost/", userinfo},
		{"https://example.com/mcp#frag", fragment},
		{"https://example.com/mcp#", fragment},
		{"https://example.com/a@b?c=d@e", ""},
		{"https://exa mple.com/", invalid},
		{"https://example.com/%zz", invalid},
		{"http://[::1/", invalid},
		{"https://example.com/\n", invalid},
	}
	for _, tt := range tests {
		u, err := CheckURL(tt.url)
		if tt.want == "" {
			if err != nil {
				t.Errorf("CheckURL(%q) = %v, want accepted", tt.url, err)
			} else if u == nil || u.Host == "" {
				t.Errorf("CheckURL(%q) returned %v and no error", tt.url, u)
			}
			continue
		}
		var ue *URLError
		if !errors.As(err, &ue) {
			t.Errorf("CheckURL(%q) = %v, want a *URLError containing %q", tt.url, err, tt.want)
			continue
		}
		if !strings.Contains(ue.Reason, tt.want) {
			t.Errorf("CheckURL(%q) reason = %q, want it to contain %q", tt.url, ue.Reason, tt.want)
		}
		if u != nil {
			t.Errorf("CheckURL(%q) returned a URL with an error", tt.url)
		}
	}
}

func TestCheckURLErrorText(t *testing.T) {
	tests := []struct{ url, want string }{
		{"http://example.com/mcp",
			`url "http://example.com/mcp": plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost); use https`},
		{"ftp://example.com/x",
			`url "ftp://example.com/x": scheme "ftp" is not allowed; want https, or http to a loopback address`},
		{"https://bob:hunter2@example.com/mcp?x=1",
			`url "https://example.com/mcp?x=1": must not contain a user name or password; send credentials in a header`},
		{"http://bob:hunter2@example.com/mcp",
			`url "http://example.com/mcp": must not contain a user name or password; send credentials in a header`},
		// Unparsable: everything up to the last '@' goes, and so does the
		// parser's message, which may quote part of the password.
		{"https://bob:hun/ter2@example.com/",
			`url "https://example.com/": not a valid URL`},
		{"https://bob:%zz@example.com/",
			`url "https://example.com/": not a valid URL`},
		{"https://bob:hunter2@[::1/",
			`url "https://[::1/": not a valid URL`},
		{"https://example.com:x/",
			`url "https://example.com:x/": not a valid URL: invalid port ":x" after host`},
		// No authority, yet an '@' that may be a password's end.
		{"http:bob:hunter2@example.com",
			`url "http:example.com": has no host`},
	}
	for _, tt := range tests {
		_, err := CheckURL(tt.url)
		if err == nil || err.Error() != tt.want {
			t.Errorf("CheckURL(%q) error:\n got %v\nwant %s", tt.url, err, tt.want)
		}
	}
}

// marker stands in for a password in FuzzCheckURL; no constant text of
// the package contains it.
const marker = "Pw9Qz7Xk"

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/mcp", "http://localhost:8080/", "http://127.0.0.1/", "http://[::1]/",
		"http://2130706433/", "http://0177.0.0.1/", "http://0x7f.1/", "http://localhost.evil.com/",
		"http://127.0.0.1.nip.io/", "https://bücher.example/", "https://u:p@h/", "http://[::ffff:127.0.0.1]/",
		"https://h/#f", "http://localhost./", "https://h:0/", "http://[::1%25lo]/", "ftp://h/", "http:h",
		"https://h/%zz", "https://a@b@c/", "h:p@q",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := CheckURL(raw)
		if err == nil {
			host := u.Hostname()
			switch {
			case u.Scheme != "https" && u.Scheme != "http":
				t.Fatalf("CheckURL(%q) accepted scheme %q", raw, u.Scheme)
			case host == "":
				t.Fatalf("CheckURL(%q) accepted an empty host", raw)
			case u.User != nil || strings.Contains(raw, "#"):
				t.Fatalf("CheckURL(%q) accepted user information or a fragment", raw)
			case u.Scheme == "http" && !loopbackByHand(host):
				t.Fatalf("CheckURL(%q) accepted plain http to %q", raw, host)
			}
			return
		}
		var ue *URLError
		if !errors.As(err, &ue) {
			t.Fatalf("CheckURL(%q) error %T is not a *URLError", raw, err)
		}
		if strings.Contains(raw, marker) {
			return
		}
		// The same URL with a password in it: the error must not show it.
		n := schemeEnd(raw)
		if n == 0 || !strings.HasPrefix(raw[n:], "//") {
			return
		}
		withPw := raw[:n+2] + "user:" + marker + "@" + raw[n+2:]
		if _, err := CheckURL(withPw); err == nil {
			t.Fatalf("CheckURL(%q) accepted a password", withPw)
		} else if strings.Contains(err.Error(), marker) {
			t.Fatalf("CheckURL(%q) error shows the password: %v", withPw, err)
		}
	})
}

// loopbackByHand is the loopback test written out independently of
// IsLoopbackHost: localhost, 127.x.x.x in four decimal parts, or ::1.
func loopbackByHand(host string) bool {
	switch strings.ToLower(host) {
	case "localhost", "localhost.":
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	if a.Is4() {
		return a.As4()[0] == 127
	}
	return a == netip.IPv6Loopback()
}
