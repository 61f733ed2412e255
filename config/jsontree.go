package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
)

// parseJSON reads a JSON document into a node tree. It uses encoding/json
// rather than the YAML parser because YAML rejects valid JSON such as the
// "\/" escape; lines come from the decoder's byte offsets.
func parseJSON(name string, data []byte) (*node, error) {
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
		return nil, syntaxError(name, p.lines.line(start), "invalid JSON: unexpected data after the top-level value")
	}
	return root, nil
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

func (p *jsonParser) wrap(err error, start int) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read up to and including the bad one.
		return syntaxError(p.name, p.lines.line(int(se.Offset)-1), "invalid JSON: %s", se.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Point at the last byte: the end offset of a file ending in a
		// newline lies on an empty line past the content.
		return syntaxError(p.name, p.lines.line(len(p.data)-1), "invalid JSON: unexpected end of file")
	}
	return syntaxError(p.name, p.lines.line(start), "invalid JSON: %s", err.Error())
}

func (p *jsonParser) value(tok json.Token, line, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, syntaxError(p.name, line, "nested more than %d levels deep", maxDepth)
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
		return nil, syntaxError(p.name, line, "invalid JSON: unexpected %q", string(t))
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
	return nil, syntaxError(p.name, line, "invalid JSON: unexpected token")
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
			return nil, syntaxError(p.name, keyLine, "invalid JSON: object key is not a string")
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
