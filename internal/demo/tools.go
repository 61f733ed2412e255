package demo

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolset holds what the demo tool handlers share: the owning server's state
// and a logger.
type toolset struct {
	st  *state
	log *slog.Logger
}

// EchoDescriptionEnv names a test hook: when this environment variable is
// set, its value replaces the echo tool's description. A stdio server's
// environment comes from the client's configuration, so a test can play a
// server that changes a tool between two runs (what tool pinning must
// catch) without a server of its own.
const EchoDescriptionEnv = "DEMO_ECHO_DESCRIPTION"

// registerTools adds every demo tool to srv, with handlers bound to st.
func registerTools(srv *mcp.Server, st *state, log *slog.Logger) {
	ts := &toolset{st: st, log: log}
	echoDescription := os.Getenv(EchoDescriptionEnv)
	for _, t := range ts.catalog() {
		if t.tool.Name == "echo" && echoDescription != "" {
			t.tool.Description = echoDescription
		}
		handle := t.handle
		srv.AddTool(t.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Counting here, rather than in each handler, keeps the stats tool
			// honest about calls that fail argument validation.
			st.countCall()
			var sessionID string
			if req.Session != nil {
				sessionID = req.Session.ID()
			}
			ctx, release := st.track(ctx, sessionID)
			defer release()
			return handle(ctx, req)
		})
	}
}

// toolEntry pairs a tool definition with its handler.
type toolEntry struct {
	tool   *mcp.Tool
	handle mcp.ToolHandler
}

// Shared annotation values. OpenWorldHint is false throughout because every
// tool acts only on the server's own memory.
var (
	closedWorld = new(false)
	destructive = new(true)
	additive    = new(false)
)

// readOnly returns annotations for a tool that changes nothing.
func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: closedWorld}
}

// emptyObject is the input schema of tools that take no arguments.
const emptyObject = `{"type": "object", "properties": {}}`

// catalog returns the definitions of all demo tools in the order they are
// listed to clients.
func (ts *toolset) catalog() []toolEntry {
	return []toolEntry{
		{&mcp.Tool{
			Name:        "echo",
			Description: "Returns the given text unchanged.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {"text": {"type": "string", "description": "Text to echo back."}},
				"required": ["text"]
			}`),
			Annotations: readOnly(),
		}, ts.echo},
		{&mcp.Tool{
			Name:        "add",
			Description: "Adds two numbers and returns their sum.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"a": {"type": "number", "description": "First addend."},
					"b": {"type": "number", "description": "Second addend."}
				},
				"required": ["a", "b"]
			}`),
			OutputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {"sum": {"type": "number"}},
				"required": ["sum"]
			}`),
			Annotations: readOnly(),
		}, ts.add},
		{&mcp.Tool{
			Name:        "list_notes",
			Description: "Lists the titles of all saved notes in alphabetical order.",
			InputSchema: json.RawMessage(emptyObject),
			OutputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {"titles": {"type": "array", "items": {"type": "string"}}},
				"required": ["titles"]
			}`),
			Annotations: readOnly(),
		}, ts.listNotes},
		{&mcp.Tool{
			Name:        "write_note",
			Description: "Saves a note under a title, replacing any note with the same title.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"title": {
						"type": "string",
						"minLength": 1,
						"maxLength": 100,
						"pattern": "^[^\\r\\n]*$",
						"description": "Single-line title that identifies the note."
					},
					"body": {"type": "string", "description": "Text of the note."}
				},
				"required": ["title", "body"]
			}`),
			Annotations: &mcp.ToolAnnotations{
				DestructiveHint: additive,
				IdempotentHint:  true,
				OpenWorldHint:   closedWorld,
			},
		}, ts.writeNote},
		{&mcp.Tool{
			Name:        "delete_note",
			Description: "Deletes the note with the given title.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {"title": {"type": "string", "description": "Title of the note to delete."}},
				"required": ["title"]
			}`),
			Annotations: &mcp.ToolAnnotations{
				DestructiveHint: destructive,
				OpenWorldHint:   closedWorld,
			},
		}, ts.deleteNote},
		{&mcp.Tool{
			Name:        "tiny_image",
			Description: "Returns an 8x8 PNG image with a short description.",
			InputSchema: json.RawMessage(emptyObject),
			Annotations: readOnly(),
		}, ts.tinyImage},
		{&mcp.Tool{
			Name:        "mislabeled_image",
			Description: "Returns the same 8x8 PNG image as tiny_image but labelled application/octet-stream.",
			InputSchema: json.RawMessage(emptyObject),
			Annotations: readOnly(),
		}, ts.mislabeledImage},
		{&mcp.Tool{
			Name:        "tiny_audio",
			Description: "Returns a 50 ms WAV clip of a quiet 440 Hz tone.",
			InputSchema: json.RawMessage(emptyObject),
			Annotations: readOnly(),
		}, ts.tinyAudio},
		{&mcp.Tool{
			Name:        "embedded_resource",
			Description: "Returns an embedded text resource and a link to another resource.",
			InputSchema: json.RawMessage(emptyObject),
			Annotations: readOnly(),
		}, ts.embeddedResource},
		{&mcp.Tool{
			Name:        "slow_count",
			Description: "Counts up to the given number of steps, pausing between steps and reporting progress after each one.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"steps": {"type": "integer", "minimum": 1, "maximum": 100, "default": 5, "description": "Number of steps to count."},
					"interval_ms": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 500, "description": "Pause before each step, in milliseconds."}
				}
			}`),
			Annotations: readOnly(),
		}, ts.slowCount},
		{&mcp.Tool{
			Name:        "wait_for_cancel",
			Description: "Blocks until the call is cancelled, reporting progress once when it starts waiting.",
			InputSchema: json.RawMessage(emptyObject),
			Annotations: readOnly(),
		}, ts.waitForCancel},
		{&mcp.Tool{
			Name:        "stats",
			Description: "Reports how many tool calls this server has served, including this one, and how many cancellations it has observed, optionally waiting for a cancellation count first.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"wait_for_cancelled": {
						"type": "integer",
						"minimum": 0,
						"maximum": 1000000,
						"default": 0,
						"description": "If positive, wait until at least this many cancellations have been observed before answering."
					}
				}
			}`),
			OutputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"calls": {"type": "integer", "minimum": 0},
					"cancelled": {"type": "integer", "minimum": 0}
				},
				"required": ["calls", "cancelled"]
			}`),
			Annotations: readOnly(),
		}, ts.stats},
		{&mcp.Tool{
			Name:        "fail",
			Description: "Always returns a tool error, with the given reason if one is provided.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {"reason": {"type": "string", "description": "Reason to include in the error message."}}
			}`),
			Annotations: readOnly(),
		}, ts.fail},
	}
}
