package oauthtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ResourceOptions configures [NewResourceServer]. A nil *ResourceOptions
// means defaults.
type ResourceOptions struct {
	// Verify checks bearer tokens; nil means the OP's Userinfo.
	Verify auth.TokenVerifier
	// PRM, if set, edits the protected resource metadata before it is
	// served.
	PRM func(*oauthex.ProtectedResourceMetadata)
	// ResourceMetadataURL, if set, replaces the metadata URL that
	// WWW-Authenticate names.
	ResourceMetadataURL string
	// Stateless serves without sessions (go-sdk's stateless handler,
	// cancellation propagated): MCP 2026-07-28, and older revisions each
	// request on its own.
	Stateless bool
	// Extras adds, besides whoami, the tools progress (three progress
	// reports and a log line, then the subject), ask (an elicitation
	// whose answer it returns with the subject) and slow (which waits
	// until cancelled: see Cancelled), the resource whoami://me and the
	// prompt whoami, each of which says the token's subject, and accepts
	// resource subscriptions.
	Extras bool
}

// Request is one request the MCP endpoint served after the bearer check:
// what reached the upstream with a valid token.
type Request struct {
	// HTTPMethod is POST, GET or DELETE.
	HTTPMethod string
	// Method is the JSON-RPC method of a POST's request or notification
	// ("" for a response, a batch or another HTTP method).
	Method string
	// Authorization is the request's Authorization header.
	Authorization string
	// Subject is the subject of the token, as the verifier found it.
	Subject string
	// Session is the request's Mcp-Session-Id ("" without one).
	Session string
	// Protocol is the request's MCP-Protocol-Version header.
	Protocol string
}

// ResourceServer is a Streamable HTTP MCP server on 127.0.0.1 behind
// go-sdk's RequireBearerToken: of sessions (go-sdk's stateful handler,
// 2025-11-25 and older: an initialize opens a session, a DELETE closes
// it), or stateless (ResourceOptions.Stateless, 2026-07-28). It publishes RFC 9728 metadata naming the
// OP (scope openid) at /.well-known/oauth-protected-resource/mcp and
// serves one tool, whoami, whose structured result {"user": ...} is the
// token's subject (and, with ResourceOptions.Extras, more of the kind).
type ResourceServer struct {
	// URL is the MCP endpoint, http://127.0.0.1:PORT/mcp.
	URL string

	mu        sync.Mutex
	auths     []string  // the Authorization header of every request to URL
	requests  []Request // the requests that passed the bearer check
	cancelled int       // calls of the slow tool cancelled
}

// Authorizations returns the Authorization header of every request the
// MCP endpoint received, in order ("" for a request without one), the
// refused ones included: what reached the upstream.
func (rs *ResourceServer) Authorizations() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.auths)
}

// Requests returns the requests that passed the bearer check, in order.
func (rs *ResourceServer) Requests() []Request {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.requests)
}

// WhoamiTool is the name of the resource server's one tool.
const WhoamiTool = "whoami"

// NewResourceServer starts a resource server protected by o, stopped when
// the test ends.
func NewResourceServer(t testing.TB, o *OP, opts *ResourceOptions) *ResourceServer {
	t.Helper()
	if opts == nil {
		opts = &ResourceOptions{}
	}
	verify := opts.Verify
	if verify == nil {
		verify = o.Userinfo
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	rs := &ResourceServer{URL: base + "/mcp"}
	so := &mcp.ServerOptions{}
	if opts.Extras {
		accept := func(context.Context, *mcp.SubscribeRequest) error { return nil }
		so.SubscribeHandler = accept
		so.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, so)
	type whoami struct {
		User string `json:"user"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: WhoamiTool, Description: "says who the token belongs to"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			return nil, whoami{User: req.Extra.TokenInfo.UserID}, nil
		})
	if opts.Extras {
		rs.addExtras(server)
	}
	prm := &oauthex.ProtectedResourceMetadata{Resource: rs.URL, AuthorizationServers: []string{o.Issuer}, ScopesSupported: []string{"openid"}}
	if opts.PRM != nil {
		opts.PRM(prm)
	}
	prmURL := base + "/.well-known/oauth-protected-resource/mcp"
	if opts.ResourceMetadataURL != "" {
		prmURL = opts.ResourceMetadataURL
	}
	mux := http.NewServeMux()
	var ho *mcp.StreamableHTTPOptions
	if opts.Stateless {
		ho = &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}
	}
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, ho)
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: prmURL, AllowMissingExpiration: true,
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := Request{HTTPMethod: r.Method, Authorization: r.Header.Get("Authorization"), Session: r.Header.Get("Mcp-Session-Id"), Protocol: r.Header.Get("Mcp-Protocol-Version")}
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			req.Subject = ti.UserID
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil {
				req.Method = m.Method
			}
		}
		rs.mu.Lock()
		rs.requests = append(rs.requests, req)
		rs.mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.auths = append(rs.auths, r.Header.Get("Authorization"))
		rs.mu.Unlock()
		protected.ServeHTTP(w, r)
	}))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(prm))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return rs
}

// The extra tools' names (ResourceOptions.Extras).
const (
	ProgressTool = "progress"
	AskTool      = "ask"
	// SlowTool reports progress once, then waits until it is cancelled.
	SlowTool = "slow"
	// WhoamiURI is the extra resource, whose text is the token's subject.
	WhoamiURI = "whoami://me"
	// WhoamiPrompt is the extra prompt, whose one message names the
	// token's subject.
	WhoamiPrompt = "whoami"
)

// Cancelled returns how many calls of the slow tool ended because their
// caller cancelled them.
func (rs *ResourceServer) Cancelled() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.cancelled
}

// addExtras adds what ResourceOptions.Extras says.
func (rs *ResourceServer) addExtras(server *mcp.Server) {
	type said struct {
		User   string `json:"user"`
		Answer string `json:"answer,omitempty"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: ProgressTool, Description: "reports progress three times and logs a line"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, said, error) {
			user := req.Extra.TokenInfo.UserID
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "progress", Data: "working for " + user})
			if token := req.Params.GetProgressToken(); token != nil {
				for i := 1; i <= 3; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3, Message: "step for " + user})
				}
			}
			return nil, said{User: user}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: AskTool, Description: "asks its client a question"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, said, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message:         "your name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
			})
			if err != nil {
				return nil, said{}, err
			}
			name, _ := res.Content["name"].(string)
			return nil, said{User: req.Extra.TokenInfo.UserID, Answer: res.Action + ":" + name}, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: SlowTool, Description: "waits until it is cancelled"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, said, error) {
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Message: "waiting"})
			}
			<-ctx.Done()
			rs.mu.Lock()
			rs.cancelled++
			rs.mu.Unlock()
			return nil, said{}, ctx.Err()
		})
	server.AddResource(&mcp.Resource{URI: WhoamiURI, Name: "whoami", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: WhoamiURI, MIMEType: "text/plain", Text: req.Extra.TokenInfo.UserID}}}, nil
		})
	server.AddPrompt(&mcp.Prompt{Name: WhoamiPrompt},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "you are " + req.Extra.TokenInfo.UserID}}}}, nil
		})
}
