//go:build !linux

package mcpclient

import "github.com/modelcontextprotocol/go-sdk/mcp"

// hostileServer has no tools off Linux, where the sandbox's tests skip.
func hostileServer() *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "0.0.1"}, nil)
}
