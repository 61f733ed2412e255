package mcpclient

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/tool"
)

// maxErrorMessage bounds the one-line message taken from a server's error
// text; the full text stays in the result's content.
const maxErrorMessage = 500

// convertResult turns an MCP tool result into toolwire's own result: content
// blocks mapped one for one with media types checked against the bytes, the
// structured value kept, and isError turned into an error result carrying
// the server's text.
func convertResult(r *mcp.CallToolResult) *tool.Result {
	res := &tool.Result{Structured: r.StructuredContent}
	for _, c := range r.Content {
		if block := convertContent(c); block != nil {
			res.Content = append(res.Content, block)
		}
	}
	if r.IsError {
		res.IsError = true
		res.Reason = tool.ReasonTool
		res.Message = errorMessage(res)
	}
	return res
}

func convertContent(c mcp.Content) tool.Content {
	switch c := c.(type) {
	case *mcp.TextContent:
		return &tool.Text{Text: c.Text}
	case *mcp.ImageContent:
		return &tool.Image{Data: c.Data, MIMEType: fixMIME("image", c.MIMEType, c.Data)}
	case *mcp.AudioContent:
		return &tool.Audio{Data: c.Data, MIMEType: fixMIME("audio", c.MIMEType, c.Data)}
	case *mcp.EmbeddedResource:
		if c.Resource == nil {
			return nil
		}
		r := c.Resource
		mime := r.MIMEType
		if len(r.Blob) > 0 {
			mime = fixResourceMIME(mime, r.Blob)
		}
		return &tool.Resource{URI: r.URI, MIMEType: mime, Text: r.Text, Blob: r.Blob}
	case *mcp.ResourceLink:
		return &tool.ResourceLink{URI: c.URI, Name: c.Name, Title: c.Title, Description: c.Description, MIMEType: c.MIMEType, Size: c.Size}
	case nil:
		return nil
	default:
		// A block type a tool result should not carry (tool use, say):
		// kept as its JSON so nothing the server sent is silently lost.
		raw, err := json.Marshal(c)
		if err != nil {
			return &tool.Text{Text: fmt.Sprintf("[unsupported content %T]", c)}
		}
		return &tool.Text{Text: string(raw)}
	}
}

// errorMessage is the one-line summary of a server's error result.
func errorMessage(res *tool.Result) string {
	msg := strings.Join(strings.Fields(res.Text()), " ")
	if msg == "" {
		return "the server reported an error without text"
	}
	if len(msg) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && !utf8Start(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
