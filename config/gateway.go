package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path"
	"reflect"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Gateway configures "toolwire serve": how write and destructive calls that
// arrive through it are approved and, over HTTP, who may call and which
// tools each caller sees. Only toolwire's own file has it. Values are kept
// as written (they hold no placeholders); the gateway package turns them
// into its own types.
type Gateway struct {
	Line      int // line of the "gateway" key
	Approvals GatewayApprovals
	// Tokens are the static bearer tokens callers may present, each
	// stored as the SHA-256 of the token, never the token itself. Nil
	// when absent.
	Tokens []GatewayToken
	// Roles maps a role to the tools it may see and call, as glob
	// patterns over registered tool names (path.Match syntax). Every
	// token's role is defined here. Nil when absent.
	Roles map[string][]string
	// ResourceURL is the gateway's canonical URL, announced in its RFC
	// 9728 protected-resource metadata; "" when not set.
	ResourceURL string
	// AuthorizationServers are the issuers announced in that metadata.
	AuthorizationServers []string
	// JWT configures callers authenticated by JWTs of an issuer; nil when
	// absent.
	JWT *GatewayJWT
	// Limits bound sessions, calls and connections over HTTP; nil when
	// absent (see gatewaylimits.go).
	Limits *GatewayLimits
	// AllowedOrigins are the browser origins whose requests are served;
	// nil when absent.
	AllowedOrigins []string
	// TLS has the certificate and key "serve --http" terminates TLS with;
	// nil when absent.
	TLS *GatewayTLS
	// Console is the operator console's listener and token (nil when
	// absent).
	Console *GatewayConsole
}

// GatewayJWT configures JWT caller authentication: tokens signed by a key
// of the JWK set at JWKSURL, with Issuer as "iss" and Audience among "aud";
// the caller's role is the string claim RoleClaim ("" means "role").
type GatewayJWT struct {
	JWKSURL   string
	Issuer    string
	Audience  string
	RoleClaim string
}

// GatewayApprovals says how write and destructive calls through the gateway
// are approved: each value is "elicit", "deny" or "allow"; "" when not set.
type GatewayApprovals struct {
	Write       string
	Destructive string
	Tools       map[string]string // registered tool name -> approval; nil when absent
	// OperatorWait is how long a call whose client cannot be asked waits
	// for an operator's decision (operatorWait); nil when not set (the
	// default, 30 s), 0 to refuse such calls at once.
	OperatorWait *time.Duration
	// Webhook is told of each call that starts waiting; nil when absent.
	Webhook *GatewayWebhook
}

// GatewayWebhook is where a gateway posts the calls waiting for an
// operator: an http or https URL, and the environment variable holding
// the secret the posts are signed with (never the secret itself).
type GatewayWebhook struct {
	URL       string
	SecretEnv string
}

// GatewayToken is one static bearer token: the hex SHA-256 of the token
// (64 hex digits), the subject it identifies and the role it grants.
type GatewayToken struct {
	SHA256  string
	Subject string
	Role    string
}

var (
	gatewayFields   = []string{"approvals", "tokens", "roles", "resourceURL", "authorizationServers", "jwt", "limits", "allowedOrigins", "tls", "console"}
	jwtFields       = []string{"jwksURL", "issuer", "audience", "roleClaim"}
	jwtRequired     = []string{"jwksURL", "issuer", "audience"}
	approvalsFields = []string{"write", "destructive", "tools", "operatorWait", "webhook"}
	webhookFields   = []string{"url", "secretEnv"}
	tokenFields     = []string{"sha256", "subject", "role"}
)

// gateway decodes toolwire's "gateway" section.
func (d *decoder) gateway(p pair) *Gateway {
	const gpath = "gateway"
	if !d.wantMap(p.value, gpath, "a map of gateway settings") {
		return nil
	}
	g := &Gateway{Line: p.keyLine}
	var tokensPair, rolesPair, jwtPair *pair
	for _, f := range d.entries(p.value, gpath) {
		fpath := joinPath(gpath, f.key)
		switch f.key {
		case "approvals":
			d.gatewayApprovals(f.value, fpath, &g.Approvals)
		case "tokens":
			tokensPair = &f
			g.Tokens = d.gatewayTokens(f.value, fpath)
		case "roles":
			rolesPair = &f
			g.Roles = d.gatewayRoles(f.value, fpath)
		case "resourceURL":
			if s, ok := d.gatewayURL(f.value, fpath); ok {
				if strings.Contains(s, "#") {
					d.errorf(f.value.line, fpath, "must not have a fragment")
				} else {
					g.ResourceURL = s
				}
			}
		case "authorizationServers":
			if list, ok := d.strList(f.value, fpath, true); ok {
				for i, s := range list {
					if msg := urlProblem(s, true); msg != "" {
						d.errorf(f.value.items[i].line, indexPath(fpath, i), "%s", msg)
					}
				}
				g.AuthorizationServers = list
			}
		case "jwt":
			jwtPair = &f
			g.JWT = d.gatewayJWT(f.value, fpath)
		case "limits":
			g.Limits = d.gatewayLimits(f.value, fpath)
		case "allowedOrigins":
			if list, ok := d.strList(f.value, fpath, true); ok {
				for i, s := range list {
					if msg := originProblem(s); msg != "" {
						d.errorf(f.value.items[i].line, indexPath(fpath, i), "%s", msg)
					}
				}
				g.AllowedOrigins = list
			}
		case "tls":
			g.TLS = d.gatewayTLS(f.value, fpath)
		case "console":
			g.Console = d.gatewayConsole(f.value, fpath)
		default:
			d.unknownField(f, gpath, gatewayFields)
		}
	}
	// Every token's role must be defined: a token whose role lists no tool
	// would authenticate a caller who then sees nothing, which is more
	// likely a typo than a wish.
	if tokensPair != nil && tokensPair.value.kind == listNode {
		for i, t := range g.Tokens {
			if t.Role == "" {
				continue
			}
			if _, ok := g.Roles[t.Role]; !ok {
				item := tokensPair.value.items[i]
				line := item.line
				if rp, ok := lookup(item, "role"); ok {
					line = rp.value.line
				}
				d.errorf(line, joinPath(indexPath(joinPath(gpath, "tokens"), i), "role"),
					"role %q is not defined in gateway.roles%s", t.Role, knownRoles(g.Roles))
			}
		}
	}
	// A JWT's role claim names a role; with none defined, every caller it
	// authenticates would see nothing.
	if jwtPair != nil && len(g.Roles) == 0 {
		const why = "gateway.jwt is set, and a JWT's role claim must name a role defined here, or its caller sees no tool"
		switch {
		case rolesPair == nil:
			d.errorf(jwtPair.keyLine, joinPath(gpath, "jwt"), "needs gateway.roles: %s", why)
		case rolesPair.value.kind == mapNode:
			d.errorf(rolesPair.value.line, joinPath(gpath, "roles"), "must define a role: %s", why)
		}
	}
	return g
}

// gatewayJWT decodes gateway.jwt.
func (d *decoder) gatewayJWT(v *node, jpath string) *GatewayJWT {
	if !d.wantMap(v, jpath, `a map with "jwksURL", "issuer" and "audience"`) {
		return nil
	}
	j := &GatewayJWT{}
	for _, f := range d.entries(v, jpath) {
		fpath := joinPath(jpath, f.key)
		switch f.key {
		case "jwksURL":
			if s, ok := d.nonEmpty(f.value, fpath); ok {
				if msg := jwksURLProblem(s); msg != "" {
					d.errorf(f.value.line, fpath, "%s", msg)
				} else {
					j.JWKSURL = s
				}
			}
		case "issuer":
			if s, ok := d.gatewayURL(f.value, fpath); ok {
				j.Issuer = s
			}
		case "audience":
			if s, ok := d.nonEmpty(f.value, fpath); ok {
				j.Audience = s
			}
		case "roleClaim":
			if s, ok := d.nonEmpty(f.value, fpath); ok {
				j.RoleClaim = s
			}
		default:
			d.unknownField(f, jpath, jwtFields)
		}
	}
	d.requireKeys(v, jpath, jwtRequired)
	return j
}

// jwksURLProblem checks a JWK set URL the way the gateway will: https, or
// http to a loopback host.
func jwksURLProblem(s string) string {
	if msg := urlProblem(s, true); msg != "" {
		return msg
	}
	u, _ := url.Parse(s)
	if u.Scheme == "http" {
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Sprintf("http is only allowed to a loopback host, got %q; use https", s)
		}
	}
	return ""
}

func knownRoles(roles map[string][]string) string {
	if len(roles) == 0 {
		return ""
	}
	return " (defined: " + strings.Join(sortedKeys(roles), ", ") + ")"
}

func (d *decoder) gatewayApprovals(v *node, apath string, a *GatewayApprovals) {
	if !d.wantMap(v, apath, "a map of approvals") {
		return
	}
	for _, f := range d.entries(v, apath) {
		fpath := joinPath(apath, f.key)
		switch f.key {
		case "write":
			a.Write, _ = d.approval(f.value, fpath)
		case "destructive":
			a.Destructive, _ = d.approval(f.value, fpath)
		case "tools":
			if !d.wantMap(f.value, fpath, "a map of tool name to approval") {
				break
			}
			m := make(map[string]string, len(f.value.pairs))
			for _, t := range d.entries(f.value, fpath) {
				tpath := joinPath(fpath, t.key)
				if t.key == "" {
					d.errorf(t.keyLine, tpath, "empty tool name")
					continue
				}
				if ap, ok := d.approval(t.value, tpath); ok {
					m[t.key] = ap
				}
			}
			a.Tools = m
		case "operatorWait":
			s, ok := d.str(f.value, fpath, `a duration such as "30s" (0 to refuse at once)`)
			if !ok {
				break
			}
			v, err := time.ParseDuration(s)
			switch {
			case err != nil:
				d.errorf(f.value.line, fpath, `invalid duration %q (want a Go duration such as "30s" or "2m", or "0" to refuse at once)`, s)
			case v < 0:
				d.errorf(f.value.line, fpath, "must be 0 or more, got %q", s)
			default:
				a.OperatorWait = &v
			}
		case "webhook":
			a.Webhook = d.gatewayWebhook(f.value, fpath)
		default:
			d.unknownField(f, apath, approvalsFields)
		}
	}
}

func (d *decoder) gatewayWebhook(v *node, wpath string) *GatewayWebhook {
	if !d.wantMap(v, wpath, `a map with "url" and "secretEnv"`) {
		return nil
	}
	w := &GatewayWebhook{}
	for _, f := range d.entries(v, wpath) {
		fpath := joinPath(wpath, f.key)
		switch f.key {
		case "url":
			s, ok := d.nonEmpty(f.value, fpath)
			if !ok {
				break
			}
			// Not shown: a chat's webhook URL is itself a secret.
			if p := serverURLProblem(s, false); p != "" {
				d.errorf(f.value.line, fpath, "invalid webhook URL: %s", p)
				break
			}
			w.URL = s
		case "secretEnv":
			s, ok := d.nonEmpty(f.value, fpath)
			if !ok {
				break
			}
			if !isEnvName(s) {
				// Not quoted: a secret pasted here by mistake stays out of the message.
				d.errorf(f.value.line, fpath, "must name an environment variable (letters, digits and _); never put the secret in the file")
				break
			}
			w.SecretEnv = s
		default:
			d.unknownField(f, wpath, webhookFields)
		}
	}
	d.requireKeys(v, wpath, webhookFields)
	return w
}

func (d *decoder) approval(v *node, path string) (string, bool) {
	s, ok := d.str(v, path, "elicit, deny or allow")
	if !ok {
		return "", false
	}
	switch s {
	case "elicit", "deny", "allow":
		return s, true
	}
	d.errorf(v.line, path, "unknown approval %q (want elicit, deny or allow)", s)
	return "", false
}

func (d *decoder) gatewayTokens(v *node, tpath string) []GatewayToken {
	if v.kind != listNode {
		d.mismatch(v, tpath, `a list of tokens, each with "sha256", "subject" and "role"`)
		return nil
	}
	out := make([]GatewayToken, 0, len(v.items))
	seen := map[string]int{} // lower-case hash -> index
	for i, item := range v.items {
		ipath := indexPath(tpath, i)
		var t GatewayToken
		if !d.wantMap(item, ipath, `a map with "sha256", "subject" and "role"`) {
			out = append(out, t)
			continue
		}
		for _, f := range d.entries(item, ipath) {
			fpath := joinPath(ipath, f.key)
			switch f.key {
			case "sha256":
				s, ok := d.nonEmpty(f.value, fpath)
				if !ok {
					break
				}
				if msg := sha256Problem(s); msg != "" {
					// The value is not shown: it may be a token pasted
					// where its hash belongs.
					d.errorf(f.value.line, fpath, "%s", msg)
					break
				}
				if first, dup := seen[strings.ToLower(s)]; dup {
					d.errorf(f.value.line, fpath, "same token as %s", indexPath(tpath, first))
					break
				}
				seen[strings.ToLower(s)] = i
				t.SHA256 = s
			case "subject":
				if s, ok := d.nonEmpty(f.value, fpath); ok {
					if strings.IndexFunc(s, unicode.IsControl) >= 0 {
						d.errorf(f.value.line, fpath, "must not contain control characters")
					} else {
						t.Subject = s
					}
				}
			case "role":
				if s, ok := d.nonEmpty(f.value, fpath); ok {
					t.Role = s
				}
			default:
				d.unknownField(f, ipath, tokenFields)
			}
		}
		d.requireKeys(item, ipath, tokenFields)
		out = append(out, t)
	}
	return out
}

func (d *decoder) gatewayRoles(v *node, rpath string) map[string][]string {
	if !d.wantMap(v, rpath, "a map of role to tool-name patterns") {
		return nil
	}
	out := make(map[string][]string, len(v.pairs))
	for _, r := range d.entries(v, rpath) {
		path := joinPath(rpath, r.key)
		switch {
		case r.key == "":
			d.errorf(r.keyLine, path, "empty role name")
			continue
		case strings.TrimSpace(r.key) != r.key:
			d.errorf(r.keyLine, path, "role name must not start or end with spaces")
			continue
		}
		// A role whose list has problems is still defined, so that tokens
		// naming it are not reported as well.
		globs, _ := d.strList(r.value, path, true)
		for i, g := range globs {
			if _, err := matchGlob(g); err != nil {
				d.errorf(r.value.items[i].line, indexPath(path, i), "invalid pattern %q: %v (want path.Match syntax: *, ?, [a-z])", g, err)
			}
		}
		out[r.key] = globs
	}
	return out
}

// matchGlob checks a pattern the way the gateway will use it.
func matchGlob(g string) (bool, error) { return path.Match(g, "") }

func (d *decoder) gatewayURL(v *node, path string) (string, bool) {
	s, ok := d.nonEmpty(v, path)
	if !ok {
		return "", false
	}
	if msg := urlProblem(s, true); msg != "" {
		d.errorf(v.line, path, "%s", msg)
		return "", false
	}
	return s, true
}

// sha256Problem says what is wrong with a token hash, without repeating it.
func sha256Problem(s string) string {
	const want = `want the token's SHA-256 as 64 hex digits ("toolwire token hash" prints it; never the token itself)`
	if len(s) != 2*sha256.Size {
		return fmt.Sprintf("%s, got %d characters", want, len(s))
	}
	if _, err := hex.DecodeString(s); err != nil {
		return want + ", got a character that is not a hex digit"
	}
	return ""
}

// gatewayNode writes g as toolwire YAML.
func gatewayNode(g *Gateway) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	a := g.Approvals
	if a.Write != "" || a.Destructive != "" || a.Tools != nil || a.OperatorWait != nil || a.Webhook != nil {
		am := &yaml.Node{Kind: yaml.MappingNode}
		if a.Write != "" {
			addPair(am, "write", str(a.Write))
		}
		if a.Destructive != "" {
			addPair(am, "destructive", str(a.Destructive))
		}
		if a.Tools != nil {
			tools := strMap(a.Tools)
			tools.Style = yaml.FlowStyle
			addPair(am, "tools", tools)
		}
		if a.OperatorWait != nil {
			addPair(am, "operatorWait", str(a.OperatorWait.String()))
		}
		if a.Webhook != nil {
			wm := &yaml.Node{Kind: yaml.MappingNode}
			addPair(wm, "url", str(a.Webhook.URL))
			addPair(wm, "secretEnv", str(a.Webhook.SecretEnv))
			addPair(am, "webhook", wm)
		}
		addPair(m, "approvals", am)
	}
	if g.Tokens != nil {
		list := &yaml.Node{Kind: yaml.SequenceNode}
		for _, t := range g.Tokens {
			tm := &yaml.Node{Kind: yaml.MappingNode}
			addPair(tm, "sha256", str(t.SHA256))
			addPair(tm, "subject", str(t.Subject))
			addPair(tm, "role", str(t.Role))
			list.Content = append(list.Content, tm)
		}
		addPair(m, "tokens", list)
	}
	if g.Roles != nil {
		roles := &yaml.Node{Kind: yaml.MappingNode}
		for _, r := range sortedKeys(g.Roles) {
			addPair(roles, r, strList(g.Roles[r]))
		}
		addPair(m, "roles", roles)
	}
	if g.ResourceURL != "" {
		addPair(m, "resourceURL", str(g.ResourceURL))
	}
	if g.AuthorizationServers != nil {
		addPair(m, "authorizationServers", strList(g.AuthorizationServers))
	}
	if j := g.JWT; j != nil {
		jm := &yaml.Node{Kind: yaml.MappingNode}
		addPair(jm, "jwksURL", str(j.JWKSURL))
		addPair(jm, "issuer", str(j.Issuer))
		addPair(jm, "audience", str(j.Audience))
		if j.RoleClaim != "" {
			addPair(jm, "roleClaim", str(j.RoleClaim))
		}
		addPair(m, "jwt", jm)
	}
	if g.Limits != nil {
		addPair(m, "limits", limitsNode(g.Limits))
	}
	if g.AllowedOrigins != nil {
		addPair(m, "allowedOrigins", strList(g.AllowedOrigins))
	}
	if g.TLS != nil {
		addPair(m, "tls", tlsNode(g.TLS))
	}
	if g.Console != nil {
		addPair(m, "console", consoleNode(g.Console))
	}
	if len(m.Content) == 0 {
		return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	}
	return m
}

// sameGateway reports whether a and b configure the same gateway, wherever
// in a file they are written.
func sameGateway(a, b *Gateway) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Line, y.Line = 0, 0
	return reflect.DeepEqual(x, y)
}

// requireKeys reports, in one error at the map's line, every key of keys
// that the map n lacks.
func (d *decoder) requireKeys(n *node, path string, keys []string) {
	var missing []string
	for _, k := range keys {
		if !hasKey(n, k) {
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	if len(missing) > 0 {
		d.errorf(n.line, path, "needs %s", strings.Join(missing, " and "))
	}
}
