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

// mask masks the secrets m knows in what an upstream's listing shows a
// person or a model: titles and descriptions (names and URIs are matched
// against role globs and routed, so they are served as the upstream gave
// them). The listing is the gateway's own copy.
func (l *listing) mask(m *audit.Secrets) {
	for _, r := range l.resources {
		r.Title, r.Description = m.String(r.Title), m.String(r.Description)
	}
	for _, t := range l.templates {
		t.Title, t.Description = m.String(t.Title), m.String(t.Description)
	}
	for _, p := range l.prompts {
		p.Title, p.Description = m.String(p.Title), m.String(p.Description)
		for _, a := range p.Arguments {
			if a != nil {
				a.Title, a.Description = m.String(a.Title), m.String(a.Description)
			}
		}
	}
}
