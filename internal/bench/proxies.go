//go:build unix

package bench

import (
	"context"
	"fmt"
	"os/exec"
)

// The peer rows' gateways are benchproxy (internal/bench/benchproxy), a
// binary of its own built with demoserver and toolwire: bare pass-throughs
// written with mark3labs/mcp-go (the fastest peer's stand-in, answering
// POSTs with JSON) and with go-sdk as released.

// startProxy starts benchproxy -impl impl (mcpgo or sdk) in front of a
// demo of its own and returns its URL, its process and the PIDs of it and
// its upstream.
func (b *bench) startProxy(ctx context.Context, impl string) (string, *proc, []int, error) {
	if b.demoErr != nil {
		return "", nil, nil, b.demoErr
	}
	if b.proxyErr != nil {
		return "", nil, nil, b.proxyErr
	}
	cmd := exec.Command(b.proxyBin, "-impl", impl, "-demo", b.demoBin)
	cmd.Env = childEnv()
	url, p, err := startListening(ctx, b, impl+" proxy", cmd)
	if err != nil {
		return "", nil, nil, err
	}
	// The proxy connects to its upstream before it listens: the demo is
	// there.
	pids := append([]int{p.pid()}, b.procs.adoptDescendants(p.pid())...)
	if len(pids) < 2 {
		return "", nil, nil, withTail(fmt.Errorf("the %s proxy (pid %d) has no upstream child", impl, p.pid()), p.tail)
	}
	return url, p, pids, nil
}

// openProxy returns an opener of a go-sdk session, asking for version,
// through benchproxy -impl impl.
func openProxy(impl, version string) func(context.Context, *bench) (*target, error) {
	return func(ctx context.Context, b *bench) (*target, error) {
		url, p, pids, err := b.startProxy(ctx, impl)
		if err != nil {
			return nil, err
		}
		cs, err := b.sdkHTTPSessionVersion(ctx, url, version)
		if err != nil {
			return nil, withTail(fmt.Errorf("connecting to the %s proxy: %w", impl, err), p.tail)
		}
		roles := []string{"proxy"}
		for range pids[1:] {
			roles = append(roles, "upstream")
		}
		return &target{call: sdkCaller(cs, "demo__echo"), pids: pids, roles: roles, close: func() { _ = cs.Close() }}, nil
	}
}
