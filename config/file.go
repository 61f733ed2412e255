package config

import (
	"bytes"
	"os"
	"path/filepath"
	"time"
)

// File is a loaded configuration file.
type File struct {
	Path     string   // as given to Load ("" for Parse with no name)
	Dialect  string   // "toolwire" or "mcpServers"
	Servers  []Server // declaration order
	Audit    Audit
	Warnings []string
}

// Audit configures the JSON Lines audit log.
type Audit struct {
	File         string // absolute when the file was loaded with Load; "" means no audit log
	LogArguments bool
}

// Server is one MCP server as the configuration describes it. String fields
// may still hold ${VAR} placeholders; ExpandServer resolves them.
type Server struct {
	Name      string
	Line      int    // line of the server's key
	Transport string // "stdio" or "http"

	Command string
	Args    []string
	Env     map[string]string
	Cwd     string

	URL         string
	Headers     map[string]string
	BearerToken string

	Prefix        string            // "" means the server name
	DefaultTier   string            // always set after load: "read" when absent
	TierOverrides map[string]string // original tool name -> tier
	OnlyTools     []string          // nil = all tools; non-nil empty = no tools
	ExcludeTools  []string
	Timeout       time.Duration // 0 = library default
	Required      bool
}

// Dialect names.
const (
	dialectToolwire   = "toolwire"
	dialectMCPServers = "mcpServers"
)

// Load reads the configuration file at path. Relative paths inside it are
// resolved against the file's directory, made absolute so that they stay
// right whatever directory a server is later started in.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return Parse(path, data, dir)
}

// Parse decodes a configuration from data. The name is used in error
// messages and as File.Path; dir is the directory that relative paths in the
// file are resolved against, and "" leaves them as written. The returned
// error joins every problem found, in file order, one per line.
func Parse(name string, data []byte, dir string) (*File, error) {
	// Editors on Windows like to start files with a byte order mark, which
	// encoding/json rejects.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	root, err := parseTree(name, data)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, syntaxError(name, 0, "file is empty")
	}
	d := &decoder{name: name, dir: dir}
	f := &File{Path: name}
	if root.kind != mapNode {
		return nil, &problem{file: name, line: root.line, msg: "want a map with a \"servers\" or \"mcpServers\" key at the top level, got " + root.describe()}
	}
	switch {
	case hasKey(root, "mcpServers"):
		f.Dialect = dialectMCPServers
		d.hostFile(root, f)
	case hasKey(root, "servers"):
		f.Dialect = dialectToolwire
		d.toolwireFile(root, f)
	default:
		return nil, &problem{file: name, line: root.line,
			msg: `want a "servers" map (toolwire) or an "mcpServers" map (Claude Desktop, Claude Code, Cursor) at the top level`}
	}
	if err := joinProblems(d.problems); err != nil {
		return nil, err
	}
	f.Warnings = d.warningTexts()
	return f, nil
}

// parseTree picks the parser by content rather than by file name, because
// host files are JSON under many names. Anything starting with "{" is JSON
// and nothing else: falling back to YAML would quietly accept JSON that the
// host application itself rejects, such as a trailing comma.
func parseTree(name string, data []byte) (*node, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, nil
	}
	if trimmed[0] == '{' {
		return parseJSON(name, data)
	}
	return parseYAML(name, data)
}

func hasKey(n *node, key string) bool {
	for _, p := range n.pairs {
		if p.key == key {
			return true
		}
	}
	return false
}
