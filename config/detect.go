package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/toolwire/toolwire/internal/spelling"
)

// shapesAccepted is the list of shapes in the error for a file that has
// none of them.
const shapesAccepted = `want one of: a "servers" map (toolwire's file, or VS Code's .vscode/mcp.json with "type" and "inputs"); ` +
	`an "mcpServers" map (Claude Desktop, Claude Code, Cursor); a list of servers, each with "name"; ` +
	`a single server with "name"; or a map from server name to settings with "command" or "url"`

// serverKeys are the fields that make a map look like one server.
var serverKeys = []string{"command", "url", "httpUrl", "sseUrl", "type", "transport"}

// vscodeServerMarkers and toolwireServerMarkers are the fields of a server
// under "servers" that only one of the two dialects has; they decide which
// of the two a "servers" file is.
var (
	vscodeServerMarkers   = []string{"type"}
	toolwireServerMarkers = []string{
		"transport", "bearerToken", "prefix", "defaultTier", "tierOverrides",
		"onlyTools", "excludeTools", "timeout", "required", "roots", "protocol", "sandbox",
	}
)

// detect tells the shapes apart by their top-level structure:
//
//   - a map with "mcpServers": the host file of Claude Desktop, Claude Code,
//     Cursor and others;
//   - a map with "servers": VS Code's when "inputs" is a list or a server
//     has "type", toolwire's when a field only toolwire's file has is
//     there (a server's "defaultTier", say, or a "security" section); a
//     file with fields of both is an error naming them. With neither, a
//     JSON file is VS Code's, since VS Code could have written it (and
//     then its tools ask before they write: fail-closed), and a YAML file
//     is toolwire's, since no host writes YAML;
//   - a list: a list of servers, each with "name";
//   - a map with a server field ("command", "url", "httpUrl", "sseUrl",
//     "type" or "transport") holding a plain value: a single server, named
//     by its "name";
//   - a map whose values include a map with a server field: a map from
//     server name to settings.
//
// It returns the dialect and why it was chosen, as [File.DialectReason]
// says. isJSON says the file is JSON (or JSONC) rather than YAML.
func detect(name string, root *node, isJSON bool) (dialect, reason string, err error) {
	switch root.kind {
	case listNode:
		if len(root.items) == 0 {
			return DialectList, "the file is an empty list", nil
		}
		for _, it := range root.items {
			if it.kind == mapNode {
				return DialectList, "the file is a list of maps", nil
			}
		}
	case mapNode:
		switch {
		case hasKey(root, "mcpServers"):
			return DialectMCPServers, `it has an "mcpServers" map`, nil
		case hasKey(root, "servers"):
			return serversDialect(name, root, isJSON)
		case isSingleServer(root):
			return DialectSingle, "it has a server's fields at the top level", nil
		}
		for _, p := range root.pairs {
			if looksLikeServer(p.value) {
				return DialectNamedMap, fmt.Sprintf("%q holds a server's fields", p.key), nil
			}
		}
	}
	msg := "no configuration found: " + shapesAccepted
	if root.kind == mapNode {
		for _, p := range root.pairs {
			for _, want := range []string{"servers", "mcpServers"} {
				if p.key != want && spelling.Distance(normKey(p.key), normKey(want)) <= 2 {
					return "", "", &problem{file: name, line: p.keyLine, path: joinPath("", p.key), msg: fmt.Sprintf("unknown key (did you mean %q?); %s", want, msg)}
				}
			}
		}
	} else {
		msg = "no configuration found in " + root.describe() + ": " + shapesAccepted
	}
	return "", "", &problem{file: name, line: root.line, msg: msg}
}

func normKey(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
}

func looksLikeServer(n *node) bool {
	if n == nil || n.kind != mapNode {
		return false
	}
	for _, k := range serverKeys {
		if hasKey(n, k) {
			return true
		}
	}
	return false
}

// isSingleServer reports whether the top-level map is one server's
// settings: it has a server field with a plain value (a map under "url"
// would rather be a server named "url").
func isSingleServer(n *node) bool {
	for _, k := range serverKeys {
		if p, ok := lookup(n, k); ok && p.value.kind != mapNode {
			return true
		}
	}
	return false
}

// toolwireSections are the top-level sections only toolwire's file has.
var toolwireSections = []string{"audit", "gateway", "security", "agent", "store"}

// serversDialect decides whether a file with "servers" is VS Code's or
// toolwire's, from the fields only one of them has, and with none from
// the syntax: JSON is VS Code's (fail-closed), YAML toolwire's.
func serversDialect(name string, root *node, isJSON bool) (string, string, error) {
	vscode := map[string]int{}   // field -> first line
	toolwire := map[string]int{} // field -> first line
	note := func(m map[string]int, key string, line int) {
		if _, ok := m[key]; !ok {
			m[key] = line
		}
	}
	var serversLine int
	for _, p := range root.pairs {
		switch p.key {
		case "inputs":
			switch p.value.kind {
			case listNode:
				note(vscode, "inputs", p.keyLine)
			case mapNode:
				note(toolwire, "inputs", p.keyLine)
			}
		case "audit", "gateway", "security", "agent", "store":
			note(toolwire, p.key, p.keyLine)
		case "servers":
			if serversLine == 0 {
				serversLine = p.keyLine
			}
			if p.value.kind != mapNode {
				continue
			}
			for _, s := range p.value.pairs {
				if s.value.kind != mapNode {
					continue
				}
				for _, f := range s.value.pairs {
					switch {
					case slices.Contains(vscodeServerMarkers, f.key):
						note(vscode, f.key, f.keyLine)
					case slices.Contains(toolwireServerMarkers, f.key):
						note(toolwire, f.key, f.keyLine)
					}
				}
			}
		}
	}
	switch {
	case len(vscode) > 0 && len(toolwire) > 0:
		return "", "", &problem{file: name, line: serversLine, path: "servers", msg: fmt.Sprintf(
			"mixes VS Code fields (%s) with toolwire fields (%s); write the file in one dialect: "+
				`VS Code's uses "type" and an "inputs" list, toolwire's uses "transport" and its own fields`,
			describeFields(vscode), describeFields(toolwire))}
	case len(vscode) > 0:
		return DialectVSCode, "it has VS Code's " + firstField(vscode), nil
	case len(toolwire) > 0:
		return DialectToolwire, "it has toolwire's " + firstField(toolwire), nil
	case isJSON:
		return DialectVSCode, `a JSON file with "servers" and no field only toolwire's file has is read as VS Code could have written it: its tools ask before they write (fail-closed)`, nil
	}
	return DialectToolwire, `a YAML file with "servers" (no host application writes YAML)`, nil
}

// firstField names the field of m on the first line: `"type" on line 4`.
func firstField(m map[string]int) string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] < m[keys[j]] })
	return fmt.Sprintf("%q on line %d", keys[0], m[keys[0]])
}

func describeFields(m map[string]int) string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] < m[keys[j]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q on line %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
