package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// Version is the server version the gateway announces.
const Version = "0.1.0"

// protocolVersions are the MCP versions the gateway negotiates. From
// 2026-07-28 on, a server may no longer send elicitation/create while
// serving a call (multi round-trip requests replace it), which the
// gateway's approvals rely on; until it speaks that form, it offers the
// versions before.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Options configures a [Gateway]. The zero value is usable.
type Options struct {
	// Name is the server name announced to clients; default "toolwire".
	Name string
	// Logger receives the SDK's server logs. Nil means none.
	Logger *slog.Logger
	// Unprefixed serves tools under their upstream's own names
	// (Origin.Name) instead of their registered <prefix>__<tool> names:
	// for a gateway in front of a single upstream, whose clients expect
	// its names. Two tools that would share a name are a collision (see
	// [Gateway.Collisions]).
	Unprefixed bool
}

// Gateway serves an executor's registry over MCP.
type Gateway struct {
	ex   *tool.Executor
	opts Options
}

// New returns a gateway for ex. The executor's registry should have an
// [Approver] as its confirmer, so that write and destructive calls are
// approved per the gateway's policy.
func New(ex *tool.Executor, opts *Options) *Gateway {
	g := &Gateway{ex: ex}
	if opts != nil {
		g.opts = *opts
	}
	if g.opts.Name == "" {
		g.opts.Name = "toolwire"
	}
	return g
}

// servedName is the name a client sees for t.
func (g *Gateway) servedName(t *tool.Tool) string {
	if g.opts.Unprefixed && t.Origin.Name != "" {
		return t.Origin.Name
	}
	return t.Name
}

// Collisions reports tools of the registry that would be served under the
// same name, naming both, or nil. Only an unprefixed gateway can have them
// (registered names are unique); serve refuses to start with any.
func (g *Gateway) Collisions() error {
	var errs []error
	by := map[string]*tool.Tool{}
	for _, t := range g.ex.Registry().List() {
		name := g.servedName(t)
		if first, dup := by[name]; dup {
			errs = append(errs, fmt.Errorf("tools %s and %s would both be served as %q", describeTool(first), describeTool(t), name))
			continue
		}
		by[name] = t
	}
	return errors.Join(errs...)
}

func describeTool(t *tool.Tool) string {
	if t.Origin.Source == "" {
		return fmt.Sprintf("%q", t.Name)
	}
	return fmt.Sprintf("%q (%q of server %q)", t.Name, t.Origin.Name, t.Origin.Source)
}

// Server returns an MCP server offering the registry's tools that visible
// accepts (nil accepts all), and keeps it in step with the registry: tools
// that appear, change or go away are added, replaced or removed, and
// connected clients are told (notifications/tools/list_changed). A tool
// visible refuses is absent from the listing, not listed and refused.
// Call stop when the server is no longer served.
func (g *Gateway) Server(visible func(name string) bool) (srv *mcp.Server, stop func()) {
	srv = mcp.NewServer(&mcp.Implementation{Name: g.opts.Name, Version: Version}, &mcp.ServerOptions{
		Logger:                    g.opts.Logger,
		HasTools:                  true,
		SupportedProtocolVersions: protocolVersions,
	})
	s := &served{g: g, srv: srv, visible: visible, offered: map[string]*tool.Tool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.sync()
	unwatch := g.ex.Registry().Watch(s.poke)
	go s.loop()
	var once sync.Once
	return srv, func() {
		once.Do(func() {
			unwatch()
			close(s.done)
		})
	}
}

// served is one MCP server kept in step with the registry.
type served struct {
	g       *Gateway
	srv     *mcp.Server
	visible func(string) bool
	wake    chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	offered map[string]*tool.Tool // what the server lists now, by served name
}

// poke asks for a resync. It runs in the goroutine that changed the
// registry, so it only signals; several changes fold into one resync.
func (s *served) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *served) loop() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
			s.sync()
		}
	}
}

// sync makes the server's tools those of the registry that are visible.
func (s *served) sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]*tool.Tool{}
	for _, t := range s.g.ex.Registry().List() { // sorted: the first of a collision wins
		if s.visible != nil && !s.visible(t.Name) {
			continue
		}
		name := s.g.servedName(t)
		if _, dup := want[name]; dup {
			continue // a collision: refused at start-up, ignored if it appears later
		}
		want[name] = t
	}
	var gone []string
	for name := range s.offered {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	for name, t := range want {
		if s.offered[name] == t {
			continue // same registration: nothing to tell clients
		}
		s.srv.AddTool(&mcp.Tool{
			Name:        name,
			Description: t.Description,
			InputSchema: advertisedSchema(t),
			Annotations: Annotations(t),
		}, s.g.handler(t.Name))
	}
	s.offered = want
}

// handler runs a call that arrived through the gateway through the
// executor, with the session (for approvals) and a progress relay (when
// the client asked for progress) in the context.
func (g *Gateway) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = withSession(ctx, req.Session)
		if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
			ctx = tool.WithIdentity(ctx, req.Extra.TokenInfo.UserID)
		}
		if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
			ctx = tool.WithCaller(ctx, &progressRelay{ss: req.Session, token: token})
		}
		res := g.ex.Call(ctx, name, req.Params.Arguments)
		return toMCP(res), nil
	}
}

// progressRelay forwards an upstream's progress reports for a call to the
// client that made it, under the client's own progress token.
type progressRelay struct {
	ss    *mcp.ServerSession
	token any
}

func (p *progressRelay) Progress(ctx context.Context, pr tool.Progress) {
	_ = p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token, Progress: pr.Progress, Total: pr.Total, Message: pr.Message,
	})
}

// toMCP converts a result for the wire. A refusal or failure is an isError
// result whose text says why (a tool's own error keeps the tool's content).
func toMCP(res *tool.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: res.IsError, StructuredContent: res.Structured}
	if res.IsError && res.Reason != tool.ReasonTool {
		out.Content = []mcp.Content{&mcp.TextContent{Text: res.Message}}
		return out
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *tool.Text:
			out.Content = append(out.Content, &mcp.TextContent{Text: c.Text})
		case *tool.Image:
			out.Content = append(out.Content, &mcp.ImageContent{Data: c.Data, MIMEType: c.MIMEType})
		case *tool.Audio:
			out.Content = append(out.Content, &mcp.AudioContent{Data: c.Data, MIMEType: c.MIMEType})
		case *tool.Resource:
			out.Content = append(out.Content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text, Blob: c.Blob}})
		case *tool.ResourceLink:
			out.Content = append(out.Content, &mcp.ResourceLink{URI: c.URI, Name: c.Name, Title: c.Title, Description: c.Description, MIMEType: c.MIMEType, Size: c.Size})
		}
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
		if res.Structured != nil {
			if raw, err := json.Marshal(res.Structured); err == nil {
				out.Content = []mcp.Content{&mcp.TextContent{Text: string(raw)}}
			}
		}
	}
	return out
}
