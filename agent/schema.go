package agent

import (
	"bytes"
	"encoding/json"
)

// schemaObject decodes a tool's schema, keeping numbers as written. A
// schema that is not a JSON object (which a registered tool cannot have)
// becomes the empty object schema.
func schemaObject(raw json.RawMessage) map[string]any {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return map[string]any{"type": "object"}
	}
	return rawNumbers(m).(map[string]any)
}

// rawNumbers replaces each json.Number in v with the same digits as
// json.RawMessage: the SDKs' encoders write a json.Number as a string,
// but pass a json.Marshaler's bytes through.
func rawNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return json.RawMessage(v)
	case map[string]any:
		for k, e := range v {
			v[k] = rawNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = rawNumbers(e)
		}
	}
	return v
}
