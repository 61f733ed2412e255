package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtureTools are the tools the conformance suite's server scenarios call.
var fixtureTools = []string{
	"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
	"test_multiple_content_types", "test_tool_with_logging", "test_error_handling",
	"test_tool_with_progress", "test_sampling", "test_elicitation",
	"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
	"json_schema_2020_12_tool", "test_reconnection",
}

// notes collects what the server sends the client outside of results.
type notes struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
	updated  chan string
}

func (n *notes) snapshot() ([]*mcp.ProgressNotificationParams, []*mcp.LoggingMessageParams) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.progress), slices.Clone(n.logs)
}

// start serves the fixture server over Streamable HTTP on 127.0.0.1 and
// connects a client that, like the suite's, supports sampling and
// elicitation and speaks protocol version 2025-11-25.
func start(t *testing.T, stateless bool) (*mcp.ClientSession, *notes) {
	t.Helper()
	return startWith(t, stateless, "2025-11-25")
}

// startWith is start with the client offering protocol version (""
// offers go-sdk's latest: 2026-07-28, which a stateless server serves).
func startWith(t *testing.T, stateless bool, version string) (*mcp.ClientSession, *notes) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	server := newServer()
	go notifyWatchedResource(ctx, server, 20*time.Millisecond)
	httpServer := httptest.NewServer(newHandler(server, stateless))

	n := &notes{updated: make(chan string, 100)}
	client := mcp.NewClient(&mcp.Implementation{Name: "fixture-test", Version: "1.0.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.progress = append(n.progress, req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.logs = append(n.logs, req.Params)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case n.updated <- req.Params.URI:
			default:
			}
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "echo",
				Content: &mcp.TextContent{Text: "echo: " + prompt}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept",
				Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: httpServer.URL + mcpPath},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		cancel()
		httpServer.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		session.Close()
		cancel()
		httpServer.Close()
	})
	return session, n
}

func callTool(t *testing.T, s *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("%s: %v", params.Name, err)
	}
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("no content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T, want text", res.Content[0])
	}
	return tc.Text
}

func TestToolsList(t *testing.T) {
	s, _ := start(t, false)
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("%s: missing description or input schema", tool.Name)
		}
	}
	for _, name := range fixtureTools {
		if byName[name] == nil {
			t.Errorf("tools/list lacks %s", name)
		}
	}
	// json-schema-2020-12: the schema's keywords survive tools/list.
	if tool := byName["json_schema_2020_12_tool"]; tool != nil {
		raw, _ := json.Marshal(tool.InputSchema)
		var schema map[string]any
		json.Unmarshal(raw, &schema) //nolint:errcheck // checked below
		if schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" ||
			schema["$defs"] == nil || schema["additionalProperties"] != false {
			t.Errorf("json_schema_2020_12_tool schema lost keywords: %s", raw)
		}
	}
}

func TestContentTools(t *testing.T) {
	s, _ := start(t, false)

	if got := text(t, callTool(t, s, &mcp.CallToolParams{Name: "test_simple_text"})); got == "" {
		t.Error("test_simple_text: empty text")
	}

	res := callTool(t, s, &mcp.CallToolParams{Name: "test_image_content"})
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("test_image_content: got %#v, want a PNG image", res.Content[0])
	}
	if _, err := png.Decode(bytes.NewReader(img.Data)); err != nil {
		t.Errorf("test_image_content: not a valid PNG: %v", err)
	}

	res = callTool(t, s, &mcp.CallToolParams{Name: "test_audio_content"})
	audio, ok := res.Content[0].(*mcp.AudioContent)
	if !ok || audio.MIMEType != "audio/wav" || !bytes.HasPrefix(audio.Data, []byte("RIFF")) ||
		!bytes.Equal(audio.Data[8:12], []byte("WAVE")) {
		t.Errorf("test_audio_content: got %#v, want a WAV file", res.Content[0])
	}

	res = callTool(t, s, &mcp.CallToolParams{Name: "test_multiple_content_types"})
	var kinds []string
	for _, c := range res.Content {
		raw, _ := json.Marshal(c)
		var v struct{ Type string }
		json.Unmarshal(raw, &v) //nolint:errcheck // a failure leaves Type empty
		kinds = append(kinds, v.Type)
	}
	if !slices.Equal(kinds, []string{"text", "image", "resource"}) {
		t.Errorf("test_multiple_content_types: content types %v", kinds)
	}

	res = callTool(t, s, &mcp.CallToolParams{Name: "test_error_handling"})
	if !res.IsError || text(t, res) == "" {
		t.Errorf("test_error_handling: want an isError result with a message, got %+v", res)
	}
}

func TestProgressAndLogging(t *testing.T) {
	s, n := start(t, false)

	params := &mcp.CallToolParams{Name: "test_tool_with_progress"}
	params.SetProgressToken("tok-1")
	callTool(t, s, params)
	// Notifications and the result travel on the same stream, in order,
	// but the client handles notifications asynchronously.
	var progress []*mcp.ProgressNotificationParams
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if progress, _ = n.snapshot(); len(progress) >= 3 {
			break
		}
	}
	if len(progress) != 3 {
		t.Fatalf("got %d progress notifications, want 3", len(progress))
	}
	for i, p := range progress {
		if p.ProgressToken != "tok-1" || p.Total != 100 || (i > 0 && p.Progress <= progress[i-1].Progress) {
			t.Errorf("progress[%d] = %+v; want token tok-1, total 100, rising", i, p)
		}
	}

	if err := s.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	callTool(t, s, &mcp.CallToolParams{Name: "test_tool_with_logging"})
	var logs []*mcp.LoggingMessageParams
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, logs = n.snapshot(); len(logs) >= 3 {
			break
		}
	}
	if len(logs) != 3 {
		t.Errorf("got %d log messages, want 3", len(logs))
	}
}

func TestSamplingAndElicitation(t *testing.T) {
	s, _ := start(t, false)
	res := callTool(t, s, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "hi"}})
	if got := text(t, res); res.IsError || got != "LLM response: echo: hi" {
		t.Errorf("test_sampling: %q (isError %v)", got, res.IsError)
	}
	res = callTool(t, s, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "who?"}})
	if got := text(t, res); res.IsError || !strings.Contains(got, "action=accept") || !strings.Contains(got, "ada") {
		t.Errorf("test_elicitation: %q (isError %v)", got, res.IsError)
	}
}

// TestSamplingAndElicitationIn2026 asks a client of protocol 2026-07-28,
// which no request may reach during a call, through multi round-trip
// requests, over stateless HTTP.
func TestSamplingAndElicitationIn2026(t *testing.T) {
	s, _ := startWith(t, true, "")
	if got := s.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", got)
	}
	res := callTool(t, s, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "hi"}})
	if got := text(t, res); res.IsError || got != "LLM response: echo: hi" {
		t.Errorf("test_sampling: %q (isError %v)", got, res.IsError)
	}
	res = callTool(t, s, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "who?"}})
	if got := text(t, res); res.IsError || !strings.Contains(got, "action=accept") || !strings.Contains(got, "ada") {
		t.Errorf("test_elicitation: %q (isError %v)", got, res.IsError)
	}
}

func TestStatelessCannotAskTheClient(t *testing.T) {
	s, _ := start(t, true)
	if got := text(t, callTool(t, s, &mcp.CallToolParams{Name: "test_simple_text"})); got == "" {
		t.Error("test_simple_text: empty text")
	}
	res := callTool(t, s, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "hi"}})
	if !res.IsError {
		t.Errorf("test_sampling in stateless mode: want isError, got %q", text(t, res))
	}
}

func TestResources(t *testing.T) {
	s, n := start(t, false)
	ctx := context.Background()
	read := func(uri string) *mcp.ResourceContents {
		t.Helper()
		res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if len(res.Contents) != 1 {
			t.Fatalf("read %s: %d contents", uri, len(res.Contents))
		}
		return res.Contents[0]
	}
	if c := read("test://static-text"); c.MIMEType != "text/plain" || c.Text == "" {
		t.Errorf("static-text: %+v", c)
	}
	if c := read("test://static-binary"); c.MIMEType != "image/png" || !bytes.HasPrefix(c.Blob, []byte("\x89PNG")) {
		t.Errorf("static-binary: %+v", c)
	}
	if c := read("test://template/123/data"); c.URI != "test://template/123/data" || !strings.Contains(c.Text, `"123"`) {
		t.Errorf("template: %+v", c)
	}
	if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://nothing"}); err == nil {
		t.Error("reading an unknown resource succeeded")
	}

	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: watchedURI}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-n.updated:
		if uri != watchedURI {
			t.Errorf("resources/updated for %q", uri)
		}
	case <-time.After(5 * time.Second):
		t.Error("no resources/updated after subscribing")
	}
	if err := s.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: watchedURI}); err != nil {
		t.Fatal(err)
	}
}

func TestPromptsAndCompletion(t *testing.T) {
	s, _ := start(t, false)
	ctx := context.Background()
	res, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments",
		Arguments: map[string]string{"arg1": "one", "arg2": "two"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.Messages)
	if !strings.Contains(string(raw), "one") || !strings.Contains(string(raw), "two") {
		t.Errorf("arguments not substituted: %s", raw)
	}
	for _, name := range []string{"test_simple_prompt", "test_prompt_with_image"} {
		if res, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: name}); err != nil || len(res.Messages) == 0 {
			t.Errorf("%s: %v, %d messages", name, err, len(res.Messages))
		}
	}

	comp, err := s.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := comp.Completion.Values; !slices.Equal(got, []string{"paris", "park", "party"}) {
		t.Errorf("completion of arg1=par: %v", got)
	}
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:0": true, "localhost:3000": true, "[::1]:80": true, "127.0.0.2:1": true,
		"0.0.0.0:3000": false, ":3000": false, "192.168.1.1:80": false, "example.com:80": false, "nope": false,
	} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}
