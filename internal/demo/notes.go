package demo

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTitleLen is the longest note title accepted, in characters.
const maxTitleLen = 100

// listNotesOutput is the structured content of the list_notes tool.
type listNotesOutput struct {
	Titles []string `json:"titles"`
}

// listNotes implements the list_notes tool.
func (ts *toolset) listNotes(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := noArgs(req); err != nil {
		return errorResult(err), nil
	}
	titles := ts.st.noteTitles()
	text := "no notes"
	if len(titles) > 0 {
		text = strings.Join(titles, "\n")
	}
	res := textResult(text)
	res.StructuredContent = listNotesOutput{Titles: titles}
	return res, nil
}

// writeNote implements the write_note tool.
func (ts *toolset) writeNote(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(err), nil
	}
	title, err := requireString("title", args.Title)
	if err != nil {
		return errorResult(err), nil
	}
	body, err := requireString("body", args.Body)
	if err != nil {
		return errorResult(err), nil
	}
	if err := validateTitle(title); err != nil {
		return errorResult(err), nil
	}
	if err := ts.st.putNote(title, body); err != nil {
		return errorResult(fmt.Errorf("cannot save note %q: %w", title, err)), nil
	}
	return textResult(fmt.Sprintf("saved note %q", title)), nil
}

// validateTitle enforces the title constraints advertised in the write_note
// input schema, since the SDK does not validate raw tool arguments.
func validateTitle(title string) error {
	switch n := utf8.RuneCountInString(title); {
	case n == 0:
		return fmt.Errorf("argument %q must not be empty", "title")
	case n > maxTitleLen:
		return fmt.Errorf("argument %q must be at most %d characters, got %d", "title", maxTitleLen, n)
	}
	// list_notes prints one title per line, which a line break would corrupt.
	if strings.ContainsAny(title, "\r\n") {
		return fmt.Errorf("argument %q must be a single line", "title")
	}
	return nil
}

// deleteNote implements the delete_note tool.
func (ts *toolset) deleteNote(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Title *string `json:"title"`
	}
	if err := decodeArgs(req.Params.Arguments, &args); err != nil {
		return errorResult(err), nil
	}
	title, err := requireString("title", args.Title)
	if err != nil {
		return errorResult(err), nil
	}
	existed, err := ts.st.deleteNote(title)
	switch {
	case err != nil:
		return errorResult(fmt.Errorf("cannot delete note %q: %w", title, err)), nil
	case !existed:
		return errorResult(fmt.Errorf("no note titled %q", title)), nil
	}
	return textResult(fmt.Sprintf("deleted note %q", title)), nil
}
