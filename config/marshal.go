package config

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// dialectNames describe the dialects in comments and messages.
var dialectNames = map[string]string{
	DialectToolwire:   "toolwire's own file",
	DialectMCPServers: `an "mcpServers" file (Claude Desktop, Claude Code, Cursor)`,
	DialectVSCode:     "a VS Code .vscode/mcp.json file",
	DialectList:       "a list of servers",
	DialectSingle:     "a single server",
	DialectNamedMap:   "a map from server name to settings",
}

// DescribeDialect says in a few words what a File.Dialect name stands for.
func DescribeDialect(dialect string) string {
	if s, ok := dialectNames[dialect]; ok {
		return s
	}
	return dialect
}

// Marshal writes f as toolwire's own YAML file: servers, their settings,
// the inputs they use, the audit settings and the gateway settings, with placeholders kept as
// they are (${VAR} and ${input:ID} alike; nothing is expanded, so no secret
// ends up in the output). Comments say where the file came from, what each
// input is for, and which of the original's fields were ignored and why.
//
// Paths are written as they are in f; those of a file read with Load are
// absolute. The output is checked by parsing it back: Marshal fails rather
// than write a file that does not load to the same servers.
func Marshal(f *File) ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	var head []string
	if f.Dialect != "" && f.Dialect != DialectToolwire {
		src := "a file"
		if f.Path != "" {
			src = commentSafe(f.Path)
		}
		head = append(head, fmt.Sprintf("toolwire configuration converted from %s, %s.", src, DescribeDialect(f.Dialect)))
	} else {
		head = append(head, "toolwire configuration.")
	}
	head = append(head, "Placeholders such as ${VAR} are kept as written and resolved only when a server starts.")
	for _, w := range f.WarningDetails {
		if w.Server == "" {
			head = append(head, fmt.Sprintf("Original line %d: %s: %s", w.Line, commentSafe(w.Field), commentSafe(w.Message)))
		}
	}
	doc.HeadComment = strings.Join(head, "\n")

	if len(f.Inputs) > 0 {
		inputs := &yaml.Node{Kind: yaml.MappingNode}
		for _, id := range sortedKeys(f.Inputs) {
			in := f.Inputs[id]
			m := &yaml.Node{Kind: yaml.MappingNode}
			if in.Description != "" {
				addPair(m, "description", str(in.Description))
			}
			if in.Password {
				addPair(m, "password", boolNode(true))
			}
			if in.Default != "" {
				addPair(m, "default", str(in.Default))
			}
			if len(m.Content) == 0 {
				m = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
			}
			addPair(inputs, id, m)
			inputs.Content[len(inputs.Content)-2].HeadComment = fmt.Sprintf(
				"${input:%s} is asked for on the terminal when a server using it starts; without a terminal that server fails to start.", id)
		}
		addPair(root, "inputs", inputs)
	}

	servers := &yaml.Node{Kind: yaml.MappingNode}
	for _, s := range f.Servers {
		m, err := serverNode(s)
		if err != nil {
			return nil, err
		}
		addPair(servers, s.Name, m)
		var notes []string
		for _, w := range f.WarningDetails {
			if w.Server == s.Name && w.Field != "disabled" {
				notes = append(notes, fmt.Sprintf("Original line %d: %s: %s", w.Line, commentSafe(w.Field), commentSafe(w.Message)))
			}
		}
		if s.Disabled {
			notes = append(notes, "Disabled: listed but not started.")
		}
		servers.Content[len(servers.Content)-2].HeadComment = strings.Join(notes, "\n")
	}
	addPair(root, "servers", servers)

	if f.Audit != (Audit{}) {
		audit := &yaml.Node{Kind: yaml.MappingNode}
		if f.Audit.File != "" {
			addPair(audit, "file", str(f.Audit.File))
		}
		if f.Audit.LogArguments {
			addPair(audit, "logArguments", boolNode(true))
		}
		if f.Audit.SigningKey != "" {
			addPair(audit, "signingKey", str(f.Audit.SigningKey))
		}
		if f.Audit.Required {
			addPair(audit, "required", boolNode(true))
		}
		addPair(root, "audit", audit)
	}
	if sec := securityNode(f.Security); sec != nil {
		addPair(root, "security", sec)
	}
	if f.Agent != (Agent{}) {
		a := &yaml.Node{Kind: yaml.MappingNode}
		for _, kv := range [][2]string{{"provider", f.Agent.Provider}, {"model", f.Agent.Model}, {"baseURL", f.Agent.BaseURL}, {"apiKeyEnv", f.Agent.APIKeyEnv}} {
			if kv[1] != "" {
				addPair(a, kv[0], str(kv[1]))
			}
		}
		addPair(root, "agent", a)
	}
	if f.Gateway != nil {
		addPair(root, "gateway", gatewayNode(f.Gateway))
	}
	if f.Store != "" {
		addPair(root, "store", str(f.Store))
	}

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if err := checkRoundTrip(f, out); err != nil {
		return nil, err
	}
	return out, nil
}

func serverNode(s Server) (*yaml.Node, error) {
	if !serverNameRE.MatchString(s.Name) {
		return nil, fmt.Errorf("server %q: invalid name", s.Name)
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	addPair(m, "transport", str(string(s.Transport)))
	if s.Command != "" {
		addPair(m, "command", str(s.Command))
	}
	if s.Args != nil {
		addPair(m, "args", strList(s.Args))
	}
	if s.Env != nil {
		addPair(m, "env", strMap(s.Env))
	}
	if s.EnvFile != "" {
		addPair(m, "envFile", str(s.EnvFile))
	}
	if s.Cwd != "" {
		addPair(m, "cwd", str(s.Cwd))
	}
	if s.URL != "" {
		addPair(m, "url", str(s.URL))
	}
	if s.Headers != nil {
		addPair(m, "headers", strMap(s.Headers))
	}
	if s.BearerToken != "" {
		addPair(m, "bearerToken", str(s.BearerToken))
	}
	if s.OAuth != nil {
		o := &yaml.Node{Kind: yaml.MappingNode}
		for _, kv := range [][2]string{{"clientId", s.OAuth.ClientID}, {"clientSecretEnv", s.OAuth.ClientSecretEnv}, {"privateKeyFile", s.OAuth.PrivateKeyFile}, {"privateKeyEnv", s.OAuth.PrivateKeyEnv}, {"clientMetadataUrl", s.OAuth.ClientMetadataURL}, {"grant", s.OAuth.Grant}, {"authMethod", s.OAuth.AuthMethod},
			{"identity", s.OAuth.Identity}, {"issuer", s.OAuth.Issuer}, {"redirectUrl", s.OAuth.RedirectURL}, {"subjectTokenType", s.OAuth.SubjectTokenType}, {"audience", s.OAuth.Audience}} {
			if kv[1] != "" {
				addPair(o, kv[0], str(kv[1]))
			}
		}
		if s.OAuth.Scopes != nil {
			addPair(o, "scopes", strList(s.OAuth.Scopes))
		}
		if c := s.OAuth.IdP; c != nil {
			idp := &yaml.Node{Kind: yaml.MappingNode}
			for _, kv := range [][2]string{{"issuer", c.Issuer}, {"tokenEndpoint", c.TokenEndpoint}, {"clientId", c.ClientID}, {"clientSecretEnv", c.ClientSecretEnv}, {"idTokenEnv", c.IDTokenEnv}, {"idTokenFile", c.IDTokenFile}} {
				if kv[1] != "" {
					addPair(idp, kv[0], str(kv[1]))
				}
			}
			addPair(o, "idp", idp)
		}
		addPair(m, "oauth", o)
	}
	if s.Prefix != "" {
		addPair(m, "prefix", str(s.Prefix))
	}
	if s.DefaultTier != "" && s.DefaultTier != "read" {
		addPair(m, "defaultTier", str(s.DefaultTier))
	}
	if s.TierOverrides != nil {
		addPair(m, "tierOverrides", strMap(s.TierOverrides))
	}
	if s.OnlyTools != nil {
		addPair(m, "onlyTools", strList(s.OnlyTools))
	}
	if s.ExcludeTools != nil {
		addPair(m, "excludeTools", strList(s.ExcludeTools))
	}
	if s.Timeout > 0 {
		addPair(m, "timeout", str(s.Timeout.String()))
	}
	if s.Required {
		addPair(m, "required", boolNode(true))
	}
	if s.Disabled {
		addPair(m, "disabled", boolNode(true))
	}
	if s.Protocol != "" {
		addPair(m, "protocol", str(s.Protocol))
	}
	if s.Roots != nil {
		addPair(m, "roots", strList(s.Roots))
	}
	if sb := sandboxNode(s.Sandbox); sb != nil {
		addPair(m, "sandbox", sb)
	}
	return m, nil
}

func addPair(m *yaml.Node, key string, value *yaml.Node) {
	m.Content = append(m.Content, str(key), value)
}

// str is a string scalar; the encoder quotes it when it would otherwise
// read back as something else (true, 8080, null, "").
func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func boolNode(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(b)}
}

func strList(list []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range list {
		n.Content = append(n.Content, str(s))
	}
	return n
}

func strMap(m map[string]string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range sortedKeys(m) {
		addPair(n, k, str(m[k]))
	}
	return n
}

// commentSafe keeps a comment on one line whatever a field or file name
// holds.
func commentSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
}

// checkRoundTrip parses Marshal's output and compares it with f.
func checkRoundTrip(f *File, out []byte) error {
	back, err := Parse(f.Path, out, "")
	if err != nil {
		return fmt.Errorf("the converted file does not load: %w", err)
	}
	if len(back.Servers) != len(f.Servers) {
		return fmt.Errorf("the converted file has %d servers, want %d", len(back.Servers), len(f.Servers))
	}
	for i := range f.Servers {
		if !EquivalentServers(back.Servers[i], f.Servers[i]) {
			return fmt.Errorf("server %q does not convert to an equivalent toolwire server", f.Servers[i].Name)
		}
	}
	if !reflect.DeepEqual(back.Audit, f.Audit) {
		return fmt.Errorf("the audit settings do not convert")
	}
	if !maps.Equal(back.Inputs, f.Inputs) {
		return fmt.Errorf("the inputs do not convert")
	}
	if !sameGateway(back.Gateway, f.Gateway) {
		return fmt.Errorf("the gateway settings do not convert")
	}
	if back.Agent != f.Agent {
		return fmt.Errorf("the agent settings do not convert")
	}
	if !reflect.DeepEqual(back.Security, f.Security) {
		return fmt.Errorf("the security settings do not convert")
	}
	if back.Store != f.Store {
		return fmt.Errorf("the store setting does not convert")
	}
	return nil
}

// EquivalentServers reports whether a and b describe the same server,
// ignoring where in a file they are written (Line) and the difference
// between an absent and an empty args, env or headers.
func EquivalentServers(a, b Server) bool {
	a.Line, b.Line = 0, 0
	for _, s := range []*Server{&a, &b} {
		if len(s.Args) == 0 {
			s.Args = nil
		}
		if len(s.Env) == 0 {
			s.Env = nil
		}
		if len(s.Headers) == 0 {
			s.Headers = nil
		}
		if len(s.TierOverrides) == 0 {
			s.TierOverrides = nil
		}
		if len(s.Inputs) == 0 {
			s.Inputs = nil
		}
		if s.DefaultTier == "" {
			s.DefaultTier = "read"
		}
		// Whether a tier was written or implied, it is the same tier.
		s.DefaultTierImplied = false
	}
	return reflect.DeepEqual(a, b)
}

// securityNode is the "security" section, or nil when every setting is
// the default.
func securityNode(s Security) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	if s.Strict {
		addPair(n, "strict", boolNode(true))
	}
	if s.Pins != "" {
		addPair(n, "pins", str(s.Pins))
	}
	if s.PinsFile != "" {
		addPair(n, "pinsFile", str(s.PinsFile))
	}
	if s.Sandbox != "" {
		addPair(n, "sandbox", str(s.Sandbox))
	}
	if s.AllowHosts != nil {
		list := &yaml.Node{Kind: yaml.SequenceNode}
		for _, h := range s.AllowHosts {
			list.Content = append(list.Content, str(h))
		}
		addPair(n, "allowHosts", list)
	}
	for _, kv := range []struct {
		key string
		v   int
	}{{"maxDescription", s.MaxDescription}, {"maxResultBytes", s.MaxResultBytes}, {"maxTools", s.MaxTools}} {
		if kv.v > 0 {
			addPair(n, kv.key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(kv.v)})
		}
	}
	if len(n.Content) == 0 {
		return nil
	}
	return n
}
