package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// serveFlaky is TOOLWIRE_TEST_SERVER=flaky: a server whose tools, in the
// first process started (the one that creates the marker file), note
// that the call arrived (marker + ".called") and then hang until killed;
// in every later process they answer at once, naming the process. Each
// tool counts its calls in marker + "." + tool, so a test sees how often
// a call reached a server at all.
func serveFlaky() error {
	marker := os.Getenv(envMarker)
	if marker == "" {
		return errors.New("flaky: " + envMarker + " is not set")
	}
	first := false
	if f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
		first = true
	} else if !errors.Is(err, fs.ErrExist) {
		return err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "flaky", Version: "0.0.1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}}}`)
	handler := func(name string) mcp.ToolHandler {
		return func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f, err := os.OpenFile(marker+"."+name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				return nil, err
			}
			fmt.Fprintln(f, os.Getpid())
			f.Close()
			if first {
				if err := os.WriteFile(marker+".called", nil, 0o600); err != nil {
					return nil, err
				}
				<-ctx.Done() // the test kills this process
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s answered by %d", name, os.Getpid())}}}, nil
		}
	}
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: obj,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}, handler("lookup"))
	srv.AddTool(&mcp.Tool{Name: "peek", InputSchema: obj,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, handler("peek"))
	srv.AddTool(&mcp.Tool{Name: "put", InputSchema: obj,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(bool)}}, handler("put"))
	return srv.Run(context.Background(), &mcp.StdioTransport{})
}

// A call whose stdio child is SIGKILLed while it runs is sent once more on
// the reconnected session when, and only when, its tool is read tier and
// the server declared it idempotent; the audit shows both attempts under
// the one call. A read tool without the hint, and an idempotent write
// tool, fail as the session did and reach the server once.
func TestRetrySafeCallSurvivesALostSession(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tool      string
		retried   bool
		tierWrite bool
	}{
		{tool: "lookup", retried: true},
		{tool: "peek", retried: false},
		{tool: "put", retried: false, tierWrite: true},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			marker := filepath.Join(dir, "marker")
			cfg := stdioConfig("flaky", "flaky")
			cfg.Env[envMarker] = marker
			pidFile := filepath.Join(dir, "pid")
			cfg.Env[envPIDFile] = pidFile
			writableBy(&cfg, marker)
			if tc.tierWrite {
				cfg.TierOverrides = map[string]string{"put": "write"}
			}
			watch, log := newAuditWatch()
			reg := confirmingRegistry()
			connect(t, cfg, reg, &Options{Reconnect: fastPolicy, Audit: log})
			ex := tool.NewExecutor(reg, &tool.ExecutorOptions{Audit: log})

			done := make(chan *tool.Result, 1)
			go func() { done <- call(t, ex, "flaky__"+tc.tool, `{"key":"k"}`) }()
			eventually(t, marker+".called exists", func() bool { _, err := os.Stat(marker + ".called"); return err == nil })
			pid, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			var first int
			fmt.Sscan(string(pid), &first)
			kill(t, first)
			res := <-done

			reached := strings.Fields(readOr(t, marker+"."+tc.tool))
			evs := watch.all()
			var retried []audit.Event
			var outcome audit.Event
			for _, ev := range evs {
				switch ev.Kind {
				case audit.CallRetried:
					retried = append(retried, ev)
				case audit.CallExecuted, audit.CallErrored:
					outcome = ev
				}
			}
			if !tc.retried {
				if !res.IsError || len(retried) != 0 || len(reached) != 1 {
					t.Fatalf("%s: result %+v, %d call.retried events, reached the server %d times; want an error, no retry, one attempt", tc.tool, res, len(retried), len(reached))
				}
				if outcome.Kind != audit.CallErrored {
					t.Fatalf("%s: outcome %s, want call.errored", tc.tool, outcome.Kind)
				}
				return
			}
			if res.IsError || !strings.HasPrefix(res.Text(), "lookup answered by ") || strings.HasSuffix(res.Text(), " "+strings.TrimSpace(string(pid))) {
				t.Fatalf("lookup after the kill = %+v (first child %d); want the answer of a new child", res, first)
			}
			if len(reached) != 2 || reached[0] == reached[1] {
				t.Fatalf("lookup reached the server as %v; want once in each of two processes", reached)
			}
			if len(retried) != 1 || retried[0].Attempt != 2 || retried[0].CallID != outcome.CallID || retried[0].Batch != outcome.Batch || retried[0].Error == "" {
				t.Fatalf("call.retried events %+v, outcome %+v; want one, attempt 2, under the same call, with its cause", retried, outcome)
			}
			if outcome.Kind != audit.CallExecuted {
				t.Fatalf("outcome %s, want call.executed", outcome.Kind)
			}
		})
	}
}

func readOr(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}
