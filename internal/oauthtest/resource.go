package oauthtest

import (
	"context"
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
}

// ResourceServer is a Streamable HTTP MCP server on 127.0.0.1 behind
// go-sdk's RequireBearerToken. It publishes RFC 9728 metadata naming the
// OP (scope openid) at /.well-known/oauth-protected-resource/mcp and
// serves one tool, whoami, whose structured result {"user": ...} is the
// token's subject.
type ResourceServer struct {
	// URL is the MCP endpoint, http://127.0.0.1:PORT/mcp.
	URL string

	mu    sync.Mutex
	auths []string // the Authorization header of every request to URL
}

// Authorizations returns the Authorization header of every request the
// MCP endpoint received, in order ("" for a request without one), the
// refused ones included: what reached the upstream.
func (rs *ResourceServer) Authorizations() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.auths)
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
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	type whoami struct {
		User string `json:"user"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: WhoamiTool, Description: "says who the token belongs to"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
			return nil, whoami{User: req.Extra.TokenInfo.UserID}, nil
		})
	prm := &oauthex.ProtectedResourceMetadata{Resource: rs.URL, AuthorizationServers: []string{o.Issuer}, ScopesSupported: []string{"openid"}}
	if opts.PRM != nil {
		opts.PRM(prm)
	}
	prmURL := base + "/.well-known/oauth-protected-resource/mcp"
	if opts.ResourceMetadataURL != "" {
		prmURL = opts.ResourceMetadataURL
	}
	mux := http.NewServeMux()
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: prmURL, AllowMissingExpiration: true,
	})(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
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
