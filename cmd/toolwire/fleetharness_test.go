package main

// The fleet harness of issue 17: real parts only. One PostgreSQL database
// (internal/pgtest's cluster), N "toolwire serve --http" processes of the
// built binary sharing one configuration and the store, each with its own
// demo server over stdio, and Debian's haproxy in front of them
// (round-robin, no stickiness, health checks on /readyz), all on
// 127.0.0.1. The clients are go-sdk v1.8.0 clients through haproxy.
// haproxy names the replica that served each response in X-Served-By,
// which the clients' transport records.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/benchkit"
	"github.com/toolwire/toolwire/internal/pgtest"
)

// fleetStart bounds a replica's or haproxy's start.
const fleetStart = 2 * time.Minute

// haproxyPath finds Debian's haproxy; the test is skipped without it,
// except under CI=true, where .ci/run installs it.
func haproxyPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"haproxy", "/usr/sbin/haproxy"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("haproxy is not installed (.ci/run installs Debian's haproxy)")
	}
	t.Skip("haproxy is not installed: the fleet tests need a real load balancer (apt-get install haproxy)")
	return ""
}

// fleetOptions shape a cluster.
type fleetOptions struct {
	replicas int
	callers  int    // tokens caller-00 … caller-NN, role ops
	security string // the security section's lines
	extra    string // more servers, as YAML under servers
	gateway  string // more keys of the gateway section, as YAML under it
	env      []string
	files    bool // the files of one machine instead of PostgreSQL (one replica)
	// auditFile, with files, writes the audit to a file in the
	// cluster's directory (a PostgreSQL store audits to its table).
	auditFile bool
	direct    bool // no load balancer: clients reach replica r0
	// volume runs the replicas and their demo servers built without the
	// race detector: a soak's thousands of calls measure the fleet, not
	// the detector (which multiplies a call's CPU several times on a
	// 2-core machine). The fleet's paths run race-enabled in the other
	// fleet tests and in-process in the gateway's and store's tests.
	volume bool
	// before runs once the configuration is written, before the
	// replicas start (a login, say).
	before func(c *cluster)
}

// cluster is one fleet: its database, replicas and load balancer.
type cluster struct {
	t        testing.TB
	bin      string
	dir      string
	config   string
	dbURL    string
	env      []string
	replicas []*replicaProc
	proxy    *exec.Cmd
	proxyURL string // http://127.0.0.1:PORT
	tokens   []string
}

// replicaProc is one "toolwire serve --http" process.
type replicaProc struct {
	name string // as haproxy knows it: r0, r1, …
	addr string // 127.0.0.1:PORT, kept across restarts
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been waited for
	err  error

	mu     sync.Mutex
	stderr strings.Builder
}

func (r *replicaProc) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

// callerToken is the bearer token of caller i.
func callerToken(i int) string { return fmt.Sprintf("fleet-caller-token-%02d-of-the-tests", i) }

// startCluster starts a fleet: the configuration, the replicas (in
// parallel), then haproxy, and waits until haproxy sees every replica up.
func startCluster(t testing.TB, o fleetOptions) *cluster {
	t.Helper()
	var proxyBin string
	if !o.direct {
		proxyBin = haproxyPath(t)
	}
	c := &cluster{t: t, bin: e2eToolwire(t), dir: t.TempDir()}
	demo := quoteYAML(os.Args[0])
	if o.volume {
		bins := e2ePlainBinaries(t)
		c.bin, demo = bins.toolwire, quoteYAML(bins.demo)
	}
	c.env = append([]string{"XDG_CONFIG_HOME=" + filepath.Join(c.dir, "config"),
		"TOOLWIRE_PASSPHRASE=the fleet's passphrase, the same on every replica"}, o.env...)
	if !o.files {
		c.dbURL = pgtest.DB(t)
		c.env = append(c.env, storeEnv+"="+c.dbURL)
	}
	proxyPort := freePort(t)
	c.proxyURL = "http://127.0.0.1:" + strconv.Itoa(proxyPort)

	var b strings.Builder
	fmt.Fprintf(&b, "servers:\n  demo:\n    command: %s\n    env:\n      TOOLWIRE_TEST_SERVER: demo\n      GORACE: atexit_sleep_ms=0\n    tierOverrides:\n      write_note: write\n", demo)
	b.WriteString(o.extra)
	fmt.Fprintf(&b, "gateway:\n%s  resourceURL: %s/mcp\n  roles:\n    ops: [\"*\"]\n  tokens:\n", o.gateway, c.proxyURL)
	for i := range o.callers {
		c.tokens = append(c.tokens, callerToken(i))
		fmt.Fprintf(&b, "    - sha256: %s\n      subject: caller-%02d\n      role: ops\n", gateway.HashToken(callerToken(i)), i)
	}
	b.WriteString("security:\n" + o.security)
	if o.files && o.auditFile {
		fmt.Fprintf(&b, "audit:\n  file: %s\n", quoteYAML(filepath.Join(c.dir, "audit.jsonl")))
	}
	c.config = filepath.Join(c.dir, "toolwire.yaml")
	if err := os.WriteFile(c.config, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	if o.before != nil {
		o.before(c)
	}
	c.replicas = make([]*replicaProc, o.replicas)
	var wg sync.WaitGroup
	errs := make([]error, o.replicas)
	for i := range c.replicas {
		c.replicas[i] = &replicaProc{name: "r" + strconv.Itoa(i), addr: "127.0.0.1:0"}
		wg.Go(func() { errs[i] = c.start(i) })
	}
	wg.Wait()
	t.Cleanup(c.stopAll)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if o.direct {
		c.proxyURL = "http://" + c.replicas[0].addr
		return c
	}

	cfg := filepath.Join(c.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(t, proxyPort, c.replicas)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.proxy = exec.Command(proxyBin, "-db", "-f", cfg)
	c.proxy.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var proxyErr strings.Builder
	c.proxy.Stdout, c.proxy.Stderr = &proxyErr, &proxyErr
	if err := c.proxy.Start(); err != nil {
		t.Fatalf("haproxy: %v", err)
	}
	t.Cleanup(func() {
		_ = c.proxy.Process.Kill()
		_ = c.proxy.Wait()
	})
	for i := range c.replicas {
		if err := c.awaitServed(i, fleetStart); err != nil {
			t.Fatalf("%v\nhaproxy: %s", err, proxyErr.String())
		}
	}
	return c
}

// haproxyExample is the HAProxy configuration docs/fleet.md shows, which
// the tests run with their own bind address and servers.
const haproxyExample = "../../examples/fleet/haproxy.cfg"

// haproxyConfig is haproxyExample listening on 127.0.0.1:port, in front
// of replicas.
func haproxyConfig(t testing.TB, port int, replicas []*replicaProc) string {
	t.Helper()
	raw, err := os.ReadFile(haproxyExample)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	bound, servers := false, false
	for line := range strings.Lines(string(raw)) {
		switch f := strings.Fields(line); {
		case len(f) > 0 && f[0] == "bind":
			fmt.Fprintf(&b, "\tbind 127.0.0.1:%d\n", port)
			bound = true
		case len(f) > 0 && f[0] == "server":
			if !servers {
				for _, r := range replicas {
					fmt.Fprintf(&b, "\tserver %s %s check\n", r.name, r.addr)
				}
				servers = true
			}
		default:
			b.WriteString(line)
		}
	}
	if !bound || !servers {
		t.Fatalf("%s has no bind line or no server lines to replace", haproxyExample)
	}
	return b.String()
}

// freePort returns a port free on 127.0.0.1 now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

var servingLine = regexp.MustCompile(`serving MCP at http://(127\.0\.0\.1:[0-9]+)/mcp`)

// start starts replica i on its address (port 0 the first time) and
// returns once it serves.
func (c *cluster) start(i int) error {
	r := c.replicas[i]
	// A short drain delay: haproxy's checks (every 250 ms) see a
	// stopping replica within it; the tests' stops stay quick.
	cmd := exec.Command(c.bin, "--config", c.config, "serve", "--http", r.addr, "--drain-grace", "2s", "--drain-delay", "600ms")
	cmd.Env = append(e2eEnv(), c.env...)
	// A process group of its own (a kill takes its demo server too), ended
	// by the kernel if this test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("replica %s: %w", r.name, err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func() {
		r.err = cmd.Wait()
		pw.Close()
		close(r.done)
	}()
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.stderr.WriteString(line + "\n")
			r.mu.Unlock()
			if m := servingLine.FindStringSubmatch(line); m != nil {
				select {
				case serving <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case addr := <-serving:
		r.addr = addr
		return nil
	case <-r.done:
		return fmt.Errorf("replica %s exited before serving: %v\n%s", r.name, r.err, r.log())
	case <-time.After(fleetStart):
		return fmt.Errorf("replica %s did not serve within %s:\n%s", r.name, fleetStart, r.log())
	}
}

// kill sends replica i SIGKILL (its demo server with it: the process
// group) and waits for it.
func (c *cluster) kill(i int) {
	r := c.replicas[i]
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}

// stop sends replica i SIGTERM, and waits for it to drain and exit.
func (c *cluster) stop(i int) error {
	r := c.replicas[i]
	select {
	case <-r.done:
		return nil
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("replica %s: %v\n%s", r.name, r.err, r.log())
		}
		return nil
	case <-time.After(fleetStart):
		c.kill(i)
		return fmt.Errorf("replica %s did not exit after SIGTERM:\n%s", r.name, r.log())
	}
}

func (c *cluster) stopAll() {
	for i, r := range c.replicas {
		if r.cmd != nil {
			if err := c.stop(i); err != nil {
				c.t.Log(err)
			}
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) // what is left of its group
		}
	}
}

// awaitServed waits until a request through haproxy is answered by
// replica i: haproxy has seen it come up.
func (c *cluster) awaitServed(i int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		resp, err := http.Get(c.proxyURL + gateway.ReadinessPath)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Header.Get("X-Served-By") == c.replicas[i].name {
				return nil
			}
		}
		// Round-robin: the next requests go to the other replicas first.
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("haproxy did not send a request to replica %s within %s:\n%s", c.replicas[i].name, within, c.replicas[i].log())
}

// cpu returns the CPU time used so far by the replicas (and their demo
// servers) and haproxy.
func (c *cluster) cpu() time.Duration {
	var pids []int
	for _, r := range c.replicas {
		if r.cmd != nil && r.cmd.Process != nil {
			pids = append(pids, r.cmd.Process.Pid)
			if kids, err := benchkit.Descendants(r.cmd.Process.Pid); err == nil {
				for _, k := range kids {
					pids = append(pids, k.PID)
				}
			}
		}
	}
	if c.proxy != nil {
		pids = append(pids, c.proxy.Process.Pid)
	}
	var total time.Duration
	for _, pid := range pids {
		if d, err := benchkit.ProcessCPU(pid); err == nil {
			total += d
		}
	}
	return total
}

// served records which replica answered each response (haproxy's
// X-Served-By) and passes requests on with a bearer token.
type served struct {
	base  http.RoundTripper
	token string
	mu    sync.Mutex
	by    map[string]int
}

func newServed(token string) *served {
	return &served{
		base:  &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		token: token, by: map[string]int{},
	}
}

func (s *served) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.base.RoundTrip(req)
	if err == nil {
		if by := resp.Header.Get("X-Served-By"); by != "" {
			s.mu.Lock()
			s.by[by]++
			s.mu.Unlock()
		}
	}
	return resp, err
}

func (s *served) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.by))
	for k, v := range s.by {
		out[k] = v
	}
	return out
}

// dialFleet connects a go-sdk client through haproxy as the caller of
// token: a 2025-11-25 session when rev names it, 2026-07-28 when rev is
// "".
func dialFleet(ctx context.Context, c *cluster, rt *served, rev string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	var so *mcp.ClientSessionOptions
	if rev != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	return mcp.NewClient(&mcp.Implementation{Name: "fleet-" + rev, Version: "1"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: c.proxyURL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, so)
}
