package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// parseJSON reads a JSON document into a node tree. It uses encoding/json
// rather than the YAML parser because YAML rejects valid JSON such as the
// "\/" escape; lines come from the decoder's byte offsets.
func parseJSON(name string, data []byte) (*node, error) {
	data = jsoncToJSON(data)
	p := jsonParser{name: name, data: data, lines: newLineIndex(data)}
	p.dec = json.NewDecoder(bytes.NewReader(data))
	p.dec.UseNumber()
	tok, line, err := p.next()
	if err != nil {
		return nil, err
	}
	root, err := p.value(tok, line, 0)
	if err != nil {
		return nil, err
	}
	start := p.skip(p.dec.InputOffset())
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, p.errorAt(start, "invalid JSON: unexpected data after the top-level value")
	}
	return root, nil
}

// jsoncToJSON turns JSON with comments (JSONC, as VS Code reads its
// settings and mcp.json files) into JSON: it blanks // and /* */ comments
// outside strings and trailing commas (a comma before a closing "}" or "]")
// with spaces, keeping every line break, so that every byte stays at its
// line and column and errors point into the file as written. Anything else
// is left for the JSON parser to judge.
func jsoncToJSON(data []byte) []byte {
	return blankTrailingCommas(blankJSONComments(data))
}

// blankTrailingCommas replaces with a space each comma outside strings
// that follows a value and is followed, past whitespace only, by "}" or
// "]". Comments must be blank already. A comma after "{", "[", ":" or
// another comma stays, for the parser to report where it is.
func blankTrailingCommas(data []byte) []byte {
	if !bytes.Contains(data, []byte(",")) {
		return data
	}
	var out []byte
	inString := false
	var prev byte // the last byte outside strings that is not whitespace
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
			continue
		case c == '"':
			inString = true
		case c == ',' && prev != 0 && strings.IndexByte("{[:,", prev) < 0:
			j := i + 1
			for j < len(data) && strings.IndexByte(" \t\r\n", data[j]) >= 0 {
				j++
			}
			if j < len(data) && (data[j] == '}' || data[j] == ']') {
				if out == nil {
					out = bytes.Clone(data)
				}
				out[i] = ' '
			}
		}
		if strings.IndexByte(" \t\r\n", c) < 0 {
			prev = c
		}
	}
	return orData(out, data)
}

// blankJSONComments replaces // and /* */ comments outside strings with
// spaces, keeping line breaks (see jsoncToJSON).
func blankJSONComments(data []byte) []byte {
	if !bytes.Contains(data, []byte("/")) {
		return data
	}
	var out []byte
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(data) && (data[i+1] == '/' || data[i+1] == '*'):
			end := len(data)
			if data[i+1] == '/' {
				if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
					end = i + j
				}
			} else {
				j := bytes.Index(data[i+2:], []byte("*/"))
				if j < 0 {
					// Unterminated: leave it for the parser to report.
					return orData(out, data)
				}
				end = i + 2 + j + 2
			}
			if out == nil {
				out = bytes.Clone(data)
			}
			for k := i; k < end; k++ {
				if out[k] != '\n' && out[k] != '\r' {
					out[k] = ' '
				}
			}
			i = end - 1
		}
	}
	return orData(out, data)
}

func orData(out, data []byte) []byte {
	if out == nil {
		return data
	}
	return out
}

type jsonParser struct {
	name  string
	data  []byte
	lines lineIndex
	dec   *json.Decoder
}

// skip moves past the whitespace and separators that the decoder consumes as
// part of the next token, so the result is where that token really starts.
func (p *jsonParser) skip(off int64) int {
	i := int(off)
	for i < len(p.data) && strings.IndexByte(" \t\r\n,:", p.data[i]) >= 0 {
		i++
	}
	return i
}

// next returns the next token and the line it starts on.
func (p *jsonParser) next() (json.Token, int, error) {
	start := p.skip(p.dec.InputOffset())
	tok, err := p.dec.Token()
	if err != nil {
		return nil, 0, p.wrap(err, start)
	}
	return tok, p.lines.line(start), nil
}

// errorAt reports a syntax error at a byte offset, as line and column.
func (p *jsonParser) errorAt(off int, format string, args ...any) error {
	return syntaxError(p.name, p.lines.line(off), p.lines.col(p.data, off), format, args...)
}

func (p *jsonParser) wrap(err error, start int) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// While streaming tokens the decoder counts offsets from the start
		// of the current value for some errors and of the input for
		// others; validating the whole input gives one that always counts
		// the bytes read up to and including the bad one.
		var whole json.RawMessage
		if err := json.Unmarshal(p.data, &whole); errors.As(err, &se) {
			return p.errorAt(int(se.Offset)-1, "invalid JSON: %s", se.Error())
		}
		return p.errorAt(start, "invalid JSON: %s", se.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Point just past the last non-blank byte: the end offset of a
		// file ending in a newline lies on an empty line past the content.
		end := len(bytes.TrimRight(p.data, " \t\r\n"))
		return p.errorAt(end, "invalid JSON: unexpected end of file")
	}
	return p.errorAt(start, "invalid JSON: %s", err.Error())
}

func (p *jsonParser) value(tok json.Token, line, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, syntaxError(p.name, line, 0, "nested more than %d levels deep", maxDepth)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return p.object(line, depth)
		}
		if t == '[' {
			return p.array(line, depth)
		}
		// The decoder only returns a closing delimiter where one is valid,
		// so reaching here means a caller lost track of nesting.
		return nil, syntaxError(p.name, line, 0, "invalid JSON: unexpected %q", string(t))
	case string:
		return &node{kind: scalarNode, line: line, typ: typeString, text: t}, nil
	case json.Number:
		typ := typeInt
		if strings.ContainsAny(string(t), ".eE") {
			typ = typeFloat
		}
		return &node{kind: scalarNode, line: line, typ: typ, text: string(t)}, nil
	case bool:
		text := "false"
		if t {
			text = "true"
		}
		return &node{kind: scalarNode, line: line, typ: typeBool, text: text}, nil
	case nil:
		return &node{kind: scalarNode, line: line, typ: typeNull, text: "null"}, nil
	}
	return nil, syntaxError(p.name, line, 0, "invalid JSON: unexpected token")
}

func (p *jsonParser) object(line, depth int) (*node, error) {
	out := &node{kind: mapNode, line: line}
	for {
		tok, keyLine, err := p.next()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim('}') {
			return out, nil
		}
		key, ok := tok.(string)
		if !ok {
			return nil, syntaxError(p.name, keyLine, 0, "invalid JSON: object key is not a string")
		}
		vtok, vline, err := p.next()
		if err != nil {
			return nil, err
		}
		v, err := p.value(vtok, vline, depth+1)
		if err != nil {
			return nil, err
		}
		out.pairs = append(out.pairs, pair{key: key, keyLine: keyLine, value: v})
	}
}

func (p *jsonParser) array(line, depth int) (*node, error) {
	out := &node{kind: listNode, line: line}
	for {
		tok, itemLine, err := p.next()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim(']') {
			return out, nil
		}
		v, err := p.value(tok, itemLine, depth+1)
		if err != nil {
			return nil, err
		}
		out.items = append(out.items, v)
	}
}

// lineIndex maps byte offsets to 1-based line numbers.
type lineIndex []int

func newLineIndex(data []byte) lineIndex {
	starts := lineIndex{0}
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

func (l lineIndex) line(off int) int {
	if off < 0 {
		off = 0
	}
	// The number of line starts at or before off is the line number.
	return sort.Search(len(l), func(i int) bool { return l[i] > off })
}

// col returns the 1-based column of the byte at off, counted in characters
// as editors count them (a tab is one column).
func (l lineIndex) col(data []byte, off int) int {
	off = max(0, min(off, len(data)))
	start := l[l.line(off)-1]
	return utf8.RuneCount(data[start:off]) + 1
}
