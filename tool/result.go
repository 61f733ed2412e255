package tool

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Result is what a call produced. A successful result has content and
// possibly a structured value; an error result has IsError set, a Reason
// saying why and a one-line Message a model or a person can read.
type Result struct {
	// Content holds the result's blocks in the order the tool gave them.
	Content []Content
	// Structured is the tool's optional structured value (any JSON value).
	Structured any
	// IsError reports whether the call failed or was refused.
	IsError bool
	// Reason classifies an error result; it is empty on success.
	Reason Reason
	// Message explains an error result in one line.
	Message string
	// Violations lists each argument that failed validation, when Reason is
	// [ReasonInvalidArgs].
	Violations []Violation
	// Authorization, when Reason is [ReasonAuthorization], says where the
	// caller must authorize before calling again (see
	// [AuthorizationError]). It is the caller's alone: it is left out of
	// the result's JSON, hence out of the audit log, and the party that
	// serves the caller decides how to show it (a URL-mode elicitation, a
	// message naming it).
	Authorization *Authorization
}

// Reason says why a call ended in an error result.
type Reason string

const (
	// ReasonTool means the tool ran and reported an error itself.
	ReasonTool Reason = "tool_error"
	// ReasonUnknownTool means no tool of that name is registered.
	ReasonUnknownTool Reason = "unknown_tool"
	// ReasonInvalidArgs means the arguments were not JSON, not an object,
	// or failed the tool's input schema. Nothing was sent to the tool.
	ReasonInvalidArgs Reason = "invalid_arguments"
	// ReasonDeclined means confirmation was refused (or the confirmer
	// failed). The model should not retry the same call.
	ReasonDeclined Reason = "declined"
	// ReasonUnconfirmed means nobody could be asked to confirm the call
	// (the confirmer returned [ErrNobodyToAsk]): nobody refused it, but it
	// did not run.
	ReasonUnconfirmed Reason = "unconfirmed"
	// ReasonFailed means the handler could not produce a result (a broken
	// connection, a protocol error, a panic).
	ReasonFailed Reason = "failed"
	// ReasonUnavailable means the tool's source cannot take calls right now
	// (an MCP server that is reconnecting, say). The call was not sent; it
	// may succeed if retried later.
	ReasonUnavailable Reason = "unavailable"
	// ReasonCancelled means the caller cancelled the call.
	ReasonCancelled Reason = "cancelled"
	// ReasonTimeout means the call ran out of time.
	ReasonTimeout Reason = "timeout"
	// ReasonAuditFailed means the audit log is required and could not
	// record the call, so it was refused before it ran.
	ReasonAuditFailed Reason = "audit_failed"
	// ReasonAuthorization means the caller must first authorize at the
	// upstream (Result.Authorization says where), then call again.
	ReasonAuthorization Reason = "authorization_required"
)

// Violation is one way the arguments failed the input schema.
type Violation struct {
	// Path is a JSON pointer to the failing value ("" for the whole object).
	Path string `json:"path"`
	// Message says what was expected.
	Message string `json:"message"`
}

// ErrorResult returns an error result with one text block carrying msg.
// Handlers use it to report a failure the model should see.
func ErrorResult(reason Reason, msg string) *Result {
	return &Result{
		Content: []Content{&Text{Text: msg}},
		IsError: true,
		Reason:  reason,
		Message: msg,
	}
}

// TextResult returns a successful result with one text block.
func TextResult(text string) *Result {
	return &Result{Content: []Content{&Text{Text: text}}}
}

// Text returns the result's text blocks joined by newlines.
func (r *Result) Text() string {
	var texts []string
	for _, c := range r.Content {
		if t, ok := c.(*Text); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Flatten reduces the result to one JSON-serializable value for callers that
// need a single value: the structured value if there is one, else the single
// text, else the texts joined by newlines, else the content blocks
// themselves.
func (r *Result) Flatten() any {
	if r.Structured != nil {
		return r.Structured
	}
	var texts []string
	for _, c := range r.Content {
		if t, ok := c.(*Text); ok {
			texts = append(texts, t.Text)
		}
	}
	switch {
	case len(texts) == 0 && r.Content == nil:
		return []Content{}
	case len(texts) == 0:
		return r.Content
	case len(texts) == 1 && len(r.Content) == 1:
		return texts[0]
	case len(texts) == len(r.Content):
		return strings.Join(texts, "\n")
	default:
		return r.Content
	}
}

// MarshalJSON encodes the result with MCP-like field names
// (content, structuredContent, isError) plus reason, message and violations.
func (r *Result) MarshalJSON() ([]byte, error) {
	content := r.Content
	if content == nil {
		content = []Content{}
	}
	return json.Marshal(struct {
		Content    []Content   `json:"content"`
		Structured any         `json:"structuredContent,omitempty"`
		IsError    bool        `json:"isError,omitempty"`
		Reason     Reason      `json:"reason,omitempty"`
		Message    string      `json:"message,omitempty"`
		Violations []Violation `json:"violations,omitempty"`
	}{content, r.Structured, r.IsError, r.Reason, r.Message, r.Violations})
}

// size is the result's size in bytes for the audit log: its texts and raw
// media bytes, plus the encoded structured value. It is close to the JSON
// size without encoding the whole result just to measure it.
func (r *Result) size() int {
	n := 0
	for _, c := range r.Content {
		switch c := c.(type) {
		case *Text:
			n += len(c.Text)
		case *Image:
			n += len(c.Data)
		case *Audio:
			n += len(c.Data)
		case *Resource:
			n += len(c.URI) + len(c.Text) + len(c.Blob)
		case *ResourceLink:
			n += len(c.URI) + len(c.Name) + len(c.Description)
		}
	}
	if r.Structured != nil {
		if raw, err := json.Marshal(r.Structured); err == nil {
			n += len(raw)
		}
	}
	return n
}

// invalidArgs builds the result for arguments that failed validation. The
// message names the tool and every failing path so a model can correct itself.
func invalidArgs(name string, vs []Violation) *Result {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid arguments for tool %q:", name)
	for _, v := range vs {
		path := v.Path
		if path == "" {
			path = "(root)"
		}
		fmt.Fprintf(&b, " %s: %s;", path, v.Message)
	}
	msg := strings.TrimSuffix(b.String(), ";")
	res := ErrorResult(ReasonInvalidArgs, msg)
	res.Violations = vs
	return res
}
