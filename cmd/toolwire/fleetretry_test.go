package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/gateway"
)

// deadOnRequest is a backend on 127.0.0.1 that answers its health checks
// and closes every other request's connection once the request is read,
// with nothing sent back: what haproxy sees on a kept-alive connection to
// a replica that was killed. It counts the requests it read by method.
type deadOnRequest struct {
	ln   net.Listener
	mu   sync.Mutex
	seen map[string]int
	wg   sync.WaitGroup
}

func startDeadOnRequest(t *testing.T) *deadOnRequest {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &deadOnRequest{ln: ln, seen: map[string]int{}}
	d.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			d.wg.Go(func() { d.serve(conn) })
		}
	})
	t.Cleanup(func() { ln.Close(); d.wg.Wait() })
	return d
}

func (d *deadOnRequest) serve(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Path == gateway.ReadinessPath {
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
			continue
		}
		d.mu.Lock()
		d.seen[req.Method]++
		d.mu.Unlock()
		return // closed, nothing answered
	}
}

func (d *deadOnRequest) count(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[method]
}

// Issue 22.18: the example haproxy.cfg, run by the real haproxy in front
// of a replica that reads a request and dies without answering and a
// healthy one: a GET or DELETE that got nothing back is tried again on
// the healthy replica and answered; a POST (a tool call, which may have
// run) is not sent twice: the client gets haproxy's 502, naming the
// replica in X-Served-By.
func TestFleetHAProxyRetriesOnlyWhatCannotRunTwice(t *testing.T) {
	t.Parallel()
	proxyBin := haproxyPath(t)
	dead := startDeadOnRequest(t)
	var healthy atomic.Int64
	good := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != gateway.ReadinessPath {
			healthy.Add(1)
		}
		_, _ = io.WriteString(w, "ok\n")
	})}
	goodLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = good.Serve(goodLn) }()
	t.Cleanup(func() { good.Close() })

	replicas := []*replicaProc{{name: "dead", addr: dead.ln.Addr().String()}, {name: "good", addr: goodLn.Addr().String()}}
	var base string
	// The free port can be taken by another test between freePort and
	// haproxy's bind: haproxy then exits saying so, and is started again
	// on another port (three tries).
	for try := 1; ; try++ {
		port := freePort(t)
		cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(cfg, []byte(haproxyConfig(t, port, replicas)), 0o600); err != nil {
			t.Fatal(err)
		}
		proxy := exec.Command(proxyBin, "-db", "-f", cfg)
		proxy.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var proxyOut strings.Builder
		proxy.Stdout, proxy.Stderr = &proxyOut, &proxyOut
		if err := proxy.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = proxy.Wait(); close(exited) }()
		t.Cleanup(func() { _ = proxy.Process.Kill(); <-exited })
		base = fmt.Sprintf("http://127.0.0.1:%d", port)
		up := false
		for range 200 { // both replicas pass their checks: /readyz through haproxy
			if s := readyStatus(base); s == http.StatusOK {
				up = true
				break
			}
			select {
			case <-exited:
			case <-time.After(25 * time.Millisecond):
				continue
			}
			break
		}
		if up {
			break
		}
		_ = proxy.Process.Kill()
		<-exited
		if try < 3 && strings.Contains(proxyOut.String(), "Address already in use") {
			continue
		}
		t.Fatalf("haproxy did not serve /readyz:\n%s", proxyOut.String())
	}

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	do := func(method string) (int, string) {
		req, _ := http.NewRequest(method, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s through haproxy: %v", method, err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Served-By")
	}
	// Round-robin: of every two requests one goes first to the dead
	// replica.
	const n = 6
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		for range n {
			if status, by := do(method); status != http.StatusOK || by != "good" {
				t.Errorf("%s: status %d served by %q, want 200 by good (tried again after the dead replica)", method, status, by)
			}
		}
		if got := dead.count(method); got == 0 {
			t.Errorf("the dead replica read no %s: the test did not exercise a retry", method)
		}
	}
	posts502 := 0
	for range n {
		switch status, by := do(http.MethodPost); {
		case status == http.StatusBadGateway && by == "dead":
			posts502++
		case status == http.StatusOK && by == "good":
		default:
			t.Errorf("POST: status %d served by %q, want 200 by good or 502 by dead", status, by)
		}
	}
	if got := dead.count(http.MethodPost); got != posts502 || got == 0 {
		t.Errorf("the dead replica read %d POSTs and %d got 502: each POST it read must be answered 502, never sent again", got, posts502)
	}
	if got := healthy.Load(); got != int64(2*n+n-posts502) {
		t.Errorf("the healthy replica served %d requests, want %d (every GET and DELETE, the POSTs not sent to the dead one)", got, 2*n+n-posts502)
	}
}

// readyStatus is /readyz's status now, or 0 when it cannot be reached.
func readyStatus(base string) int {
	resp, err := http.Get(base + gateway.ReadinessPath)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
