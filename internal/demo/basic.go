package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// echo implements the echo tool.
func (ts *toolset) echo(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Text *string `json:"text"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(err), nil
	}
	text, err := requireString("text", args.Text)
	if err != nil {
		return errorResult(err), nil
	}
	return textResult(text), nil
}

// addOutput is the structured content of the add tool.
type addOutput struct {
	Sum float64 `json:"sum"`
}

// add implements the add tool.
func (ts *toolset) add(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		A *float64 `json:"a"`
		B *float64 `json:"b"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(err), nil
	}
	a, err := requireNumber("a", args.A)
	if err != nil {
		return errorResult(err), nil
	}
	b, err := requireNumber("b", args.B)
	if err != nil {
		return errorResult(err), nil
	}
	sum := a + b
	// JSON cannot carry infinities, so an overflowing sum would otherwise
	// fail to encode and surface as a confusing protocol error.
	if math.IsInf(sum, 0) {
		return errorResult(fmt.Errorf("sum of %v and %v overflows", a, b)), nil
	}
	// Formatting with encoding/json makes the text match structuredContent
	// exactly, e.g. "5" rather than "5e+00".
	text, err := json.Marshal(sum)
	if err != nil {
		return nil, err
	}
	res := textResult(string(text))
	res.StructuredContent = addOutput{Sum: sum}
	return res, nil
}

// fail implements the fail tool.
func (ts *toolset) fail(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Reason string `json:"reason"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(err), nil
	}
	reason := args.Reason
	if reason == "" {
		reason = "requested"
	}
	return errorResult(fmt.Errorf("demo failure: %s", reason)), nil
}
