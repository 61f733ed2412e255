package config

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// The YAML library reports a line but never a column, so the column is
// found again from the message and the text of that line: the character the
// message is about when the line shows it (the '@' that cannot start a
// token, the second ':' of "a: b: c", the backslash of a bad escape, the
// bracket that is never closed), else the first character on the line.

// lineText returns line n (1-based) of data without its line break.
func lineText(data []byte, n int) []byte {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return nil
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return bytes.TrimSuffix(data, []byte("\r"))
}

// yamlColumn returns the 1-based column for a YAML error message on a line.
func yamlColumn(line []byte, msg string) int {
	s := string(line)
	pos := -1
	switch {
	case strings.Contains(msg, "cannot start any token"):
		pos = tokenStartProblem(s)
	case strings.Contains(msg, "mapping values are not allowed"):
		pos = mappingColon(s)
	case strings.Contains(msg, "unknown escape character"):
		pos = badEscape(s)
	case strings.Contains(msg, "tab character"):
		pos = strings.IndexByte(s, '\t')
	case strings.Contains(msg, "expected ',' or ']'"):
		pos = unclosed(s, '[', ']')
	case strings.Contains(msg, "expected ',' or '}'"):
		pos = unclosed(s, '{', '}')
	case strings.Contains(msg, "end of stream"):
		pos = unterminatedQuote(s)
	case strings.Contains(msg, "expected alphabetic or numeric character"):
		pos = strings.IndexAny(s, "*&")
	case strings.Contains(msg, "expected '-' indicator"):
		if i := firstNonBlank(s); i >= 0 && s[i] == '-' {
			pos = i
		}
	}
	if pos < 0 {
		pos = firstNonBlank(s)
	}
	if pos < 0 {
		return 1
	}
	return utf8.RuneCountInString(s[:pos]) + 1
}

func firstNonBlank(s string) int {
	return strings.IndexFunc(s, func(r rune) bool { return r != ' ' && r != '\t' })
}

// scanOutsideQuotes calls f for every byte of s that is not inside a quoted
// scalar, stopping when f returns true; it returns that byte's index or -1.
func scanOutsideQuotes(s string, f func(i int) bool) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case (c == '"' || c == '\'') && (i == 0 || strings.IndexByte(" \t[{,:-", s[i-1]) >= 0):
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return -1
		case f(i):
			return i
		}
	}
	return -1
}

// tokenStartProblem finds a character no YAML token may start with.
func tokenStartProblem(s string) int {
	if i := scanOutsideQuotes(s, func(i int) bool {
		c := s[i]
		starts := i == 0 || strings.IndexByte(" \t[{,", s[i-1]) >= 0
		return starts && (c == '@' || c == '`' || (c == '%' && i > 0))
	}); i >= 0 {
		return i
	}
	if i := firstNonBlank(s); i > 0 && strings.Contains(s[:i], "\t") {
		return strings.IndexByte(s, '\t')
	}
	return -1
}

// mappingColon finds the ':' that makes a second mapping value on the line,
// or the only one when the line as a whole is misplaced.
func mappingColon(s string) int {
	var colons []int
	scanOutsideQuotes(s, func(i int) bool {
		if s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t') {
			colons = append(colons, i)
		}
		return false
	})
	switch len(colons) {
	case 0:
		return -1
	case 1:
		return colons[0]
	}
	return colons[1]
}

// badEscape finds a backslash in a double-quoted scalar that starts no
// escape YAML knows.
func badEscape(s string) int {
	in := false
	for i := 0; i < len(s); i++ {
		switch {
		case !in && s[i] == '"':
			in = true
		case in && s[i] == '"':
			in = false
		case in && s[i] == '\\':
			if i+1 < len(s) && strings.IndexByte("0abt\tnvfre \"/\\N_LPxuU", s[i+1]) < 0 {
				return i
			}
			i++
		}
	}
	return -1
}

// unclosed finds the last opening bracket on the line that the line does
// not close.
func unclosed(s string, open, close byte) int {
	var stack []int
	scanOutsideQuotes(s, func(i int) bool {
		switch s[i] {
		case open:
			stack = append(stack, i)
		case close:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
		return false
	})
	if len(stack) > 0 {
		return stack[len(stack)-1]
	}
	return strings.IndexByte(s, open)
}

// unterminatedQuote finds the opening quote of a scalar the line does not
// end.
func unterminatedQuote(s string) int {
	var quote byte
	start := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote, start = c, i
		}
	}
	if quote != 0 {
		return start
	}
	return -1
}
