package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// nodeKind tells maps, lists and single values apart in the parsed tree.
type nodeKind int

const (
	mapNode nodeKind = iota
	listNode
	scalarNode
)

// Scalar types, named as a user would read them in an error message.
const (
	typeString = "string"
	typeInt    = "integer"
	typeFloat  = "number"
	typeBool   = "bool"
	typeNull   = "null"
)

// node is the parsed file with a line on every value. Both YAML and JSON are
// converted to it so that the schema code is written once and reports lines
// the same way whatever the input format.
type node struct {
	kind  nodeKind
	line  int
	typ   string // scalar type: one of the type* constants or a YAML tag
	text  string // scalar text as written, after unquoting
	block bool   // a YAML block scalar (| or >): its text starts on the line after line
	pairs []pair
	items []*node
}

// pair is one map entry; keys keep their own line because "unknown field"
// points at the key, not at its value.
type pair struct {
	key     string
	keyLine int
	merge   bool // a YAML "<<" merge key, which gets its own message
	value   *node
}

// describe names what a node is for "got ..." in error messages.
func (n *node) describe() string {
	switch n.kind {
	case mapNode:
		return "a map"
	case listNode:
		return "a list"
	}
	switch n.typ {
	case typeNull:
		return "null"
	case typeString:
		return fmt.Sprintf("string %q", n.text)
	case typeInt, typeFloat:
		return fmt.Sprintf("%s %s", n.typ, n.text)
	case typeBool:
		return n.text
	}
	return fmt.Sprintf("value %q with YAML tag %q", n.text, n.typ)
}

// syntaxError is a parser failure; it is reported with the file name, line
// and column but without a field path, since the file could not be read into
// fields. A zero line or column is left out.
func syntaxError(name string, line, col int, format string, args ...any) error {
	return &problem{file: name, line: line, col: col, msg: fmt.Sprintf(format, args...)}
}

// maxNodes bounds the tree built from a YAML document. Aliases let a tiny file
// describe an exponentially large tree, and nothing legitimate comes close.
const maxNodes = 100000

// maxDepth bounds nesting; it also stops an alias that refers to itself.
const maxDepth = 64

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML reads a single YAML document into a node tree. A nil tree with a
// nil error means the document was empty.
func parseYAML(name string, data []byte) (root *node, err error) {
	defer func() {
		// The YAML parser is third-party code fed with untrusted input; a
		// panic there must become an ordinary error, not a crashed CLI.
		if r := recover(); r != nil {
			root, err = nil, syntaxError(name, 0, 0, "invalid YAML: %v", r)
		}
	}()
	if err := checkYAMLText(name, data); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlError(name, data, err)
	}
	// A second document would otherwise be dropped without a word. Empty
	// ones, such as a trailing "---", hold nothing to lose.
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, yamlError(name, data, err)
		}
		empty := len(extra.Content) == 0 ||
			(extra.Content[0].Kind == yaml.ScalarNode && extra.Content[0].ShortTag() == "!!null" && extra.Content[0].Value == "")
		if !empty {
			return nil, syntaxError(name, extra.Line, extra.Column, "a second YAML document starts here; toolwire reads one document per file")
		}
	}
	c := yamlConverter{name: name}
	return c.convert(&doc, 0)
}

// yamlParserProblems are the messages of the YAML parser proper, as opposed
// to its scanner. The library reports their line 0-based and leaves the line
// out entirely when it is the first, while scanner lines are 1-based.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

var yamlAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// yamlError turns the parser's "yaml: line N: msg" into the package's format
// with a 1-based line.
func yamlError(name string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	switch {
	case slices.Contains(yamlParserProblems, msg):
		line++
	case yamlAnchorRE.MatchString(msg):
		// The library gives no line for an alias to a missing anchor.
		alias := "*" + yamlAnchorRE.FindStringSubmatch(msg)[1]
		if i := bytes.Index(data, []byte(alias)); i >= 0 {
			lines := newLineIndex(data)
			return syntaxError(name, lines.line(i), lines.col(data, i), "invalid YAML: %s", msg)
		}
	case line == 0:
		line = 1
	}
	// At the end of input the library counts one line past the last, which
	// an editor cannot jump to.
	if last := bytes.Count(data, []byte("\n")) + 1; line >= last && (len(data) == 0 || data[len(data)-1] == '\n') {
		line = max(last-1, 1)
	} else if line > last {
		line = last
	}
	return syntaxError(name, line, yamlColumn(lineText(data, line), msg), "invalid YAML: %s", msg)
}

// checkYAMLText finds what the YAML reader would reject, because its errors
// for these carry no line at all.
func checkYAMLText(name string, data []byte) error {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return syntaxError(name, line, col, "invalid YAML: the file is not valid UTF-8")
		case r == '\n':
			line++
			col = 0
		case r == '\t' || r == '\r' || r == 0x85:
		case r < 0x20 || (0x7f <= r && r < 0xa0) || r == 0xfffe || r == 0xffff:
			return syntaxError(name, line, col, "invalid YAML: control character %U is not allowed", r)
		}
		i += size
		col++
	}
	return nil
}

type yamlConverter struct {
	name  string
	count int
}

func (c *yamlConverter) convert(n *yaml.Node, depth int) (*node, error) {
	c.count++
	if c.count > maxNodes {
		return nil, syntaxError(c.name, n.Line, n.Column, "document too large (more than %d values after expanding aliases)", maxNodes)
	}
	if depth > maxDepth {
		return nil, syntaxError(c.name, n.Line, n.Column, "nested more than %d levels deep", maxDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.convert(n.Content[0], depth)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, syntaxError(c.name, n.Line, n.Column, "invalid YAML: unknown alias %q", n.Value)
		}
		out, err := c.convert(n.Alias, depth+1)
		if out != nil {
			// The value is used here, so errors about it belong here too.
			out.line = n.Line
		}
		return out, err
	case yaml.MappingNode:
		out := &node{kind: mapNode, line: n.Line}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
				return nil, syntaxError(c.name, k.Line, k.Column, "map keys must be plain names")
			}
			val, err := c.convert(v, depth+1)
			if err != nil {
				return nil, err
			}
			out.pairs = append(out.pairs, pair{key: k.Value, keyLine: k.Line, merge: k.ShortTag() == "!!merge", value: val})
		}
		return out, nil
	case yaml.SequenceNode:
		out := &node{kind: listNode, line: n.Line}
		for _, item := range n.Content {
			v, err := c.convert(item, depth+1)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, v)
		}
		return out, nil
	case yaml.ScalarNode:
		out := &node{kind: scalarNode, line: n.Line, text: n.Value, block: n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0}
		switch tag := n.ShortTag(); tag {
		case "!!str":
			out.typ = typeString
		case "!!int":
			out.typ = typeInt
		case "!!float":
			out.typ = typeFloat
		case "!!bool":
			out.typ = typeBool
		case "!!null":
			out.typ = typeNull
		default:
			out.typ = tag
		}
		return out, nil
	}
	return nil, syntaxError(c.name, n.Line, n.Column, "invalid YAML: unexpected node")
}
