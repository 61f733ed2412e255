package main

// The client's side of MCP 2026-07-28 through the CLI: a server's question
// asked in a call's result (multi round-trip) answered on the terminal, and
// the everything server's task-based tool through call, run and serve.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/agent/agenttest"
)

// serveAsking serves, over stdio, a server of every revision with one
// tool, ask, that asks its client for a name the 2026-07-28 way (in its
// result) when the client said it can answer (and for a poem when it said
// it can sample), and otherwise answers that there is nobody to ask.
func serveAsking() error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", Description: "asks for a name", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := func(s string, isErr bool) *mcp.CallToolResult {
				return &mcp.CallToolResult{IsError: isErr, Content: []mcp.Content{&mcp.TextContent{Text: s}}}
			}
			if answer, ok := req.Params.InputResponses["name"].(*mcp.ElicitResult); ok {
				if answer.Action != "accept" {
					return text("the question was "+answer.Action+"d", false), nil
				}
				return text(fmt.Sprintf("hello %v (%v)", answer.Content["name"], answer.Content["tea"]), false), nil
			}
			caps := req.ClientCapabilities()
			if caps == nil || caps.Elicitation == nil {
				return text("nobody to ask", true), nil
			}
			asks := mcp.InputRequestMap{"name": &mcp.ElicitParams{
				// The clear-screen sequence must reach no terminal as such.
				Message: "What is your name?\x1b[2J",
				RequestedSchema: map[string]any{"type": "object", "required": []string{"name"}, "properties": map[string]any{
					"name": map[string]any{"type": "string", "title": "Name"},
					"tea":  map[string]any{"type": "boolean", "title": "Tea", "default": true},
				}},
			}}
			if caps.Sampling != nil {
				asks["poem"] = &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "a poem"}}}}
			}
			return &mcp.CallToolResult{InputRequests: asks}, nil
		})
	return srv.Run(context.Background(), &mcp.StdioTransport{})
}

// askingFixture is a fixture with the asking server beside the demo.
func askingFixture(t *testing.T) *fixture {
	return newFixture(t, `  asking:
    command: `+quoteYAML(os.Args[0])+`
    env:
      TOOLWIRE_TEST_SERVER: asking
`)
}

// toolwire call answers a 2026-07-28 server's question on the terminal,
// and without a terminal the server is not told it could ask.
func TestCallAnswersAServersQuestionOnTheTerminal(t *testing.T) {
	t.Parallel()
	f := askingFixture(t)

	o := f.run(t, "y\nAda\n\n", true, "call", "asking__ask")
	o.expect(t, exitOK)
	if strings.TrimSpace(o.stdout) != "hello Ada (true)" {
		t.Errorf("stdout = %q, want the answer the server was given (the default kept)", o.stdout)
	}
	mustContain(t, "stderr", o.stderr, "The server asks (for asking__ask), in its own words:", "What is your name?", "Answer? [y/N]", "Name:", "Tea [true]:")

	// On a real terminal, what the person types answers.
	screen := newPTY(t, 120)
	done := make(chan outcome, 1)
	go func() { done <- f.runInteractive(t, screen, "call", "asking__ask") }()
	for _, step := range [][2]string{{"Answer? [y/N] ", "y\n"}, {"Name: ", "Grace\n"}, {"Tea [true]: ", "n\n"}} {
		screen.wait(t, step[0])
		if _, err := screen.master.WriteString(step[1]); err != nil {
			t.Fatal(err)
		}
	}
	o = <-done
	o.expect(t, exitOK)
	if strings.TrimSpace(o.stdout) != "hello Grace (false)" {
		t.Errorf("stdout on a terminal = %q", o.stdout)
	}
	if shown := screen.String(); strings.Contains(shown, "\x1b[2J") || !strings.Contains(shown, "What is your name?") {
		t.Errorf("the server's message reached the terminal unescaped, or not at all:\n%q", shown)
	}

	o = f.run(t, "n\n", true, "call", "asking__ask")
	o.expect(t, exitOK)
	if strings.TrimSpace(o.stdout) != "the question was declined" {
		t.Errorf("stdout after declining = %q", o.stdout)
	}

	o = f.run(t, "", false, "call", "asking__ask")
	o.expect(t, exitToolErr)
	if strings.Contains(o.stderr, "What is your name?") || !strings.Contains(o.stderr+o.stdout, "nobody to ask") {
		t.Errorf("without a terminal the server asked, or did not say why it could not:\nstdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	}
}

// runInteractive runs the CLI with stdin and stderr on the terminal, as a
// person at it would.
func (f *fixture) runInteractive(t *testing.T, screen *ptyScreen, args ...string) outcome {
	var stdout bytes.Buffer
	e := &env{stdin: screen.tty, stdout: &stdout, stderr: screen.tty, isTerminal: func() bool { return true },
		lookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCommand(e)
	root.SetArgs(append([]string{"--config", f.config}, args...))
	var errOut bytes.Buffer
	code := exitCode(root.ExecuteContext(ctx), &errOut)
	return outcome{code, stdout.String(), errOut.String()}
}

// everythingYAML returns the configuration of the everything server from
// npm over stdio, skipping (or failing, under CI=true) without it.
func everythingYAML(t *testing.T) string {
	t.Helper()
	node, npmDir := interopSDK(t)
	const pkg = "@modelcontextprotocol/server-everything"
	raw, err := os.ReadFile(filepath.Join(npmDir, "node_modules", pkg, "package.json"))
	var installed struct{ Version string }
	if err == nil {
		err = json.Unmarshal(raw, &installed)
	}
	manifest, merr := os.ReadFile(filepath.Join("..", "..", "interop", "ts", "package.json"))
	var pinned struct{ Dependencies map[string]string }
	if merr != nil || json.Unmarshal(manifest, &pinned) != nil {
		t.Fatalf("interop/ts/package.json: %v", merr)
	}
	if want := pinned.Dependencies[pkg]; err != nil || installed.Version != want {
		msg := fmt.Sprintf("%s %q is not installed in %s (%v); run scripts/npm-deps.sh", pkg, want, npmDir, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	script := filepath.Join(npmDir, "node_modules", pkg, "dist", "index.js")
	return `  every:
    command: ` + quoteYAML(node) + `
    args: [` + quoteYAML(script) + `, stdio]
`
}

// The everything server's simulate-research-query needs a task: toolwire
// call runs it as one, shows its stages as progress, asks its
// clarification on the terminal, and prints the report; with no terminal
// the server does not ask, and the report is made without it.
func TestCallOfAToolThatNeedsATask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, everythingYAML(t))

	o := f.run(t, "y\n1\n", true, "call", "every__simulate-research-query", "topic=python", "ambiguous=true")
	o.expect(t, exitOK)
	mustContain(t, "stdout", o.stdout, "# Research Report: python (programming)")
	mustContain(t, "stderr", o.stderr, "progress 1: Gathering sources...", `could have multiple interpretations`,
		"1) Python programming language", "choose 1-3:")

	o = f.run(t, "", false, "call", "every__simulate-research-query", "topic=python", "ambiguous=true")
	o.expect(t, exitOK)
	mustContain(t, "stdout", o.stdout, "# Research Report: python\n")
	if strings.Contains(o.stderr, "multiple interpretations") {
		t.Errorf("the server asked with no terminal to answer:\n%s", o.stderr)
	}
}

// toolwire run: the model calls the task-based tool, and its result (the
// report) goes back to the model.
func TestRunCallsAToolThatNeedsATask(t *testing.T) {
	t.Parallel()
	// Required: run waits for the server instead of starting the model
	// after 3 s without it (a node server under the suite's load may take
	// longer), since the scripted model calls its tool in the first reply.
	f := newFixture(t, everythingYAML(t)+"    required: true\n")
	srv := agenttest.NewServer(t,
		agenttest.OpenAIReply("", agenttest.Call{ID: "r1", Name: "every__simulate-research-query", Args: `{"topic":"go"}`}),
		agenttest.OpenAIReply("Done."),
	)
	o := f.runAgent(t, context.Background(), agentCLI{env: map[string]string{"OPENAI_API_KEY": "sk-e2e"}},
		openaiArgs(srv, "Research go.")...)
	o.expect(t, exitOK)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times, want 2\nstderr:\n%s", len(reqs), o.stderr)
	}
	results := agenttest.OpenAIToolResults(reqs[1])
	if len(results) != 1 || results[0][0] != "r1" || !strings.Contains(results[0][1], "# Research Report: go") {
		t.Errorf("the model was sent %q, want the report", results)
	}
}

// toolwire serve: a client calls the task-based tool through the gateway,
// which runs it as a task upstream; the clarification is asked of that
// client, and the report comes back.
func TestServeCallsAToolThatNeedsATask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, everythingYAML(t))
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0")
	var mu sync.Mutex
	var asked []string
	cs := connectHTTP(t, s.url, "", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, req.Params.Message)
		mu.Unlock()
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"interpretation": "snake"}}, nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "every__simulate-research-query", Arguments: map[string]any{"topic": "python", "ambiguous": true}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "# Research Report: python (snake)") {
		t.Errorf("result %+v, want the report with the clarification", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0], "could have multiple interpretations") {
		t.Errorf("the client was asked %q, want the one clarification", asked)
	}
}
