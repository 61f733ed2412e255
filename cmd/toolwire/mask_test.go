package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/agent/agenttest"
	"github.com/toolwire/toolwire/audit"
)

// leakedKey is the credential the leaky server is given, literally, under
// a name that says it is one.
const leakedKey = "sk-leaky-literal-8c2d41"

// serveLeaky is the server behind TOOLWIRE_TEST_SERVER=leaky: each tool
// echoes the credential it was given (LEAKY_API_KEY) back, in a result, in
// a tool error, in a protocol error and in its progress and log lines.
func serveLeaky(ctx context.Context) error {
	key := os.Getenv("LEAKY_API_KEY")
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, leakyCompletions(key))
	object := map[string]any{"type": "object"}
	srv.AddTool(&mcp.Tool{Name: "whoami", Description: "signs in with " + key, InputSchema: object}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "signing in with " + key})
		}
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "signed in with " + key})
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: "my key is " + key}},
			StructuredContent: map[string]any{"key": key},
		}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "deny", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "denied: key " + key + " was rejected"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "crash", InputSchema: object}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("backend refused key " + key)
	})
	srv.AddResource(&mcp.Resource{URI: "leaky://whoami", Name: "whoami", Description: "read with " + key, MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "leaky://whoami", MIMEType: "text/plain", Text: "my key is " + key}}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "whoami", Description: "signed with " + key, Arguments: []*mcp.PromptArgument{{Name: "as", Description: "one of the keys, " + key}}}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Description: "signed with " + key, Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: "use the key " + key}},
		}}, nil
	})
	return srv.Run(ctx, &mcp.StdioTransport{})
}

// leakyCompletions answers every completion with the server's key.
func leakyCompletions(key string) *mcp.ServerOptions {
	return &mcp.ServerOptions{CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"plain", key}}}, nil
	}}
}

// newLeakyFixture is the demo fixture with the leaky server beside it and
// argument logging on, so the audit log holds results too.
func newLeakyFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, `  leaky:
    command: `+quoteYAML(os.Args[0])+`
    env: {TOOLWIRE_TEST_SERVER: leaky, LEAKY_API_KEY: `+leakedKey+`}
    defaultTier: read
`)
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "audit:\n  file: audit.jsonl\n", "audit:\n  file: audit.jsonl\n  logArguments: true\n", 1)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// noKey fails the test if text holds the leaked key.
func noKey(t *testing.T, what, text string) {
	t.Helper()
	if strings.Contains(text, leakedKey) {
		t.Errorf("%s holds the server's credential:\n%s", what, text)
	}
}

func (f *fixture) auditHasNoKey(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	noKey(t, "the audit log", string(raw))
	if !strings.Contains(string(raw), audit.Mask) {
		t.Errorf("the audit log holds no mask, so no leaky result reached it:\n%s", raw)
	}
}

// TestCallMasksTheCredentialAServerEchoes: results on stdout, tool errors
// and failures on stderr, and all of them with --json.
func TestCallMasksTheCredentialAServerEchoes(t *testing.T) {
	t.Parallel()
	f := newLeakyFixture(t)
	tests := []struct {
		args   []string
		code   int
		stdout string // what must show, masked
		stderr string
	}{
		{[]string{"leaky__whoami"}, exitOK, "my key is " + audit.Mask, "signing in with " + audit.Mask},
		{[]string{"leaky__whoami", "--json"}, exitOK, `"key": "` + audit.Mask + `"`, ""},
		{[]string{"leaky__deny"}, exitToolErr, "", "denied: key " + audit.Mask + " was rejected"},
		{[]string{"leaky__deny", "--json"}, exitToolErr, "denied: key " + audit.Mask + " was rejected", "denied: key " + audit.Mask},
		{[]string{"leaky__crash"}, exitToolErr, "", "backend refused key " + audit.Mask},
		{[]string{"leaky__crash", "--json"}, exitToolErr, "backend refused key " + audit.Mask, "backend refused key " + audit.Mask},
	}
	for _, tt := range tests {
		o := f.run(t, "", false, append([]string{"--verbose", "call"}, tt.args...)...)
		o.expect(t, tt.code)
		noKey(t, strings.Join(tt.args, " ")+" stdout", o.stdout)
		noKey(t, strings.Join(tt.args, " ")+" stderr", o.stderr)
		if !strings.Contains(o.stdout, tt.stdout) || !strings.Contains(o.stderr, tt.stderr) {
			t.Errorf("%v: want %q on stdout and %q on stderr\nstdout:\n%s\nstderr:\n%s", tt.args, tt.stdout, tt.stderr, o.stdout, o.stderr)
		}
	}
	f.auditHasNoKey(t)
}

// TestRunSendsTheModelMaskedResults: what a server echoes reaches the
// model's requests masked, results and errors alike.
func TestRunSendsTheModelMaskedResults(t *testing.T) {
	t.Parallel()
	f := newLeakyFixture(t)
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("", agenttest.Call{ID: "w", Name: "leaky__whoami", Args: `{}`},
			agenttest.Call{ID: "d", Name: "leaky__deny", Args: `{}`}, agenttest.Call{ID: "c", Name: "leaky__crash", Args: `{}`}),
		agenttest.OpenAIReply("done"),
	)
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "who am I?")...)
	o.expect(t, exitOK)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests to the model, want 2", len(reqs))
	}
	results := agenttest.OpenAIToolResults(reqs[1])
	want := map[string]string{"w": "my key is " + audit.Mask, "d": "denied: key " + audit.Mask, "c": "backend refused key " + audit.Mask}
	for _, r := range results {
		if !strings.Contains(r[1], want[r[0]]) {
			t.Errorf("result %s sent to the model = %q, want it to hold %q", r[0], r[1], want[r[0]])
		}
	}
	body, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	noKey(t, "the requests to the model", string(body))
	noKey(t, "stdout", o.stdout)
	noKey(t, "stderr", o.stderr)
	f.auditHasNoKey(t)
}

// TestServeMasksResultsAndErrorsToItsClients: a gateway client over a real
// socket receives the echoed credential masked, in results, tool errors,
// failures, progress and log lines, resources and prompts.
func TestServeMasksResultsAndErrorsToItsClients(t *testing.T) {
	t.Parallel()
	f := newLeakyFixture(t)
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0")
	got := make(chan string, 8)
	cs := connectHTTPSession(t, s.url, "", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			got <- "progress: " + r.Params.Message
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			b, _ := json.Marshal(r.Params.Data)
			got <- "log: " + string(b)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"leaky__whoami": "my key is " + audit.Mask,
		"leaky__deny":   "denied: key " + audit.Mask,
		"leaky__crash":  "backend refused key " + audit.Mask,
	} {
		params := &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
		params.SetProgressToken("p-" + name)
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		noKey(t, name+"'s result", string(raw))
		if !strings.Contains(string(raw), want) {
			t.Errorf("%s's result = %s, want it to hold %q", name, raw, want)
		}
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolwire://leaky/leaky://whoami"})
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "leaky__whoami"})
	if err != nil {
		t.Fatal(err)
	}
	// What the listings and completions show of the server's own text.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	completed, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "leaky__whoami"}, Argument: mcp.CompleteParamsArgument{Name: "as", Value: ""}})
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]any{"the resource read": read, "the prompt": prompt,
		"the tool listing": tools, "the resource listing": resources, "the prompt listing": prompts, "the completion": completed} {
		raw, _ := json.Marshal(v)
		noKey(t, what, string(raw))
		if !strings.Contains(string(raw), audit.Mask) {
			t.Errorf("%s = %s, want the key masked", what, raw)
		}
	}

	var relayed []string
	for len(relayed) < 2 {
		select {
		case r := <-got:
			relayed = append(relayed, r)
		case <-ctx.Done():
			t.Fatalf("relayed only %q", relayed)
		}
	}
	all := strings.Join(relayed, "\n")
	noKey(t, "what was relayed", all)
	if !strings.Contains(all, "progress: signing in with "+audit.Mask) || !strings.Contains(all, "log: \"signed in with "+audit.Mask) {
		t.Errorf("relayed:\n%s\nwant the progress and the log line, masked", all)
	}
}
