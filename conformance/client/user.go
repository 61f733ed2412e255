package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolwire/toolwire/tool"
)

// user is the caller of the scenarios' tool calls: the person at the
// keyboard, who accepts every elicitation form as the server prefilled it
// and has no model to sample.
type user struct{}

var _ tool.Asker = user{}

func (user) Progress(context.Context, tool.Progress) {}

// Ask answers elicitation/create with "accept" and, for each field of the
// requested schema that has a default, that default (SEP-1034: a form
// shows its defaults, and a user who submits it unchanged sends them).
func (user) Ask(_ context.Context, kind tool.RequestKind, params json.RawMessage) (json.RawMessage, error) {
	if kind != tool.Elicitation {
		return nil, fmt.Errorf("%s: %w", kind, tool.ErrNotSupported)
	}
	var p struct {
		RequestedSchema struct {
			Properties map[string]struct {
				Default json.RawMessage `json:"default"`
			} `json:"properties"`
		} `json:"requestedSchema"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("elicitation request: %w", err)
	}
	content := map[string]json.RawMessage{}
	for name, prop := range p.RequestedSchema.Properties {
		if len(prop.Default) > 0 && string(prop.Default) != "null" {
			content[name] = prop.Default
		}
	}
	return json.Marshal(map[string]any{"action": "accept", "content": content})
}
