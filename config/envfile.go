package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// maxEnvFile bounds the size of an env file; real ones are a few lines.
const maxEnvFile = 1 << 20

// readEnvFile reads a dotenv file: KEY=VALUE lines, blank lines and "#"
// comments, an optional "export " before the key, and values either bare
// (trimmed, with a " #" comment after them removed), in single quotes
// (taken literally) or in double quotes (with \n, \r, \t, \" and \\
// escapes). Quoted values may span lines. Nothing in a value is expanded.
// A later line for the same key wins, as in a shell.
func readEnvFile(path string) (map[string]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, envFileError(path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if info.Size() > maxEnvFile {
		return nil, fmt.Errorf("%s: larger than %d bytes; is this an env file?", path, maxEnvFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, envFileError(path, err)
	}
	return parseEnvFile(path, string(data))
}

func envFileError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot read %s: file does not exist", path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot read %s: %w", path, err)
}

// parseEnvFile parses the text of an env file; name prefixes error
// messages, which never show a value.
func parseEnvFile(name, text string) (map[string]string, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	out := map[string]string{}
	line := 1
	fail := func(l int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", name, l, fmt.Sprintf(format, args...))
	}
	for len(text) > 0 {
		var raw string
		raw, text, _ = strings.Cut(text, "\n")
		start := line
		line++
		s := strings.TrimLeft(raw, " \t")
		if s == "" || s[0] == '#' {
			continue
		}
		if rest, ok := strings.CutPrefix(s, "export "); ok {
			s = strings.TrimLeft(rest, " \t")
		}
		key, value, ok := strings.Cut(s, "=")
		key = strings.TrimRight(key, " \t")
		if !ok {
			return nil, fail(start, "want KEY=VALUE")
		}
		if !validVarName(key) {
			return nil, fail(start, "invalid variable name %q (letters, digits and '_', not starting with a digit)", key)
		}
		value = strings.TrimLeft(value, " \t")
		var v string
		if value != "" && (value[0] == '"' || value[0] == '\'') {
			quote := value[0]
			body := value[1:]
			// A quoted value may go on over the next lines.
			for {
				end := closingQuote(body, quote)
				if end >= 0 {
					after := strings.TrimLeft(body[end+1:], " \t")
					if after != "" && after[0] != '#' {
						return nil, fail(line-1, "unexpected text after the closing quote")
					}
					body = body[:end]
					break
				}
				if text == "" {
					return nil, fail(start, "the quoted value of %s is never closed", key)
				}
				var next string
				next, text, _ = strings.Cut(text, "\n")
				line++
				body += "\n" + next
			}
			if quote == '"' {
				v = unescapeDouble(body)
			} else {
				v = body
			}
		} else {
			if i := strings.Index(value, " #"); i >= 0 {
				value = value[:i]
			}
			if i := strings.Index(value, "\t#"); i >= 0 {
				value = value[:i]
			}
			v = strings.TrimRight(value, " \t")
		}
		if strings.ContainsRune(v, 0) {
			return nil, fail(start, "the value of %s contains NUL", key)
		}
		out[key] = v
	}
	return out, nil
}

// closingQuote finds the quote that ends a value, skipping escaped double
// quotes; -1 when the text holds none.
func closingQuote(s string, quote byte) int {
	for i := 0; i < len(s); i++ {
		switch {
		case quote == '"' && s[i] == '\\':
			i++
		case s[i] == quote:
			return i
		}
	}
	return -1
}

func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '"', '\\':
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
