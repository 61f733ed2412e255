package demo

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decodeArgs unmarshals a tool's raw arguments into dst. Absent arguments
// are treated as an empty object, because clients may omit the field for
// tools whose parameters are all optional.
func decodeArgs(raw json.RawMessage, dst any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

// noArgs checks the arguments of a tool that takes none. Extra fields are
// ignored, but malformed JSON is still reported so that a broken client
// notices.
func noArgs(req *mcp.CallToolRequest) error {
	var args struct{}
	return decodeArgs(req.Params.Arguments, &args)
}

// requireString returns *v, or an error naming the argument if it is absent.
func requireString(name string, v *string) (string, error) {
	if v == nil {
		return "", fmt.Errorf("missing required argument %q", name)
	}
	return *v, nil
}

// requireNumber returns *v, or an error naming the argument if it is absent.
func requireNumber(name string, v *float64) (float64, error) {
	if v == nil {
		return 0, fmt.Errorf("missing required argument %q", name)
	}
	return *v, nil
}

// optionalInt returns the integer held by v, or def if v is absent. It is
// decoded from a float64 because JSON Schema counts 5.0 as an integer while
// encoding/json refuses to put it in an int.
func optionalInt(name string, v *float64, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	f := *v
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("argument %q must be an integer from %d to %d, got %v", name, lo, hi, f)
	}
	return int(f), nil
}

// textResult returns a successful result holding one text block.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// errorResult returns a tool-level error result, which the calling model can
// read and react to, unlike a protocol error.
func errorResult(err error) *mcp.CallToolResult {
	res := textResult(err.Error())
	res.IsError = true
	return res
}

// structuredResult returns a result whose structured content is v and whose
// text block is the JSON encoding of v, for clients that only read text.
func structuredResult(v any) (*mcp.CallToolResult, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	res := textResult(string(data))
	res.StructuredContent = v
	return res, nil
}
