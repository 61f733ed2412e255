package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// Annotations derives a tool's MCP annotations from what toolwire enforces
// for it, so that the advertisement cannot drift from the policy:
//
//   - read: readOnlyHint true (and destructiveHint false);
//   - write: neither hint claimed;
//   - destructive: destructiveHint true;
//   - openWorldHint true for a tool that reaches an upstream server.
//
// Only read claims read-only: over-claiming it is the dangerous direction,
// since a client may skip its own confirmation on that basis. A tool of an
// invalid tier is advertised as destructive.
func Annotations(t *tool.Tool) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{}
	switch t.Tier {
	case tool.Read:
		a.ReadOnlyHint = true
		a.DestructiveHint = ptr(false)
	case tool.Write:
	default:
		a.DestructiveHint = ptr(true)
	}
	if t.Origin.Source != "" {
		a.OpenWorldHint = ptr(true)
	}
	return a
}

func ptr[T any](v T) *T { return &v }

// advertisedSchema is the input schema shown to clients: the tool's own when
// it is an object schema, as MCP requires; anything else is advertised as
// an object taking any properties. Calls are validated against the real
// schema either way, so the looser advertisement can only lead to a
// refused call, never an accepted bad one.
func advertisedSchema(t *tool.Tool) json.RawMessage {
	raw := t.Schema()
	var probe struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &probe) == nil && probe.Type == "object" {
		return raw
	}
	return json.RawMessage(`{"type":"object"}`)
}
