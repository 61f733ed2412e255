package gateway_test

// End-to-end tests of what the gateway serves and relays of an upstream MCP
// server besides its tools. The upstream is the conformance fixture server
// (./conformance/server), built once per test process and connected over
// stdio through mcpclient, as `toolwire serve` connects it; the clients are
// go-sdk clients on in-memory transports to the gateway's server.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// waitTime bounds every wait on something the code under test should make
// happen, so that a bug fails the test rather than hanging it.
const waitTime = 20 * time.Second

func bounded(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

var fixtureBuild struct {
	once sync.Once
	path string
	err  error
}

// fixtureServer returns the path of the conformance fixture server, built
// on first use. Under go test the binary goes into the go command's work
// directory beside the test binary, which is removed after the run.
func fixtureServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the conformance fixture server")
	}
	fixtureBuild.once.Do(func() {
		dir := filepath.Dir(os.Args[0])
		if !strings.HasPrefix(filepath.Base(filepath.Dir(dir)), "go-build") {
			if dir, fixtureBuild.err = os.MkdirTemp("", "toolwire-fixture-"); fixtureBuild.err != nil {
				return
			}
		}
		out := filepath.Join(dir, "conformance-server")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// go test puts its own go command first on PATH.
		b, err := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/toolwire/toolwire/conformance/server").CombinedOutput()
		if err != nil {
			fixtureBuild.err = fmt.Errorf("building the conformance fixture server: %v\n%s", err, b)
			return
		}
		fixtureBuild.path = out
	})
	if fixtureBuild.err != nil {
		t.Fatal(fixtureBuild.err)
	}
	return fixtureBuild.path
}

// prefix is the upstream's name and the prefix of what is served of it.
const prefix = "conf"

// rig is the fixture server connected as an upstream, its tools
// registered (read tier: no approvals), and a gateway serving them.
type rig struct {
	up *mcpclient.Server
	gw *gateway.Gateway
}

func newRig(t *testing.T, unprefixed bool) *rig {
	t.Helper()
	bin := fixtureServer(t)
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{})})
	// A server of the revisions before 2026-07-28, which asks for input
	// with requests of its own during a call: what these tests describe.
	cfg := config.Server{Name: prefix, Transport: "stdio", Command: bin, Args: []string{"-legacy"}, DefaultTier: "read"}
	up, err := mcpclient.Connect(bounded(t, waitTime), cfg, reg, &mcpclient.Options{
		Logger:    slog.New(slog.DiscardHandler),
		Relay:     mcpclient.RelayCapabilities{Sampling: true, Elicitation: true},
		Reconnect: mcpclient.ReconnectPolicy{Initial: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("connecting the fixture server: %v", err)
	}
	t.Cleanup(func() { _ = up.Close() })
	gw := gateway.New(tool.NewExecutor(reg, nil), &gateway.Options{
		Upstreams:  []gateway.Upstream{up.Catalog()},
		Unprefixed: unprefixed,
		Logger:     slog.New(slog.DiscardHandler),
	})
	return &rig{up: up, gw: gw}
}

// serve returns a gateway server showing what visible accepts (nil: all).
func (r *rig) serve(t *testing.T, visible func(string) bool) *mcp.Server {
	t.Helper()
	srv, stop := r.gw.Server(visible)
	t.Cleanup(stop)
	return srv
}

// The revisions a client speaks to the gateway: the 2025 one opens a
// session (the go-sdk client prefers 2026-07-28 unless told).
const (
	rev2025 = "2025-11-25"
	rev2026 = "2026-07-28"
)

// connect opens a 2025-11-25 session of a client with opts to srv. When w
// is set, it records what the gateway sends the client.
func connect(t *testing.T, srv *mcp.Server, opts *mcp.ClientOptions, w *wire) *mcp.ClientSession {
	t.Helper()
	return connectRevision(t, srv, opts, w, rev2025)
}

// connectRevision is connect speaking revision rev.
func connectRevision(t *testing.T, srv *mcp.Server, opts *mcp.ClientOptions, w *wire, rev string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(bounded(t, waitTime), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	var transport mcp.Transport = ct
	if w != nil {
		transport = &wireTransport{Transport: ct, w: w}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts).Connect(bounded(t, waitTime), transport,
		&mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("the client speaks %s to the gateway, want %s", got, rev)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(bounded(t, waitTime), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// wire records, in the order the client read them, the log lines and
// progress reports the gateway sent it and the responses to its tools/call
// requests. It sees
// the order on the wire, before the client's SDK, which hands a response
// to the waiting call at once but queues notifications for its handlers.
type wire struct {
	mu     sync.Mutex
	calls  map[any]bool // IDs of the client's tools/call requests
	events []string     // "result", a log line as "<level> <data>", or "progress <token> <n>/<total>"
}

// take returns the events recorded since the last take.
func (w *wire) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := w.events
	w.events = nil
	return ev
}

type wireTransport struct {
	mcp.Transport
	w *wire
}

func (t *wireTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &wireConn{Connection: c, w: t.w}, nil
}

type wireConn struct {
	mcp.Connection
	w *wire
}

func (c *wireConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "tools/call" {
		c.w.mu.Lock()
		if c.w.calls == nil {
			c.w.calls = map[any]bool{}
		}
		c.w.calls[r.ID.Raw()] = true
		c.w.mu.Unlock()
	}
	return c.Connection.Write(ctx, m)
}

func (c *wireConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil {
		return m, err
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	switch m := m.(type) {
	case *jsonrpc.Request:
		if m.Method == "notifications/message" {
			var p struct {
				Level string `json:"level"`
				Data  any    `json:"data"`
			}
			_ = json.Unmarshal(m.Params, &p)
			c.w.events = append(c.w.events, fmt.Sprintf("%s %v", p.Level, p.Data))
		}
		if m.Method == "notifications/progress" {
			var p mcp.ProgressNotificationParams
			_ = json.Unmarshal(m.Params, &p)
			c.w.events = append(c.w.events, fmt.Sprintf("progress %v %v/%v", p.ProgressToken, p.Progress, p.Total))
		}
	case *jsonrpc.Response:
		if c.w.calls[m.ID.Raw()] {
			c.w.events = append(c.w.events, "result")
		}
	}
	return m, nil
}

// logLines collects what a client's LoggingMessageHandler receives.
type logLines struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // signalled on every line
}

func newLogLines() *logLines { return &logLines{more: make(chan struct{}, 1)} }

func (l *logLines) handler(_ context.Context, req *mcp.LoggingMessageRequest) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf("%s %v", req.Params.Level, req.Params.Data))
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
}

func (l *logLines) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.lines
	l.lines = nil
	return got
}

// waitLen waits until n lines have been received (and returns them) or the
// bound passes.
func (l *logLines) waitLen(ctx context.Context, n int) []string {
	for {
		l.mu.Lock()
		got := slices.Clone(l.lines)
		l.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-l.more:
		case <-ctx.Done():
			return got
		}
	}
}

var fixtureLogLines = []string{
	"info Tool execution started",
	"info Tool processing data",
	"info Tool execution completed",
}

// The fixture sends its last log line just before its result; the gateway
// must send the client every line before the result, call after call.
func TestUpstreamLogLinesReachTheClientBeforeTheResult(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	srv := r.serve(t, nil)
	w, lines := &wire{}, newLogLines()
	cs := connect(t, srv, &mcp.ClientOptions{LoggingMessageHandler: lines.handler}, w)
	if err := cs.SetLoggingLevel(bounded(t, waitTime), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		res := callTool(t, cs, prefix+"__test_tool_with_logging", map[string]any{})
		if res.IsError || text(res) != "Tool with logging executed successfully" {
			t.Fatalf("call %d: %+v %q", i, res, text(res))
		}
		want := append(slices.Clone(fixtureLogLines), "result")
		if got := w.take(); !slices.Equal(got, want) {
			t.Fatalf("call %d: the gateway sent %q, want %q", i, got, want)
		}
		// The client's own SDK hands a result over before the
		// notifications queued for its handlers (here about one call in
		// ten), so the order is checked on the wire above and the handler
		// only for what it got.
		if got := lines.waitLen(bounded(t, waitTime), 3); !slices.Equal(got, fixtureLogLines) {
			t.Fatalf("call %d: the client's handler got %q, want %q", i, got, fixtureLogLines)
		}
		lines.take()
	}
}

// Progress reports reach the client under its own token before the
// result, and only when it asked for them.
func TestUpstreamProgressReachesTheClientBeforeTheResult(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	w := &wire{}
	cs := connect(t, r.serve(t, nil), nil, w)
	name := prefix + "__test_tool_with_progress"
	for i := range 10 {
		token := fmt.Sprintf("client-token-%d", i)
		params := &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
		params.SetProgressToken(token)
		res, err := cs.CallTool(bounded(t, waitTime), params)
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
		want := []string{
			"progress " + token + " 0/100",
			"progress " + token + " 50/100",
			"progress " + token + " 100/100",
			"result",
		}
		if got := w.take(); !slices.Equal(got, want) {
			t.Fatalf("call %d: the gateway sent %q, want %q", i, got, want)
		}
	}
	callTool(t, cs, name, map[string]any{})
	if got := w.take(); !slices.Equal(got, []string{"result"}) {
		t.Errorf("a call without a progress token: the gateway sent %q, want only the result", got)
	}
}

// Each client gets the lines of its own calls at the level it set, while
// the upstream is asked for the most verbose level any client set.
func TestUpstreamLogLinesAreFilteredByEachClientsLevel(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	srv := r.serve(t, nil)
	verbose, quiet, silent := &wire{}, &wire{}, &wire{}
	csVerbose := connect(t, srv, nil, verbose)
	csQuiet := connect(t, srv, nil, quiet)
	csSilent := connect(t, srv, nil, silent) // never sets a level
	ctx := bounded(t, waitTime)
	if err := csVerbose.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	// Set after "info": the upstream must not be turned down to "error".
	if err := csQuiet.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	name := prefix + "__test_tool_with_logging"
	for _, c := range []struct {
		who  string
		cs   *mcp.ClientSession
		w    *wire
		want []string
	}{
		{"error-level client", csQuiet, quiet, []string{"result"}},
		{"client without a level", csSilent, silent, []string{"result"}},
		{"info-level client", csVerbose, verbose, append(slices.Clone(fixtureLogLines), "result")},
	} {
		callTool(t, c.cs, name, map[string]any{})
		if got := c.w.take(); !slices.Equal(got, c.want) {
			t.Errorf("%s: the gateway sent %q, want %q", c.who, got, c.want)
		}
	}
}

// elicited records the elicitation requests a client's handler received
// and answers each with answer.
type elicited struct {
	answer *mcp.ElicitResult
	mu     sync.Mutex
	got    []*mcp.ElicitParams
}

func (e *elicited) handler(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, req.Params)
	return e.answer, nil
}

func (e *elicited) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.got)
}

func TestUpstreamElicitationIsRelayedToTheCallingClient(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	srv := r.serve(t, nil)
	e := &elicited{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice", "email": "alice@example.com"}}}
	cs := connect(t, srv, &mcp.ClientOptions{ElicitationHandler: e.handler}, nil)
	other := &elicited{answer: &mcp.ElicitResult{Action: "decline"}}
	connect(t, srv, &mcp.ClientOptions{ElicitationHandler: other.handler}, nil) // connected, not calling

	res := callTool(t, cs, prefix+"__test_elicitation", map[string]any{"message": "Who are you?"})
	got := text(res)
	if res.IsError || !strings.Contains(got, "action=accept") || !strings.Contains(got, `"username":"alice"`) || !strings.Contains(got, `"email":"alice@example.com"`) {
		t.Fatalf("result %q (isError %v), want the accepted answer", got, res.IsError)
	}
	e.mu.Lock()
	if len(e.got) != 1 || e.got[0].Message != "Who are you?" {
		t.Errorf("the calling client was asked %+v, want once with the tool's message", e.got)
	}
	e.mu.Unlock()
	if other.count() != 0 {
		t.Errorf("another client was asked %d times", other.count())
	}
}

func TestUpstreamElicitationOfAClientWithoutTheCapabilityFails(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	srv := r.serve(t, nil)
	bystander := &elicited{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "x", "email": "x@example.com"}}}
	connect(t, srv, &mcp.ClientOptions{ElicitationHandler: bystander.handler}, nil)
	cs := connect(t, srv, nil, nil) // no elicitation capability

	res := callTool(t, cs, prefix+"__test_elicitation", map[string]any{"message": "Who are you?"})
	got := text(res)
	if !res.IsError || !strings.Contains(got, "elicitation failed") || !strings.Contains(got, "does not support elicitation") {
		t.Errorf("result %q (isError %v), want an error saying the client does not support elicitation", got, res.IsError)
	}
	if bystander.count() != 0 {
		t.Errorf("a client that did not make the call was asked %d times", bystander.count())
	}
}

// sampled records the sampling requests a client's handler received and
// answers each with the text reply.
type sampled struct {
	reply string
	mu    sync.Mutex
	got   []string // the first message's text of each request
}

func (s *sampled) handler(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first string
	if len(req.Params.Messages) > 0 {
		if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
			first = tc.Text
		}
	}
	s.got = append(s.got, first)
	return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: s.reply}}, nil
}

func (s *sampled) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func TestUpstreamSamplingIsRelayedToTheCallingClient(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	srv := r.serve(t, nil)
	s := &sampled{reply: "Paris"}
	cs := connect(t, srv, &mcp.ClientOptions{CreateMessageHandler: s.handler}, nil)
	bystander := &sampled{reply: "Rome"}
	connect(t, srv, &mcp.ClientOptions{CreateMessageHandler: bystander.handler}, nil)

	res := callTool(t, cs, prefix+"__test_sampling", map[string]any{"prompt": "Capital of France?"})
	if got := text(res); res.IsError || got != "LLM response: Paris" {
		t.Fatalf("result %q (isError %v), want the calling client's reply", got, res.IsError)
	}
	if got := s.asked(); !slices.Equal(got, []string{"Capital of France?"}) {
		t.Errorf("the calling client was asked %q", got)
	}
	if got := bystander.asked(); len(got) != 0 {
		t.Errorf("another client was asked %q", got)
	}

	// A client without the capability is not asked, and the call says why.
	plain := connect(t, srv, nil, nil)
	res = callTool(t, plain, prefix+"__test_sampling", map[string]any{"prompt": "Capital of Italy?"})
	if got := text(res); !res.IsError || !strings.Contains(got, "sampling failed") || !strings.Contains(got, "does not support sampling") {
		t.Errorf("result %q (isError %v), want an error saying the client does not support sampling", got, res.IsError)
	}
	if got := append(s.asked(), bystander.asked()...); len(got) != 1 {
		t.Errorf("clients were asked %q, want only the first call's question", got)
	}
}

// An elicitation that arrives while two calls are in flight on the upstream
// could be either's: it is declined, reaching neither client.
func TestUpstreamElicitationDuringOverlappingCallsIsDeclined(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	srv := r.serve(t, nil)

	// The first client's elicitation is held until the second call is done,
	// so the first call is in flight throughout the second.
	entered, release := make(chan struct{}), make(chan struct{})
	var firstAsked atomic.Int32
	var enterOnce sync.Once
	first := connect(t, srv, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		firstAsked.Add(1)
		enterOnce.Do(func() { close(entered) })
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "first", "email": "first@example.com"}}, nil
	}}, nil)
	second := &elicited{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "second", "email": "second@example.com"}}}
	cs2 := connect(t, srv, &mcp.ClientOptions{ElicitationHandler: second.handler}, nil)

	name := prefix + "__test_elicitation"
	firstDone := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := first.CallTool(bounded(t, waitTime), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "first"}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		firstDone <- res
	}()
	select {
	case <-entered:
	case res := <-firstDone:
		close(release)
		t.Fatalf("the first call ended before its elicitation reached its client: %q", text(res))
	case <-time.After(waitTime):
		close(release)
		t.Fatal("the first call's elicitation never reached its client")
	}

	res := callTool(t, cs2, name, map[string]any{"message": "second"})
	close(release)
	if got := text(res); !res.IsError || !strings.Contains(got, "cannot be matched to a single call") {
		t.Errorf("second call: %q (isError %v), want the elicitation declined as unmatched", got, res.IsError)
	}
	if second.count() != 0 {
		t.Errorf("the second client was asked %d times", second.count())
	}

	select {
	case res := <-firstDone:
		if got := text(res); res.IsError || !strings.Contains(got, `"username":"first"`) {
			t.Errorf("first call: %q (isError %v), want its own client's answer", got, res.IsError)
		}
	case <-time.After(waitTime):
		t.Fatal("the first call did not return")
	}
	if n := firstAsked.Load(); n != 1 {
		t.Errorf("the first client was asked %d times, want once", n)
	}
}

// Catalog helpers.

func resourceURIs(t *testing.T, cs *mcp.ClientSession) map[string]string {
	t.Helper()
	res, err := cs.ListResources(bounded(t, waitTime), nil)
	if err != nil {
		t.Fatalf("list resources: %v", err)
	}
	got := map[string]string{}
	for _, r := range res.Resources {
		got[r.URI] = r.Name
	}
	return got
}

func templateURIs(t *testing.T, cs *mcp.ClientSession) map[string]string {
	t.Helper()
	res, err := cs.ListResourceTemplates(bounded(t, waitTime), nil)
	if err != nil {
		t.Fatalf("list resource templates: %v", err)
	}
	got := map[string]string{}
	for _, r := range res.ResourceTemplates {
		got[r.URITemplate] = r.Name
	}
	return got
}

func promptNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListPrompts(bounded(t, waitTime), nil)
	if err != nil {
		t.Fatalf("list prompts: %v", err)
	}
	var got []string
	for _, p := range res.Prompts {
		got = append(got, p.Name)
	}
	slices.Sort(got)
	return got
}

func readText(t *testing.T, cs *mcp.ClientSession, uri string) (gotURI, text string) {
	t.Helper()
	res, err := cs.ReadResource(bounded(t, waitTime), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("read %s: %d contents, want 1", uri, len(res.Contents))
	}
	return res.Contents[0].URI, res.Contents[0].Text
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// catalogCase is what a gateway in one mode serves of the fixture.
type catalogCase struct {
	unprefixed bool
	uri        func(string) string // served URI of an upstream URI
	name       func(string) string // served name of an upstream name
}

func TestUpstreamCatalogIsServedNamespaced(t *testing.T) {
	t.Parallel()
	testCatalog(t, catalogCase{
		uri:  func(u string) string { return "toolwire://" + prefix + "/" + u },
		name: func(n string) string { return prefix + "__" + n },
	})
}

func TestUpstreamCatalogIsServedUnprefixed(t *testing.T) {
	t.Parallel()
	testCatalog(t, catalogCase{
		unprefixed: true,
		uri:        func(u string) string { return u },
		name:       func(n string) string { return n },
	})
}

func testCatalog(t *testing.T, c catalogCase) {
	r := newRig(t, c.unprefixed)
	cs := connect(t, r.serve(t, nil), nil, nil)
	ctx := bounded(t, waitTime)

	wantResources := map[string]string{
		c.uri("test://static-text"):      c.name("static-text"),
		c.uri("test://static-binary"):    c.name("static-binary"),
		c.uri("test://watched-resource"): c.name("watched-resource"),
	}
	if got := resourceURIs(t, cs); !equalMaps(got, wantResources) {
		t.Errorf("resources %v, want %v", got, wantResources)
	}
	wantTemplates := map[string]string{c.uri("test://template/{id}/data"): c.name("template")}
	if got := templateURIs(t, cs); !equalMaps(got, wantTemplates) {
		t.Errorf("resource templates %v, want %v", got, wantTemplates)
	}
	var wantPrompts []string
	for _, p := range []string{"test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image"} {
		wantPrompts = append(wantPrompts, c.name(p))
	}
	slices.Sort(wantPrompts)
	if got := promptNames(t, cs); !slices.Equal(got, wantPrompts) {
		t.Errorf("prompts %v, want %v", got, wantPrompts)
	}

	// Reads reach the upstream and answer under the served URI.
	static := c.uri("test://static-text")
	if uri, txt := readText(t, cs, static); uri != static || txt != "This is the content of the static text resource." {
		t.Errorf("read %s = %q at %q", static, txt, uri)
	}
	instance := c.uri("test://template/42/data")
	if uri, txt := readText(t, cs, instance); uri != instance || !strings.Contains(txt, `"id":"42"`) {
		t.Errorf("read %s = %q at %q", instance, txt, uri)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: c.uri("test://nothing-here")}); err == nil {
		t.Errorf("reading a URI nothing serves succeeded")
	}

	// Prompts: arguments pass, embedded resources are served URIs.
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: c.name("test_prompt_with_arguments"), Arguments: map[string]string{"arg1": "one", "arg2": "two"}})
	if err != nil {
		t.Fatalf("get prompt: %v", err)
	}
	if len(pr.Messages) != 1 {
		t.Fatalf("prompt with arguments: %d messages", len(pr.Messages))
	}
	if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != `Prompt with arguments: arg1="one", arg2="two"` {
		t.Errorf("prompt with arguments: %#v", pr.Messages[0].Content)
	}
	pr, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: c.name("test_prompt_with_embedded_resource"), Arguments: map[string]string{"resourceUri": "test://static-text"}})
	if err != nil {
		t.Fatalf("get prompt: %v", err)
	}
	if len(pr.Messages) == 0 {
		t.Fatal("prompt with an embedded resource: no messages")
	}
	if er, ok := pr.Messages[0].Content.(*mcp.EmbeddedResource); !ok || er.Resource == nil || er.Resource.URI != static {
		t.Errorf("prompt with an embedded resource: first content %#v, want the resource at %s", pr.Messages[0].Content, static)
	}

	// A tool's embedded resource is served under the gateway's URI too.
	toolName := "test_embedded_resource"
	if !c.unprefixed {
		toolName = prefix + "__" + toolName
	}
	res := callTool(t, cs, toolName, map[string]any{})
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents", toolName, len(res.Content))
	}
	if er, ok := res.Content[0].(*mcp.EmbeddedResource); !ok || er.Resource.URI != c.uri("test://embedded-resource") {
		t.Errorf("%s: content %#v, want the resource at %s", toolName, res.Content[0], c.uri("test://embedded-resource"))
	}

	// Completion goes to the upstream under its own prompt name.
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: c.name("test_prompt_with_arguments")},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"},
	})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	if want := []string{"paris", "park", "party"}; !slices.Equal(comp.Completion.Values, want) {
		t.Errorf("completion values %v, want %v", comp.Completion.Values, want)
	}
	// A template's argument: the fixture completes none, but answers.
	comp, err = cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: c.uri("test://template/{id}/data")},
		Argument: mcp.CompleteParamsArgument{Name: "id", Value: "4"},
	})
	if err != nil || comp.Completion.Values == nil {
		t.Errorf("complete a template's argument: %+v, %v", comp, err)
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: c.name("no_such_prompt")},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"},
	}); err == nil {
		t.Errorf("completing an unknown prompt's argument succeeded")
	}
}

// Visibility is decided on <prefix>__<name>: a caller allowed one prompt
// sees that prompt and nothing else, and cannot reach the rest.
func TestUpstreamCatalogFollowsVisibility(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	allowed := prefix + "__test_simple_prompt"
	cs := connect(t, r.serve(t, func(name string) bool { return name == allowed }), nil, nil)
	ctx := bounded(t, waitTime)

	if got := promptNames(t, cs); !slices.Equal(got, []string{allowed}) {
		t.Errorf("prompts %v, want only %s", got, allowed)
	}
	if got := resourceURIs(t, cs); len(got) != 0 {
		t.Errorf("resources %v, want none", got)
	}
	if got := templateURIs(t, cs); len(got) != 0 {
		t.Errorf("resource templates %v, want none", got)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: allowed}); err != nil {
		t.Errorf("get the visible prompt: %v", err)
	}
	for _, uri := range []string{"toolwire://" + prefix + "/test://static-text", "toolwire://" + prefix + "/test://template/1/data"} {
		if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("read hidden %s: %+v, want an error", uri, res.Contents)
		}
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: prefix + "__test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}}); err == nil {
		t.Errorf("get a hidden prompt succeeded")
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: prefix + "__test_prompt_with_arguments"},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "p"},
	}); err == nil {
		t.Errorf("completing a hidden prompt's argument succeeded")
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "toolwire://" + prefix + "/test://watched-resource"}); err == nil {
		t.Errorf("subscribing to a hidden resource succeeded")
	}
}

// signal returns a channel and a function that signals it without blocking.
func signal() (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	return ch, func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// When the upstream goes away, its resources, templates and prompts go
// too, and connected clients are told.
func TestUpstreamClosedEmptiesTheCatalog(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	resourcesChanged, onResources := signal()
	promptsChanged, onPrompts := signal()
	cs := connect(t, r.serve(t, nil), &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { onResources() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { onPrompts() },
	}, nil)
	if len(resourceURIs(t, cs)) == 0 || len(promptNames(t, cs)) == 0 {
		t.Fatal("nothing served before the upstream closed")
	}
	if err := r.up.Close(); err != nil {
		t.Fatalf("closing the upstream: %v", err)
	}
	ctx := bounded(t, waitTime)
	// A notification may be left over from the first listing: wait for one
	// after which the listing is empty.
	for len(resourceURIs(t, cs)) != 0 {
		select {
		case <-resourcesChanged:
		case <-ctx.Done():
			t.Fatalf("no resources/list_changed after which the resources are gone; still %v", resourceURIs(t, cs))
		}
	}
	for len(promptNames(t, cs)) != 0 {
		select {
		case <-promptsChanged:
		case <-ctx.Done():
			t.Fatalf("no prompts/list_changed after which the prompts are gone; still %v", promptNames(t, cs))
		}
	}
	if got := templateURIs(t, cs); len(got) != 0 {
		t.Errorf("resource templates %v after the upstream closed", got)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://" + prefix + "/test://static-text"}); err == nil {
		t.Error("reading a resource of a closed upstream succeeded")
	}
}

// updates collects the URIs of notifications/resources/updated.
func updates() (chan string, func(context.Context, *mcp.ResourceUpdatedNotificationRequest)) {
	ch := make(chan string, 16)
	return ch, func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		select {
		case ch <- req.Params.URI:
		default:
		}
	}
}

// waitUpdate waits for an update of uri; the fixture reports one every 3 s.
func waitUpdate(t *testing.T, ch chan string, uri string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == uri {
				return
			}
			t.Errorf("update of %q, want only %q", got, uri)
		case <-timeout:
			t.Fatalf("no notifications/resources/updated for %s", uri)
		}
	}
}

// A subscription to a served URI reaches the upstream, its updates reach
// the client under the served URI, and it survives a reconnect.
func TestUpstreamResourceUpdatesReachSubscribers(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	srv := r.serve(t, nil)
	ch, handler := updates()
	cs := connect(t, srv, &mcp.ClientOptions{ResourceUpdatedHandler: handler}, nil)
	unsubscribedCh, unsubscribedHandler := updates()
	connect(t, srv, &mcp.ClientOptions{ResourceUpdatedHandler: unsubscribedHandler}, nil)

	served := "toolwire://" + prefix + "/test://watched-resource"
	if err := cs.Subscribe(bounded(t, waitTime), &mcp.SubscribeParams{URI: served}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	waitUpdate(t, ch, served)

	// Right after an update, so that the next one can only come from the
	// new session: the old child would have sent it 3 s later.
	oldPID := r.up.PID()
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the upstream: %v", err)
	}
	ctx := bounded(t, waitTime)
	for r.up.State() != mcpclient.Ready || r.up.PID() == oldPID {
		if ctx.Err() != nil {
			t.Fatalf("the upstream did not reconnect: %s", r.up.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitUpdate(t, ch, served)
	// The catalog is the same, and reads go to the new session.
	if got := resourceURIs(t, cs); len(got) != 3 {
		t.Errorf("resources after the reconnect: %v", got)
	}
	if uri, _ := readText(t, cs, served); uri != served {
		t.Errorf("read after the reconnect answered at %q", uri)
	}
	select {
	case got := <-unsubscribedCh:
		t.Errorf("a client that did not subscribe was told of %q", got)
	default:
	}
}

// noisyUpstream is a server whose resource read logs and asks for input,
// as a server may while serving any request, and whose tool hold runs
// until release is closed (entered is closed when it starts). It is served
// over Streamable HTTP on 127.0.0.1 and connected through mcpclient.
func noisyUpstream(t *testing.T) (up *mcpclient.Server, reg *tool.Registry, entered, release chan struct{}) {
	t.Helper()
	entered, release = make(chan struct{}), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "noisy", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://noisy", Name: "noisy"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "logged while reading"}); err != nil {
			return nil, err
		}
		answer := "none"
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "asked while reading", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			answer = err.Error()
		} else {
			answer = string(res.Action)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "elicitation: " + answer}}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	reg = tool.NewRegistry(&tool.RegistryOptions{Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{})})
	up, err := mcpclient.Connect(bounded(t, waitTime), config.Server{Name: "noisy", Transport: "http", URL: ts.URL, DefaultTier: "read"}, reg, &mcpclient.Options{
		Logger: slog.New(slog.DiscardHandler),
		Relay:  mcpclient.RelayCapabilities{Elicitation: true},
	})
	if err != nil {
		t.Fatalf("connecting the noisy server: %v", err)
	}
	t.Cleanup(func() { _ = up.Close() })
	return up, reg, entered, release
}

// What an upstream sends while serving a resource read that a client made
// through the gateway is not taken for a tool call in flight at the same
// time: the caller of that call is neither shown the read's log line nor
// asked the read's question.
func TestUpstreamRequestsDuringAReadDoNotReachAConcurrentCaller(t *testing.T) {
	t.Parallel()
	up, reg, entered, release := noisyUpstream(t)
	gw := gateway.New(tool.NewExecutor(reg, nil), &gateway.Options{Upstreams: []gateway.Upstream{up.Catalog()}, Logger: slog.New(slog.DiscardHandler)})
	srv, stop := gw.Server(nil)
	t.Cleanup(stop)

	callerAsked, readerAsked := &elicited{answer: &mcp.ElicitResult{Action: "accept"}}, &elicited{answer: &mcp.ElicitResult{Action: "accept"}}
	callerWire := &wire{}
	caller := connect(t, srv, &mcp.ClientOptions{ElicitationHandler: callerAsked.handler}, callerWire)
	reader := connect(t, srv, &mcp.ClientOptions{ElicitationHandler: readerAsked.handler}, nil)
	if err := caller.SetLoggingLevel(bounded(t, waitTime), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := caller.CallTool(bounded(t, waitTime), &mcp.CallToolParams{Name: "noisy__hold", Arguments: map[string]any{}})
		done <- err
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("hold returned before it started: %v", err)
	case <-time.After(waitTime):
		t.Fatal("hold did not start")
	}
	served := "toolwire://noisy/test://noisy"
	_, txt := readText(t, reader, served)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("hold: %v", err)
	}

	if !strings.Contains(txt, "cannot be matched to a single call") {
		t.Errorf("the read's elicitation got %q, want it declined as unmatched", txt)
	}
	if n := callerAsked.count(); n != 0 {
		t.Errorf("the caller of a concurrent tool call was asked the read's question %d times", n)
	}
	if n := readerAsked.count(); n != 0 {
		t.Errorf("the reader was asked %d times, want the question declined", n)
	}
	if got := callerWire.take(); !slices.Equal(got, []string{"result"}) {
		t.Errorf("the caller of a concurrent tool call was sent %q, want only its result", got)
	}
}

// *mcpclient.Catalog is what toolwire serve hands the gateway.
var _ gateway.Upstream = (*mcpclient.Catalog)(nil)

// bearerTransport sends every request with a bearer token.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(req)
}

// The gateway keeps one listing of its upstreams for every role: with
// several roles' clients connected over HTTP, each to a server of its own,
// the first role's server lists the upstream and the others share that
// listing, and a change the upstream reports is listed once, not once per
// role, and reaches every role.
func TestAnUpstreamChangeIsListedOnceForEveryRole(t *testing.T) {
	t.Parallel()
	var lists atomic.Int32 // resources/list requests the upstream answered
	srv := mcp.NewServer(&mcp.Implementation{Name: "listed", Version: "1"}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/list" {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "text"}}}, nil
	}
	srv.AddResource(&mcp.Resource{URI: "test://a", Name: "a"}, read)
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(upstream.Close)
	reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: gateway.NewApprover(gateway.ApprovalPolicy{})})
	up, err := mcpclient.Connect(bounded(t, waitTime), config.Server{Name: "listed", Transport: "http", URL: upstream.URL, DefaultTier: "read"}, reg,
		&mcpclient.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("connecting the upstream: %v", err)
	}
	t.Cleanup(func() { _ = up.Close() })

	gw := gateway.New(tool.NewExecutor(reg, nil), &gateway.Options{Upstreams: []gateway.Upstream{up.Catalog()}, Logger: slog.New(slog.DiscardHandler)})
	roles := gateway.Roles{"all": {"*"}, "resources": {"listed__*"}, "some": {"listed__a", "listed__b"}}
	var tokens []gateway.StaticToken
	for role := range roles {
		tokens = append(tokens, gateway.StaticToken{SHA256: gateway.HashToken(role + "-token"), Subject: role, Role: role})
	}
	verify, err := gateway.StaticVerifier(tokens)
	if err != nil {
		t.Fatal(err)
	}
	h := gw.Handler(&gateway.HTTPOptions{Verifier: verify, Roles: roles})
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close(); h.Close() })

	changed, onChanged := signal()
	var clients []*mcp.ClientSession
	for role := range roles {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: role, Version: "1"}, &mcp.ClientOptions{
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { onChanged() },
		}).Connect(bounded(t, waitTime), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{role + "-token"}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("connecting as %s: %v", role, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		if got := resourceURIs(t, cs); !equalMaps(got, map[string]string{"toolwire://listed/test://a": "listed__a"}) {
			t.Fatalf("role %s sees %v, want test://a", role, got)
		}
		clients = append(clients, cs)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("the upstream was listed %d times for %d roles' servers, want once", n, len(roles))
	}

	srv.AddResource(&mcp.Resource{URI: "test://b", Name: "b"}, read)
	ctx := bounded(t, waitTime)
	for _, cs := range clients {
		// Each role's server tells its clients when it has synced.
		for _, ok := resourceURIs(t, cs)["toolwire://listed/test://b"]; !ok; _, ok = resourceURIs(t, cs)["toolwire://listed/test://b"] {
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("a role never saw the upstream's new resource; it sees %v", resourceURIs(t, cs))
			}
		}
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("the upstream was listed %d times after one change with %d roles served, want once more (2 in all)", n, len(roles))
	}
}
