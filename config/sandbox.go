package config

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var sandboxFields = []string{"read", "write", "network", "maxProcesses", "maxOpenFiles", "maxMemoryMB"}

// Sandbox is a stdio server's "sandbox" settings: what it may do beyond
// the default confinement (see docs/security.md). A nil *Sandbox means
// the defaults.
type Sandbox struct {
	// Off runs the server unconfined ("sandbox: off"), with a warning.
	Off bool
	// Read and Write are further paths the server may read, and read and
	// write: absolute, possibly built from placeholders.
	Read  []string
	Write []string
	// Network lists the hosts the server may reach through toolwire's
	// egress proxy (exact names, IP addresses or "*.example.com"); nil
	// means none. NetworkOpen leaves the network unconfined instead
	// ("network: open").
	Network     []string
	NetworkOpen bool
	// Limits; 0 means the default.
	MaxProcesses int
	MaxOpenFiles int
	MaxMemoryMB  int
}

// The values of Security.Sandbox.
const (
	SandboxOn       = ""         // confine where the system can, say what it cannot
	SandboxRequired = "required" // refuse to start a server that cannot be confined as configured
	SandboxOff      = "off"      // confine no server
)

// sandbox decodes a server's "sandbox": "off", or a map of settings.
func (d *decoder) sandbox(st *serverState, v *node, path string) {
	if v.kind == scalarNode {
		if (v.typ == typeString && v.text == "off") || (v.typ == typeBool && !isTrue(v.text)) {
			st.s.Sandbox = &Sandbox{Off: true}
			d.serverWarnf(st, v.line, "sandbox", "the server runs unconfined: it can read, write and reach whatever you can")
			return
		}
		got := strconv.Quote(v.text)
		if v.typ == typeNull {
			got = "nothing (remove the field for the default sandbox)"
		}
		d.errorf(v.line, path, `want "off" or a map of sandbox settings (read, write, network, maxProcesses, maxOpenFiles, maxMemoryMB), got %s`, got)
		return
	}
	if !d.wantMap(v, path, "\"off\" or a map of sandbox settings") {
		return
	}
	sb := &Sandbox{}
	paths := func(n *node, fpath string) []string {
		list, ok := d.strList(n, fpath, true)
		if !ok {
			return nil
		}
		for i, p := range list {
			ipath := indexPath(fpath, i)
			line := n.items[i].line
			if p, ok = d.template(st, line, ipath, p); !ok {
				continue
			}
			list[i] = p
			if msg := sandboxPathProblem(p); msg != "" && !strings.Contains(p, "$") {
				d.errorf(line, ipath, "%s", msg)
			}
		}
		return list
	}
	for _, p := range d.entries(v, path) {
		fpath := joinPath(path, p.key)
		switch p.key {
		case "read":
			sb.Read = paths(p.value, fpath)
		case "write":
			sb.Write = paths(p.value, fpath)
		case "network":
			if p.value.kind == scalarNode {
				switch p.value.text {
				case "none":
					sb.Network = nil
				case "open":
					sb.NetworkOpen = true
					d.serverWarnf(st, p.value.line, "sandbox", "network: open leaves the server's network unconfined")
				default:
					d.errorf(p.value.line, fpath, `want "none", "open" or a list of hosts, got %q`, p.value.text)
				}
				break
			}
			if list, ok := d.strList(p.value, fpath, true); ok {
				sb.Network = list
			}
		case "maxProcesses":
			sb.MaxProcesses = d.positive(p.value, fpath)
		case "maxOpenFiles":
			sb.MaxOpenFiles = d.positive(p.value, fpath)
		case "maxMemoryMB":
			sb.MaxMemoryMB = d.positive(p.value, fpath)
		default:
			d.unknownField(p, path, sandboxFields)
		}
	}
	st.s.Sandbox = sb
}

func isTrue(s string) bool { b, _ := strconv.ParseBool(s); return b }

// sandboxPathProblem says what is wrong with p as a sandbox path, or "".
func sandboxPathProblem(p string) string {
	if msg := rootProblem(p); msg != "" {
		return strings.Replace(msg, "to a directory", "to a file or directory", 1)
	}
	return ""
}

// sandboxNode is a server's "sandbox" for Marshal, or nil for defaults.
func sandboxNode(s *Sandbox) *yaml.Node {
	if s == nil {
		return nil
	}
	if s.Off {
		return str("off")
	}
	n := &yaml.Node{Kind: yaml.MappingNode}
	if s.Read != nil {
		addPair(n, "read", strList(s.Read))
	}
	if s.Write != nil {
		addPair(n, "write", strList(s.Write))
	}
	switch {
	case s.NetworkOpen:
		addPair(n, "network", str("open"))
	case s.Network != nil:
		addPair(n, "network", strList(s.Network))
	}
	for _, kv := range []struct {
		key string
		v   int
	}{{"maxProcesses", s.MaxProcesses}, {"maxOpenFiles", s.MaxOpenFiles}, {"maxMemoryMB", s.MaxMemoryMB}} {
		if kv.v > 0 {
			addPair(n, kv.key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(kv.v)})
		}
	}
	return n
}
