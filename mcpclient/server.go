package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// DefaultTimeout bounds connecting, listing and each call when the server's
// configuration sets no timeout.
const DefaultTimeout = 60 * time.Second

// terminateGrace is how long closing a stdio server waits after closing its
// stdin before SIGTERM, and again before SIGKILL.
const terminateGrace = 2 * time.Second

// Version is the client version toolwire announces to servers.
const Version = "0.1.0"

// Options configures [Connect]. The zero value is usable.
type Options struct {
	// Logger receives the server's stderr lines (at debug level) and
	// adaptation warnings. Nil means slog.Default().
	Logger *slog.Logger
	// LookupEnv resolves ${VAR} placeholders in the server's configuration.
	// Nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HTTPClient carries Streamable HTTP requests. Nil means a plain client.
	HTTPClient *http.Client
	// Secrets, when set, learns every value expanded from a placeholder, so
	// that the audit log and error messages mask them.
	Secrets *audit.Secrets
}

// Server is one connected MCP server whose tools are in a registry.
type Server struct {
	cfg     config.Server
	reg     *tool.Registry
	logger  *slog.Logger
	secrets *audit.Secrets
	timeout time.Duration

	session *mcp.ClientSession
	cmd     *exec.Cmd    // the stdio child, nil over HTTP
	pid     atomic.Int64 // the child's pid once started, read by killers on other goroutines
	stderr  *stderrLog

	tools    []string
	skipped  []Skipped
	warnings []string

	progress  sync.Map // progress token (string) -> progressTarget
	nextToken atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// progressTarget is where one in-flight call's progress reports go.
type progressTarget struct {
	ctx    context.Context
	caller tool.Caller
}

// ErrNeedsConfirmer, wrapped, is returned by [Connect] when the server has
// write or destructive tools and the registry has no confirmer. It is
// [tool.ErrNeedsConfirmer].
var ErrNeedsConfirmer = tool.ErrNeedsConfirmer

// Connect connects the server described by cfg, lists its tools (following
// pagination), adapts them and registers them in reg, all or nothing. The
// server's timeout bounds the whole of it, within ctx.
//
// It fails, leaving nothing registered and no process running, when the
// server cannot be started or reached (the error names the server, the
// command or URL, and for stdio the tail of the server's stderr), when the
// listing fails, when a tool resolves to write or destructive and reg has no
// confirmer (wrapping [ErrNeedsConfirmer] and naming the tools), or when
// registration fails. A tool whose input schema does not compile is only
// skipped (see [Server.Skipped]).
func Connect(ctx context.Context, cfg config.Server, reg *tool.Registry, opts *Options) (_ *Server, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Secrets == nil {
		o.Secrets = audit.NewSecrets()
	}
	s := &Server{cfg: cfg, reg: reg, logger: o.Logger, secrets: o.Secrets, timeout: cfg.Timeout}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if _, err := parseTiers(cfg); err != nil {
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}

	// Placeholders resolve here, at the transport boundary, and nowhere
	// else: the expanded values live only in this process's memory.
	expanded, secretValues, err := config.ExpandServer(cfg, o.LookupEnv)
	if err != nil {
		return nil, err
	}
	s.secrets.Add(secretValues...)

	transport, err := s.transport(expanded, o.HTTPClient)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolwire", Version: Version}, &mcp.ClientOptions{
		// No roots, sampling or elicitation yet: a server must not be led
		// to ask for what toolwire would refuse.
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: s.onProgress,
	})

	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// A stdio server that has not started within the timeout is killed at
	// once: the SDK's cleanup of a failed handshake would otherwise close
	// stdin and wait for a child that may never read it. Disarmed (first,
	// as defers run last-in first-out) when Connect returns.
	disarm := context.AfterFunc(cctx, s.killChild)
	defer disarm()
	session, err := client.Connect(cctx, transport, nil)
	if err != nil {
		s.killChild()
		return nil, s.connectError(ctx, cctx, err)
	}
	s.session = session
	defer func() {
		if err != nil {
			_ = s.shutdown()
		}
	}()

	listing, err := s.list(cctx)
	if err != nil {
		return nil, s.requestError(ctx, cctx, "list tools", err)
	}
	ad, err := adapt(cfg, listing, reg.Has, s.handler)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	if err := preflight(cfg.Name, ad.tools, reg); err != nil {
		return nil, err
	}
	if err := reg.RegisterAll(ad.tools); err != nil {
		return nil, fmt.Errorf("server %q: register tools: %w", cfg.Name, err)
	}
	for _, t := range ad.tools {
		s.tools = append(s.tools, t.Name)
	}
	s.skipped, s.warnings = ad.skipped, ad.warnings
	for _, sk := range ad.skipped {
		s.logger.Warn("tool left out", "server", cfg.Name, "tool", sk.Name, "reason", sk.Reason)
	}
	for _, w := range ad.warnings {
		s.logger.Warn(w)
	}
	return s, nil
}

// preflight refuses a server whose tools would need a confirmer the
// registry lacks, naming every such tool, before anything is registered.
func preflight(server string, tools []*tool.Tool, reg *tool.Registry) error {
	if reg.CanConfirm() {
		return nil
	}
	var need []string
	for _, t := range tools {
		if t.Tier.NeedsConfirmation() {
			need = append(need, fmt.Sprintf("%s (%s)", t.Name, t.Tier))
		}
	}
	if len(need) == 0 {
		return nil
	}
	return fmt.Errorf("server %q: %w; these tools are write or destructive: %s (configure a confirmer, or set their tiers or filters)",
		server, ErrNeedsConfirmer, strings.Join(need, ", "))
}

// transport builds the SDK transport from the expanded configuration.
func (s *Server) transport(cfg config.Server, httpClient *http.Client) (mcp.Transport, error) {
	switch cfg.Transport {
	case "stdio":
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Env = childEnv(cfg.Env)
		cmd.Dir = cfg.Cwd
		s.stderr = &stderrLog{server: cfg.Name, logger: s.logger, secrets: s.secrets}
		cmd.Stderr = s.stderr
		isolate(cmd)
		s.cmd = cmd
		return &startedTransport{inner: &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateGrace}, started: func() {
			s.pid.Store(int64(cmd.Process.Pid))
		}}, nil
	case "http":
		if httpClient == nil {
			httpClient = &http.Client{}
		}
		if cfg.BearerToken != "" || len(cfg.Headers) > 0 {
			httpClient = withHeaders(httpClient, cfg.Headers, cfg.BearerToken)
		}
		return &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: httpClient, MaxRetries: 2}, nil
	default:
		return nil, fmt.Errorf("server %q: unknown transport %q (want stdio or http)", cfg.Name, cfg.Transport)
	}
}

// inheritedEnv names the variables a stdio server inherits from toolwire's
// own environment. Everything else (API keys above all) stays out unless the
// configuration passes it in env: a server is untrusted code.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ",
	"SYSTEMROOT", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "PROGRAMFILES", "TEMP", "TMP"}

func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if _, overridden := extra[k]; overridden {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// startedTransport reports when its inner transport has connected (for
// stdio: when the child process exists).
type startedTransport struct {
	inner   mcp.Transport
	started func()
}

func (t *startedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err == nil {
		t.started()
	}
	return conn, err
}

// killChild ends the stdio child's whole process group, if it was started.
func (s *Server) killChild() { killGroup(int(s.pid.Load())) }

// headerTransport adds static headers and a bearer token to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	bearer  string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	if t.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+t.bearer)
	}
	return t.base.RoundTrip(req)
}

func withHeaders(c *http.Client, headers map[string]string, bearer string) *http.Client {
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc := *c
	cc.Transport = &headerTransport{base: base, headers: headers, bearer: bearer}
	return &cc
}

// list returns the server's whole tool listing, page by page.
func (s *Server) list(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for t, err := range s.session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// handler returns the registry handler that calls the server's tool named
// original.
func (s *Server) handler(original string) tool.Handler {
	return func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
		return s.call(ctx, original, args)
	}
}

// call sends tools/call under the server's timeout. When the caller supplied
// a [tool.Caller], the request carries a progress token and the server's
// progress reports for it are forwarded.
func (s *Server) call(ctx context.Context, name string, args json.RawMessage) (*tool.Result, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if c := tool.CallerFrom(ctx); c != nil {
		token := fmt.Sprintf("toolwire-%d", s.nextToken.Add(1))
		s.progress.Store(token, progressTarget{ctx: ctx, caller: c})
		defer s.progress.Delete(token)
		params.SetProgressToken(token)
	}
	r, err := s.session.CallTool(cctx, params)
	if err != nil {
		return nil, s.requestError(ctx, cctx, fmt.Sprintf("call %q", name), err)
	}
	return convertResult(r), nil
}

func (s *Server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := s.progress.Load(token)
	if !ok {
		return // a report for a call that has ended, or not ours
	}
	t := v.(progressTarget)
	t.caller.Progress(t.ctx, tool.Progress{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
}

// requestError wraps a failed request, saying plainly when the server's own
// timeout, not the caller, ended it.
func (s *Server) requestError(parent, ctx context.Context, what string, err error) error {
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("server %q: %s: no answer within %s: %w", s.cfg.Name, what, s.timeout, context.DeadlineExceeded)
	}
	// The SDK's message may quote an expanded URL or header, and this one
	// goes to the model: mask it, keeping the cause for errors.Is.
	return &maskedError{msg: fmt.Sprintf("server %q: %s: %s", s.cfg.Name, what, s.secrets.String(err.Error())), err: err}
}

// maskedError shows a message with secrets masked while still wrapping the
// original error.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// connectError explains a failed connection: which server, which command or
// URL (as configured, so placeholders stay unexpanded), the cause and, for a
// stdio server, what it printed on stderr.
func (s *Server) connectError(parent, ctx context.Context, err error) error {
	target := s.cfg.URL
	if s.cfg.Transport == "stdio" {
		target = strings.Join(append([]string{s.cfg.Command}, s.cfg.Args...), " ")
	}
	cause := s.secrets.String(err.Error())
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		cause = fmt.Sprintf("no answer within %s", s.timeout)
	}
	msg := fmt.Sprintf("server %q: connect %s: %s", s.cfg.Name, target, cause)
	if s.stderr != nil {
		if tail := s.stderr.Tail(10); tail != "" {
			msg += "; stderr:\n" + tail
		}
	}
	return &ConnectError{Server: s.cfg.Name, msg: msg, err: err}
}

// ConnectError is returned by [Connect] when the server cannot be started or
// reached.
type ConnectError struct {
	Server string
	msg    string
	err    error
}

func (e *ConnectError) Error() string { return e.msg }
func (e *ConnectError) Unwrap() error { return e.err }

// Name returns the server's configured name.
func (s *Server) Name() string { return s.cfg.Name }

// Tools returns the registered names of the server's tools.
func (s *Server) Tools() []string { return append([]string(nil), s.tools...) }

// Skipped returns the tools of the server's listing that were left out
// because their input schema did not compile, with the reasons.
func (s *Server) Skipped() []Skipped { return append([]Skipped(nil), s.skipped...) }

// Warnings returns adaptation warnings, such as a tier override naming a
// tool the server does not list.
func (s *Server) Warnings() []string { return append([]string(nil), s.warnings...) }

// Close deregisters the server's tools and ends the session. For a stdio
// server it closes the child's stdin, waits for it to exit (then signals it,
// as the MCP spec describes), and ends anything left in its process group:
// once Close returns, no process of the server's is running. Close is safe
// to call more than once; later calls return the first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.reg.Deregister(s.tools...)
		s.closeErr = s.shutdown()
	})
	return s.closeErr
}

func (s *Server) shutdown() error {
	err := s.session.Close()
	s.killChild()
	if err != nil {
		return fmt.Errorf("server %q: close: %w", s.cfg.Name, err)
	}
	return nil
}
