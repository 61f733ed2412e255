package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxyRequest sends raw to the proxy and returns the status line of its
// answer and the connection, which the caller closes.
func proxyRequest(t *testing.T, p *Proxy, raw string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.Port()))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return strings.TrimSpace(status), c, r
}

// The proxy lets through to the allowed hosts only, whatever the
// request's form, and ends its tunnels when closed.
func TestProxy(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "backend") }))
	defer backend.Close()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	var mu sync.Mutex
	var refused []string
	p, err := NewProxy(ProxyOptions{Allow: []string{"127.0.0.1", "*.example.com"}, Refused: func(host string, _ error) {
		mu.Lock()
		refused = append(refused, host)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	backendHost := strings.TrimPrefix(backend.URL, "http://")
	_, port, _ := net.SplitHostPort(backendHost)

	for _, c := range []struct{ name, raw, want string }{
		{"plain HTTP to an allowed host", "GET " + backend.URL + "/ HTTP/1.1\r\nHost: " + backendHost + "\r\n\r\n", "HTTP/1.1 200 OK"},
		{"plain HTTP to another name of it", "GET http://localhost:" + port + "/ HTTP/1.1\r\nHost: localhost\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"CONNECT to another name of it", "CONNECT localhost:" + port + " HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"CONNECT to cloud metadata", "CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: 169.254.169.254:80\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"CONNECT to an IPv6 loopback", "CONNECT [::1]:" + port + " HTTP/1.1\r\nHost: [::1]:" + port + "\r\n\r\n", "HTTP/1.1 403 Forbidden"},
		{"an origin-form request", "GET / HTTP/1.1\r\nHost: " + backendHost + "\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"another scheme", "GET ftp://127.0.0.1:" + port + "/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "HTTP/1.1 400 Bad Request"},
	} {
		status, conn, _ := proxyRequest(t, p, c.raw)
		conn.Close()
		if status != c.want {
			t.Errorf("%s: %q, want %q", c.name, status, c.want)
		}
	}
	mu.Lock()
	if len(refused) != 4 {
		t.Errorf("refusals heard: %q, want 4", refused)
	}
	mu.Unlock()

	// A tunnel carries bytes both ways, and Close ends it.
	status, conn, r := proxyRequest(t, p, "CONNECT "+echo.Addr().String()+" HTTP/1.1\r\nHost: "+echo.Addr().String()+"\r\n\r\n")
	defer conn.Close()
	if status != "HTTP/1.1 200 Connection established" {
		t.Fatalf("CONNECT to an allowed host: %q", status)
	}
	if blank, _ := r.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("after the status line: %q", blank)
	}
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); line != "ping\n" {
		t.Fatalf("through the tunnel: %q, %v", line, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("the tunnel is still open after Close")
	}
}
