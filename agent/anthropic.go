package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// DefaultAnthropicURL is the base URL of Anthropic's API.
const DefaultAnthropicURL = "https://api.anthropic.com"

// DefaultMaxTokens is the reply length limit sent to Anthropic, which
// requires one.
const DefaultMaxTokens = 4096

// AnthropicOptions configures an [Anthropic] provider. Nil means defaults.
type AnthropicOptions struct {
	// BaseURL is the API's base URL, the part before /v1/messages
	// (default [DefaultAnthropicURL]).
	BaseURL string
	// APIKey is the key the endpoint authenticates requests with.
	APIKey string
	// APIKeyEnv names the environment variable the key came from, so that
	// an authentication failure can say where to look. It is never read.
	APIKeyEnv string
	// HTTPClient sends the requests. Nil means a client that applies the
	// remote-URL rule to every redirect hop and has no overall timeout (the
	// context bounds each request).
	HTTPClient *http.Client
	// AllowInsecureHTTP accepts a plain http base URL on a host other than
	// loopback, which the remote-URL rule ([netpolicy.CheckURL]) refuses.
	AllowInsecureHTTP bool
	// MaxTokens bounds each reply (default [DefaultMaxTokens]).
	MaxTokens int
	// IdleTimeout bounds how long the reply stream may send nothing,
	// the wait for its first event included (default
	// [DefaultIdleTimeout]; negative means no limit). The API sends
	// pings while the model works, so silence means a stalled stream.
	IdleTimeout time.Duration
}

// Anthropic is a [Provider] speaking Anthropic's Messages API, streamed.
// It is safe for concurrent use. Images from tool results go back inside
// the tool_result blocks, which take them.
type Anthropic struct {
	svc       anthropic.MessageService
	model     string
	maxTokens int
	idle      time.Duration
	ep        endpoint
	hc        *http.Client
	key       string
}

// NewAnthropic returns a provider for model at the options' endpoint. The
// SDK does not retry on its own (the [Agent] retries rate limits within
// its bounds), reads nothing from the environment and records no traces.
func NewAnthropic(model string, opts *AnthropicOptions) (*Anthropic, error) {
	var o AnthropicOptions
	if opts != nil {
		o = *opts
	}
	if model == "" {
		return nil, errors.New("anthropic: no model given")
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultAnthropicURL
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	u, err := checkBaseURL(o.BaseURL, o.AllowInsecureHTTP)
	if err != nil {
		return nil, fmt.Errorf("anthropic: base URL: %w", err)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient(o.AllowInsecureHTTP)
	}
	reqOpts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithoutOpenTelemetry(),
		option.WithBaseURL(u.String()),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if o.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(o.APIKey))
	}
	client := anthropic.NewClient(reqOpts...)
	return &Anthropic{
		svc:       client.Messages,
		model:     model,
		maxTokens: o.MaxTokens,
		idle:      idleTimeout(o.IdleTimeout),
		hc:        hc,
		key:       o.APIKey,
		ep:        endpoint{provider: "anthropic", baseURL: u.String(), keyEnv: o.APIKeyEnv, hasKey: o.APIKey != ""},
	}, nil
}

// Complete streams one message. The reply is complete at its
// message_stop event; a stream that ends before it is an [ErrStalled]
// error, and a reply stopped for "max_tokens" is [Response].Cut, with
// each tool_use block the limit ended before its content_block_stop.
func (p *Anthropic) Complete(parent context.Context, req *Request) (*Response, error) {
	ctx, touch, stop := idleWatch(parent, p.idle)
	defer stop()
	params := anthropic.MessageNewParams{
		Model:     p.model,
		MaxTokens: int64(p.maxTokens),
		Messages:  anthropicMessages(req.Messages),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, d := range req.Tools {
		params.Tools = append(params.Tools, anthropicTool(d))
	}
	stream := p.svc.NewStreaming(ctx, params)
	defer stream.Close()

	// Blocks are kept by index: a tool_use block's input arrives as
	// pieces of JSON text, kept as written so that malformed input reaches
	// the executor (and the model) as it is.
	type block struct {
		kind, id, name string
		input          strings.Builder
		startInput     string
		stopped        bool
	}
	blocks := map[int64]*block{}
	var (
		text       strings.Builder
		stopReason string
		ended      bool
	)
	for stream.Next() {
		touch()
		ev := stream.Current()
		switch ev.Type {
		case "content_block_stop":
			if b, ok := blocks[ev.Index]; ok {
				b.stopped = true
			}
		case "message_delta":
			if r := string(ev.Delta.StopReason); r != "" {
				stopReason = r
			}
		case "message_stop":
			ended = true
		case "content_block_start":
			b := &block{kind: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			if b.kind == "tool_use" && ev.ContentBlock.Input != nil {
				if raw, err := json.Marshal(ev.ContentBlock.Input); err == nil {
					b.startInput = string(raw)
				}
			}
			if b.kind == "text" && ev.ContentBlock.Text != "" {
				text.WriteString(ev.ContentBlock.Text)
				if req.OnText != nil {
					req.OnText(ev.ContentBlock.Text)
				}
			}
			blocks[ev.Index] = b
		case "content_block_delta":
			b, ok := blocks[ev.Index]
			if !ok {
				continue
			}
			switch ev.Delta.Type {
			case "text_delta":
				text.WriteString(ev.Delta.Text)
				if req.OnText != nil {
					req.OnText(ev.Delta.Text)
				}
			case "input_json_delta":
				b.input.WriteString(ev.Delta.PartialJSON)
			}
		}
	}
	if err := p.ep.idleError(ctx, parent, p.idle); err != nil {
		return nil, err
	}
	if err := stream.Err(); err != nil {
		return nil, p.classify(parent, err)
	}
	if !ended {
		return nil, p.ep.unterminated("message_stop event")
	}
	resp := &Response{Text: text.String(), Cut: stopReason == "max_tokens"}
	order := slices.Sorted(maps.Keys(blocks))
	for n, i := range order {
		b := blocks[i]
		if b.kind != "tool_use" {
			continue
		}
		args := b.input.String()
		if args == "" {
			args = b.startInput
		}
		// The limit ends the reply in its last block, which Anthropic
		// still closes with content_block_stop: a tool_use block there,
		// or one never closed, was cut while the model wrote it (as
		// OpenAI's last call is when finish_reason is "length").
		cut := resp.Cut && (!b.stopped || n == len(order)-1)
		resp.Calls = append(resp.Calls, ToolCall{ID: b.id, Name: b.name, Args: args, Cut: cut})
	}
	return resp, nil
}

func (p *Anthropic) classify(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		if status, msg, ok := streamedError(err); ok {
			return p.ep.statusError(status, nil, msg, err)
		}
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && ctx.Err() == nil && apiErr.StatusCode != 0 {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return p.ep.statusError(apiErr.StatusCode, h, apiErr.Message, err)
	}
	return p.ep.transportError(ctx, err)
}

// streamErrorStatus maps the error types the Messages API sends in an
// "error" event of a stream that had started with 200 OK to the HTTP
// status the same error has before a stream starts, so that an
// overloaded_error mid-stream is retried like a 529.
var streamErrorStatus = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"overloaded_error":      529,
}

// streamedError reads an error event of the stream: the SDK hands it over
// either as an *anthropic.Error holding the event's JSON, or as a plain
// error quoting it.
func streamedError(err error) (status int, msg string, ok bool) {
	var raw string
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode != http.StatusOK && apiErr.StatusCode != 0 {
			return 0, "", false // an error status, before any stream
		}
		raw = apiErr.RawJSON()
	} else if r, found := strings.CutPrefix(err.Error(), "received error while streaming: "); found {
		raw = r
	}
	var ev struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if raw == "" || json.Unmarshal([]byte(raw), &ev) != nil || ev.Type != "error" {
		return 0, "", false
	}
	status, ok = streamErrorStatus[ev.Error.Type]
	if !ok {
		status = http.StatusInternalServerError
	}
	return status, ev.Error.Message + " (sent mid-stream)", true
}

// anthropicMessages translates the conversation into Messages API turns.
// Tool results are user content; a user message right after them joins
// the same turn, since the API wants user and assistant turns to alternate.
func anthropicMessages(msgs []Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	var user []anthropic.ContentBlockParamUnion
	flush := func() {
		if len(user) > 0 {
			out = append(out, anthropic.NewUserMessage(user...))
			user = nil
		}
	}
	for _, m := range msgs {
		switch m.Role {
		case User:
			user = append(user, anthropic.NewTextBlock(m.Text))
		case ToolResults:
			for _, r := range m.Results {
				user = append(user, anthropicResult(r))
			}
		case Assistant:
			flush()
			var blocks []anthropic.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.Calls {
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, replayInput(c.Args), c.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock("(no reply)"))
			}
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		}
	}
	flush()
	return out
}

// replayInput is a tool call's input as sent back in the history: the
// model's object, or an empty one when it wrote something else (the API
// takes only an object; the call's result says what was wrong).
func replayInput(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(args)
}

func anthropicResult(r ToolResult) anthropic.ContentBlockParamUnion {
	block := anthropic.ToolResultBlockParam{ToolUseID: r.CallID}
	if r.IsError {
		block.IsError = anthropic.Bool(true)
	}
	for _, part := range r.Parts {
		if part.Image != nil {
			block.Content = append(block.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{
				Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
					Data:      base64.StdEncoding.EncodeToString(part.Image.Data),
					MediaType: anthropic.Base64ImageSourceMediaType(part.Image.MIMEType),
				}},
			}})
			continue
		}
		block.Content = append(block.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: part.Text}})
	}
	if len(block.Content) == 0 {
		block.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: "(no content)"}}}
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &block}
}

// anthropicTool describes a tool. The API takes an object schema as
// properties, required and any other keywords alongside.
func anthropicTool(d ToolDef) anthropic.ToolUnionParam {
	schema := schemaObject(d.Schema)
	in := anthropic.ToolInputSchemaParam{Properties: schema["properties"]}
	if in.Properties == nil {
		in.Properties = map[string]any{}
	}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				in.Required = append(in.Required, s)
			}
		}
	}
	for k, v := range schema {
		switch k {
		case "properties", "required", "type", "$schema":
			continue
		}
		if in.ExtraFields == nil {
			in.ExtraFields = map[string]any{}
		}
		in.ExtraFields[k] = v
	}
	t := anthropic.ToolParam{Name: d.Name, InputSchema: in}
	if d.Description != "" {
		t.Description = anthropic.String(d.Description)
	}
	return anthropic.ToolUnionParam{OfTool: &t}
}
