package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolwire/toolwire/internal/jsonenc"
)

// schemaURL is the location every input schema is compiled at. Each schema
// is compiled by its own compiler, so the location only anchors relative
// references inside the document.
const schemaURL = "mem:///input-schema.json"

// maxViolations bounds how many failures one validation reports, so a huge
// bad argument cannot produce a huge result.
const maxViolations = 20

var printer = message.NewPrinter(language.English)

// emptyObjectSchema is the schema of a tool that declares none: any object.
var emptyObjectSchema = json.RawMessage(`{"type":"object"}`)

// refuseLoader refuses every external reference. The library's default loader
// reads file:// URLs, which would let an untrusted server's schema read local
// files ("$ref": "file:///etc/passwd"); a well-formed tool schema refers only
// within itself.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not loaded (%s)", url)
}

// maxCachedSchemas bounds the compiled-schema cache, so a server that keeps
// changing its schemas cannot grow it without limit.
const maxCachedSchemas = 4096

// schemaCache maps a schema's bytes to its compiled form. Compiling is the
// dominant cost of adapting a server (the library checks each schema
// against its draft's metaschema), and the same schemas come back on every
// reconnect and list_changed, and often repeat across tools. A compiled
// schema is immutable, so tools may share one.
var schemaCache = struct {
	sync.Mutex
	m map[string]*jsonschema.Schema
}{m: make(map[string]*jsonschema.Schema)}

// compileSchema compiles raw, a JSON Schema of draft 4, 6, 7, 2019-09 or
// 2020-12, or returns the cached result for the same bytes. A schema without
// "$schema" is read as 2020-12, the draft MCP names as its default.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	key := string(raw)
	schemaCache.Lock()
	s, ok := schemaCache.m[key]
	schemaCache.Unlock()
	if ok {
		return s, nil
	}
	s, err := compileUncached(raw)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	if len(schemaCache.m) >= maxCachedSchemas {
		clear(schemaCache.m)
	}
	schemaCache.m[key] = s
	schemaCache.Unlock()
	return s, nil
}

func compileUncached(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", oneLine(err.Error()))
	}
	return s, nil
}

// parseArgs decodes raw call arguments into a JSON object. Empty input and
// null mean no arguments.
func parseArgs(raw json.RawMessage) (map[string]any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("arguments are not valid JSON: data after the value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, not %s", jsonKind(v))
	}
	return obj, nil
}

// encodeArgs re-encodes validated arguments. The handler receives these bytes
// rather than the caller's, so what was validated and confirmed is exactly
// what runs: duplicate keys, for one, cannot smuggle a second value past the
// validator to a server whose parser keeps the first.
func encodeArgs(args map[string]any) (json.RawMessage, error) { return jsonenc.Marshal(args) }

// violations lists the leaves of a validation error: each is one value that
// failed one keyword, which is what a model needs to fix its call.
func violations(err error) []Violation {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Violation{{Path: "", Message: oneLine(err.Error())}}
	}
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) >= maxViolations {
			return
		}
		if len(e.Causes) == 0 {
			out = append(out, Violation{
				Path:    jsonPointer(e.InstanceLocation),
				Message: e.ErrorKind.LocalizedString(printer),
			})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// jsonPointer encodes tokens as an RFC 6901 JSON pointer.
func jsonPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// oneLine folds a multi-line library message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
