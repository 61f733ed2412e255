//go:build unix

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// protocolVersion is what every MCP client here asks for: the version
// mcpclient offers, and the newest the gateway serves, so that bare and
// toolwire rows speak the same protocol.
const protocolVersion = "2025-11-25"

// modernVersion is the sessionless revision the gateway and the peer also
// serve: the *-2026 rows ask for it.
const modernVersion = "2026-07-28"

var clientImpl = &mcp.Implementation{Name: "toolwire-bench", Version: "0"}

// sdkCaller returns one echo call of the named tool on cs, checked. Each
// call has its own params, as an application makes them.
func sdkCaller(cs *mcp.ClientSession, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: echoArgs})
		if err != nil {
			return err
		}
		if r.IsError {
			return fmt.Errorf("echo: the result is an error: %s", resultText(r))
		}
		if len(r.Content) != 1 {
			return fmt.Errorf("echo: unexpected result %+v", r)
		}
		if t, ok := r.Content[0].(*mcp.TextContent); !ok || t.Text != echoText {
			return fmt.Errorf("echo: unexpected content %+v", r.Content[0])
		}
		return nil
	}
}

// resultText is the text of r's content, for an error message: an
// isError result says why in its text.
func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, strconv.Quote(t.Text))
		}
	}
	if len(parts) == 0 {
		return "(no text)"
	}
	return strings.Join(parts, ", ")
}

// toolwireCaller returns one call of the registered tool through ex.
func toolwireCaller(ex *tool.Executor, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		res := ex.Call(ctx, name, echoArgs)
		if res.IsError {
			return fmt.Errorf("echo: %s: %s", res.Reason, res.Message)
		}
		if len(res.Content) != 1 {
			return fmt.Errorf("echo: unexpected result %+v", res)
		}
		if t, ok := res.Content[0].(*tool.Text); !ok || t.Text != echoText {
			return fmt.Errorf("echo: unexpected content %+v", res.Content[0])
		}
		return nil
	}
}

// denyAll is the registries' confirmer: the demo has write and destructive
// tools, which a registry refuses without one; echo is read-tier and never
// asks.
var denyAll = tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) { return false, nil })

// demoCmd is the demo server as a stdio child with args, with the
// environment that mcpclient gives one.
func (b *bench) demoCmd(args ...string) (*exec.Cmd, error) {
	if b.demoErr != nil {
		return nil, b.demoErr
	}
	cmd := exec.Command(b.demoBin, args...)
	cmd.Env = childEnv()
	childAttrs(cmd)
	return cmd, nil
}

// openSDKStdio returns the opener of a bare go-sdk row over stdio: a
// client over mcp.CommandTransport to the demo child started with args.
func openSDKStdio(args ...string) func(context.Context, *bench) (*target, error) {
	return func(ctx context.Context, b *bench) (*target, error) {
		cmd, err := b.demoCmd(args...)
		if err != nil {
			return nil, err
		}
		cs, err := mcp.NewClient(clientImpl, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd},
			&mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
		if err != nil {
			return nil, fmt.Errorf("connecting to the demo over stdio: %w", err)
		}
		pid := cmd.Process.Pid
		b.procs.adopt(pid)
		return &target{call: sdkCaller(cs, "echo"), pids: []int{pid}, roles: []string{"demo"}, close: func() { _ = cs.Close() }}, nil
	}
}

// demoHTTPRE matches demoserver's announcement of its URL on stderr.
var demoHTTPRE = regexp.MustCompile(`listening on (http://\S+/mcp)`)

// startDemoHTTP starts "demoserver -http 127.0.0.1:0" (demo.HTTPHandler)
// and returns its URL.
func (b *bench) startDemoHTTP(ctx context.Context, name string) (string, *proc, error) {
	if b.demoErr != nil {
		return "", nil, b.demoErr
	}
	cmd := exec.Command(b.demoBin, "-http", "127.0.0.1:0")
	cmd.Env = childEnv()
	return b.startAnnouncing(ctx, name, cmd, demoHTTPRE)
}

// startAnnouncing starts cmd, which announces its URL on stderr and stops
// on SIGTERM, and waits (bounded) for the URL.
func (b *bench) startAnnouncing(ctx context.Context, name string, cmd *exec.Cmd, re *regexp.Regexp) (string, *proc, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = pw
	p, err := b.procs.start(name, cmd, true)
	pw.Close()
	if err != nil {
		pr.Close()
		return "", nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url, err := waitLine(wctx, pr, re, p.tail)
	if err != nil {
		return "", nil, withTail(fmt.Errorf("%s: %w", name, err), p.tail)
	}
	return url, p, nil
}

// sdkHTTPSession connects a bare go-sdk client to url over Streamable HTTP
// with the bench's pooled HTTP client.
func (b *bench) sdkHTTPSession(ctx context.Context, url string) (*mcp.ClientSession, error) {
	return b.sdkHTTPSessionVersion(ctx, url, protocolVersion)
}

// sdkHTTPSessionVersion is sdkHTTPSession asking for version: a 2025
// revision opens a session (initialize, Mcp-Session-Id); 2026-07-28 has
// none, every request carrying its version.
func (b *bench) sdkHTTPSessionVersion(ctx context.Context, url, version string) (*mcp.ClientSession, error) {
	return mcp.NewClient(clientImpl, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: b.httpClient},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
}

func openSDKHTTP(ctx context.Context, b *bench) (*target, error) {
	url, p, err := b.startDemoHTTP(ctx, "sdk-http demo")
	if err != nil {
		return nil, err
	}
	cs, err := b.sdkHTTPSession(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting to the demo over HTTP: %w", err)
	}
	return &target{call: sdkCaller(cs, "echo"), pids: []int{p.pid()}, roles: []string{"demo"}, close: func() { _ = cs.Close() }}, nil
}

// toolwireStack connects cfg into a fresh registry the way toolwire's CLI
// does (audit to a file, secrets redacted, no pins: the library default)
// and returns an executor over it. tweak, if set, changes the options.
func (b *bench) toolwireStack(ctx context.Context, name string, cfg config.Server, tweak func(*mcpclient.Options)) (*tool.Executor, *mcpclient.Server, error) {
	alog, secrets, err := b.auditLog(name)
	if err != nil {
		return nil, nil, err
	}
	if dirs := profileWritable(); dirs != nil {
		sb := config.Sandbox{}
		if cfg.Sandbox != nil {
			sb = *cfg.Sandbox
		}
		sb.Write = append(sb.Write[:len(sb.Write):len(sb.Write)], dirs...)
		cfg.Sandbox = &sb
	}
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: denyAll})
	ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: alog, Logger: b.quiet})
	opts := &mcpclient.Options{Logger: b.quiet, Secrets: secrets, Audit: alog, HTTPClient: b.httpClient}
	if tweak != nil {
		tweak(opts)
	}
	srv, err := mcpclient.Connect(ctx, cfg, reg, opts)
	if err != nil {
		return nil, nil, err
	}
	return ex, srv, nil
}

// openToolwireStdio returns the opener of a toolwire row over stdio; tweak,
// if set, changes mcpclient's options (to select another connection, say).
func openToolwireStdio(tweak func(*mcpclient.Options)) func(context.Context, *bench) (*target, error) {
	return func(ctx context.Context, b *bench) (*target, error) {
		if b.demoErr != nil {
			return nil, b.demoErr
		}
		cfg := config.Server{Name: "demo", Transport: "stdio", Command: b.demoBin, Env: passedEnv(), DefaultTier: "read"}
		ex, srv, err := b.toolwireStack(ctx, "tw-stdio", cfg, tweak)
		if err != nil {
			return nil, err
		}
		pid := srv.PID()
		b.procs.adopt(pid)
		return &target{call: toolwireCaller(ex, "demo__echo"), pids: []int{pid}, roles: []string{"demo"}, close: func() { _ = srv.Close() }}, nil
	}
}

func openToolwireHTTP(ctx context.Context, b *bench) (*target, error) {
	url, p, err := b.startDemoHTTP(ctx, "tw-http demo")
	if err != nil {
		return nil, err
	}
	cfg := config.Server{Name: "demo", Transport: "http", URL: url, DefaultTier: "read"}
	ex, srv, err := b.toolwireStack(ctx, "tw-http", cfg, nil)
	if err != nil {
		return nil, err
	}
	return &target{call: toolwireCaller(ex, "demo__echo"), pids: []int{p.pid()}, roles: []string{"demo"}, close: func() { _ = srv.Close() }}, nil
}

// serveRE matches toolwire serve's announcement of its URL on stderr.
var serveRE = regexp.MustCompile(`toolwire: serving MCP at (http://\S+/mcp)`)

// serveLimits says how a `toolwire serve` row sets gateway.limits.
type serveLimits int

const (
	// limitsOff switches every per-caller and per-session limit off, as
	// the peers the gateway is compared with have none: with serve's
	// defaults (100 calls/s per caller, 64 calls in progress per session,
	// 100 sessions per caller) one load generator on one address is
	// refused within a second.
	limitsOff serveLimits = iota
	// limitsOn enables every limit, each set high enough that the bench's
	// load is never refused, so that the row shows what checking them
	// costs.
	limitsOn
)

// limitsYAML is the gateway.limits block for each setting. Every count,
// rate and burst is named: a default added later that could refuse the
// load would otherwise apply unseen.
var limitsYAML = map[serveLimits]string{
	limitsOff: "gateway:\n  limits:\n    maxSessions: 0\n    maxSessionsPerCaller: 0\n    maxCallsPerSession: 0\n    maxCallsPerCaller: 0\n    callRate: 0\n    callBurst: 0\n    maxListensPerCaller: 0\n    maxListenResources: 0\n",
	limitsOn:  "gateway:\n  limits:\n    maxSessions: 100000\n    maxSessionsPerCaller: 100000\n    maxCallsPerSession: 4096\n    maxCallsPerCaller: 4096\n    callRate: 1000000\n    callBurst: 1000000\n    maxListensPerCaller: 4096\n    maxListenResources: 4096\n",
}

// startServe starts `toolwire serve --http 127.0.0.1:0` in front of a
// stdio demo server, with an audit file and its pins file in the
// temporary directory and its limits as lim says, and returns its URL and
// process. The demo child (serve's) is adopted.
func (b *bench) startServe(ctx context.Context, name string, lim serveLimits, telemetry bool) (string, *proc, error) {
	if b.toolwireErr != nil {
		return "", nil, b.toolwireErr
	}
	if b.demoErr != nil {
		return "", nil, b.demoErr
	}
	var env strings.Builder
	for k, v := range passedEnv() {
		fmt.Fprintf(&env, "      %s: %s\n", k, strconv.Quote(v))
	}
	demo := "" // the demo server's settings after its command
	if env.Len() > 0 {
		demo = "    env:\n" + env.String()
	}
	if dirs := profileWritable(); dirs != nil {
		// The demo is confined: the profiling hook writes there.
		quoted := make([]string, len(dirs))
		for i, dir := range dirs {
			quoted[i] = strconv.Quote(dir)
		}
		demo += "    sandbox:\n      write: [" + strings.Join(quoted, ", ") + "]\n"
	}
	cfgPath := filepath.Join(b.dir, name+".yaml")
	cfg := fmt.Sprintf("servers:\n  demo:\n    command: %s\n%saudit:\n  file: %s\nsecurity:\n  pinsFile: %s\n%s",
		strconv.Quote(b.demoBin), demo,
		strconv.Quote(filepath.Join(b.dir, name+"-audit.jsonl")),
		strconv.Quote(filepath.Join(b.dir, name+"-pins.json")),
		limitsYAML[lim])
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return "", nil, err
	}
	args := []string{"--config", cfgPath, "serve", "--http", "127.0.0.1:0"}
	// XDG_CONFIG_HOME keeps anything serve might keep per user out of
	// the user's own directories.
	extra := []string{"XDG_CONFIG_HOME=" + filepath.Join(b.dir, "xdg"), "XDG_STATE_HOME=" + filepath.Join(b.dir, "xdg-state")}
	if telemetry {
		// Metrics for a Prometheus reader, and traces and metrics over
		// OTLP/HTTP to a sink that takes and drops them: telemetry as an
		// operator switches it on.
		sink, _, err := startHTTPChild(ctx, b, name+" otlp sink", "otlp-sink")
		if err != nil {
			return "", nil, err
		}
		args = append(args, "--metrics-listen", "127.0.0.1:0")
		extra = append(extra, "OTEL_EXPORTER_OTLP_ENDPOINT="+strings.TrimSuffix(sink, "/mcp"), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	}
	cmd := exec.Command(b.toolwireBin, args...)
	cmd.Env = childEnv(extra...)
	url, p, err := b.startAnnouncing(ctx, name, cmd, serveRE)
	if err != nil {
		return "", nil, err
	}
	return url, p, nil
}

// openGatewayServe returns an opener of a go-sdk session asking for
// version through `toolwire serve` with its limits as lim says, and its
// telemetry on if telemetry is set.
func openGatewayServe(name string, lim serveLimits, version string, telemetry bool) func(context.Context, *bench) (*target, error) {
	return func(ctx context.Context, b *bench) (*target, error) {
		url, p, err := b.startServe(ctx, name, lim, telemetry)
		if err != nil {
			return nil, err
		}
		cs, err := b.sdkHTTPSessionVersion(ctx, url, version)
		if err != nil {
			return nil, withTail(fmt.Errorf("connecting to toolwire serve: %w", err), p.tail)
		}
		// serve starts its servers before it listens: the demo is there.
		pids := append([]int{p.pid()}, b.procs.adoptDescendants(p.pid())...)
		if len(pids) < 2 {
			_ = cs.Close()
			return nil, withTail(fmt.Errorf("toolwire serve (pid %d) has no upstream child", p.pid()), p.tail)
		}
		roles := []string{"serve"}
		for range pids[1:] {
			roles = append(roles, "upstream")
		}
		return &target{call: sdkCaller(cs, "demo__echo"), pids: pids, roles: roles, close: func() { _ = cs.Close() }}, nil
	}
}
