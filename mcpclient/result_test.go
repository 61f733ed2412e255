package mcpclient

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

func text(s string) *mcp.TextContent { return &mcp.TextContent{Text: s} }

func TestConvertResultErrors(t *testing.T) {
	long := strings.Repeat("a", 499) + strings.Repeat("é", 10) // byte 500 is inside an é
	for _, tc := range []struct {
		name    string
		content []mcp.Content
		want    string
	}{
		{"server text becomes the message", []mcp.Content{text("disk full")}, "disk full"},
		{"folded to one line", []mcp.Content{text("line one\n\n  line two\t end")}, "line one line two end"},
		{"text blocks joined", []mcp.Content{text("first"), &mcp.ImageContent{Data: pngBytes, MIMEType: "image/png"}, text("second")}, "first second"},
		{"no text", nil, "the server reported an error without text"},
		{"blank text", []mcp.Content{text(" \n ")}, "the server reported an error without text"},
		{"cut at a UTF-8 boundary", []mcp.Content{text(long)}, strings.Repeat("a", 499) + "…"},
		{"cut at exactly 500 bytes", []mcp.Content{text(strings.Repeat("b", 600))}, strings.Repeat("b", 500) + "…"},
		{"500 bytes is not cut", []mcp.Content{text(strings.Repeat("c", 500))}, strings.Repeat("c", 500)},
		{"multibyte run cut on a rune", []mcp.Content{text(strings.Repeat("€", 200))}, strings.Repeat("€", 166) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := convertResult(&mcp.CallToolResult{IsError: true, Content: tc.content})
			if !res.IsError || res.Reason != tool.ReasonTool {
				t.Errorf("IsError %v, Reason %q; want true, tool_error", res.IsError, res.Reason)
			}
			if res.Message != tc.want {
				t.Errorf("Message = %q (%d bytes), want %q (%d bytes)", res.Message, len(res.Message), tc.want, len(tc.want))
			}
			if !utf8.ValidString(res.Message) {
				t.Errorf("Message %q is not valid UTF-8", res.Message)
			}
			if len(res.Content) != len(tc.content) {
				t.Errorf("content has %d blocks, want all %d kept", len(res.Content), len(tc.content))
			}
		})
	}
	// The full text stays in the content even when the message is cut.
	res := convertResult(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{text(long)}})
	if res.Text() != long {
		t.Errorf("content text was changed")
	}
}

func TestConvertResultContent(t *testing.T) {
	size := int64(1234)
	r := convertResult(&mcp.CallToolResult{
		Content: []mcp.Content{
			text("hello"),
			&mcp.ImageContent{Data: pngBytes, MIMEType: "application/octet-stream"},
			&mcp.ImageContent{Data: random, MIMEType: "image/x-raw"},
			&mcp.AudioContent{Data: wavBytes, MIMEType: "audio/mpeg"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.png", MIMEType: "application/octet-stream", Blob: pngBytes}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b.txt", MIMEType: "text/plain", Text: "body"}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///c", Blob: random}},
			&mcp.EmbeddedResource{Resource: nil},
			&mcp.ResourceLink{URI: "file:///d", Name: "d", Title: "D", Description: "the d", MIMEType: "text/csv", Size: &size},
			nil,
			&mcp.ToolUseContent{ID: "u1", Name: "other"},
		},
		StructuredContent: map[string]any{"sum": 5.0},
	})
	if r.IsError || r.Reason != "" || r.Message != "" {
		t.Errorf("a success became IsError %v, Reason %q, Message %q", r.IsError, r.Reason, r.Message)
	}
	if !reflect.DeepEqual(r.Structured, map[string]any{"sum": 5.0}) {
		t.Errorf("Structured = %#v", r.Structured)
	}
	want := []tool.Content{
		&tool.Text{Text: "hello"},
		&tool.Image{Data: pngBytes, MIMEType: "image/png"},
		&tool.Image{Data: random, MIMEType: "image/x-raw"},
		&tool.Audio{Data: wavBytes, MIMEType: "audio/wav"},
		&tool.Resource{URI: "file:///a.png", MIMEType: "image/png", Blob: pngBytes},
		&tool.Resource{URI: "file:///b.txt", MIMEType: "text/plain", Text: "body"},
		&tool.Resource{URI: "file:///c", MIMEType: "", Blob: random},
		&tool.ResourceLink{URI: "file:///d", Name: "d", Title: "D", Description: "the d", MIMEType: "text/csv", Size: &size},
	}
	if len(r.Content) != len(want)+1 {
		t.Fatalf("got %d blocks, want %d (nil blocks dropped, the tool_use block kept as text): %#v", len(r.Content), len(want)+1, r.Content)
	}
	for i, w := range want {
		if !reflect.DeepEqual(r.Content[i], w) {
			t.Errorf("block %d = %#v, want %#v", i, r.Content[i], w)
		}
	}
	last, ok := r.Content[len(want)].(*tool.Text)
	if !ok {
		t.Fatalf("unsupported block became %T, want *tool.Text", r.Content[len(want)])
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(last.Text), &raw); err != nil || raw["type"] != "tool_use" || raw["name"] != "other" {
		t.Errorf("unsupported block kept as %q, want its JSON", last.Text)
	}
}

func TestConvertResultStructuredError(t *testing.T) {
	r := convertResult(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("bad")}, StructuredContent: []any{"x"}})
	if !r.IsError || r.Message != "bad" || !reflect.DeepEqual(r.Structured, []any{"x"}) {
		t.Errorf("got %+v, want the error with its structured value kept", r)
	}
}
