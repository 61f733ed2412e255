package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/tool"
)

var pngBytes = []byte("\x89PNG\r\n\x1a\n-not-really-an-image")

var imageTool = &tool.Tool{
	Name: "pic__snap", Description: "Takes a picture.", Tier: tool.Read,
	Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
		return &tool.Result{Content: []tool.Content{&tool.Text{Text: "a red square"}, &tool.Image{Data: pngBytes, MIMEType: "image/png"}}}, nil
	},
}

func anthropicFor(t *testing.T, s *scripted) *Anthropic {
	t.Helper()
	p, err := NewAnthropic("scripted-claude", &AnthropicOptions{BaseURL: s.URL, APIKey: "sk-ant-test", APIKeyEnv: "TEST_ANTHROPIC_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnthropicRoundTrip(t *testing.T) {
	b := newBench(t, nil, addTool, imageTool)
	s := newScripted(t,
		anthropicReply("Let me check. ",
			ToolCall{ID: "toolu_1", Name: "calc__add", Args: `{"a":2,"b":3}`},
			ToolCall{ID: "toolu_2", Name: "pic__snap", Args: `{}`},
			ToolCall{ID: "toolu_3", Name: "calc__add", Args: `{"a":2,`}),
		anthropicReply("Done."),
	)
	var streamed strings.Builder
	a := New(b.ex, anthropicFor(t, s), &Options{System: "Be brief.", OnText: func(d string) { streamed.WriteString(d) }})
	out, err := a.Run(context.Background(), "add and snap")
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "Done." || streamed.String() != "Let me check. Done." {
		t.Errorf("text = %q, streamed = %q", out.Text, streamed.String())
	}
	reqs := s.Requests()
	first := reqs[0]
	if first["model"] != "scripted-claude" || first["max_tokens"] != float64(DefaultMaxTokens) || s.Keys()[0] != "Bearer sk-ant-test" {
		t.Errorf("first request = model %v, max_tokens %v, key %q", first["model"], first["max_tokens"], s.Keys()[0])
	}
	if sys := jsonString(first["system"]); sys != `[{"text":"Be brief.","type":"text"}]` {
		t.Errorf("system = %s", sys)
	}
	var add map[string]any
	for _, tl := range first["tools"].([]any) {
		if m := tl.(map[string]any); m["name"] == "calc__add" {
			add = m
		}
	}
	if got := jsonString(add["input_schema"]); got != `{"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"type":"object"}` {
		t.Errorf("input_schema = %s", got)
	}

	msgs := messagesOf(t, reqs[1])
	if len(msgs) != 3 || msgs[0]["role"] != "user" || msgs[1]["role"] != "assistant" || msgs[2]["role"] != "user" {
		t.Fatalf("messages = %s", jsonString(msgs))
	}
	uses := msgs[1]["content"].([]any)
	if len(uses) != 4 {
		t.Fatalf("assistant content = %s", jsonString(uses))
	}
	// The malformed input is replayed as an empty object: the API takes
	// nothing else.
	if got := jsonString(uses[1].(map[string]any)["input"]) + jsonString(uses[3].(map[string]any)["input"]); got != `{"a":2,"b":3}{}` {
		t.Errorf("replayed inputs = %s", got)
	}
	results := msgs[2]["content"].([]any)
	if len(results) != 3 {
		t.Fatalf("tool results = %s", jsonString(results))
	}
	want := []string{
		`{"content":[{"text":"5","type":"text"}],"tool_use_id":"toolu_1","type":"tool_result"}`,
		`{"content":[{"text":"a red square","type":"text"},{"source":{"data":"` + base64.StdEncoding.EncodeToString(pngBytes) + `","media_type":"image/png","type":"base64"},"type":"image"}],"tool_use_id":"toolu_2","type":"tool_result"}`,
	}
	for i, w := range want {
		if got := jsonString(results[i]); got != w {
			t.Errorf("tool result %d =\n%s\nwant\n%s", i, got, w)
		}
	}
	bad := results[2].(map[string]any)
	if bad["is_error"] != true || !strings.Contains(jsonString(bad["content"]), "invalid arguments") {
		t.Errorf("malformed call's result = %s", jsonString(bad))
	}
}

func TestAnthropicErrors(t *testing.T) {
	t.Run("unauthorized", func(t *testing.T) {
		s := newScripted(t, status(http.StatusUnauthorized, "invalid x-api-key"))
		_, err := New(newBench(t, nil).ex, anthropicFor(t, s), nil).Run(context.Background(), "x")
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err = %v", err)
		}
		contains(t, "error", err.Error(), "anthropic:", "invalid x-api-key", "TEST_ANTHROPIC_KEY")
	})
	t.Run("overloaded then ok", func(t *testing.T) {
		s := newScripted(t, status(529, "Overloaded", "Retry-After", "2"), anthropicReply("fine"))
		log := &audit.Memory{}
		a := New(newBench(t, nil).ex, anthropicFor(t, s), &Options{Audit: audit.NewLog(log, nil)})
		var waits []time.Duration
		a.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
		out, err := a.Run(context.Background(), "x")
		if err != nil || out.Text != "fine" {
			t.Fatalf("out = %+v, err = %v", out, err)
		}
		if !slices.Equal(waits, []time.Duration{2 * time.Second}) {
			t.Errorf("waits = %v", waits)
		}
		if evs := log.Events(); len(evs) != 1 || evs[0].Source != "anthropic" || evs[0].Reason != "rate_limited" {
			t.Errorf("audit = %+v", evs)
		}
	})
}

func TestOpenAIImagesFollowTheToolMessages(t *testing.T) {
	for _, noImages := range []bool{false, true} {
		b := newBench(t, nil, imageTool)
		s := newScripted(t, openaiReply("", ToolCall{ID: "c1", Name: "pic__snap", Args: `{}`}), openaiReply("red"))
		p, err := NewOpenAI("m", &OpenAIOptions{BaseURL: s.URL, NoImages: noImages})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(b.ex, p, nil).Run(context.Background(), "snap"); err != nil {
			t.Fatal(err)
		}
		msgs := messagesOf(t, s.Requests()[1])
		tm := openaiToolMessages(t, s.Requests()[1])
		if len(tm) != 1 || tm[0][1] != "a red square\n[image image/png, 28 bytes]" {
			t.Errorf("noImages=%v: tool message = %v", noImages, tm)
		}
		last := msgs[len(msgs)-1]
		if noImages {
			if last["role"] != "tool" {
				t.Errorf("noImages: last message = %s, want the tool message", jsonString(last))
			}
			continue
		}
		want := `{"content":[{"text":"Image from the result of pic__snap (call c1):","type":"text"},{"image_url":{"url":"data:image/png;base64,` +
			base64.StdEncoding.EncodeToString(pngBytes) + `"},"type":"image_url"}],"role":"user"}`
		if got := jsonString(last); got != want {
			t.Errorf("image message =\n%s\nwant\n%s", got, want)
		}
	}
}

func TestToolSchemasAreConvertedPerProvider(t *testing.T) {
	cases := []struct {
		name, schema, openai, anthropic string
	}{
		{
			"plain",
			`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`,
			`{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"}`,
			`{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"}`,
		},
		{
			"no properties",
			`{"type":"object"}`,
			`{"properties":{},"type":"object"}`,
			`{"properties":{},"type":"object"}`,
		},
		{
			"dialect and definitions",
			`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"p":{"$ref":"#/definitions/pt"}},"definitions":{"pt":{"type":"number","maximum":1e400}},"additionalProperties":false}`,
			`{"additionalProperties":false,"definitions":{"pt":{"maximum":1e400,"type":"number"}},"properties":{"p":{"$ref":"#/definitions/pt"}},"type":"object"}`,
			`{"properties":{"p":{"$ref":"#/definitions/pt"}},"type":"object","additionalProperties":false,"definitions":{"pt":{"maximum":1e400,"type":"number"}}}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := ToolDef{Name: "x__y", Description: "d", Schema: json.RawMessage(c.schema)}
			o, _ := json.Marshal(openaiTool(d))
			var ot struct {
				Function struct{ Parameters json.RawMessage }
			}
			if err := json.Unmarshal(o, &ot); err != nil {
				t.Fatal(err)
			}
			if got := string(ot.Function.Parameters); !sameJSON(got, c.openai) {
				t.Errorf("openai parameters = %s, want %s", got, c.openai)
			}
			a, _ := json.Marshal(anthropicTool(d))
			var at struct {
				InputSchema json.RawMessage `json:"input_schema"`
			}
			if err := json.Unmarshal(a, &at); err != nil {
				t.Fatal(err)
			}
			if got := string(at.InputSchema); !sameJSON(got, c.anthropic) {
				t.Errorf("anthropic input_schema = %s, want %s", got, c.anthropic)
			}
		})
	}
}

// sameJSON compares two JSON texts as values, keeping numbers as written.
func sameJSON(a, b string) bool {
	return reflect.DeepEqual(schemaObject(json.RawMessage(a)), schemaObject(json.RawMessage(b)))
}

func TestRetryAfterHeaders(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name    string
		headers map[string]string
		want    time.Duration
		ok      bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "12"}, 12 * time.Second, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"fractional seconds", map[string]string{"Retry-After": "2.5"}, 2500 * time.Millisecond, true},
		{"not a number", map[string]string{"Retry-After": "NaN"}, 0, false},
		{"milliseconds win", map[string]string{"Retry-After": "12", "Retry-After-Ms": "1500"}, 1500 * time.Millisecond, true},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, false},
		{"absurd", map[string]string{"Retry-After": "999999999999"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"bad ms falls back", map[string]string{"Retry-After-Ms": "x", "Retry-After": "4"}, 4 * time.Second, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			got, ok := retryAfter(h, now)
			if got != c.want || ok != c.ok {
				t.Errorf("retryAfter = %v, %v; want %v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestBaseURLRule(t *testing.T) {
	cases := []struct {
		url       string
		allowHTTP bool
		ok        bool
	}{
		{"https://api.openai.com/v1", false, true},
		{"http://127.0.0.1:11434/v1", false, true},
		{"http://localhost:8000/v1", false, true},
		{"http://[::1]:8000/v1", false, true},
		{"http://192.168.1.20:8000/v1", false, false},
		{"http://gpu-box.lan:8000/v1", false, false},
		{"http://gpu-box.lan:8000/v1", true, true},
		{"ftp://127.0.0.1/", false, false},
		{"ftp://127.0.0.1/", true, false},
		{"https://user:pw@api.example.com/", false, false},
		{"https://user:pw@api.example.com/", true, false},
		{"https:///v1", true, false},
	}
	for _, c := range cases {
		_, err := checkBaseURL(c.url, c.allowHTTP)
		if (err == nil) != c.ok {
			t.Errorf("checkBaseURL(%q, %v) = %v, want ok=%v", c.url, c.allowHTTP, err, c.ok)
		}
	}
	var ue *netpolicy.URLError
	if _, err := NewOpenAI("m", &OpenAIOptions{BaseURL: "http://10.0.0.1/v1"}); !errors.As(err, &ue) {
		t.Errorf("NewOpenAI on remote http: %v, want a *netpolicy.URLError", err)
	}
	if _, err := NewAnthropic("", nil); err == nil {
		t.Error("NewAnthropic without a model succeeded")
	}
}
