package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Handler runs a tool. It receives arguments that have already been parsed
// and validated against the tool's input schema, re-encoded as a JSON object.
// It must return when ctx is done.
//
// A failure the model should see (a file not found, a refused request) is an
// error result (see [ErrorResult]) with a nil error. A non-nil error means the
// tool could not run at all (a lost connection, a protocol error); the
// executor turns it into an error result too.
type Handler func(ctx context.Context, args json.RawMessage) (*Result, error)

// ErrUnavailable, wrapped in a handler's error, says the tool's source cannot
// take calls right now and the call was not sent; the executor turns it into
// a [ReasonUnavailable] result, which a caller may retry.
var ErrUnavailable = errors.New("temporarily unavailable")

// Origin says where a tool came from.
type Origin struct {
	// Source names the provider, such as an MCP server's configured name.
	// It is empty for a tool written in Go.
	Source string
	// Name is the tool's name at its source, used when calling it there.
	Name string
}

// Tool is one callable tool. Fill it in and pass it to [Registry.Register];
// a registered Tool must not be modified.
type Tool struct {
	// Name is the registered name, unique in a registry and matching
	// ^[A-Za-z0-9_-]{1,64}$ (the form LLM providers accept).
	Name string
	// Description tells a model what the tool does.
	Description string
	// InputSchema is a JSON Schema (draft 4 to 2020-12) for the arguments.
	// Nil means any JSON object.
	InputSchema json.RawMessage
	// Tier decides whether calls are confirmed first.
	Tier Tier
	// TierSource says where Tier came from; empty for a tool whose source
	// does not say (a tool written in Go: its author chose).
	TierSource TierSource
	// Origin records where the tool came from.
	Origin Origin
	// Pin says whether the tool's definition is the one an operator
	// approved (see package pins); empty when its source does not pin.
	Pin PinState
	// Handler runs the tool.
	Handler Handler

	schema *jsonschema.Schema // compiled InputSchema, set by CompileSchema
}

// PinState says how a tool's definition stands against its pin.
type PinState string

// The pin states a source may give a tool.
const (
	// PinApproved: the definition is the approved one (or was pinned on
	// first use).
	PinApproved PinState = "approved"
	// PinUnapproved: the definition differs from the approved one, or is
	// new, and was registered anyway (pins mode "warn").
	PinUnapproved PinState = "unapproved"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName reports whether name is a valid registered tool name.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// CompileSchema compiles the tool's input schema and keeps the result, so
// that [Registry.Register] does not compile it again. Sources call it early
// to leave out a tool whose schema is broken before registering anything.
// External references ("$ref" to another document or a file) are refused.
func (t *Tool) CompileSchema() error {
	if t.schema != nil {
		return nil
	}
	raw := t.InputSchema
	if len(raw) == 0 {
		raw = emptyObjectSchema
	}
	s, err := compileSchema(raw)
	if err != nil {
		return fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	t.schema = s
	return nil
}

// Schema returns the tool's input schema as JSON, substituting an empty
// object schema when the tool declares none.
func (t *Tool) Schema() json.RawMessage {
	if len(t.InputSchema) == 0 {
		return append(json.RawMessage(nil), emptyObjectSchema...)
	}
	return t.InputSchema
}

// check reports what makes t unregistrable, if anything.
func (t *Tool) check() error {
	switch {
	case !ValidName(t.Name):
		return fmt.Errorf("tool %q: name must match ^[A-Za-z0-9_-]{1,64}$", t.Name)
	case !t.Tier.Valid():
		return fmt.Errorf("tool %q: %w", t.Name, ErrInvalidTier)
	case t.Handler == nil:
		return fmt.Errorf("tool %q: no handler", t.Name)
	}
	return t.CompileSchema()
}
