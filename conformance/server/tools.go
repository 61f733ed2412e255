//lint:file-ignore SA1019 the fixtures exercise sampling, elicitation and logging on purpose.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// noArgs is the input of the fixture tools that take no arguments.
type noArgs struct{}

type samplingArgs struct {
	Prompt string `json:"prompt" jsonschema:"the prompt to send to the client's LLM"`
}

type elicitationArgs struct {
	Message string `json:"message" jsonschema:"the message to show the user"`
}

// schema2020 is the input schema of json_schema_2020_12_tool. The suite checks
// that $schema, $defs and additionalProperties reach tools/list unchanged.
const schema2020 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"}
  },
  "additionalProperties": false
}`

func addTools(s *mcp.Server) {
	tool := func(name, description string) *mcp.Tool {
		return &mcp.Tool{Name: name, Description: description}
	}
	mcp.AddTool(s, tool("test_simple_text", "Returns one text content item"), simpleText)
	mcp.AddTool(s, tool("test_image_content", "Returns one PNG image content item"), imageContent)
	mcp.AddTool(s, tool("test_audio_content", "Returns one WAV audio content item"), audioContent)
	mcp.AddTool(s, tool("test_embedded_resource", "Returns one embedded text resource"), embeddedResource)
	mcp.AddTool(s, tool("test_multiple_content_types", "Returns text, image and embedded resource content"), multipleContent)
	mcp.AddTool(s, tool("test_tool_with_logging", "Sends three info log messages while it runs"), withLogging)
	mcp.AddTool(s, tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 for the request's progress token"), withProgress)
	mcp.AddTool(s, tool("test_error_handling", "Always fails with an isError result"), failing)
	mcp.AddTool(s, tool("test_sampling", "Asks the client for an LLM completion of prompt (sampling/createMessage)"), sampling)
	mcp.AddTool(s, tool("test_elicitation", "Asks the user for a username and an email address (elicitation/create)"), elicitation)
	mcp.AddTool(s, tool("test_elicitation_sep1034_defaults", "Elicits a form whose string, integer, number, enum and boolean fields have defaults (SEP-1034)"), elicitDefaults)
	mcp.AddTool(s, tool("test_elicitation_sep1330_enums", "Elicits a form with the five enum schema forms (SEP-1330)"), elicitEnums)
	mcp.AddTool(s, tool("test_reconnection", "Closes its SSE response stream mid-call so the client reconnects (SEP-1699)"), reconnection)

	t := tool("json_schema_2020_12_tool", "Takes input described by a JSON Schema 2020-12 schema ($schema, $defs, additionalProperties)")
	t.InputSchema = json.RawMessage(schema2020)
	mcp.AddTool(s, t, schema2020Tool)
}

func textResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func simpleText(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return textResult("This is a simple text response for testing."), nil, nil
}

func imageContent(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.ImageContent{MIMEType: "image/png", Data: testPNG()},
	}}, nil, nil
}

func audioContent(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.AudioContent{MIMEType: "audio/wav", Data: testWAV()},
	}}, nil, nil
}

func embeddedResource(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource.",
		}},
	}}, nil, nil
}

func multipleContent(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "Text, an image and an embedded resource follow."},
		&mcp.ImageContent{MIMEType: "image/png", Data: testPNG()},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "This is an embedded resource.",
		}},
	}}, nil, nil
}

// withLogging sends three log messages, 50 ms apart. The session drops them
// unless the client has set a level with logging/setLevel (info or lower).
func withLogging(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 {
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return nil, nil, err
			}
		}
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "test_tool_with_logging", Data: msg}); err != nil {
			return nil, nil, err
		}
	}
	return textResult("Tool with logging executed successfully"), nil, nil
}

// withProgress reports 0, 50 and 100 of 100, 50 ms apart, when the request
// carries a progress token, and answers with the token.
func withProgress(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return nil, nil, err
			}
		}
		if token == nil {
			continue
		}
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: p, Total: 100, Message: fmt.Sprintf("%.0f%% done", p),
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return textResult("progress token: %v", token), nil, nil
}

// failing returns an error, which mcp.AddTool turns into an isError result.
func failing(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return nil, nil, errors.New("This tool intentionally returns an error for testing")
}

func sampling(ctx context.Context, req *mcp.CallToolRequest, in samplingArgs) (*mcp.CallToolResult, any, error) {
	params := &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
		MaxTokens: 100,
	}
	var text string
	if asksInResult(req) {
		answer, ask := inputResponse[*mcp.CreateMessageWithToolsResult](req, "sample", params)
		if ask != nil {
			return ask, nil, nil
		}
		text = "(non-text response)"
		if len(answer.Content) > 0 {
			if tc, ok := answer.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		return textResult("LLM response: %s", text), nil, nil
	}
	res, err := req.Session.CreateMessage(ctx, params)
	if err != nil {
		return nil, nil, fmt.Errorf("sampling failed: %w", err)
	}
	text = "(non-text response)"
	if tc, ok := res.Content.(*mcp.TextContent); ok {
		text = tc.Text
	}
	return textResult("LLM response: %s", text), nil, nil
}

// asksInResult reports whether the client's protocol revision is 2026-07-28
// or later, where a server may not send requests while serving a call and
// asks for input in the call's result instead (multi round-trip requests,
// SEP-2322): the client answers and calls again.
func asksInResult(req *mcp.CallToolRequest) bool {
	return req.ProtocolVersion() >= "2026-07-28"
}

// inputResponse returns the client's answer, of type R, to the input
// request key of a multi round-trip call, or, on the call's first round, the
// result that asks for it with params.
func inputResponse[R mcp.InputResponse](req *mcp.CallToolRequest, key string, params mcp.InputRequest) (R, *mcp.CallToolResult) {
	var zero R
	if answer, ok := req.Params.InputResponses[key].(R); ok {
		return answer, nil
	}
	return zero, &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{key: params}}
}

func elicitation(ctx context.Context, req *mcp.CallToolRequest, in elicitationArgs) (*mcp.CallToolResult, any, error) {
	return elicit(ctx, req, in.Message, map[string]any{
		"type": "object",
		"properties": map[string]any{
			"username": map[string]any{"type": "string", "description": "Your username"},
			"email":    map[string]any{"type": "string", "description": "Your email address"},
		},
		"required": []string{"username", "email"},
	})
}

func elicitDefaults(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	return elicit(ctx, req, "Confirm or change these values", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":     map[string]any{"type": "string", "description": "Name", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "description": "Age", "default": 30},
			"score":    map[string]any{"type": "number", "description": "Score", "default": 95.5},
			"status":   map[string]any{"type": "string", "description": "Status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "description": "Verified", "default": true},
		},
	})
}

func elicitEnums(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	titled := []map[string]any{
		{"const": "value1", "title": "First Option"},
		{"const": "value2", "title": "Second Option"},
		{"const": "value3", "title": "Third Option"},
	}
	untitled := []string{"option1", "option2", "option3"}
	return elicit(ctx, req, "Pick some options", map[string]any{
		"type": "object",
		"properties": map[string]any{
			// single choice: plain enum, oneOf const/title, legacy enumNames
			"untitledSingle": map[string]any{"type": "string", "enum": untitled},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
			"legacyEnum": map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"},
				"enumNames": []string{"Option One", "Option Two", "Option Three"}},
			// multiple choice: array of a plain enum, array of anyOf const/title
			"untitledMulti": map[string]any{"type": "array", "minItems": 1, "maxItems": 3,
				"items": map[string]any{"type": "string", "enum": untitled}},
			"titledMulti": map[string]any{"type": "array", "minItems": 1, "maxItems": 3,
				// No "type" beside anyOf, as SEP-1330 writes it: go-sdk's
				// client refuses typed items without an enum.
				"items": map[string]any{"anyOf": titled}},
		},
	})
}

// elicit asks the client's user to fill in a form and reports the answer.
func elicit(ctx context.Context, req *mcp.CallToolRequest, message string, schema map[string]any) (*mcp.CallToolResult, any, error) {
	params := &mcp.ElicitParams{Message: message, RequestedSchema: schema}
	var res *mcp.ElicitResult
	if asksInResult(req) {
		answer, ask := inputResponse[*mcp.ElicitResult](req, "elicit", params)
		if ask != nil {
			return ask, nil, nil
		}
		res = answer
	} else {
		var err error
		if res, err = req.Session.Elicit(ctx, params); err != nil {
			return nil, nil, fmt.Errorf("elicitation failed: %w", err)
		}
	}
	content, _ := json.Marshal(res.Content)
	return textResult("User response: action=%s, content=%s", res.Action, content), nil, nil
}

// reconnection closes the POST's SSE stream (asking the client to come back
// after 10 ms) and answers a little later, on whichever stream then carries
// the session's messages.
func reconnection(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
	if req.Extra != nil && req.Extra.CloseSSEStream != nil {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
	}
	if err := sleep(ctx, 100*time.Millisecond); err != nil {
		return nil, nil, err
	}
	return textResult("Reconnection test completed."), nil, nil
}

func schema2020Tool(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
	args, _ := json.Marshal(in)
	return textResult("json_schema_2020_12_tool called with %s", args), nil, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
