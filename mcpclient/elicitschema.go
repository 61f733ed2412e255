package mcpclient

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A titled multi-select (SEP-1330) is an array property whose items are an
// anyOf of string constants, each with a title. Servers write its items
// with or without "type": "string" beside the anyOf (go-sdk's own
// reference server writes it), and both mean the same, as every constant
// is a string. go-sdk's client checks a form elicitation's schema before
// its handler sees it, and refuses typed items without an enum: toolwire,
// which only relays the question to its caller, could then not relay what
// the specification allows. untypeTitledItems takes the type off such
// items first, which leaves the schema's meaning whole; everything else
// go-sdk checks as before.

// relaxTitledMultiSelect is receiving middleware that passes an
// elicitation/create request's schema through untypeTitledItems before
// go-sdk checks it.
func relaxTitledMultiSelect(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "elicitation/create" {
			if p, ok := req.GetParams().(*mcp.ElicitParams); ok && p != nil && p.RequestedSchema != nil {
				p.RequestedSchema = untypeTitledItems(p.RequestedSchema)
			}
		}
		return next(ctx, method, req)
	}
}

// untypeTitledItems returns schema with "type": "string" taken off the
// items of each array property whose items are a non-empty anyOf and no
// enum (a titled multi-select); it changes nothing in place. A schema it
// cannot read as a JSON object is returned as it is, for go-sdk to judge.
func untypeTitledItems(schema any) any {
	m, ok := schema.(map[string]any)
	if !ok {
		raw, err := json.Marshal(schema)
		if err != nil || json.Unmarshal(raw, &m) != nil || m == nil {
			return schema
		}
	}
	props, _ := m["properties"].(map[string]any)
	var changed map[string]any
	for name, p := range props {
		prop, _ := p.(map[string]any)
		if prop == nil || prop["type"] != "array" {
			continue
		}
		items, _ := prop["items"].(map[string]any)
		anyOf, _ := items["anyOf"].([]any)
		if items == nil || items["type"] != "string" || len(anyOf) == 0 || items["enum"] != nil {
			continue
		}
		untyped := maps.Clone(items)
		delete(untyped, "type")
		prop = maps.Clone(prop)
		prop["items"] = untyped
		if changed == nil {
			changed = maps.Clone(props)
		}
		changed[name] = prop
	}
	if changed == nil {
		return schema
	}
	out := maps.Clone(m)
	out["properties"] = changed
	return out
}
