package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// DefaultOpenAIURL is the base URL of OpenAI's API.
const DefaultOpenAIURL = "https://api.openai.com/v1"

// OpenAIOptions configures an [OpenAI] provider. Nil means defaults.
type OpenAIOptions struct {
	// BaseURL is the API's base URL, the part before /chat/completions
	// (default [DefaultOpenAIURL]). Ollama, vLLM, LM Studio and llama.cpp
	// servers serve the same API, for example at http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers
	// usually want none).
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
	// NoImages describes images from tool results in text instead of
	// sending them, for models without vision.
	NoImages bool
	// IdleTimeout bounds how long the reply stream may send nothing,
	// the wait for its first chunk included (default
	// [DefaultIdleTimeout]; negative means no limit).
	IdleTimeout time.Duration
}

// OpenAI is a [Provider] speaking OpenAI's Chat Completions API, streamed.
// It is safe for concurrent use.
//
// Tool results go back as tool messages, which take text only; images from
// them follow in one user message of image parts, the only place the API
// takes them.
type OpenAI struct {
	svc      openai.ChatCompletionService
	model    string
	noImages bool
	idle     time.Duration
	ep       endpoint
	hc       *http.Client
	key      string
}

// NewOpenAI returns a provider for model at the options' endpoint. The SDK
// does not retry on its own: the [Agent] retries rate limits within its
// bounds, and nothing is read from the environment.
func NewOpenAI(model string, opts *OpenAIOptions) (*OpenAI, error) {
	var o OpenAIOptions
	if opts != nil {
		o = *opts
	}
	if model == "" {
		return nil, errors.New("openai: no model given")
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultOpenAIURL
	}
	u, err := checkBaseURL(o.BaseURL, o.AllowInsecureHTTP)
	if err != nil {
		return nil, fmt.Errorf("openai: base URL: %w", err)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient(o.AllowInsecureHTTP)
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(u.String()),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if o.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(o.APIKey))
	}
	// A service rather than openai.NewClient: the client would add
	// settings from OPENAI_* environment variables behind our back.
	return &OpenAI{
		svc:      openai.NewChatCompletionService(reqOpts...),
		model:    model,
		noImages: o.NoImages,
		idle:     idleTimeout(o.IdleTimeout),
		hc:       hc,
		key:      o.APIKey,
		ep:       endpoint{provider: "openai", baseURL: u.String(), keyEnv: o.APIKeyEnv, hasKey: o.APIKey != ""},
	}, nil
}

// Complete streams one chat completion. The reply is complete once a
// chunk gives its finish_reason; a stream that ends before one is an
// [ErrStalled] error, and a reply finished for "length" is [Response].Cut,
// its last call with it.
func (p *OpenAI) Complete(parent context.Context, req *Request) (*Response, error) {
	ctx, touch, stop := idleWatch(parent, p.idle)
	defer stop()
	params := openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(p.model),
		Messages: p.messages(req),
	}
	for _, d := range req.Tools {
		params.Tools = append(params.Tools, openaiTool(d))
	}
	stream := p.svc.NewStreaming(ctx, params)
	defer stream.Close()

	var (
		text    strings.Builder
		calls   = map[int64]*openaiPartialCall{} // by key, in order of first chunk
		order   []int64
		byIndex = map[int64]int64{} // the stream's tool-call index -> key of its current call
		finish  string
	)
	for stream.Next() {
		touch()
		for _, choice := range stream.Current().Choices {
			if choice.Index != 0 {
				continue
			}
			if choice.FinishReason != "" {
				finish = choice.FinishReason
			}
			d := choice.Delta
			if d.Content != "" {
				text.WriteString(d.Content)
				if req.OnText != nil {
					req.OnText(d.Content)
				}
			}
			for _, tc := range d.ToolCalls {
				key, ok := byIndex[tc.Index]
				if ok && tc.ID != "" && calls[key].id != "" && calls[key].id != tc.ID {
					// Some servers (Ollama) number every parallel call 0:
					// a new id under the same index starts a new call.
					ok = false
				}
				if !ok {
					key = int64(len(order))
					byIndex[tc.Index] = key
					calls[key] = &openaiPartialCall{}
					order = append(order, key)
				}
				pc := calls[key]
				if tc.ID != "" {
					pc.id = tc.ID
				}
				if tc.Function.Name != "" {
					pc.name = tc.Function.Name
				}
				pc.args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if err := p.ep.idleError(ctx, parent, p.idle); err != nil {
		return nil, err
	}
	if err := stream.Err(); err != nil {
		return nil, p.classify(parent, err)
	}
	if finish == "" {
		return nil, p.ep.unterminated("finish_reason")
	}
	resp := &Response{Text: text.String(), Cut: finish == "length"}
	slices.Sort(order)
	for _, i := range order {
		pc := calls[i]
		id := pc.id
		if id == "" {
			// Some compatible servers leave ids out; the results must
			// still name their calls.
			id = fmt.Sprintf("call_%d", i)
		}
		resp.Calls = append(resp.Calls, ToolCall{ID: id, Name: pc.name, Args: pc.args.String()})
	}
	if resp.Cut && len(resp.Calls) > 0 {
		// Calls stream one after the other: the limit ended the last.
		resp.Calls[len(resp.Calls)-1].Cut = true
	}
	return resp, nil
}

type openaiPartialCall struct {
	id, name string
	args     strings.Builder
}

func (p *OpenAI) classify(ctx context.Context, err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) && ctx.Err() == nil {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return p.ep.statusError(apiErr.StatusCode, h, apiErr.Message, err)
	}
	return p.ep.transportError(ctx, err)
}

// messages translates the conversation into Chat Completions messages.
func (p *OpenAI) messages(req *Request) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if req.System != "" {
		out = append(out, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case User:
			out = append(out, openai.UserMessage(m.Text))
		case Assistant:
			var a openai.ChatCompletionAssistantMessageParam
			if m.Text != "" || len(m.Calls) == 0 {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.Calls {
				args := c.Args
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case ToolResults:
			var images []openai.ChatCompletionContentPartUnionParam
			for _, r := range m.Results {
				text := partsText(r.Parts)
				if text == "" {
					text = "(no content)"
				}
				out = append(out, openai.ToolMessage(text, r.CallID))
				if p.noImages {
					continue
				}
				for _, part := range r.Parts {
					if part.Image == nil {
						continue
					}
					images = append(images,
						openai.TextContentPart(fmt.Sprintf("Image from the result of %s (call %s):", r.Name, r.CallID)),
						openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{
							URL: "data:" + part.Image.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(part.Image.Data),
						}))
				}
			}
			if len(images) > 0 {
				out = append(out, openai.UserMessage(images))
			}
		}
	}
	return out
}

// openaiTool describes a tool as a function. The schema goes as it is,
// less "$schema", with an empty "properties" added when missing (some
// compatible servers insist on one).
func openaiTool(d ToolDef) openai.ChatCompletionToolUnionParam {
	params := schemaObject(d.Schema)
	delete(params, "$schema")
	if _, ok := params["properties"]; !ok {
		params["properties"] = map[string]any{}
	}
	fn := shared.FunctionDefinitionParam{Name: d.Name, Parameters: shared.FunctionParameters(params)}
	if d.Description != "" {
		fn.Description = openai.String(d.Description)
	}
	return openai.ChatCompletionFunctionTool(fn)
}
