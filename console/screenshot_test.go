package console_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/browsertest"
	"github.com/toolwire/toolwire/tool"
)

// screenshotsEnv names the directory TestScreenshots writes the console's
// pictures to (scripts/console-screenshots.sh sets it to docs/console);
// without it the test is skipped.
const screenshotsEnv = "TOOLWIRE_CONSOLE_SCREENSHOTS"

// The callers of the screenshots' gateway and their tokens.
const (
	aliceToken = "alice-token-of-the-console-screenshots"
	agentToken = "build-agent-token-of-the-console-screenshots"
)

// TestScreenshots starts a console with sample data (the demo server, a
// server that fails to start, policy rules, callers with sessions open, a
// limit hit, calls audited, calls waiting for an operator, a lasting
// approval) and writes a PNG of each page, as a laptop's screen shows it.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		t.Skip(screenshotsEnv + " is not set: scripts/console-screenshots.sh takes the console's pictures")
	}
	f := newFixture(t, &fixtureOptions{
		servers: serverEntry("demo", "demo") + "  tickets:\n    command: /nonexistent/tickets-mcp\n",
		extra: `gateway:
  tokens:
    - {sha256: ` + gateway.HashToken(aliceToken) + `, subject: alice@example.com, role: admin}
    - {sha256: ` + gateway.HashToken(agentToken) + `, subject: build-agent, role: agent}
  roles:
    admin: ["*"]
    agent: ["demo__*"]
  limits:
    maxSessionsPerCaller: 2
  approvals:
    operatorWait: 10m
policy:
  rules:
    - name: drafts-only-for-agents
      tools: [demo__write_note]
      when: 'caller.role != "admin" && !args.title.startsWith("draft-")'
      decision: ask
      reason: agents write drafts; anything else is looked at first
    - name: admins-destroy
      tiers: [destructive]
      when: caller.role != "admin"
      decision: ask
    - name: no-keys-in-results
      on: result
      when: result.text.contains("PRIVATE KEY")
      decision: deny
      reason: a private key never reaches a model
`,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Sessions: alice's one, the agent's two, and a third it is refused.
	var open []*mcp.ClientSession
	defer func() {
		for _, cs := range open {
			cs.Close()
		}
	}()
	connect := func(token string) (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: f.mcpURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token}}},
			&mcp.ClientSessionOptions{ProtocolVersion: rev2025})
	}
	for _, tok := range []string{aliceToken, agentToken, agentToken, agentToken} {
		cs, err := connect(tok)
		if err != nil {
			continue // the third of the agent's: refused by maxSessionsPerCaller
		}
		open = append(open, cs)
	}
	// Calls audited.
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"demo__echo", map[string]any{"text": "hello"}},
		{"demo__add", map[string]any{"a": 2, "b": 40}},
		{"demo__write_note", map[string]any{"title": "draft-release-notes", "body": "v2.4"}},
		{"demo__list_notes", nil},
		{"demo__fail", map[string]any{"reason": "upstream quota exceeded"}},
	} {
		if _, err := open[len(open)-1].CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args}); err != nil {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// Calls waiting for an operator (the agent's client cannot be asked),
	// and a lasting approval.
	q := f.w.Pending()
	if q == nil {
		t.Fatal("the workspace keeps no queue")
	}
	changed := q.Watch(ctx)
	agent := open[len(open)-1]
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"demo__delete_note", map[string]any{"title": "quarterly-report"}},
		{"demo__write_note", map[string]any{"title": "release-notes", "body": "Version 2.4 ships the operator console.\nUpgrade notes follow."}},
	} {
		go func() { _, _ = agent.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args}) }()
		for waiting := 0; waiting == 0; {
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("%s never waited for an operator", c.name)
			}
			p, err := q.Pending(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p {
				if r.Tool == c.name {
					waiting++
				}
			}
		}
	}
	if _, err := f.w.Approvals().Grant(ctx, approval.Args, tool.ApprovalKey{Caller: "build-agent", Tool: "demo__write_note", Definition: "sample", Args: "5f1e0c8d9a7b3c2e4f6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e"}, 8*time.Hour); err != nil {
		t.Fatal(err)
	}

	tab := browsertest.New(t, nil)
	tab, cancelTab := context.WithTimeout(tab, 60*time.Second)
	defer cancelTab()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shoot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1366, 820), chromedp.Navigate(f.url+"/login"), chromedp.WaitVisible(chromedp.CSS(`#token`))); err != nil {
		t.Fatal(err)
	}
	shoot("login")
	signInBrowser(t, tab, f, operatorToken)
	for _, page := range []string{"overview", "approvals", "servers", "tools", "sessions", "audit", "limits"} {
		path := "/" + page
		if page == "overview" {
			path = "/"
		}
		if err := chromedp.Do(tab, chromedp.Navigate(f.url+path), chromedp.WaitVisible(chromedp.CSS(`body[data-live="on"]`))); err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		shoot(page)
	}
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
