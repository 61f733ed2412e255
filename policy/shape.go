package policy

import (
	"encoding/json"
	"math"
	"strconv"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// shape is what a tool's input schema says of one value, in the terms a
// rule is checked in: the CEL type the value is declared with, and how a
// decoded JSON value is converted to it, so that a number declared an
// integer is an int at run time and a "number" always a double.
type shape struct {
	kind  shapeKind
	name  string            // the struct type's name, for object
	props map[string]*shape // object: the declared properties
	elem  *shape            // list: the items; map: the values
}

type shapeKind uint8

const (
	dynShape shapeKind = iota // unknown: checked at run time only
	stringShape
	intShape
	doubleShape
	boolShape
	listShape
	objectShape // declared properties: reading any other is an error
	mapShape    // an object without declared properties
)

// argsTypeName is the CEL type of a tool's arguments; a nested object's
// type is named by its path below it ("toolwire.Args.options").
const argsTypeName = "toolwire.Args"

// maxShapeDepth bounds how deep a schema is followed: a hostile server's
// schema cannot make the checker's types arbitrarily large. Deeper
// values are dyn.
const maxShapeDepth = 16

// argsShape returns the shape of a tool's arguments from its input schema
// (raw JSON; empty means any object).
func argsShape(raw json.RawMessage) *shape {
	var s any
	if len(raw) > 0 && json.Unmarshal(raw, &s) != nil {
		s = nil
	}
	sh := shapeOf(s, argsTypeName, 0)
	if sh.kind != objectShape && sh.kind != mapShape {
		// Arguments are always an object; a schema that says nothing
		// useful of it leaves each argument unchecked.
		return &shape{kind: mapShape, elem: &shape{kind: dynShape}}
	}
	return sh
}

// shapeOf reads one schema. What it cannot read exactly ($ref, anyOf,
// several types) is dyn: such values are checked when a rule runs, and a
// rule that reads one absent from a call is denied, not skipped.
func shapeOf(v any, name string, depth int) *shape {
	s, ok := v.(map[string]any)
	if !ok || depth > maxShapeDepth {
		return &shape{kind: dynShape}
	}
	for _, k := range []string{"$ref", "anyOf", "oneOf", "allOf", "not", "if"} {
		if _, ok := s[k]; ok {
			return &shape{kind: dynShape}
		}
	}
	typ := schemaType(s)
	switch typ {
	case "string":
		return &shape{kind: stringShape}
	case "integer":
		return &shape{kind: intShape}
	case "number":
		return &shape{kind: doubleShape}
	case "boolean":
		return &shape{kind: boolShape}
	case "array":
		items, _ := s["items"].(map[string]any)
		return &shape{kind: listShape, elem: shapeOf(items, name+"[]", depth+1)}
	case "object":
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			elem := &shape{kind: dynShape}
			if ap, ok := s["additionalProperties"].(map[string]any); ok {
				elem = shapeOf(ap, name+"{}", depth+1)
			}
			return &shape{kind: mapShape, elem: elem}
		}
		sh := &shape{kind: objectShape, name: name, props: make(map[string]*shape, len(props))}
		for k, p := range props {
			sh.props[k] = shapeOf(p, name+"."+k, depth+1)
		}
		return sh
	}
	return &shape{kind: dynShape}
}

// schemaType returns the one type a schema gives its value: its "type"
// (leaving out "null" from a list of two), or what its properties or
// enum imply; "" when there is no single type.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		var only string
		for _, x := range t {
			name, _ := x.(string)
			if name == "null" {
				continue
			}
			if only != "" {
				return ""
			}
			only = name
		}
		return only
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		for _, e := range enum {
			if _, ok := e.(string); !ok {
				return ""
			}
		}
		return "string"
	}
	return ""
}

// celType is the type a rule sees the value as.
func (sh *shape) celType() *cel.Type {
	switch sh.kind {
	case stringShape:
		return cel.StringType
	case intShape:
		return cel.IntType
	case doubleShape:
		return cel.DoubleType
	case boolShape:
		return cel.BoolType
	case listShape:
		return cel.ListType(sh.elem.celType())
	case objectShape:
		return cel.ObjectType(sh.name)
	case mapShape:
		return cel.MapType(cel.StringType, sh.elem.celType())
	}
	return cel.DynType
}

// structs adds the struct types of sh and those nested in it to out, by
// name.
func (sh *shape) structs(out map[string]map[string]*types.Type) {
	switch sh.kind {
	case objectShape:
		fields := make(map[string]*types.Type, len(sh.props))
		for k, p := range sh.props {
			fields[k] = p.celType()
			p.structs(out)
		}
		out[sh.name] = fields
	case listShape, mapShape:
		sh.elem.structs(out)
	}
}

// value converts v, as encoding/json decoded it with UseNumber, to what a
// rule sees: numbers as the schema declares them, everything else as it
// is. A value the schema's type does not fit (it passed validation, so
// only where the shape is looser than the schema) is kept as decoded.
func (sh *shape) value(v any) any {
	switch x := v.(type) {
	case json.Number:
		return sh.number(x)
	case []any:
		elem := sh.elem
		if sh.kind != listShape || elem == nil {
			elem = &shape{kind: dynShape}
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = elem.value(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = sh.field(k).value(e)
		}
		return out
	}
	return v
}

// field returns the shape of property k of an object.
func (sh *shape) field(k string) *shape {
	switch sh.kind {
	case objectShape:
		if p, ok := sh.props[k]; ok {
			return p
		}
	case mapShape:
		return sh.elem
	}
	return &shape{kind: dynShape}
}

// number converts a JSON number: a double where the schema says
// "number", an int where it says "integer" (1.0 is an integer in JSON
// Schema), and otherwise an int when it is a whole number that fits, a
// double when not.
func (sh *shape) number(n json.Number) any {
	if sh.kind == doubleShape {
		f, _ := strconv.ParseFloat(string(n), 64)
		return f
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i
	}
	f, _ := strconv.ParseFloat(string(n), 64)
	if sh.kind == intShape && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return int64(f)
	}
	return f
}
