package gateway

import (
	"errors"
	"net"
	"testing"
)

// CheckExposure refuses, fail-closed, an unauthenticated gateway off
// loopback and bearer tokens in the clear off loopback, each unless
// allowed.
func TestCheckExposure(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr string
		e    Exposure
		want error
	}{
		{"0.0.0.0:8443", Exposure{Authenticated: true}, ErrPlainBearer},
		{"10.0.0.5:8443", Exposure{Authenticated: true}, ErrPlainBearer},
		{"[::]:8443", Exposure{Authenticated: true}, ErrPlainBearer},
		{"0.0.0.0:8443", Exposure{Authenticated: true, TLS: true}, nil},
		{"0.0.0.0:8443", Exposure{Authenticated: true, AllowPlainBearer: true}, nil},
		{"127.0.0.1:8443", Exposure{Authenticated: true}, nil},
		{"localhost:8443", Exposure{Authenticated: true}, nil},
		{"0.0.0.0:8443", Exposure{}, ErrUnauthenticatedExposure},
		{"0.0.0.0:8443", Exposure{TLS: true}, ErrUnauthenticatedExposure},
		{"0.0.0.0:8443", Exposure{AllowUnauthenticated: true}, nil},
		{"[::1]:8443", Exposure{}, nil},
	} {
		if err := CheckExposure(c.addr, c.e); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("CheckExposure(%q, %+v) = %v, want %v", c.addr, c.e, err, c.want)
		}
	}
	if err := CheckExposure("no-port", Exposure{}); err == nil {
		t.Error("CheckExposure accepted an address without a port")
	}
}

func TestResourceURLFor(t *testing.T) {
	t.Parallel()
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	for _, c := range []struct {
		addr string
		tls  bool
		want string
	}{
		{"127.0.0.1:0", false, "http://127.0.0.1:41234/mcp"},
		{"gw.example.com:0", true, "https://gw.example.com:41234/mcp"},
		{"[::1]:0", false, "http://[::1]:41234/mcp"},
		{"0.0.0.0:8443", false, ""},
		{":8443", false, ""},
	} {
		if got := ResourceURLFor(c.addr, bound, c.tls); got != c.want {
			t.Errorf("ResourceURLFor(%q, tls %v) = %q, want %q", c.addr, c.tls, got, c.want)
		}
	}
}
