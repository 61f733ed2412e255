package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/agent/agenttest"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/tool"
)

// Aliases keep the tests short.
type scripted = agenttest.Server

var (
	newScripted        = agenttest.NewServer
	status             = agenttest.Status
	messagesOf         = func(_ *testing.T, req map[string]any) []map[string]any { return agenttest.Messages(req) }
	toolNames          = agenttest.ToolNames
	openaiToolMessages = func(_ *testing.T, req map[string]any) [][2]string { return agenttest.OpenAIToolResults(req) }
)

func calls(cs []ToolCall) []agenttest.Call {
	out := make([]agenttest.Call, len(cs))
	for i, c := range cs {
		out[i] = agenttest.Call{ID: c.ID, Name: c.Name, Args: c.Args}
	}
	return out
}

func openaiReply(text string, cs ...ToolCall) http.HandlerFunc {
	return agenttest.OpenAIReply(text, calls(cs)...)
}

func anthropicReply(text string, cs ...ToolCall) http.HandlerFunc {
	return agenttest.AnthropicReply(text, calls(cs)...)
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// bench is a registry of Go tools with an executor auditing into memory.
type bench struct {
	reg   *tool.Registry
	ex    *tool.Executor
	audit *audit.Memory
}

func newBench(t *testing.T, confirm tool.ConfirmFunc, tools ...*tool.Tool) *bench {
	t.Helper()
	b := &bench{audit: &audit.Memory{}}
	var opts tool.RegistryOptions
	if confirm != nil {
		opts.Confirmer = confirm
	}
	b.reg = tool.NewRegistry(&opts)
	if err := b.reg.RegisterAll(tools); err != nil {
		t.Fatal(err)
	}
	b.ex = tool.NewExecutor(b.reg, &tool.ExecutorOptions{Audit: audit.NewLog(b.audit, nil)})
	return b
}

// kinds lists the audit events' kinds with their reasons, as "kind" or
// "kind:reason".
func (b *bench) kinds() []string {
	var out []string
	for _, ev := range b.audit.Events() {
		k := string(ev.Kind)
		if ev.Reason != "" {
			k += ":" + ev.Reason
		}
		out = append(out, k)
	}
	return out
}

var addTool = &tool.Tool{
	Name:        "calc__add",
	Description: "Adds two numbers.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
	Tier:        tool.Read,
	Handler: func(_ context.Context, args json.RawMessage) (*tool.Result, error) {
		var in struct{ A, B float64 }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		return tool.TextResult(fmt.Sprint(in.A + in.B)), nil
	},
}

func textTool(name, desc string, tier tool.Tier, text string) *tool.Tool {
	return &tool.Tool{
		Name: name, Description: desc, Tier: tier,
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult(text), nil },
	}
}

func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}
