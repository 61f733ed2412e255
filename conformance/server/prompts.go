package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func addPrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{
		Name: "test_simple_prompt", Title: "Simple prompt", Description: "A prompt without arguments",
	}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return prompt("A simple prompt", &mcp.TextContent{Text: "This is a simple prompt for testing."}), nil
	})
	s.AddPrompt(&mcp.Prompt{
		Name: "test_prompt_with_arguments", Title: "Prompt with arguments",
		Description: "A prompt that repeats its two required arguments",
		Arguments: []*mcp.PromptArgument{
			{Name: "arg1", Description: "First argument", Required: true},
			{Name: "arg2", Description: "Second argument", Required: true},
		},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		return prompt("A prompt with arguments",
			&mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1=%q, arg2=%q", a["arg1"], a["arg2"])}), nil
	})
	s.AddPrompt(&mcp.Prompt{
		Name: "test_prompt_with_embedded_resource", Title: "Prompt with an embedded resource",
		Description: "A prompt that embeds the resource named by resourceUri",
		Arguments: []*mcp.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
		},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		uri := req.Params.Arguments["resourceUri"]
		return prompt("A prompt with an embedded resource",
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: "text/plain",
				Text: "Embedded resource content for testing."}},
			&mcp.TextContent{Text: "Please process the embedded resource above."}), nil
	})
	s.AddPrompt(&mcp.Prompt{
		Name: "test_prompt_with_image", Title: "Prompt with an image", Description: "A prompt that includes a PNG image",
	}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return prompt("A prompt with an image",
			&mcp.ImageContent{MIMEType: "image/png", Data: testPNG()},
			&mcp.TextContent{Text: "Please analyze the image above."}), nil
	})
}

// prompt is a result with one user message per content item.
func prompt(description string, content ...mcp.Content) *mcp.GetPromptResult {
	res := &mcp.GetPromptResult{Description: description}
	for _, c := range content {
		res.Messages = append(res.Messages, &mcp.PromptMessage{Role: "user", Content: c})
	}
	return res
}

// completions lists the suggestions for the arguments of test_prompt_with_arguments.
var completions = map[string][]string{
	"arg1": {"paris", "park", "party", "test", "testing"},
	"arg2": {"alpha", "beta", "gamma"},
}

// complete answers completion/complete: the values of the argument that
// start with what was typed so far. Anything else gets an empty list.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	values := []string{} // never null: the suite wants an array
	ref := req.Params.Ref
	if ref != nil && ref.Type == "ref/prompt" && ref.Name == "test_prompt_with_arguments" {
		prefix := strings.ToLower(req.Params.Argument.Value)
		for _, v := range completions[req.Params.Argument.Name] {
			if strings.HasPrefix(v, prefix) {
				values = append(values, v)
			}
		}
	}
	slices.Sort(values)
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
