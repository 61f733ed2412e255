package pins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Definition is what a server says about one tool: the parts that reach
// the model or decide how a call is made, and so the parts a pin covers.
type Definition struct {
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema as JSON. Empty means absent and
	// fingerprints as JSON null.
	InputSchema json.RawMessage
	// Annotations are the tool's annotations as JSON. Absent (empty) and
	// JSON null fingerprint the same, since a server that stops sending
	// "annotations": null has not changed what the tool claims.
	Annotations json.RawMessage
	// Registered is the name the tool is registered under, if the caller
	// knows it. It is not fingerprinted: a pin keeps it so that listings
	// show which tool holds which name, and a check reports a tool that
	// would be registered under another name than it was approved under
	// ([Renamed]).
	Registered string
}

// Fields holds one hash per part of a [Definition], each in the form
// "sha256:<hex>" over that part's canonical JSON. Comparing them says which
// part of a changed definition changed.
type Fields struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema string `json:"inputSchema"`
	Annotations string `json:"annotations"`
}

// Diff returns the JSON names of the parts whose hashes differ between f
// and g ("name", "description", "inputSchema", "annotations"), in that
// order.
func (f Fields) Diff(g Fields) []string {
	var d []string
	if f.Name != g.Name {
		d = append(d, "name")
	}
	if f.Description != g.Description {
		d = append(d, "description")
	}
	if f.InputSchema != g.InputSchema {
		d = append(d, "inputSchema")
	}
	if f.Annotations != g.Annotations {
		d = append(d, "annotations")
	}
	return d
}

// Fingerprint returns the definition's fingerprint, "sha256:" followed by
// 64 lowercase hex digits: the SHA-256 of the canonical JSON ([CanonicalJSON])
// of the object
//
//	{"annotations": A, "description": D, "inputSchema": S, "name": N}
//
// where A and S are the definition's JSON (null when absent). The fingerprint
// therefore ignores key order, whitespace, escaping choices and number
// spelling in the schema and annotations, and changes with anything else.
//
// The error names the tool and wraps an error of [CanonicalJSON] when the
// schema or annotations are not JSON or have no canonical form, or
// [ErrUnrepresentable] when the name or description is not valid UTF-8.
func Fingerprint(def Definition) (string, error) {
	fp, _, err := digest(def)
	return fp, err
}

// digest returns the definition's fingerprint and the hashes of its parts.
func digest(def Definition) (string, Fields, error) {
	var f Fields
	wrap := func(part string, err error) error {
		return fmt.Errorf("tool %q: %s: %w", def.Name, part, err)
	}
	if def.Name == "" {
		return "", f, errors.New("tool with an empty name")
	}
	if !utf8.ValidString(def.Name) {
		return "", f, wrap("name", fmt.Errorf("%w: invalid UTF-8", ErrUnrepresentable))
	}
	if !utf8.ValidString(def.Description) {
		return "", f, wrap("description", fmt.Errorf("%w: invalid UTF-8", ErrUnrepresentable))
	}
	name := appendString(nil, def.Name)
	desc := appendString(nil, def.Description)
	schema, err := canonicalOrNull(def.InputSchema)
	if err != nil {
		return "", f, wrap("inputSchema", err)
	}
	ann, err := canonicalOrNull(def.Annotations)
	if err != nil {
		return "", f, wrap("annotations", err)
	}

	// The parts are canonical and the keys are written in UTF-16 order, so
	// the object needs no second pass through CanonicalJSON.
	obj := make([]byte, 0, len(ann)+len(desc)+len(schema)+len(name)+64)
	obj = append(obj, `{"annotations":`...)
	obj = append(obj, ann...)
	obj = append(obj, `,"description":`...)
	obj = append(obj, desc...)
	obj = append(obj, `,"inputSchema":`...)
	obj = append(obj, schema...)
	obj = append(obj, `,"name":`...)
	obj = append(obj, name...)
	obj = append(obj, '}')

	f = Fields{
		Name:        hash(name),
		Description: hash(desc),
		InputSchema: hash(schema),
		Annotations: hash(ann),
	}
	return hash(obj), f, nil
}

func canonicalOrNull(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	return CanonicalJSON(raw)
}

const hashPrefix = "sha256:"

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hashPrefix + hex.EncodeToString(sum[:])
}

// validHash reports whether s has the form hash returns.
func validHash(s string) bool {
	if len(s) != len(hashPrefix)+2*sha256.Size || s[:len(hashPrefix)] != hashPrefix {
		return false
	}
	for _, c := range []byte(s[len(hashPrefix):]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
