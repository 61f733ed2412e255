//go:build unix

package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
)

// serveMCPGoProxy is the mcpgo-proxy child: a bare pass-through gateway
// written with mark3labs/mcp-go, the stand-in for the fastest peer of
// issue 26. It starts the demo server (-demo) as its stdio upstream with
// mcp-go's client, lists its tools and serves each under "demo__" with
// mcp-go's Streamable HTTP server, whose answers to POSTs are JSON
// (application/json) unless a request streams. A call is forwarded as it
// came: no policy, no validation, no audit.
func serveMCPGoProxy(args []string) error {
	var demo string
	if err := childFlags("mcpgo-proxy", args, func(fs *flag.FlagSet) {
		fs.StringVar(&demo, "demo", "", "the demo server's binary")
	}); err != nil {
		return err
	}
	if demo == "" {
		return errors.New("-demo is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := mcpgoclient.NewStdioMCPClient(demo, nil)
	if err != nil {
		return fmt.Errorf("starting the demo: %w", err)
	}
	// The demo ends when its stdin closes: Close does that, and the parent
	// benchmark knows the demo's PID should it outlive this process.
	defer func() { _ = up.Close() }()
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcpgo.Implementation{Name: "toolwire-bench-mcpgo-proxy", Version: "0"}
	if _, err := up.Initialize(ctx, init); err != nil {
		return fmt.Errorf("initializing the demo: %w", err)
	}
	tools, err := up.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		return fmt.Errorf("listing the demo's tools: %w", err)
	}
	srv := mcpgoserver.NewMCPServer("toolwire-bench-mcpgo-proxy", "0", mcpgoserver.WithToolCapabilities(false))
	for _, t := range tools.Tools {
		name := t.Name
		t.Name = "demo__" + name
		srv.AddTool(t, func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			fwd := mcpgo.CallToolRequest{}
			fwd.Params.Name = name
			fwd.Params.Arguments = req.Params.Arguments
			return up.CallTool(ctx, fwd)
		})
	}
	return serveHTTPChild(mcpgoserver.NewStreamableHTTPServer(srv))
}

// serveSDKProxy is the sdk-proxy child: the same pass-through as
// mcpgo-proxy written with go-sdk as released (its stdio client over
// mcp.CommandTransport, its StreamableHTTPHandler with default options:
// sessions, SSE answers). The bare go-sdk proxy issue 26 compares the
// gateway's memory with.
func serveSDKProxy(args []string) error {
	var demo string
	if err := childFlags("sdk-proxy", args, func(fs *flag.FlagSet) {
		fs.StringVar(&demo, "demo", "", "the demo server's binary")
	}); err != nil {
		return err
	}
	if demo == "" {
		return errors.New("-demo is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(demo)
	childAttrs(cmd)
	up, err := mcp.NewClient(&mcp.Implementation{Name: "toolwire-bench-sdk-proxy", Version: "0"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		return fmt.Errorf("connecting to the demo: %w", err)
	}
	defer func() { _ = up.Close() }()
	tools, err := up.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("listing the demo's tools: %w", err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolwire-bench-sdk-proxy", Version: "0"}, nil)
	for _, t := range tools.Tools {
		name := t.Name
		t.Name = "demo__" + name
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return up.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
		})
	}
	return serveHTTPChild(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
}

// startProxy starts the mode child (mcpgo-proxy or sdk-proxy) in front of
// a demo of its own and returns its URL, its process and the PIDs of it
// and its upstream.
func (b *bench) startProxy(ctx context.Context, mode string) (string, *proc, []int, error) {
	if b.demoErr != nil {
		return "", nil, nil, b.demoErr
	}
	url, p, err := startHTTPChild(ctx, b, mode, mode, "-demo", b.demoBin)
	if err != nil {
		return "", nil, nil, err
	}
	// The proxy connects to its upstream before it listens: the demo is
	// there.
	pids := append([]int{p.pid()}, b.procs.adoptDescendants(p.pid())...)
	if len(pids) < 2 {
		return "", nil, nil, withTail(fmt.Errorf("%s (pid %d) has no upstream child", mode, p.pid()), p.tail)
	}
	return url, p, pids, nil
}

// openProxy returns an opener of a go-sdk session, asking for version,
// through the mode child (mcpgo-proxy or sdk-proxy).
func openProxy(mode, version string) func(context.Context, *bench) (*target, error) {
	return func(ctx context.Context, b *bench) (*target, error) {
		url, p, pids, err := b.startProxy(ctx, mode)
		if err != nil {
			return nil, err
		}
		cs, err := b.sdkHTTPSessionVersion(ctx, url, version)
		if err != nil {
			return nil, withTail(fmt.Errorf("connecting to %s: %w", mode, err), p.tail)
		}
		roles := []string{"proxy"}
		for range pids[1:] {
			roles = append(roles, "upstream")
		}
		return &target{call: sdkCaller(cs, "demo__echo"), pids: pids, roles: roles, close: func() { _ = cs.Close() }}, nil
	}
}
