//go:build unix

// Command benchproxy is a bare pass-through MCP gateway for toolwire-bench's
// peer rows, a binary of its own so that its memory is its own (the bench
// binary links much of toolwire): it starts the demo server (-demo) as its
// stdio upstream, lists its tools and serves each under "demo__" over
// Streamable HTTP on 127.0.0.1:0, printing "LISTEN <url>" on stdout once it
// accepts connections, until its stdin ends. A call is forwarded as it
// came: no policy, no validation, no audit.
//
//	benchproxy -impl mcpgo -demo PATH   mark3labs/mcp-go: its stdio client, its
//	                                    Streamable HTTP server (JSON answers)
//	benchproxy -impl sdk -demo PATH     go-sdk as released: mcp.CommandTransport,
//	                                    mcp.StreamableHTTPHandler (SSE answers)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/toolwire/toolwire/internal/bench/childhttp"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolVersion is what the proxies ask of their upstream, as the
// bench's clients ask of them.
const protocolVersion = "2025-11-25"

func main() {
	impl := flag.String("impl", "", "mcpgo or sdk")
	demo := flag.String("demo", "", "the demo server's binary")
	flag.Parse()
	if err := run(*impl, *demo); err != nil {
		fmt.Fprintln(os.Stderr, "benchproxy:", err)
		os.Exit(1)
	}
}

func run(impl, demo string) error {
	if demo == "" {
		return errors.New("-demo is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var h http.Handler
	switch impl {
	case "mcpgo":
		up, err := mcpgoclient.NewStdioMCPClient(demo, nil)
		if err != nil {
			return fmt.Errorf("starting the demo: %w", err)
		}
		// Close closes the demo's stdin, which ends it; the bench also
		// knows its PID should it outlive this process.
		defer func() { _ = up.Close() }()
		if h, err = mcpgoProxy(ctx, up); err != nil {
			return err
		}
	case "sdk":
		cmd := exec.Command(demo)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		up, err := mcp.NewClient(&mcp.Implementation{Name: "benchproxy", Version: "0"}, nil).Connect(ctx,
			&mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
		if err != nil {
			return fmt.Errorf("connecting to the demo: %w", err)
		}
		defer func() { _ = up.Close() }()
		if h, err = sdkProxy(ctx, up); err != nil {
			return err
		}
	default:
		return fmt.Errorf("-impl %q: want mcpgo or sdk", impl)
	}
	return childhttp.Serve(h)
}

// mcpgoProxy serves up's tools with mcp-go's server.
func mcpgoProxy(ctx context.Context, up *mcpgoclient.Client) (http.Handler, error) {
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcpgo.Implementation{Name: "benchproxy", Version: "0"}
	if _, err := up.Initialize(ctx, init); err != nil {
		return nil, fmt.Errorf("initializing the demo: %w", err)
	}
	tools, err := up.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the demo's tools: %w", err)
	}
	srv := mcpgoserver.NewMCPServer("benchproxy", "0", mcpgoserver.WithToolCapabilities(false))
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
	return mcpgoserver.NewStreamableHTTPServer(srv), nil
}

// sdkProxy serves up's tools with go-sdk's server and handler, default
// options.
func sdkProxy(ctx context.Context, up *mcp.ClientSession) (http.Handler, error) {
	tools, err := up.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the demo's tools: %w", err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "benchproxy", Version: "0"}, nil)
	for _, t := range tools.Tools {
		name := t.Name
		t.Name = "demo__" + name
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return up.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
		})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil), nil
}
