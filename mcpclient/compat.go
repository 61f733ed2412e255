package mcpclient

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Temporary: the gateway's old Upstream interface, until it moves to Catalog.

func (s *Server) Prefix() string { return s.cat.Prefix() }
func (s *Server) Session() *mcp.ClientSession {
	if c := s.sup.current(); c != nil {
		return c.session
	}
	return nil
}
func (s *Server) Track(ctx context.Context) func()                { return s.relay.track(ctx) }
func (s *Server) Timeout() time.Duration                          { return s.set.timeout }
func (s *Server) Mask(err error) error                            { return s.set.masked(err) }
func (s *Server) Subscribe(ctx context.Context, uri string) error { return s.cat.Subscribe(ctx, uri) }
func (s *Server) SetLogLevel(ctx context.Context, l mcp.LoggingLevel) error {
	return s.cat.SetLogLevel(ctx, l)
}
func (s *Server) Watch(changed func(), updated func(string)) func() {
	return s.cat.Watch(changed, updated)
}
