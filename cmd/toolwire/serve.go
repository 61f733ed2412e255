package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/stdioconn"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/netpolicy"
)

func newServeCommand(e *env, g *globalFlags) *cobra.Command {
	var (
		stdio                    bool
		httpAddr                 string
		stateless                bool
		insecureNoAuth           bool
		unprefixed               bool
		maxBody                  int64
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
with an error result. The configuration's gateway.approvals chooses elicit,
deny or allow per tier and per tool; --approve-write and --approve-destructive,
when given, replace its per-tier values.

Tools are advertised with annotations derived from their tiers: read tools
claim readOnlyHint, destructive tools destructiveHint, tools of upstream
servers openWorldHint.

--http serves Streamable HTTP at /mcp. When the configuration has
gateway.tokens, every request must carry one of them as a bearer token
(401 with a WWW-Authenticate challenge otherwise), each caller sees and may
call only the tools its role lists in gateway.roles, its subject is on every
audit event, and the RFC 9728 protected-resource metadata is served at
/.well-known/oauth-protected-resource; any address may then be used.
gateway.jwt does the same for JWTs of an issuer, checked against its JWK
set (fetched at start-up: failing to is exit status 1), issuer and audience,
the role coming from a claim; with both, a token is tried as a static token
first, then as a JWT.
Without tokens or jwt only loopback addresses are accepted, unless
--insecure-no-auth says that anyone who can reach the address may call
every tool. "toolwire token new" makes a token and its hash.

--max-body BYTES limits the size of a request body over HTTP: a larger one
is refused with 413 Request Entity Too Large without being parsed.
0 (the default) keeps go-sdk's limit of 4 MiB.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tuneGC(e.lookupEnv) // a long-running command
			if stdio == (httpAddr != "") {
				return &exitError{exitUsage, errors.New("give exactly one of --stdio and --http ADDR")}
			}
			if stateless && httpAddr == "" {
				return &exitError{exitUsage, errors.New("--stateless goes with --http")}
			}
			if insecureNoAuth && httpAddr == "" {
				return &exitError{exitUsage, errors.New("--insecure-no-auth goes with --http")}
			}
			if cmd.Flags().Changed("max-body") && httpAddr == "" {
				return &exitError{exitUsage, errors.New("--max-body goes with --http")}
			}
			if maxBody < 0 {
				return &exitError{exitUsage, fmt.Errorf("--max-body %d: give a number of bytes, or 0 for the default of 4 MiB", maxBody)}
			}
			// The gateway section decides whether the address may be
			// bound, which happens before any server starts.
			file, err := loadConfig(e, g)
			if err != nil {
				return err
			}
			gwc := file.Gateway
			policy, err := approvalPolicy(gwc, cmd.Flags().Changed, approveWrite, approveDel)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			var (
				ln   net.Listener
				opts gateway.HTTPOptions
			)
			if httpAddr != "" {
				if opts, err = httpOptions(cmd.Context(), gwc, stateless); err != nil {
					if xe := (*exitError)(nil); errors.As(err, &xe) {
						return err
					}
					return &exitError{exitUsage, err}
				}
				opts.MaxBodyBytes = maxBody
				authenticated := opts.Verifier != nil
				if ln, err = listenGateway(httpAddr, authenticated, insecureNoAuth); err != nil {
					return &exitError{exitUsage, err}
				}
				defer ln.Close()
				announceAuth(e.stderr, gwc, httpAddr, ln, &opts, insecureNoAuth)
			}
			// A stateless gateway cannot ask its clients anything, so its
			// upstreams are not told that they may ask.
			relay := mcpclient.RelayCapabilities{Sampling: !stateless, Elicitation: !stateless}
			w, err := open(cmd.Context(), e, g, openOptions{confirmer: gateway.NewApprover(policy), file: file, relay: relay})
			if err != nil {
				return err
			}
			defer w.close()
			var upstreams []gateway.Upstream
			for _, srv := range w.manager.Servers() {
				upstreams = append(upstreams, srv)
			}
			gw := gateway.New(w.executor, &gateway.Options{
				Unprefixed: unprefixed, Upstreams: upstreams,
				MaxResultBytes: effectiveSecurity(w.file, g).ResultLimit(),
			})
			if err := gw.Collisions(); err != nil {
				return &exitError{exitUsage, fmt.Errorf("--unprefixed: %w", err)}
			}
			if stdio {
				srv, stop := gw.Server(nil)
				defer stop()
				t := &stdioconn.Transport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}, AnswerMalformed: true}
				if err := srv.Run(cmd.Context(), t); err != nil && !errors.Is(err, context.Canceled) {
					return &exitError{exitToolErr, fmt.Errorf("serving stdio: %w", err)}
				}
				return nil
			}
			h := gw.Handler(opts)
			defer h.Close()
			return serveHTTP(cmd.Context(), e, ln, h)
		},
	}
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve MCP on stdin and stdout")
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve Streamable HTTP at http://`ADDR`/mcp (loopback only unless gateway.tokens or gateway.jwt are configured, or --insecure-no-auth)")
	cmd.Flags().BoolVar(&stateless, "stateless", false, "with --http, serve without sessions")
	cmd.Flags().BoolVar(&unprefixed, "unprefixed", false, "serve tools under their servers' own names (for a single upstream); two tools with the same name are refused at start-up")
	cmd.Flags().Int64Var(&maxBody, "max-body", 0, "with --http, refuse request bodies larger than `BYTES` with 413 (0: go-sdk's default, 4 MiB)")
	cmd.Flags().BoolVar(&insecureNoAuth, "insecure-no-auth", false, "with --http and no gateway.tokens or gateway.jwt, accept a non-loopback address: anyone who can reach it may call every tool")
	cmd.Flags().StringVar(&approveWrite, "approve-write", "elicit", "how write calls are approved: elicit, deny or allow (default: gateway.approvals.write, else elicit)")
	cmd.Flags().StringVar(&approveDel, "approve-destructive", "elicit", "how destructive calls are approved: elicit, deny or allow (default: gateway.approvals.destructive, else elicit)")
	return cmd
}

// approvalPolicy is the configuration's approvals with the tier flags the
// user gave (changed says which) in place of its per-tier values. Per-tool
// entries stay: they name tools, which the flags do not.
func approvalPolicy(gwc *config.Gateway, changed func(string) bool, write, destructive string) (gateway.ApprovalPolicy, error) {
	var p gateway.ApprovalPolicy
	var err error
	if gwc != nil {
		a := gwc.Approvals
		if a.Write != "" {
			if p.Write, err = gateway.ParseApproval(a.Write); err != nil {
				return p, fmt.Errorf("gateway.approvals.write: %w", err)
			}
		}
		if a.Destructive != "" {
			if p.Destructive, err = gateway.ParseApproval(a.Destructive); err != nil {
				return p, fmt.Errorf("gateway.approvals.destructive: %w", err)
			}
		}
		if len(a.Tools) > 0 {
			p.Tools = make(map[string]gateway.Approval, len(a.Tools))
			for name, s := range a.Tools {
				if p.Tools[name], err = gateway.ParseApproval(s); err != nil {
					return p, fmt.Errorf("gateway.approvals.tools.%s: %w", name, err)
				}
			}
		}
	}
	if changed("approve-write") {
		if p.Write, err = gateway.ParseApproval(write); err != nil {
			return p, fmt.Errorf("--approve-write: %w", err)
		}
	}
	if changed("approve-destructive") {
		if p.Destructive, err = gateway.ParseApproval(destructive); err != nil {
			return p, fmt.Errorf("--approve-destructive: %w", err)
		}
	}
	return p, nil
}

// httpOptions builds the gateway's HTTP options from its configuration:
// with tokens or jwt, a verifier of them and the roles; without, no
// authentication. The JWT verifier fetches its JWK set now: failing to is
// an error of exit status 1, naming the URL.
func httpOptions(ctx context.Context, gwc *config.Gateway, stateless bool) (gateway.HTTPOptions, error) {
	opts := gateway.HTTPOptions{Stateless: stateless}
	if gwc == nil || (len(gwc.Tokens) == 0 && gwc.JWT == nil) {
		return opts, nil
	}
	var verifiers []auth.TokenVerifier
	if len(gwc.Tokens) > 0 {
		tokens := make([]gateway.StaticToken, len(gwc.Tokens))
		for i, t := range gwc.Tokens {
			tokens[i] = gateway.StaticToken{SHA256: t.SHA256, Subject: t.Subject, Role: t.Role}
		}
		verifier, err := gateway.StaticVerifier(tokens)
		if err != nil {
			return opts, fmt.Errorf("gateway.tokens: %w", err)
		}
		verifiers = append(verifiers, verifier)
	}
	roles := gateway.Roles(gwc.Roles)
	if err := roles.Validate(); err != nil {
		return opts, fmt.Errorf("gateway.roles: %w", err)
	}
	opts.AuthorizationServers = gwc.AuthorizationServers
	if j := gwc.JWT; j != nil {
		verifier, err := gateway.JWTVerifier(ctx, gateway.JWTOptions{
			JWKSURL: j.JWKSURL, Issuer: j.Issuer, Audience: j.Audience, RoleClaim: j.RoleClaim,
		})
		if err != nil {
			return opts, &exitError{exitToolErr, fmt.Errorf("gateway.jwt: %w", err)}
		}
		verifiers = append(verifiers, verifier)
		if len(opts.AuthorizationServers) == 0 {
			opts.AuthorizationServers = []string{j.Issuer}
		}
	}
	opts.Verifier, opts.Roles = anyVerifier(verifiers), roles
	opts.ResourceURL = gwc.ResourceURL
	return opts, nil
}

// anyVerifier accepts a token that any of verifiers accepts, asking them in
// order. When all refuse it, the error is the last one's (each wraps
// auth.ErrInvalidToken); an error of another kind ends the search.
func anyVerifier(verifiers []auth.TokenVerifier) auth.TokenVerifier {
	if len(verifiers) == 1 {
		return verifiers[0]
	}
	return func(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
		err := fmt.Errorf("%w: no verifier", auth.ErrInvalidToken)
		for _, v := range verifiers {
			var info *auth.TokenInfo
			if info, err = v(ctx, token, req); err == nil {
				return info, nil
			}
			if !errors.Is(err, auth.ErrInvalidToken) {
				return nil, err
			}
		}
		return nil, err
	}
}

// listenGateway listens on addr. Without caller authentication only a
// loopback address is accepted, unless insecure says otherwise: an
// unauthenticated gateway lets anyone who reaches it call every tool.
func listenGateway(addr string, authenticated, insecure bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	if !authenticated && !insecure && !netpolicy.IsLoopbackHost(host) {
		return nil, fmt.Errorf("--http %q: without caller authentication only loopback addresses (127.0.0.1, ::1, localhost) are served; "+
			"configure gateway.tokens (\"toolwire token new\" makes one) or gateway.jwt, or pass --insecure-no-auth to let anyone who can reach this address call every tool", addr)
	}
	return net.Listen("tcp", addr)
}

// announceAuth settles the resource URL and says on stderr what protects
// the gateway, loudly when nothing does.
func announceAuth(stderr io.Writer, gwc *config.Gateway, addr string, ln net.Listener, opts *gateway.HTTPOptions, insecure bool) {
	host, _, _ := net.SplitHostPort(addr)
	if opts.Verifier == nil {
		if insecure && !netpolicy.IsLoopbackHost(host) {
			fmt.Fprintf(stderr, "toolwire: WARNING: --insecure-no-auth: serving %s WITHOUT CALLER AUTHENTICATION.\n"+
				"toolwire: WARNING: anyone who can reach this address can list and call every tool; approvals still apply.\n", ln.Addr())
		}
		if gwc != nil && (gwc.Roles != nil || gwc.ResourceURL != "" || gwc.AuthorizationServers != nil) {
			fmt.Fprintln(stderr, "toolwire: warning: gateway.tokens is empty and gateway.jwt is not set, so callers are not authenticated and gateway.roles, resourceURL and authorizationServers have no effect")
		}
		return
	}
	if insecure {
		fmt.Fprintln(stderr, "toolwire: note: --insecure-no-auth has no effect: gateway.tokens or gateway.jwt are configured, so every caller is authenticated")
	}
	if opts.ResourceURL != "" {
		return
	}
	// The resource is the URL clients use, which is the address as
	// given with the port actually bound; a wildcard address names no
	// URL, so the operator has to.
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		fmt.Fprintf(stderr, "toolwire: warning: gateway.resourceURL is not set and %q is not an address clients can use, "+
			"so the metadata names no resource and 401 answers carry no WWW-Authenticate challenge; set gateway.resourceURL to the URL clients use\n", addr)
		return
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	opts.ResourceURL = "http://" + net.JoinHostPort(host, port) + "/mcp"
}

// serveHTTP serves h (which routes /mcp and the metadata itself) on ln until
// ctx ends, then shuts down within a bounded time.
func serveHTTP(ctx context.Context, e *env, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
