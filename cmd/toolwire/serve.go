package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/gateway"
)

func newServeCommand(e *env, g *globalFlags) *cobra.Command {
	var (
		stdio                    bool
		httpAddr                 string
		stateless                bool
		approveWrite, approveDel string
	)
	cmd := &cobra.Command{
		Use:   "serve (--stdio | --http ADDR)",
		Short: "Serve every configured server's tools over MCP, through toolwire's policy",
		Long: `Serve the registry over MCP: every tool of every configured server, under its
registered name, to an MCP client (Claude Desktop, an IDE, an agent).

Each call goes through toolwire's executor: its arguments are validated, it
is audited, and a write or destructive call is approved first. By default
approval is asked of the connected client's user through MCP elicitation,
showing the validated arguments; a client that cannot be asked is refused
with an error result. --approve-write and --approve-destructive choose
elicit, deny or allow per tier.

Tools are advertised with annotations derived from their tiers: read tools
claim readOnlyHint, destructive tools destructiveHint, tools of upstream
servers openWorldHint.

--http serves Streamable HTTP at /mcp. For now it listens only on loopback
addresses: caller authentication is not built yet, and an unauthenticated
gateway must not be reachable from elsewhere.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stdio == (httpAddr != "") {
				return &exitError{exitUsage, errors.New("give exactly one of --stdio and --http ADDR")}
			}
			if stateless && httpAddr == "" {
				return &exitError{exitUsage, errors.New("--stateless goes with --http")}
			}
			policy := gateway.ApprovalPolicy{}
			var err error
			if policy.Write, err = gateway.ParseApproval(approveWrite); err != nil {
				return &exitError{exitUsage, fmt.Errorf("--approve-write: %w", err)}
			}
			if policy.Destructive, err = gateway.ParseApproval(approveDel); err != nil {
				return &exitError{exitUsage, fmt.Errorf("--approve-destructive: %w", err)}
			}
			var ln net.Listener
			if httpAddr != "" {
				// Bind before starting servers, so a bad address fails fast.
				if ln, err = listenLoopback(httpAddr); err != nil {
					return &exitError{exitUsage, err}
				}
				defer ln.Close()
			}
			w, err := open(cmd.Context(), e, g, openOptions{confirmer: gateway.NewApprover(policy)})
			if err != nil {
				return err
			}
			defer w.close()
			gw := gateway.New(w.executor, nil)
			srv, stop := gw.Server(nil)
			defer stop()
			if stdio {
				t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
				if err := srv.Run(cmd.Context(), t); err != nil && !errors.Is(err, context.Canceled) {
					return &exitError{exitToolErr, fmt.Errorf("serving stdio: %w", err)}
				}
				return nil
			}
			return serveHTTP(cmd.Context(), e, ln, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{Stateless: stateless}))
		},
	}
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve MCP on stdin and stdout")
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve Streamable HTTP at http://`ADDR`/mcp (loopback only for now)")
	cmd.Flags().BoolVar(&stateless, "stateless", false, "with --http, serve without sessions")
	cmd.Flags().StringVar(&approveWrite, "approve-write", "elicit", "how write calls are approved: elicit, deny or allow")
	cmd.Flags().StringVar(&approveDel, "approve-destructive", "elicit", "how destructive calls are approved: elicit, deny or allow")
	return cmd
}

// listenLoopback listens on addr, refusing any address that is not a
// loopback one: the gateway has no caller authentication yet.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--http %q: only loopback addresses (127.0.0.1, ::1, localhost) until caller authentication is built", addr)
	}
	return net.Listen("tcp", addr)
}

// serveHTTP serves h at /mcp on ln until ctx ends, then shuts down within a
// bounded time.
func serveHTTP(ctx context.Context, e *env, ln net.Listener, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(e.stderr, "toolwire: serving MCP at http://%s/mcp\n", ln.Addr())
	select {
	case err := <-errc:
		return &exitError{exitToolErr, fmt.Errorf("serving http: %w", err)}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close() // long-lived event streams never go idle
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
