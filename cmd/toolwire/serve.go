package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/console"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/stdioconn"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/workspace"
)

func newServeCommand(e *env, g *globalFlags) *cobra.Command {
	var (
		stdio                    bool
		httpAddr                 string
		stateless                bool
		insecureNoAuth           bool
		unprefixed               bool
		maxBody                  int64
		metricsAddr              string
		approveWrite, approveDel string
		operatorWait             time.Duration
		lf                       limitFlags
		cf                       consoleFlags
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

Every MCP revision is served, 2024-11-05 to 2026-07-28. --http serves them
all on one endpoint: clients of the 2025 revisions open sessions, clients of
2026-07-28 have none (each request carries its revision, client and
capabilities); with --stateless no client has a session. A 2026-07-28
client is asked for approvals, and relayed an upstream's questions, through
multi round-trip requests: the call is held in the gateway (parked) between
the client's requests, and cancelled when the client closes one or leaves a
question unanswered for 10 minutes. A client that declares URL-mode
elicitation and not forms is asked for an approval with a link to a page at
/approvals/ on the same listener. A 2025 client on a --stateless gateway
cannot be asked anything. docs/protocol.md says how each revision is served.

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
0 (the default) keeps go-sdk's limit of 4 MiB.

Over HTTP the gateway is bounded (sessions, calls in progress, a per-caller
rate, connection deadlines), checks the Origin header of browsers, can
terminate TLS (--tls-cert/--tls-key or gateway.tls, reloaded when the files
change), answers /healthz and /readyz, and on SIGTERM or SIGINT drains:
new sessions and calls are refused, calls in progress get --drain-grace,
then are cancelled upstream. Each limit is also a key of gateway.limits;
a flag given wins. docs/operations.md lists them with their defaults.
Bearer tokens are refused over plain HTTP on a non-loopback address unless
--insecure-plain-http (for a TLS proxy in front).

SIGHUP reloads the configuration files without ending a session: servers
added, removed or changed are started, stopped or restarted (the others
are left as they are), and tokens, roles, approvals and limits apply from
the next request on. A configuration that does not load, or that changes
what needs a restart (store, audit, security, TLS, origins), is refused
and the running one stays; stderr and the audit log say which.

--metrics-listen ADDR serves Prometheus metrics at http://ADDR/metrics, on a
listener of its own with no authentication: keep it on loopback or a private
network. Traces and metrics go over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT
(or a signal's own endpoint) is set, as the OpenTelemetry SDKs read it; the
trace of a call continues the caller's traceparent and is passed upstream.
docs/operations.md lists the metrics and spans.

--console ADDR (or gateway.console.listen) offers the operator console, a
web UI, at http://ADDR/ on a listener of its own, never on the MCP one: the
servers, the tools with their tiers, pins and policy rules, the open
sessions, the calls waiting for an operator (allow or deny, with a scope),
the audit tail with its chain's state, the limits being hit. An operator
signs in with the token in $TOOLWIRE_CONSOLE_TOKEN (or the variable
gateway.console.tokenEnv names), which must differ from every caller's
token. Only a loopback address is accepted unless TLS is configured
(--tls-cert, gateway.tls) or --console-insecure-plain-http says a TLS
proxy in front terminates it. docs/console.md describes it.`,
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
			if httpAddr == "" {
				if name := lf.changedAny(cmd.Flags().Changed); name != "" {
					return &exitError{exitUsage, fmt.Errorf("--%s goes with --http", name)}
				}
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
				ops  operations
			)
			if httpAddr != "" {
				if opts, err = httpOptions(cmd.Context(), gwc, stateless); err != nil {
					if xe := (*exitError)(nil); errors.As(err, &xe) {
						return err
					}
					return &exitError{exitUsage, err}
				}
				if ops, err = lf.resolve(gwc, cmd.Flags().Changed, newLogger(e.stderr, g, nil)); err != nil {
					return &exitError{exitUsage, err}
				}
				opts.MaxBodyBytes = maxBody
				if !cmd.Flags().Changed("max-body") && ops.maxBody > 0 {
					opts.MaxBodyBytes = ops.maxBody
				}
				opts.Limits, opts.AllowedOrigins, opts.InsecurePlainBearer = ops.limits, ops.origins, lf.insecurePlainHTTP
				exposure := gateway.Exposure{Authenticated: opts.Verifier != nil, TLS: ops.server.TLS != nil,
					AllowUnauthenticated: insecureNoAuth, AllowPlainBearer: lf.insecurePlainHTTP}
				if ln, err = listenGateway(httpAddr, exposure); err != nil {
					return &exitError{exitUsage, err}
				}
				defer ln.Close()
				announceAuth(newLogger(e.stderr, g, nil), gwc, httpAddr, ln, &opts, insecureNoAuth, ops.server.TLS != nil)
			}
			// The console's listener, like the gateway's, is decided and
			// bound before any server starts.
			con, err := cf.open(e, gwc, ops.server.TLS != nil, newLogger(e.stderr, g, nil))
			if err != nil {
				return err
			}
			if con != nil {
				defer con.ln.Close()
			}
			// Upstreams are told they may ask (elicitation, sampling): a
			// 2025 session's client is asked on its session, a 2026-07-28
			// client through its parked call, also with --stateless; a
			// client that cannot answer makes the upstream's question fail.
			relay := mcpclient.RelayCapabilities{Sampling: true, Elicitation: true}
			tel, stopTelemetry, err := serveTelemetry(cmd.Context(), e, g, metricsAddr)
			if err != nil {
				return err
			}
			defer stopTelemetry()
			wo := workspace.Options{Confirmer: gateway.NewApprover(policy), Relay: relay}
			if cmd.Flags().Changed("operator-wait") {
				if operatorWait < 0 {
					return &exitError{exitUsage, fmt.Errorf("--operator-wait: %s: want 0 (refuse at once) or more", operatorWait)}
				}
				wo.OperatorWait = &operatorWait
			}
			gwo := gateway.Options{Unprefixed: unprefixed}
			withTelemetry(cmd.Context(), tel, &wo, &gwo)
			con.watchAudit(&wo)
			w, err := open(cmd.Context(), e, g, file, &wo)
			if err != nil {
				return err
			}
			defer w.Close()
			// The console stops before the workspace it reads closes.
			defer con.stop()
			if st := w.Store(); st.Kind() == store.Postgres {
				fmt.Fprintf(e.stderr, "toolwire: state in PostgreSQL %s; schema migrations applied at this start: %s\n", st, workspace.DescribeMigrations(st.Applied()))
			}
			tel.Metrics().ObserveUpstreams(w.Manager().Status)
			gw := w.Gateway(&gwo)
			if err := gw.Collisions(); err != nil {
				return &exitError{exitUsage, fmt.Errorf("--unprefixed: %w", err)}
			}
			// SIGHUP reloads the configuration; the flags given keep
			// their place over it.
			reloadLog := newLogger(e.stderr, g, w.Secrets())
			stopReload := reloadOnHangup(cmd.Context(), e, g, reloadLog, w, func(file *config.File) (*workspace.ReloadOptions, error) {
				p, err := approvalPolicy(file.Gateway, cmd.Flags().Changed, approveWrite, approveDel)
				if err != nil {
					return nil, err
				}
				warnConsoleChanged(reloadLog, gwc, file.Gateway)
				ro := &workspace.ReloadOptions{Approvals: &p}
				if httpAddr != "" {
					next, _, err := lf.settle(file.Gateway, cmd.Flags().Changed)
					if err != nil {
						return nil, err
					}
					ro.Limits = &next.limits
				}
				return ro, nil
			})
			defer stopReload()
			if stdio {
				srv, stop := gw.Server(nil)
				defer stop()
				con.serve(cmd.Context(), e, &console.Sources{Workspace: w}, nil)
				t := &stdioconn.Transport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}, AnswerMalformed: true}
				if err := srv.Run(cmd.Context(), t); err != nil && !errors.Is(err, context.Canceled) {
					return &exitError{exitToolErr, fmt.Errorf("serving stdio: %w", err)}
				}
				return nil
			}
			for _, path := range w.CallerCallbackPaths() {
				if err := gateway.CallbackPathProblem(path); err != nil {
					return &exitError{exitUsage, fmt.Errorf("oauth.redirectUrl: %w", err)}
				}
			}
			opts.Observe = con.observe(tel.Metrics().GatewayEvents())
			h := w.Handler(gw, &opts)
			con.serve(cmd.Context(), e, &console.Sources{Workspace: w, Limits: h.Limits}, ops.server.TLS)
			return serveHTTP(cmd.Context(), e, ln, h, ops)
		},
	}
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve MCP on stdin and stdout")
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve Streamable HTTP at http://`ADDR`/mcp (loopback only unless gateway.tokens or gateway.jwt are configured, or --insecure-no-auth)")
	cmd.Flags().BoolVar(&stateless, "stateless", false, "with --http, serve without sessions: 2026-07-28 clients as always, 2025 clients each request on its own (they cannot be asked for approvals)")
	cmd.Flags().BoolVar(&unprefixed, "unprefixed", false, "serve tools under their servers' own names (for a single upstream); two tools with the same name are refused at start-up")
	cmd.Flags().Int64Var(&maxBody, "max-body", 0, "with --http, refuse request bodies larger than `BYTES` with 413 (0: go-sdk's default, 4 MiB)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-listen", "", "serve Prometheus metrics at http://`ADDR`/metrics, a listener of its own without authentication (keep it on loopback or a private network)")
	cmd.Flags().BoolVar(&insecureNoAuth, "insecure-no-auth", false, "with --http and no gateway.tokens or gateway.jwt, accept a non-loopback address: anyone who can reach it may call every tool")
	lf.register(cmd)
	cf.register(cmd)
	cmd.Flags().StringVar(&approveWrite, "approve-write", "elicit", "how write calls are approved: elicit, deny or allow (default: gateway.approvals.write, else elicit)")
	cmd.Flags().DurationVar(&operatorWait, "operator-wait", workspace.DefaultOperatorWait, "how long a call whose client cannot be asked waits for an operator (toolwire approvals approve), 0 to refuse at once (default: gateway.approvals.operatorWait, else 30s)")
	cmd.Flags().StringVar(&approveDel, "approve-destructive", "elicit", "how destructive calls are approved: elicit, deny or allow (default: gateway.approvals.destructive, else elicit)")
	return cmd
}

// approvalPolicy is the configuration's approvals with the tier flags the
// user gave (changed says which) in place of its per-tier values. Per-tool
// entries stay: they name tools, which the flags do not.
func approvalPolicy(gwc *config.Gateway, changed func(string) bool, write, destructive string) (gateway.ApprovalPolicy, error) {
	p, err := workspace.ApprovalPolicy(gwc)
	if err != nil {
		return p, err
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

// httpOptions builds the gateway's HTTP options from its configuration's
// authentication (workspace.Authentication) and --stateless. Failing to
// fetch the JWK set is exit status 1, naming the URL.
func httpOptions(ctx context.Context, gwc *config.Gateway, stateless bool) (gateway.HTTPOptions, error) {
	opts, err := workspace.Authentication(ctx, gwc)
	if errors.Is(err, workspace.ErrVerifier) {
		return opts, &exitError{exitToolErr, err}
	}
	opts.Stateless = stateless
	return opts, err
}

// listenGateway listens on addr, after gateway.CheckExposure's rules: an
// unauthenticated gateway only on loopback unless --insecure-no-auth, and
// bearer tokens in the clear only on loopback unless --insecure-plain-http.
func listenGateway(addr string, e gateway.Exposure) (net.Listener, error) {
	switch err := gateway.CheckExposure(addr, e); {
	case errors.Is(err, gateway.ErrUnauthenticatedExposure):
		return nil, fmt.Errorf("--http %q: without caller authentication only loopback addresses (127.0.0.1, ::1, localhost) are served; "+
			"configure gateway.tokens (\"toolwire token new\" makes one) or gateway.jwt, or pass --insecure-no-auth to let anyone who can reach this address call every tool", addr)
	case errors.Is(err, gateway.ErrPlainBearer):
		return nil, fmt.Errorf("--http %q: callers authenticate with bearer tokens, which plain HTTP on a non-loopback address would send in the clear; "+
			"give --tls-cert and --tls-key (or gateway.tls), or pass --insecure-plain-http when a TLS proxy in front terminates TLS", addr)
	case err != nil:
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	return net.Listen("tcp", addr)
}

// announceAuth settles the resource URL and says on stderr what protects
// the gateway, loudly when nothing does.
func announceAuth(log *slog.Logger, gwc *config.Gateway, addr string, ln net.Listener, opts *gateway.HTTPOptions, insecure, tls bool) {
	host, _, _ := net.SplitHostPort(addr)
	if opts.Verifier == nil {
		if insecure && !netpolicy.IsLoopbackHost(host) {
			log.Warn(fmt.Sprintf("--insecure-no-auth: serving %s WITHOUT CALLER AUTHENTICATION: "+
				"anyone who can reach this address can list and call every tool; approvals still apply", ln.Addr()))
		}
		if gwc != nil && (gwc.Roles != nil || gwc.ResourceURL != "" || gwc.AuthorizationServers != nil) {
			log.Warn("gateway.tokens is empty and gateway.jwt is not set, so callers are not authenticated and gateway.roles, resourceURL and authorizationServers have no effect")
		}
		return
	}
	if insecure {
		log.Warn("--insecure-no-auth has no effect: gateway.tokens or gateway.jwt are configured, so every caller is authenticated")
	}
	if opts.ResourceURL != "" {
		return
	}
	if opts.ResourceURL = gateway.ResourceURLFor(addr, ln.Addr(), tls); opts.ResourceURL == "" {
		log.Warn(fmt.Sprintf("gateway.resourceURL is not set and %q is not an address clients can use, "+
			"so the metadata names no resource and 401 answers carry no WWW-Authenticate challenge; set gateway.resourceURL to the URL clients use", addr))
	}
}

// serveHTTP serves h on ln until ctx ends, then drains (see
// gateway.Handler.Serve), saying so on stderr. The exit comes at most
// ops.grace plus gateway.DrainBound after the signal (docs/operations.md
// gives the measured time); the caller's deferred closes then end every
// upstream (and child process) and the audit file.
func serveHTTP(ctx context.Context, e *env, ln net.Listener, h *gateway.Handler, ops operations) error {
	scheme := "http"
	if ops.server.TLS != nil {
		scheme = "https"
	}
	fmt.Fprintf(e.stderr, "toolwire: serving MCP at %s://%s/mcp\n", scheme, ln.Addr())
	n, err := h.Serve(ctx, ln, &gateway.ServeOptions{Server: &ops.server, DrainGrace: ops.grace, DrainDelay: ops.delay, Draining: func() {
		fmt.Fprintf(e.stderr, "toolwire: draining: refusing new sessions and calls, giving calls in progress %s\n", ops.grace)
	}, Unready: func() {
		fmt.Fprintf(e.stderr, "toolwire: stopping: /readyz answers 503 for %s while requests are still served, then the drain\n", ops.delay)
	}})
	if err != nil {
		return &exitError{exitToolErr, err}
	}
	if n > 0 {
		fmt.Fprintf(e.stderr, "toolwire: drain: cancelled %d call(s) still in progress after %s\n", n, ops.grace)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
