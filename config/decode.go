package config

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/toolwire/toolwire/internal/spelling"
)

// decoder walks a parsed tree, collecting every problem instead of stopping
// at the first, so a user fixes a file in one pass rather than one error per
// run.
type decoder struct {
	name     string
	dir      string
	problems []*problem
	warnings []*problem

	// host is set for the dialects of other applications, whose files
	// may use ${workspaceFolder} (resolved to workspace at load) and
	// ${userHome}.
	host      bool
	workspace string

	// inputsAllowed is set for the dialects that declare inputs; inputs
	// holds the declared ones usable as ${input:ID}, and otherInputs the
	// IDs of declared inputs of kinds toolwire cannot ask for, by type.
	inputsAllowed bool
	inputs        map[string]Input
	otherInputs   map[string]string
}

func (d *decoder) errorf(line int, path, format string, args ...any) {
	d.problems = append(d.problems, &problem{file: d.name, line: line, path: path, msg: fmt.Sprintf(format, args...)})
}

// warnf records a warning about the file as a whole.
func (d *decoder) warnf(line int, path, format string, args ...any) {
	d.warnings = append(d.warnings, &problem{file: d.name, line: line, path: path, field: path, msg: fmt.Sprintf(format, args...)})
}

// serverWarnf records a warning about one server's field.
func (d *decoder) serverWarnf(st *serverState, line int, field, format string, args ...any) {
	d.warnings = append(d.warnings, &problem{file: d.name, line: line, path: joinPath(st.path, field),
		server: st.s.Name, field: field, msg: fmt.Sprintf(format, args...)})
}

// warningTexts renders the warnings in file order, as text and in parts.
func (d *decoder) warningTexts() ([]string, []Warning) {
	if len(d.warnings) == 0 {
		return nil, nil
	}
	sort.SliceStable(d.warnings, func(i, j int) bool { return d.warnings[i].line < d.warnings[j].line })
	texts := make([]string, len(d.warnings))
	details := make([]Warning, len(d.warnings))
	for i, w := range d.warnings {
		texts[i] = w.Error()
		details[i] = Warning{Line: w.line, Server: w.server, Field: w.field, Message: w.msg, Text: texts[i]}
	}
	return texts, details
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
	return d.uniqueEntries(n, path, func(key string, first int) string {
		return fmt.Sprintf("duplicate key (first defined on line %d)", first)
	})
}

// serverEntries is entries for a map from server name to settings, where a
// repeated key is a repeated server name.
func (d *decoder) serverEntries(n *node, path string) []pair {
	return d.uniqueEntries(n, path, duplicateServer)
}

func duplicateServer(name string, first int) string {
	return fmt.Sprintf("duplicate server name %q (first defined on line %d)", name, first)
}

func (d *decoder) uniqueEntries(n *node, path string, dupMsg func(key string, first int) string) []pair {
	out := make([]pair, 0, len(n.pairs))
	seen := make(map[string]int, len(n.pairs))
	for _, p := range n.pairs {
		if p.merge {
			d.errorf(p.keyLine, joinPath(path, p.key), "YAML merge keys are not supported; repeat the settings instead")
			continue
		}
		if first, dup := seen[p.key]; dup {
			d.errorf(p.keyLine, joinPath(path, p.key), "%s", dupMsg(p.key, first))
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
	if k := closest(p.key, known); k != "" {
		d.errorf(p.keyLine, joinPath(path, p.key), "unknown field (did you mean %q?)", k)
		return
	}
	d.errorf(p.keyLine, joinPath(path, p.key), "unknown field")
}

// closest returns the known name a key most likely misspells: one that
// differs only in case, '_' or '-', else the nearest by edit distance when
// that is small for the key's length; "" when none is close.
func closest(key string, known []string) string {
	nk := normKey(key)
	for _, k := range known {
		if normKey(k) == nk {
			return k
		}
	}
	limit := 1
	if len(nk) >= 6 {
		limit = 2
	}
	if len(nk) < 3 {
		return ""
	}
	best, bestDist := "", limit+1
	for _, k := range known {
		if dist := spelling.Distance(nk, normKey(k)); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
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

// choice reads a string that must be one of allowed; an unknown one is
// an error naming the field (what, as in "unknown grant") and want, the
// choices as a person reads them.
func (d *decoder) choice(n *node, path, what, want string, allowed ...string) (string, bool) {
	s, ok := d.nonEmpty(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		d.errorf(n.line, path, "unknown %s %q (want %s)", what, s, want)
		return "", false
	}
	return s, true
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
// (which returns a complaint or "") and passing each value through value,
// which reports its own problems and returns the value to keep.
func (d *decoder) strMap(n *node, path string, checkKey func(string) string, value func(line int, path, v string) (string, bool)) (map[string]string, bool) {
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
		if value != nil {
			if v, good = value(p.value.line, kp, v); !good {
				continue
			}
		}
		out[p.key] = v
	}
	return out, before == len(d.problems)
}
