package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// decoder walks a parsed tree, collecting every problem instead of stopping
// at the first, so a user fixes a file in one pass rather than one error per
// run.
type decoder struct {
	name     string
	dir      string
	problems []*problem
	warnings []*problem
}

func (d *decoder) errorf(line int, path, format string, args ...any) {
	d.problems = append(d.problems, &problem{file: d.name, line: line, path: path, msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) warnf(line int, path, format string, args ...any) {
	d.warnings = append(d.warnings, &problem{file: d.name, line: line, path: path, msg: fmt.Sprintf(format, args...)})
}

// warningTexts renders the warnings in file order.
func (d *decoder) warningTexts() []string {
	if len(d.warnings) == 0 {
		return nil
	}
	sort.SliceStable(d.warnings, func(i, j int) bool { return d.warnings[i].line < d.warnings[j].line })
	out := make([]string, len(d.warnings))
	for i, w := range d.warnings {
		out[i] = w.Error()
	}
	return out
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinPath appends a key to a field path. Keys that would make the path
// ambiguous, such as a server named "a.b", are quoted.
func joinPath(base, key string) string {
	if !plainKeyRE.MatchString(key) {
		return base + "[" + strconv.Quote(key) + "]"
	}
	if base == "" {
		return key
	}
	return base + "." + key
}

func indexPath(base string, i int) string {
	return base + "[" + strconv.Itoa(i) + "]"
}

// entries returns a map's pairs with duplicates reported and dropped. Neither
// parser rejects a repeated key, and silently keeping one of two servers with
// the same name would hide a mistake.
func (d *decoder) entries(n *node, path string) []pair {
	out := make([]pair, 0, len(n.pairs))
	seen := make(map[string]int, len(n.pairs))
	for _, p := range n.pairs {
		if p.merge {
			d.errorf(p.keyLine, joinPath(path, p.key), "YAML merge keys are not supported; repeat the settings instead")
			continue
		}
		if first, dup := seen[p.key]; dup {
			d.errorf(p.keyLine, joinPath(path, p.key), "duplicate key (first defined on line %d)", first)
			continue
		}
		seen[p.key] = p.keyLine
		out = append(out, p)
	}
	return out
}

// unknownField reports a key the schema does not have, suggesting the known
// field it most likely meant when only case, '_' or '-' differ.
func (d *decoder) unknownField(p pair, path string, known []string) {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, k := range known {
		if norm(k) == norm(p.key) {
			d.errorf(p.keyLine, joinPath(path, p.key), "unknown field (did you mean %q?)", k)
			return
		}
	}
	d.errorf(p.keyLine, joinPath(path, p.key), "unknown field")
}

func (d *decoder) wantMap(n *node, path, what string) bool {
	if n.kind == mapNode {
		return true
	}
	d.errorf(n.line, path, "want %s, got %s", what, n.describe())
	return false
}

// mismatch reports a value of the wrong type. Unquoted YAML such as 8080 or
// true is not a string, which surprises people, so the message says how to
// fix it.
func (d *decoder) mismatch(n *node, path, want string) {
	hint := ""
	if want == "a string" && n.kind == scalarNode && n.typ != typeNull && n.typ != typeString {
		hint = " (put it in quotes)"
	}
	d.errorf(n.line, path, "want %s, got %s%s", want, n.describe(), hint)
}

// str reads a string value; want describes the expected value in errors.
func (d *decoder) str(n *node, path, want string) (string, bool) {
	if n.kind != scalarNode || n.typ != typeString {
		d.mismatch(n, path, want)
		return "", false
	}
	return n.text, true
}

// nonEmpty reads a string that must have content.
func (d *decoder) nonEmpty(n *node, path string) (string, bool) {
	s, ok := d.str(n, path, "a string")
	if ok && s == "" {
		d.errorf(n.line, path, "must not be empty")
		return "", false
	}
	return s, ok
}

func (d *decoder) boolean(n *node, path string) (bool, bool) {
	if n.kind != scalarNode || n.typ != typeBool {
		d.mismatch(n, path, "true or false")
		return false, false
	}
	// YAML also spells booleans True and TRUE.
	return strings.EqualFold(n.text, "true"), true
}

// strList reads a list of strings. An empty list comes back non-nil because
// for onlyTools "present but empty" means something different from absent.
func (d *decoder) strList(n *node, path string, nonEmpty bool) ([]string, bool) {
	if n.kind != listNode {
		d.mismatch(n, path, "a list of strings")
		return nil, false
	}
	out := make([]string, 0, len(n.items))
	ok := true
	for i, item := range n.items {
		var s string
		var good bool
		if nonEmpty {
			s, good = d.nonEmpty(item, indexPath(path, i))
		} else {
			s, good = d.str(item, indexPath(path, i), "a string")
		}
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// strMap reads a map of string values, checking each key with checkKey
// (which returns a complaint or "") and each value with checkValue.
func (d *decoder) strMap(n *node, path string, checkKey, checkValue func(string) string) (map[string]string, bool) {
	if !d.wantMap(n, path, "a map of strings") {
		return nil, false
	}
	out := make(map[string]string, len(n.pairs))
	before := len(d.problems)
	for _, p := range d.entries(n, path) {
		kp := joinPath(path, p.key)
		if checkKey != nil {
			if msg := checkKey(p.key); msg != "" {
				d.errorf(p.keyLine, kp, "%s", msg)
				continue
			}
		}
		v, good := d.str(p.value, kp, "a string")
		if !good {
			continue
		}
		if checkValue != nil {
			if msg := checkValue(v); msg != "" {
				d.errorf(p.value.line, kp, "%s", msg)
				continue
			}
		}
		out[p.key] = v
	}
	return out, before == len(d.problems)
}
