package config

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is a loaded configuration file.
type File struct {
	Path    string // as given to Load ("" for Parse with no name)
	Dialect string // one of the Dialect* names: which shape the file has
	// DialectReason says why the file was read as Dialect, for "toolwire
	// config check": `it has VS Code's "type" on line 4`, say.
	DialectReason string
	Servers       []Server
	// Inputs are the declared ${input:ID} values (VS Code's "inputs", or
	// toolwire's), by ID; nil when the file declares none.
	Inputs map[string]Input
	Audit  Audit
	// Security says how far servers are trusted (toolwire's own file only).
	Security Security
	// Agent names the LLM of "toolwire run" and "chat" (toolwire's own
	// file only).
	Agent Agent
	// Gateway configures "toolwire serve" (toolwire's own file only); nil
	// when the file has no "gateway" section.
	Gateway *Gateway
	// Store is where toolwire keeps its state (toolwire's own file only):
	// "" for the files of one machine, or a PostgreSQL URL
	// (postgres://USER@HOST:PORT/DATABASE) shared by a fleet. It may be a
	// ${VAR} placeholder, kept as text like every other; see store.Open.
	Store string
	// Policy holds the rules that decide on calls beyond their tiers
	// (toolwire's own file only); nil when the file has no "policy"
	// section. See [Policy].
	Policy   *Policy
	Warnings []string // every warning, in file order, as "file:line: path: message"
	// WarningDetails holds the same warnings, in the same order, with the
	// server each one concerns, so that they can be shown per server.
	WarningDetails []Warning
}

// Dialect names: the shapes Parse understands. See docs/config.md.
const (
	DialectToolwire   = "toolwire"   // toolwire's own file: "servers" (and "audit", "inputs", "gateway")
	DialectMCPServers = "mcpServers" // Claude Desktop, Claude Code, Cursor and others: "mcpServers"
	DialectVSCode     = "vscode"     // VS Code's .vscode/mcp.json: "servers" with "type", and "inputs"
	DialectList       = "list"       // a list of servers, each with "name"
	DialectSingle     = "single"     // one server with "name"
	DialectNamedMap   = "namedMap"   // a map from server name to settings, with no wrapper key
)

// Transport names, as in Server.Transport.
// Revisions are the MCP revisions a server's protocol may name, newest
// first.
var Revisions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Transport is how toolwire reaches a server.
type Transport string

// The transports.
const (
	TransportStdio Transport = "stdio" // a child process speaking on stdin and stdout
	TransportHTTP  Transport = "http"  // Streamable HTTP
	TransportSSE   Transport = "sse"   // the legacy HTTP+SSE transport
)

// Audit configures the JSON Lines audit log.
type Audit struct {
	File         string // absolute when the file was loaded with Load; "" means no audit log
	LogArguments bool
	// SigningKey is a PEM Ed25519 private key file whose key signs every
	// line; "" means unsigned. Absolute when loaded with Load.
	SigningKey string
	// Required refuses every call the audit log cannot record, instead
	// of running it unrecorded. It needs an audit file (File, or the
	// CLI's --audit).
	Required bool
}

// Server is one MCP server as the configuration describes it. String fields
// may still hold ${VAR} and ${input:ID} placeholders; ExpandServer resolves
// them.
type Server struct {
	Name      string
	Line      int       // line of the server's key (of its "name" in a list)
	Transport Transport // TransportStdio, TransportHTTP or TransportSSE

	Command string
	Args    []string
	Env     map[string]string
	EnvFile string // a KEY=VALUE file whose variables ExpandServer adds to Env; "" for none
	Cwd     string

	URL         string
	Headers     map[string]string
	BearerToken string
	// OAuth configures OAuth 2.1 for a remote server; nil means defaults
	// (see [OAuth]).
	OAuth *OAuth

	Prefix string // "" means the server name
	// DefaultTier is the tier of tools not in TierOverrides. It is always
	// set after load: when the file gives none, it is the dialect's
	// default (see DefaultTierFor) and DefaultTierImplied is set.
	DefaultTier string
	// DefaultTierImplied is set when nobody chose DefaultTier: the file
	// has no defaultTier for the server.
	DefaultTierImplied bool
	TierOverrides      map[string]string // original tool name -> tier
	OnlyTools          []string          // nil = all tools; non-nil empty = no tools
	ExcludeTools       []string
	Timeout            time.Duration // 0 = library default
	Required           bool
	Disabled           bool // the file disables the server: keep it listed, do not start it
	// Roots are directories offered to the server as its roots (MCP
	// roots/list): absolute paths, possibly built from placeholders, which
	// ExpandServer checks are directories. Nil offers none.
	Roots []string
	// Protocol, when set, is the one MCP revision offered to the server
	// (one of Revisions): for a server that answers the newest revision's
	// discovery but was written for an older one's behaviour. "" offers
	// the newest and falls back to what the server speaks.
	Protocol string
	// Sandbox loosens or turns off the confinement of a stdio server
	// (toolwire's own file only); nil means the defaults.
	Sandbox *Sandbox

	// Inputs are the declared inputs that this server's placeholders
	// use, by ID, so that ExpandServer can say what it asks for; nil when
	// it uses none.
	Inputs map[string]Input
}

// Input is a value that is asked for when a server starts, declared once in
// the file and used as ${input:ID}; VS Code's "promptString" input.
type Input struct {
	ID          string
	Description string // what to ask, e.g. "API key"
	Password    bool   // hide what is typed
	Default     string // offered when asking; "" for none
}

// Warning is one warning with its parts. Warnings in File.Warnings are the
// same, as text.
type Warning struct {
	Line    int
	Server  string // the server the warning is about; "" when it concerns the file
	Field   string // the field's path inside the server's settings, or in the file when Server is ""
	Message string
	Text    string // as in File.Warnings
}

// missingFileError is Load's error for a file that is not there.
type missingFileError struct{ path string }

func (e missingFileError) Error() string { return "configuration " + e.path + ": no such file" }
func (missingFileError) Unwrap() error   { return fs.ErrNotExist }

// Load reads the configuration file at path. Relative paths inside it are
// resolved against the file's directory, made absolute so that they stay
// right whatever directory a server is later started in.
//
// A missing file is an error wrapping [fs.ErrNotExist] that says so, not a
// problem with a configuration.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missingFileError{path}
	}
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
// file are resolved against (and that ${workspaceFolder} is found from), and
// "" leaves them as written. The returned error joins every problem found,
// in file order, one per line.
func Parse(name string, data []byte, dir string) (*File, error) {
	// Editors on Windows like to start files with a byte order mark, which
	// encoding/json rejects.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	root, err := parseTree(name, data)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, syntaxError(name, 0, 0, "file is empty")
	}
	d := &decoder{name: name, dir: dir}
	f := &File{Path: name}
	dialect, reason, err := detect(name, root, isJSONStart(data))
	if err != nil {
		return nil, err
	}
	f.Dialect, f.DialectReason = dialect, reason
	if dialect != DialectToolwire {
		d.host = true
		d.workspace = workspaceFolder(dir)
	}
	switch dialect {
	case DialectToolwire:
		d.toolwireFile(root, f)
	case DialectMCPServers:
		d.hostFile(root, f)
	case DialectVSCode:
		d.vscodeFile(root, f)
	case DialectList:
		f.Servers = d.listServers(root)
	case DialectSingle:
		f.Servers = d.singleServer(root)
	case DialectNamedMap:
		f.Servers = d.namedServers(root, "")
	}
	if err := joinProblems(d.problems); err != nil {
		return nil, err
	}
	if len(d.inputs) > 0 {
		f.Inputs = d.inputs
	}
	for i := range f.Servers {
		if s := &f.Servers[i]; s.DefaultTier == "" {
			s.DefaultTier, s.DefaultTierImplied = DefaultTierFor(dialect), true
		}
	}
	f.Warnings, f.WarningDetails = d.warningTexts()
	return f, nil
}

// DefaultTierFor returns the tier of a server's tools when its file names
// none. toolwire's own file says "read", as documented: its operator
// writes tiers where tools write. A host application's file (Claude
// Desktop, Claude Code, Cursor, VS Code, and the plain lists and maps)
// has no tiers at all, so nobody decided that its tools only read: they
// are "write", confirmed before each call, until an operator says
// otherwise in a toolwire file (see `toolwire config import`).
func DefaultTierFor(dialect string) string {
	if dialect == DialectToolwire {
		return "read"
	}
	return "write"
}

// workspaceFolder is what ${workspaceFolder} stands for: the project
// directory, which holds the editor's settings directory when the file is
// inside one (.vscode/mcp.json, .cursor/mcp.json), else the file's own
// directory.
func workspaceFolder(dir string) string {
	if dir == "" {
		return ""
	}
	switch filepath.Base(dir) {
	case ".vscode", ".cursor":
		return filepath.Dir(dir)
	}
	return dir
}

// parseTree picks the parser by content rather than by file name, because
// host files are JSON under many names. A file whose first thing past
// whitespace and JSONC comments ("//", "/* */", which YAML does not have)
// is "{" or "[" is JSON with comments, as VS Code reads it, and nothing
// else: falling back to YAML would quietly accept what no host accepts.
// Anything else is YAML.
// isJSONStart reports whether parseTree reads data as JSON.
func isJSONStart(data []byte) bool {
	c := jsonStart(data)
	return c == '{' || c == '['
}

func parseTree(name string, data []byte) (*node, error) {
	switch jsonStart(data) {
	case 0:
		return nil, nil
	case '{', '[':
		return parseJSON(name, data)
	}
	return parseYAML(name, data)
}

// jsonStart returns the first byte of data past whitespace and leading
// JSONC comments, or 0 when there is none. An unterminated "/*" counts as
// JSON, so that the JSON parser reports it where it starts.
func jsonStart(data []byte) byte {
	for i := 0; i < len(data); {
		switch {
		case strings.IndexByte(" \t\r\n", data[i]) >= 0:
			i++
		case bytes.HasPrefix(data[i:], []byte("//")):
			j := bytes.IndexByte(data[i:], '\n')
			if j < 0 {
				return 0
			}
			i += j
		case bytes.HasPrefix(data[i:], []byte("/*")):
			j := bytes.Index(data[i+2:], []byte("*/"))
			if j < 0 {
				return '{'
			}
			i += 2 + j + 2
		default:
			return data[i]
		}
	}
	return 0
}

func hasKey(n *node, key string) bool {
	_, ok := lookup(n, key)
	return ok
}

// lookup returns the first pair of a map with the given key.
func lookup(n *node, key string) (pair, bool) {
	if n == nil || n.kind != mapNode {
		return pair{}, false
	}
	for _, p := range n.pairs {
		if p.key == key {
			return p, true
		}
	}
	return pair{}, false
}

// sortedKeys returns a map's keys in order, for messages and output that
// must not depend on map iteration.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
