package pins

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Errors returned by [CanonicalJSON], each wrapped with the byte offset
// where the problem was found.
var (
	// ErrSyntax means the input is not JSON as RFC 8259 defines it.
	ErrSyntax = errors.New("invalid json")
	// ErrDuplicateKey means an object names the same key twice (compared
	// after unescaping). Parsers disagree on which value wins, so such a
	// document has no single canonical form.
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrUnrepresentable means the input is well-formed JSON that RFC 8785
	// cannot represent, because it is not I-JSON (RFC 7493): a string with
	// invalid UTF-8 or an unpaired surrogate escape, or a number beyond the
	// range of an IEEE 754 double.
	ErrUnrepresentable = errors.New("json value has no canonical form")
	// ErrTooDeep means objects and arrays nest deeper than maxDepth.
	ErrTooDeep = errors.New("json nested too deeply")
)

// maxDepth bounds nesting, as encoding/json does, so that a hostile
// definition cannot make the recursion use unbounded stack.
const maxDepth = 10000

// CanonicalJSON returns the canonical form of the JSON document data, as
// RFC 8785 (JSON Canonicalization Scheme) defines it: no insignificant
// whitespace, object members sorted by the UTF-16 code units of their keys,
// numbers in the shortest form that ECMAScript's Number.prototype.toString
// produces, and strings with only the escapes the scheme requires.
//
// Two documents that encoding/json would decode to the same value have the
// same canonical form, with one caveat that follows from RFC 8785 itself:
// every number is read as an IEEE 754 double, so integers beyond 2^53 that
// differ only past a double's precision canonicalize alike (9007199254740993
// becomes 9007199254740992). There are no other known deviations from the RFC.
//
// CanonicalJSON returns an error wrapping [ErrSyntax], [ErrDuplicateKey],
// [ErrUnrepresentable] or [ErrTooDeep]; it never repairs its input.
func CanonicalJSON(data []byte) ([]byte, error) {
	p := parser{data: data}
	p.skipSpace()
	out, err := p.value(make([]byte, 0, len(data)))
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return nil, p.fail(ErrSyntax, "data after the top-level value")
	}
	return out, nil
}

// parser reads one JSON document and appends its canonical form.
type parser struct {
	data  []byte
	pos   int
	depth int
	str   []byte // scratch for decoding a string
}

func (p *parser) fail(sentinel error, detail string) error {
	return fmt.Errorf("%w at offset %d: %s", sentinel, p.pos, detail)
}

// skipSpace skips the four whitespace bytes RFC 8259 allows.
func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(dst []byte) ([]byte, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail(ErrSyntax, "unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(dst)
	case c == '[':
		return p.array(dst)
	case c == '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return appendString(dst, s), nil
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number(dst)
	default:
		return nil, p.fail(ErrSyntax, fmt.Sprintf("unexpected %q", c))
	}
}

func (p *parser) literal(dst []byte, word string) ([]byte, error) {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return nil, p.fail(ErrSyntax, "invalid literal")
	}
	p.pos += len(word)
	return append(dst, word...), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.fail(ErrTooDeep, fmt.Sprintf("more than %d levels", maxDepth))
	}
	return nil
}

// member is one object member: its unescaped key and where its canonical
// value sits in the object's scratch buffer.
type member struct {
	key        string
	offset     int // of the key in the input, for error messages
	start, end int
}

func (p *parser) object(dst []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	var members []member
	var vals []byte
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return append(dst, "{}"...), nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail(ErrSyntax, "expected an object key")
		}
		at := p.pos
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail(ErrSyntax, "expected ':' after an object key")
		}
		p.pos++
		p.skipSpace()
		start := len(vals)
		if vals, err = p.value(vals); err != nil {
			return nil, err
		}
		members = append(members, member{key: key, offset: at, start: start, end: len(vals)})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(ErrSyntax, "unterminated object")
		}
		if p.data[p.pos] == '}' {
			p.pos++
			break
		}
		if p.data[p.pos] != ',' {
			return nil, p.fail(ErrSyntax, "expected ',' or '}' in an object")
		}
		p.pos++
	}
	p.depth--

	// RFC 8785 section 3.2.3: members are ordered by their keys as arrays
	// of UTF-16 code units. A stable sort keeps duplicates in input order,
	// so the error names the second occurrence.
	slices.SortStableFunc(members, func(a, b member) int { return compareUTF16(a.key, b.key) })
	for i := 1; i < len(members); i++ {
		if members[i].key == members[i-1].key {
			return nil, fmt.Errorf("%w %q at offset %d", ErrDuplicateKey, members[i].key, members[i].offset)
		}
	}
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, vals[m.start:m.end]...)
	}
	return append(dst, '}'), nil
}

func (p *parser) array(dst []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	dst = append(dst, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return append(dst, ']'), nil
	}
	for {
		p.skipSpace()
		var err error
		if dst, err = p.value(dst); err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.fail(ErrSyntax, "unterminated array")
		}
		if p.data[p.pos] == ']' {
			p.pos++
			break
		}
		if p.data[p.pos] != ',' {
			return nil, p.fail(ErrSyntax, "expected ',' or ']' in an array")
		}
		p.pos++
		dst = append(dst, ',')
	}
	p.depth--
	return append(dst, ']'), nil
}

// string reads a string token and returns it unescaped. It refuses what
// I-JSON refuses: invalid UTF-8 and escapes of unpaired surrogates.
func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	p.str = p.str[:0]
	for {
		if p.pos >= len(p.data) {
			return "", p.fail(ErrSyntax, "unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(p.str), nil
		case c == '\\':
			if err := p.escape(); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", p.fail(ErrSyntax, "control character in a string")
		case c < utf8.RuneSelf:
			p.str = append(p.str, c)
			p.pos++
		default:
			r, n := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && n == 1 {
				return "", p.fail(ErrUnrepresentable, "invalid UTF-8 in a string")
			}
			p.str = append(p.str, p.data[p.pos:p.pos+n]...)
			p.pos += n
		}
	}
}

// escape reads one backslash escape and appends what it stands for.
func (p *parser) escape() error {
	if p.pos+1 >= len(p.data) {
		return p.fail(ErrSyntax, "unterminated escape")
	}
	c := p.data[p.pos+1]
	var b byte
	switch c {
	case '"', '\\', '/':
		b = c
	case 'b':
		b = '\b'
	case 'f':
		b = '\f'
	case 'n':
		b = '\n'
	case 'r':
		b = '\r'
	case 't':
		b = '\t'
	case 'u':
		return p.unicodeEscape()
	default:
		return p.fail(ErrSyntax, fmt.Sprintf("invalid escape \\%c", c))
	}
	p.str = append(p.str, b)
	p.pos += 2
	return nil
}

func (p *parser) unicodeEscape() error {
	r, ok := p.hex4()
	if !ok {
		return p.fail(ErrSyntax, "invalid \\u escape")
	}
	p.pos += 6
	if utf16.IsSurrogate(r) {
		if r >= 0xDC00 {
			return p.fail(ErrUnrepresentable, "unpaired low surrogate")
		}
		if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
			return p.fail(ErrUnrepresentable, "unpaired high surrogate")
		}
		lo, ok := p.hex4()
		if !ok {
			return p.fail(ErrSyntax, "invalid \\u escape")
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return p.fail(ErrUnrepresentable, "unpaired high surrogate")
		}
		p.pos += 6
		r = utf16.DecodeRune(r, lo)
	}
	p.str = utf8.AppendRune(p.str, r)
	return nil
}

// hex4 decodes the four hex digits of the \u escape at p.pos.
func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 6 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos+2 : p.pos+6] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number reads a number token by the RFC 8259 grammar and appends it in
// ECMAScript form.
func (p *parser) number(dst []byte) ([]byte, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.digits() == 0:
		return nil, p.fail(ErrSyntax, "invalid number")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, p.fail(ErrSyntax, "invalid number: no digits after '.'")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.fail(ErrSyntax, "invalid number: no digits in the exponent")
		}
	}
	f, err := strconv.ParseFloat(string(p.data[start:p.pos]), 64)
	if err != nil || math.IsInf(f, 0) {
		// The grammar was checked above, so the only failure left is range.
		// Underflow is not one: it rounds to zero, as in ECMAScript.
		p.pos = start
		return nil, p.fail(ErrUnrepresentable, "number out of the range of a double")
	}
	return appendNumber(dst, f), nil
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

// appendNumber appends f as ECMAScript's Number::toString does (ECMA-262,
// section 6.1.6.1.20), which RFC 8785 section 3.2.2.3 adopts. Go's shortest
// round-trip digits are the same digit string the ECMAScript algorithm
// picks; only where the decimal point goes and how the exponent is written
// differ, and that is redone here.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // covers -0, which ECMAScript prints as 0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±XX
	mant, exp, _ := bytes.Cut(e, []byte{'e'})
	x, _ := strconv.Atoi(string(exp))
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	// In ECMAScript's terms the value is 0.digits × 10^n.
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// appendString appends s, which must be valid UTF-8, as a JSON string with
// the escapes of RFC 8785 section 3.2.2.2: the two-character forms for
// quote, backslash, \b \t \n \f \r; \u00xx with lowercase hex for the other
// control characters; everything else as it is (including U+2028, U+2029,
// DEL and '/', which some encoders escape).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// compareUTF16 orders two valid UTF-8 strings as their UTF-16 encodings
// compare unit by unit. That differs from code point order only when a
// character above U+FFFF (a surrogate pair, 0xD800-0xDBFF first) meets one
// in U+E000-U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUnit(ra), firstUnit(rb)
			if ua == ub {
				// Both are surrogate pairs with the same high half: the
				// low halves order as the code points do.
				ua, ub = ra, rb
			}
			if ua < ub {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}

// firstUnit returns the first UTF-16 code unit of r's encoding.
func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	hi, _ := utf16.EncodeRune(r)
	return hi
}
