package mcpclient

import (
	"net/url"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
)

// rootsOf returns the roots a server is offered (MCP roots/list), from its
// configuration with placeholders resolved (config.ExpandServer has
// checked that each is an absolute path naming a directory): a file:// URI
// per directory, named after it. A server with none is offered none, and
// toolwire then does not declare the roots capability to it.
//
// go-sdk answers roots/list from them in every revision: as a request
// from the server before 2026-07-28, as a multi round-trip input request
// from then on.
func rootsOf(cfg config.Server) []*mcp.Root {
	roots := make([]*mcp.Root, 0, len(cfg.Roots))
	for _, dir := range cfg.Roots {
		dir = filepath.Clean(dir)
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}
		roots = append(roots, &mcp.Root{URI: u.String(), Name: filepath.Base(dir)})
	}
	return roots
}
