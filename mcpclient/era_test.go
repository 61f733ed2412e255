package mcpclient

// Protocol revisions: toolwire's client speaks 2026-07-28 to a server that
// does (go-sdk v1.8.0 over stateless Streamable HTTP, or over stdio) and
// falls back to the 2025 revisions for the others, with everything that
// works against a 2025 server working against a 2026 one.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// noteURI is the resource of askingServer that tests subscribe to.
const noteURI = "test://note"

// askingServer is customServer(release) with what a 2026-07-28 server does
// differently: "ask" asks its client for a name (elicitation) and, when
// the client declared sampling, a poem, as multi round-trip input
// requests, and answers with both; "whereami" asks for the client's roots;
// "hold" reports progress once, blocks until its call is cancelled and
// then sends its "id" argument to held, when that is not nil. It also offers the resource
// noteURI.
func askingServer(release <-chan struct{}, held chan<- string) *mcp.Server {
	srv := customServerWith(release, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "ask", Description: "asks for a name and, when it can, a poem", InputSchema: obj},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			answers := req.Params.InputResponses
			if answers == nil {
				asks := mcp.InputRequestMap{"name": &mcp.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
					"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"},
				}}}
				if caps := req.ClientCapabilities(); caps != nil && caps.Sampling != nil {
					asks["poem"] = &mcp.CreateMessageParams{MaxTokens: 20,
						Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "a poem"}}}}
				}
				return &mcp.CallToolResult{InputRequests: asks, RequestState: "asked"}, nil
			}
			if req.Params.RequestState != "asked" {
				return nil, fmt.Errorf("request state %q, want the one of the first round", req.Params.RequestState)
			}
			name, ok := answers["name"].(*mcp.ElicitResult)
			if !ok || name.Action != "accept" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("no name: %+v", answers["name"])}}}, nil
			}
			text := fmt.Sprintf("name=%v", name.Content["name"])
			if poem, ok := answers["poem"].(*mcp.CreateMessageWithToolsResult); ok && len(poem.Content) > 0 {
				if tc, ok := poem.Content[0].(*mcp.TextContent); ok {
					text += " poem=" + tc.Text
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "whereami", Description: "lists the client's roots", InputSchema: obj},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			roots, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil
			}
			var uris []string
			for _, r := range roots.Roots {
				uris = append(uris, r.URI)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, " ")}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "hold", Description: "blocks until cancelled", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if token := req.Params.GetProgressToken(); token != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Message: "holding"}); err != nil {
					return nil, err
				}
			}
			select {
			case <-ctx.Done():
			case <-release:
				return nil, fmt.Errorf("released by the test")
			}
			if held != nil {
				held <- args.ID
			}
			return nil, ctx.Err()
		})
	srv.AddResource(&mcp.Resource{URI: noteURI, Name: "note", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: noteURI, MIMEType: "text/plain", Text: "a note"}}}, nil
		})
	return srv
}

// statelessHandler serves srv the 2026-07-28 way: stateless Streamable HTTP,
// a closed stream cancelling its request.
func statelessHandler(srv *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
}

// statefulHandler serves srv with sessions: go-sdk's server then speaks
// only the revisions before 2026-07-28.
func statefulHandler(srv *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// serveSilently is a stdio server written before 2026-07-28 as many
// hand-made ones are: it answers the methods it knows and ignores the
// others, server/discover among them, without a word. Its one tool, echo,
// answers with its text argument.
func serveSilently() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	answer := func(id json.RawMessage, result any) error {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		if err != nil {
			return err
		}
		out.Write(append(b, '\n'))
		return out.Flush()
	}
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil {
			continue
		}
		var err error
		switch msg.Method {
		case "initialize":
			err = answer(msg.ID, map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "silent", "version": "1"}})
		case "ping":
			err = answer(msg.ID, map[string]any{})
		case "tools/list":
			err = answer(msg.ID, map[string]any{"tools": []any{map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}}})
		case "tools/call":
			err = answer(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": msg.Params.Arguments.Text}}})
		}
		if err != nil {
			return err
		}
	}
	return in.Err()
}

// TestRevisionNegotiated connects servers of each kind and checks the
// revision each negotiated, as Status shows it, and that a call goes
// through.
func TestRevisionNegotiated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) config.Server
		want string
		tool string
	}{
		{"go-sdk over stateless HTTP", func(t *testing.T) config.Server {
			return httpConfig("up", serveHTTP(t, statelessHandler(newCustomServer())))
		}, "2026-07-28", "up__a_b"},
		{"go-sdk over HTTP with sessions", func(t *testing.T) config.Server {
			return httpConfig("up", serveHTTP(t, statefulHandler(newCustomServer())))
		}, "2025-11-25", "up__a_b"},
		{"go-sdk over stdio", func(*testing.T) config.Server { return stdioConfig("up", "custom") }, "2026-07-28", "up__a_b"},
		// It never answers server/discover: the stdio connection answers
		// for it once it has answered a ping.
		{"a stdio server that ignores server/discover", func(*testing.T) config.Server { return stdioConfig("up", "silent") }, "2025-06-18", "up__echo"},
		// A pinned revision is offered alone, without discovery.
		{"go-sdk over stdio, protocol 2025-11-25", func(*testing.T) config.Server {
			cfg := stdioConfig("up", "custom")
			cfg.Protocol = "2025-11-25"
			return cfg
		}, "2025-11-25", "up__a_b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := confirmingRegistry()
			s := connect(t, tc.cfg(t), reg, nil)
			if got := s.Status().Protocol; got != tc.want {
				t.Errorf("Status().Protocol = %q, want %q", got, tc.want)
			}
			res := call(t, tool.NewExecutor(reg, nil), tc.tool, `{"text":"hi"}`)
			if res.IsError {
				t.Errorf("%s: %+v", tc.tool, res)
			}
		})
	}
}

// A server that does not speak the revision its configuration pins is not
// connected, and the error says which it speaks.
func TestAPinnedRevisionTheServerLacksFailsTheConnection(t *testing.T) {
	t.Parallel()
	cfg := httpConfig("up", serveHTTP(t, statefulHandler(newCustomServer())))
	cfg.Protocol = "2026-07-28"
	reg := confirmingRegistry()
	_, err := Connect(boundedCtx(t, waitTime), cfg, reg, nil)
	if !errors.Is(err, ErrProtocolMismatch) || !strings.Contains(err.Error(), "it speaks MCP 2025-11-25, and its protocol is set to 2026-07-28") {
		t.Errorf("Connect = %v, want ErrProtocolMismatch naming both revisions", err)
	}
	if reg.Len() != 0 {
		t.Errorf("registry holds %v after a refused connection", toolNames(reg))
	}
}

// methodLog records the JSON-RPC method of every POST an HTTP handler
// receives, and can make the handler forget a session: every later
// request of it gets 404, as from a server that restarted.
type methodLog struct {
	mu        sync.Mutex
	methods   []string
	session   string // the session seen first
	forgotten string // the session answered with 404
}

func (l *methodLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		l.mu.Lock()
		if l.session == "" {
			l.session = id
		}
		forgotten := id != "" && id == l.forgotten
		l.mu.Unlock()
		if forgotten {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method != "" {
				l.mu.Lock()
				l.methods = append(l.methods, m.Method)
				l.mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// forget makes the handler forget the first session it saw and returns the
// number of methods received so far.
func (l *methodLog) forget() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgotten = l.session
	l.session = ""
	return len(l.methods)
}

func (l *methodLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.methods[n:])
}

// A server found to speak only a revision before 2026-07-28 is not probed
// again when the client reconnects: it gets initialize at once.
func TestLegacyRevisionIsRememberedAcrossReconnects(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	wire := &methodLog{}
	watch, log := newAuditWatch()
	reg := confirmingRegistry()
	s := connect(t, httpConfig("up", serveHTTP(t, wire.wrap(statefulHandler(newCustomServer())))), reg,
		&Options{Audit: log, Reconnect: ReconnectPolicy{Initial: 10 * time.Millisecond}})
	if got := wire.since(0); !slices.Contains(got, "server/discover") || !slices.Contains(got, "initialize") {
		t.Fatalf("the first connection sent %q, want server/discover then initialize", got)
	}
	n := wire.forget()
	// The next call finds the session gone, and the server reconnects.
	call(t, tool.NewExecutor(reg, nil), "up__a_b", `{}`)
	watch.waitKind(t, ctx, audit.ServerReconnected)
	got := wire.since(n)
	if !slices.Contains(got, "initialize") || slices.Contains(got, "server/discover") {
		t.Errorf("the reconnection sent %q, want initialize and no server/discover", got)
	}
	if p := s.Status().Protocol; p != "2025-11-25" {
		t.Errorf("Status().Protocol = %q after reconnecting", p)
	}
}

// answeringCaller is a tool.Caller that answers elicitation with its name
// and sampling with a poem signed by it, keeping what it was asked.
// goneCaller is a caller whose own session has closed: every question
// fails as go-sdk fails a request on a closed connection.
type goneCaller struct{}

func (goneCaller) Progress(context.Context, tool.Progress) {}

func (goneCaller) Ask(context.Context, tool.RequestKind, json.RawMessage) (json.RawMessage, error) {
	return nil, fmt.Errorf("the caller's session: %w", mcp.ErrConnectionClosed)
}

type answeringCaller struct {
	name  string
	mu    sync.Mutex
	asked []tool.RequestKind
}

func (*answeringCaller) Progress(context.Context, tool.Progress) {}

func (c *answeringCaller) Ask(_ context.Context, kind tool.RequestKind, _ json.RawMessage) (json.RawMessage, error) {
	c.mu.Lock()
	c.asked = append(c.asked, kind)
	c.mu.Unlock()
	switch kind {
	case tool.Elicitation:
		return json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"name": c.name}})
	case tool.Sampling:
		return json.Marshal(map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "by " + c.name}})
	}
	return nil, tool.ErrNotSupported
}

func (c *answeringCaller) kinds() []tool.RequestKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.asked)
}

// A 2026-07-28 server's input requests (multi round-trip) reach the caller
// of the call that made them, even while other calls are in flight, over
// HTTP and stdio; a caller is asked only what the client declared it can
// answer.
func TestInputRequestsReachTheirCallsCaller(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			cfg := stdioConfig("up", "asking")
			if transport == "http" {
				cfg = httpConfig("up", serveHTTP(t, statelessHandler(askingServer(nil, nil))))
			}
			reg := confirmingRegistry()
			s := connect(t, cfg, reg, &Options{Relay: RelayCapabilities{Elicitation: true, Sampling: true}})
			if p := s.Status().Protocol; p != "2026-07-28" {
				t.Fatalf("negotiated %q", p)
			}
			ex := tool.NewExecutor(reg, nil)
			var wg sync.WaitGroup
			callers := make([]*answeringCaller, 6)
			for i := range callers {
				callers[i] = &answeringCaller{name: fmt.Sprintf("caller%d", i)}
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := callers[i]
					res := ex.Call(tool.WithCaller(boundedCtx(t, waitTime), c), "up__ask", json.RawMessage(`{}`))
					if want := fmt.Sprintf("name=%s poem=by %s", c.name, c.name); res.IsError || res.Text() != want {
						t.Errorf("%s's call: %q (%s), want %q", c.name, res.Text(), res.Message, want)
					}
				}()
			}
			wg.Wait()
			for _, c := range callers {
				if got := c.kinds(); len(got) != 2 {
					t.Errorf("%s was asked %v, want one elicitation and one sampling", c.name, got)
				}
			}
		})
	}

	// Declared elicitation only: the server asks for nothing else.
	t.Run("elicitation only", func(t *testing.T) {
		t.Parallel()
		reg := confirmingRegistry()
		connect(t, httpConfig("up", serveHTTP(t, statelessHandler(askingServer(nil, nil)))), reg,
			&Options{Relay: RelayCapabilities{Elicitation: true}})
		c := &answeringCaller{name: "ada"}
		res := tool.NewExecutor(reg, nil).Call(tool.WithCaller(boundedCtx(t, waitTime), c), "up__ask", nil)
		if res.IsError || res.Text() != "name=ada" {
			t.Errorf("ask: %q (%s)", res.Text(), res.Message)
		}
		if got := c.kinds(); !slices.Equal(got, []tool.RequestKind{tool.Elicitation}) {
			t.Errorf("the caller was asked %v", got)
		}
	})

	// A call without a caller that can answer fails, and says why; many
	// in a row leave the connection as it was (the transport carried
	// every round), for the calls of other callers.
	t.Run("no caller", func(t *testing.T) {
		t.Parallel()
		reg := confirmingRegistry()
		s := connect(t, httpConfig("up", serveHTTP(t, statelessHandler(askingServer(nil, nil)))), reg,
			&Options{Relay: RelayCapabilities{Elicitation: true}})
		before := s.sup.current()
		ex := tool.NewExecutor(reg, nil)
		for _, c := range []struct {
			caller tool.Caller
			says   string
		}{
			{&namedCaller{"plain"}, "no call in flight can take it"},
			// A caller whose own session closed: its error is go-sdk's
			// for a closed connection, which is not this one's.
			{goneCaller{}, "connection closed"},
		} {
			for i := range s.set.policy.FailureThreshold + 2 {
				res := ex.Call(tool.WithCaller(boundedCtx(t, waitTime), c.caller), "up__ask", nil)
				if !res.IsError || !strings.Contains(res.Message, c.says) {
					t.Fatalf("ask %d with a caller that cannot answer (%T): %+v", i+1, c.caller, res)
				}
			}
		}
		select {
		case <-before.lost:
			t.Fatalf("the connection was taken for lost after calls whose callers could not answer: %v", before.lostCause())
		default:
		}
		c := &answeringCaller{name: "ada"}
		if res := ex.Call(tool.WithCaller(boundedCtx(t, waitTime), c), "up__ask", nil); res.IsError || res.Text() != "name=ada" {
			t.Errorf("a caller that can answer, after them: %q (%s)", res.Text(), res.Message)
		}
		if s.sup.current() != before {
			t.Errorf("the server reconnected after calls whose callers could not answer")
		}
	})
}

// A server configured with roots is offered them, in both eras; one
// without is offered none.
func TestRootsAreOfferedToTheServersThatHaveThem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
	for _, tc := range []struct {
		name    string
		handler func(*mcp.Server) http.Handler
	}{
		{"2026-07-28", statelessHandler},
		{"2025-11-25", statefulHandler},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := confirmingRegistry()
			cfg := httpConfig("up", serveHTTP(t, tc.handler(askingServer(nil, nil))))
			cfg.Roots = []string{dir}
			s := connect(t, cfg, reg, nil)
			if p := s.Status().Protocol; p != tc.name {
				t.Fatalf("negotiated %q", p)
			}
			if res := call(t, tool.NewExecutor(reg, nil), "up__whereami", `{}`); res.IsError || res.Text() != want {
				t.Errorf("whereami = %q (%s), want %q", res.Text(), res.Message, want)
			}
		})
	}
	// Asked all the same (the server does not look at what the client
	// declared), go-sdk answers with no roots.
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		reg := confirmingRegistry()
		connect(t, httpConfig("up", serveHTTP(t, statelessHandler(askingServer(nil, nil)))), reg, nil)
		if res := call(t, tool.NewExecutor(reg, nil), "up__whereami", `{}`); res.IsError || res.Text() != "" {
			t.Errorf("whereami without roots = %q (%s), want no root", res.Text(), res.Message)
		}
	})
}

// listenGate stands between a client and a 2026-07-28 server: it tells
// when the server has acknowledged a subscriptions/listen stream, can end
// every stream open (as a server restarting or a proxy does) and can turn
// every request away with 503 meanwhile.
type listenGate struct {
	h     http.Handler
	acked chan struct{} // one per acknowledged stream

	mu       sync.Mutex
	cancels  []context.CancelFunc
	down     bool
	cutOnAck bool // end each stream as soon as it is acknowledged
}

func newListenGate(h http.Handler) *listenGate {
	return &listenGate{h: h, acked: make(chan struct{}, 16)}
}

func (g *listenGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	down := g.down
	g.mu.Unlock()
	if down {
		http.Error(w, "restarting", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "subscriptions/listen" {
		g.h.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	g.mu.Lock()
	g.cancels = append(g.cancels, cancel)
	cutOnAck := g.cutOnAck
	g.mu.Unlock()
	aw := &ackWriter{ResponseWriter: w, acked: g.acked}
	if cutOnAck {
		aw.then = cancel
	}
	g.h.ServeHTTP(aw, r.WithContext(ctx))
}

// cut ends every stream open and turns requests away until restore.
func (g *listenGate) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = true
	for _, cancel := range g.cancels {
		cancel()
	}
	g.cancels = nil
}

func (g *listenGate) restore() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = false
}

// waitAcked waits for n more acknowledged streams.
func (g *listenGate) waitAcked(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.acked:
		case <-ctx.Done():
			t.Fatal("the server acknowledged no subscriptions/listen stream")
		}
	}
}

// ackWriter tells when the server writes the acknowledgement of a
// subscriptions/listen stream.
type ackWriter struct {
	http.ResponseWriter
	acked chan<- struct{}
	then  func() // when set, called after the acknowledgement
	once  sync.Once
}

func (w *ackWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if bytes.Contains(p, []byte("notifications/subscriptions/acknowledged")) {
		w.once.Do(func() {
			select {
			case w.acked <- struct{}{}:
			default: // nobody counts them
			}
			if w.then != nil {
				w.then()
			}
		})
	}
	return n, err
}

func (w *ackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A 2026-07-28 server's notifications come on subscriptions/listen streams:
// tools/list_changed updates the registry and a subscribed resource's
// update reaches the catalog's watchers. A stream the server ends (it
// restarted) is not reopened by go-sdk: the connection counts as lost, the
// server reconnects with server/discover, lists its tools again (catching
// a change made while the stream was down) and subscribes again.
func TestNotificationsOfA2026Server(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	release := make(chan struct{})
	srv := askingServer(release, nil)
	gate := newListenGate(statelessHandler(srv))
	wire := &methodLog{}
	url := serveHTTP(t, wire.wrap(gate))
	t.Cleanup(func() { close(release) })
	watch, log := newAuditWatch()
	reg := confirmingRegistry()
	s := connect(t, httpConfig("up", url), reg, &Options{Audit: log, Reconnect: ReconnectPolicy{Initial: 10 * time.Millisecond}})
	if p := s.Status().Protocol; p != "2026-07-28" {
		t.Fatalf("negotiated %q", p)
	}
	gate.waitAcked(t, ctx, 1) // the stream of list changes

	added := func(name string) func([]audit.Event) bool {
		return func(evs []audit.Event) bool {
			return slices.ContainsFunc(evs, func(ev audit.Event) bool {
				return ev.Kind == audit.ToolsChanged && slices.Contains(ev.Added, name)
			})
		}
	}
	srv.AddTool(&mcp.Tool{Name: "gamma", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("gamma"))
	watch.waitFor(t, ctx, "gamma added", added("up__gamma"))

	updated := make(chan string, 4)
	stop := s.Catalog().Watch(nil, func(uri string) { updated <- uri })
	defer stop()
	if err := s.Catalog().Subscribe(ctx, noteURI); err != nil {
		t.Fatal(err)
	}
	gate.waitAcked(t, ctx, 1) // the resource's own stream
	notify := func() {
		t.Helper()
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: noteURI}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-updated:
			if uri != noteURI {
				t.Errorf("updated %q, want %q", uri, noteURI)
			}
		case <-ctx.Done():
			t.Fatal("the resource's update never reached the catalog's watcher")
		}
	}
	notify()

	// The server restarts: its streams end, and a tool is added before it
	// takes requests again.
	n := len(wire.since(0))
	gate.cut()
	srv.AddTool(&mcp.Tool{Name: "delta", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("delta"))
	gate.restore()
	watch.waitKind(t, ctx, audit.ServerReconnected)
	if _, ok := reg.Lookup("up__delta"); !ok {
		t.Errorf("the tool added while the stream was down is not registered: %v", toolNames(reg))
	}
	if got := wire.since(n); !slices.Contains(got, "server/discover") {
		t.Errorf("the reconnection sent %q, want server/discover", got)
	}
	gate.waitAcked(t, ctx, 2) // list changes and the resource, again
	notify()
	srv.AddTool(&mcp.Tool{Name: "epsilon", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("epsilon"))
	watch.waitFor(t, ctx, "epsilon added", added("up__epsilon"))
}

// A server that ends every notification stream as soon as it has opened it
// is reconnected to ever more slowly, not in a loop.
func TestAServerEndingEveryStreamAtOnceIsReconnectedToMoreSlowly(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	gate := newListenGate(statelessHandler(newCustomServer()))
	gate.cutOnAck = true
	watch, log := newAuditWatch()
	const initial = 10 * time.Millisecond
	s := connect(t, httpConfig("up", serveHTTP(t, gate)), confirmingRegistry(), &Options{Audit: log, Reconnect: ReconnectPolicy{Initial: initial}})
	evs := watch.waitFor(t, ctx, "three reconnections", func(evs []audit.Event) bool {
		var n int
		for _, ev := range evs {
			if ev.Kind == audit.ServerDegraded {
				n++
			}
		}
		return n >= 3
	})
	var waits []time.Duration
	for _, ev := range evs {
		if ev.Kind == audit.ServerDegraded {
			waits = append(waits, ev.Backoff)
		}
	}
	// Without the slowing down, every wait would be the first attempt's:
	// at most initial.
	if waits[2] < 4*initial {
		t.Errorf("waits before reconnecting %v, want the third at least %v", waits[:3], 4*initial)
	}
	gate.mu.Lock()
	gate.cutOnAck = false
	gate.mu.Unlock()
	if st := s.Status(); st.State == Failed {
		t.Errorf("the server was given up on: %+v", st)
	}
}

// A 2026-07-28 server that offers no resource subscriptions is not asked
// for one: Subscribe says so, as a server of an earlier revision would.
func TestSubscribingWhereTheServerOffersNone(t *testing.T) {
	t.Parallel()
	s := connect(t, httpConfig("up", serveHTTP(t, statelessHandler(askingServerWithout()))), confirmingRegistry(), nil)
	err := s.Catalog().Subscribe(boundedCtx(t, waitTime), noteURI)
	if err == nil || !strings.Contains(err.Error(), "offers no resource subscriptions") {
		t.Errorf("Subscribe: %v, want it refused", err)
	}
	if st := s.Status(); st.State != Ready {
		t.Errorf("state %s after the refused subscription", st.State)
	}
}

// askingServerWithout is a server with noteURI and no resource
// subscriptions.
func askingServerWithout() *mcp.Server {
	srv := newCustomServer()
	srv.AddResource(&mcp.Resource{URI: noteURI, Name: "note"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: noteURI, Text: "a note"}}}, nil
	})
	return srv
}

// Cancelling a call to a 2026-07-28 server over HTTP closes its stream,
// which ends the server's handler; the call ends as cancelled.
func TestCancellationReachesA2026Server(t *testing.T) {
	t.Parallel()
	release, held := make(chan struct{}), make(chan string, 1)
	url := serveHTTP(t, statelessHandler(askingServer(release, held)))
	t.Cleanup(func() { close(release) })
	reg := confirmingRegistry()
	connect(t, httpConfig("up", url), reg, nil)
	ctx, cancel := context.WithCancel(boundedCtx(t, waitTime))
	rec := &recorder{first: make(chan struct{})}
	done := make(chan *tool.Result, 1)
	go func() {
		done <- tool.NewExecutor(reg, nil).Call(tool.WithCaller(ctx, rec), "up__hold", json.RawMessage(`{"id":"h1"}`))
	}()
	select {
	case <-rec.first: // the handler is running
	case res := <-done:
		t.Fatalf("hold returned before it reported: %+v", res)
	}
	cancel()
	if res := <-done; res.Reason != tool.ReasonCancelled {
		t.Errorf("the cancelled call ended as %+v", res)
	}
	select {
	case id := <-held:
		if id != "h1" {
			t.Errorf("the server's handler that ended was %q's", id)
		}
	case <-boundedCtx(t, waitTime).Done():
		t.Fatal("the server's handler never saw the cancellation")
	}
}

// A root that is not a directory keeps the server from starting, and the
// error names the server, the field and the path.
func TestABadRootKeepsTheServerFromStarting(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "gone")
	cfg := stdioConfig("up", "custom")
	cfg.Roots = []string{missing}
	s, err := Connect(boundedCtx(t, waitTime), cfg, confirmingRegistry(), nil)
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded with a root that does not exist")
	}
	if want := fmt.Sprintf(`server "up": roots[0]: %q: no such directory`, missing); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
}
