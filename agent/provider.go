package agent

import (
	"context"
	"encoding/json"

	"github.com/toolwire/toolwire/tool"
)

// Provider sends one turn of a conversation to an LLM and returns its reply.
//
// Complete must return soon after ctx is done, abandoning the request. A
// failure to get a reply from the endpoint (an HTTP error status, an
// unreachable host, a broken stream) should be a [*ProviderError], so that
// the agent can retry a rate limit and explain the rest. The providers in
// this package ([OpenAI], [Anthropic]) are safe for concurrent use; an
// [Agent] calls Complete from one goroutine per conversation.
type Provider interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Request is one turn sent to a provider.
type Request struct {
	// System is the system prompt, or "".
	System string
	// Messages is the conversation so far, oldest first.
	Messages []Message
	// Tools are the tools the model may call this turn.
	Tools []ToolDef
	// OnText, when not nil, receives the reply's text as it streams, in
	// order, from the goroutine that called Complete.
	OnText func(delta string)
}

// Response is the model's reply to one turn.
type Response struct {
	// Text is the reply's text (all of it, also when it was streamed).
	Text string
	// Calls are the tool calls the model asked for, in its order. None
	// means the reply is a final answer.
	Calls []ToolCall
	// Cut reports a reply that ended at its token limit (OpenAI's
	// finish_reason "length", Anthropic's stop_reason "max_tokens"): its
	// text is not a finished answer, and a call marked Cut was still
	// being written.
	Cut bool
}

// Role says who a message is from.
type Role string

// The roles of a conversation.
const (
	// User messages carry the person's text.
	User Role = "user"
	// Assistant messages carry the model's text and tool calls.
	Assistant Role = "assistant"
	// ToolResults messages carry the results of the previous assistant
	// message's tool calls, one for each call, in the same order.
	ToolResults Role = "tool"
)

// Message is one entry of a conversation, in a form every provider can
// translate into its own.
type Message struct {
	Role Role
	// Text is a user's or the assistant's text.
	Text string
	// Calls are the assistant's tool calls.
	Calls []ToolCall
	// Results answer the calls of the assistant message before, in order.
	Results []ToolResult
}

// ToolCall is one tool call a model asked for.
type ToolCall struct {
	// ID is the provider's id for the call, which its result refers to.
	ID string
	// Name is the tool's registered name as the model wrote it.
	Name string
	// Args are the arguments exactly as the model wrote them: usually a JSON
	// object, but a model can produce anything, so they are validated
	// before any tool sees them.
	Args string
	// Cut reports a call the reply's token limit ended while the model
	// was writing it: its arguments are incomplete, so it is never run.
	Cut bool
}

// ToolResult is what the model is shown of one call's result: a compacted
// form of the [tool.Result] (see [Options].ResultBudget).
type ToolResult struct {
	// CallID is the [ToolCall].ID this result answers.
	CallID string
	// Name is the tool's name.
	Name string
	// IsError reports a failed or refused call.
	IsError bool
	// Parts hold the result's text and images, in order.
	Parts []Part
}

// Part is one piece of a result shown to the model: text, or an image.
type Part struct {
	Text  string
	Image *tool.Image // when set, Text is a one-line stand-in for providers that take no images
}

// ToolDef is a tool as a model is told about it.
type ToolDef struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments: an object schema.
	Schema json.RawMessage
}
