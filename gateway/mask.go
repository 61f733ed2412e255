package gateway

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
)

// maskContent masks the secrets m knows in the text of a prompt message's
// content; tool results come masked from the executor.
func maskContent(c mcp.Content, m *audit.Secrets) {
	switch c := c.(type) {
	case *mcp.TextContent:
		c.Text = m.String(c.Text)
	case *mcp.EmbeddedResource:
		if c.Resource != nil {
			c.Resource.URI, c.Resource.Text = m.String(c.Resource.URI), m.String(c.Resource.Text)
		}
	case *mcp.ResourceLink:
		c.URI, c.Name, c.Title, c.Description = m.String(c.URI), m.String(c.Name), m.String(c.Title), m.String(c.Description)
	}
}
