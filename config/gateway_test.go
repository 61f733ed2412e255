package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptrDuration(d time.Duration) *time.Duration { return &d }

const (
	hashA = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")
	hashB = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08" // sha256("test"), upper case
)

const gatewayYAML = `servers:
  demo:
    command: x
gateway:
  approvals:
    write: elicit
    destructive: deny
    tools: {demo__delete_note: deny, demo__write_note: allow}
    operatorWait: 45s
    webhook:
      url: https://hooks.example.com/services/T1
      secretEnv: TOOLWIRE_WEBHOOK_SECRET
  tokens:
    - sha256: ` + hashA + `
      subject: alice
      role: reader
    - {sha256: ` + hashB + `, subject: "bob@example.com", role: admin}
  roles:
    reader: ["demo__echo", "demo__list_*"]
    admin: ["*"]
    nobody: []
  resourceURL: https://mcp.example.com/mcp
  authorizationServers: [https://auth.example.com]
  jwt:
    jwksURL: https://auth.example.com/.well-known/jwks.json
    issuer: https://auth.example.com
    audience: https://mcp.example.com/mcp
    roleClaim: toolwire_role
`

func wantGateway(line int) *Gateway {
	return &Gateway{
		Line: line,
		Approvals: GatewayApprovals{
			Write: "elicit", Destructive: "deny",
			Tools:        map[string]string{"demo__delete_note": "deny", "demo__write_note": "allow"},
			OperatorWait: ptrDuration(45 * time.Second),
			Webhook:      &GatewayWebhook{URL: "https://hooks.example.com/services/T1", SecretEnv: "TOOLWIRE_WEBHOOK_SECRET"},
		},
		Tokens: []GatewayToken{
			{SHA256: hashA, Subject: "alice", Role: "reader"},
			{SHA256: hashB, Subject: "bob@example.com", Role: "admin"},
		},
		Roles:                map[string][]string{"reader": {"demo__echo", "demo__list_*"}, "admin": {"*"}, "nobody": {}},
		ResourceURL:          "https://mcp.example.com/mcp",
		AuthorizationServers: []string{"https://auth.example.com"},
		JWT: &GatewayJWT{
			JWKSURL:   "https://auth.example.com/.well-known/jwks.json",
			Issuer:    "https://auth.example.com",
			Audience:  "https://mcp.example.com/mcp",
			RoleClaim: "toolwire_role",
		},
	}
}

func TestParseGatewayEveryField(t *testing.T) {
	f, err := Parse("toolwire.yaml", []byte(gatewayYAML), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Gateway, wantGateway(4)) {
		t.Errorf("Gateway\n got %+v\nwant %+v", f.Gateway, wantGateway(4))
	}

	// The same in JSON.
	const js = `{
  "servers": {"demo": {"command": "x"}},
  "gateway": {
    "approvals": {"write": "elicit", "destructive": "deny", "tools": {"demo__delete_note": "deny", "demo__write_note": "allow"},
      "operatorWait": "45s", "webhook": {"url": "https://hooks.example.com/services/T1", "secretEnv": "TOOLWIRE_WEBHOOK_SECRET"}},
    "tokens": [
      {"sha256": "` + hashA + `", "subject": "alice", "role": "reader"},
      {"sha256": "` + hashB + `", "subject": "bob@example.com", "role": "admin"}
    ],
    "roles": {"reader": ["demo__echo", "demo__list_*"], "admin": ["*"], "nobody": []},
    "resourceURL": "https://mcp.example.com/mcp",
    "authorizationServers": ["https://auth.example.com"],
    "jwt": {"jwksURL": "https://auth.example.com/.well-known/jwks.json", "issuer": "https://auth.example.com",
      "audience": "https://mcp.example.com/mcp", "roleClaim": "toolwire_role"}
  }
}`
	f, err = Parse("toolwire.json", []byte(js), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Gateway, wantGateway(3)) {
		t.Errorf("JSON Gateway\n got %+v\nwant %+v", f.Gateway, wantGateway(3))
	}
}

func TestParseGatewayAbsentOrMinimal(t *testing.T) {
	f, err := Parse("t.yaml", []byte("servers:\n  a: {command: x}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Gateway != nil {
		t.Errorf("Gateway = %+v without a gateway section, want nil", f.Gateway)
	}
	f, err = Parse("t.yaml", []byte("servers:\n  a: {command: x}\ngateway: {approvals: {write: allow}}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := &Gateway{Line: 3, Approvals: GatewayApprovals{Write: "allow"}}
	if !reflect.DeepEqual(f.Gateway, want) {
		t.Errorf("Gateway = %+v, want %+v", f.Gateway, want)
	}

	// jwt alone, without tokens, roleClaim left to its default, and its
	// JWK set over http to a loopback host.
	for _, jwks := range []string{"http://127.0.0.1:8080/jwks", "http://localhost/jwks", "http://[::1]:9/jwks"} {
		f, err = Parse("t.yaml", []byte("servers:\n  a: {command: x}\ngateway:\n  jwt:\n    jwksURL: "+jwks+
			"\n    issuer: https://i\n    audience: aud\n  roles: {r: ['*']}\n"), "")
		if err != nil {
			t.Fatal(err)
		}
		want = &Gateway{Line: 3, Roles: map[string][]string{"r": {"*"}}, JWT: &GatewayJWT{JWKSURL: jwks, Issuer: "https://i", Audience: "aud"}}
		if !reflect.DeepEqual(f.Gateway, want) {
			t.Errorf("Gateway = %+v, want %+v", f.Gateway, want)
		}
	}
}

func TestParseGatewayErrors(t *testing.T) {
	const head = "servers:\n  a: {command: x}\ngateway:\n" // gateway's fields start on line 4
	tok := func(fields string) string { return "  tokens:\n    - " + fields + "\n  roles: {r: ['*']}\n" }
	jwt := func(fields string) string { return "  jwt:\n" + fields + "  roles: {r: ['*']}\n" }
	tests := []struct {
		desc, data, want string
	}{
		{"unknown gateway field", "  approval: {write: deny}\n",
			`t.yaml:4: gateway.approval: unknown field (did you mean "approvals"?)`},
		{"misspelt resource URL", "  resourceUrl: https://h/mcp\n",
			`t.yaml:4: gateway.resourceUrl: unknown field (did you mean "resourceURL"?)`},
		{"gateway not a map", "  - x\n",
			`t.yaml:4: gateway: want a map of gateway settings, got a list`},
		{"bad tier approval", "  approvals:\n    write: ask\n",
			`t.yaml:5: gateway.approvals.write: unknown approval "ask" (want elicit, deny or allow)`},
		{"approval is case-sensitive", "  approvals:\n    destructive: Deny\n",
			`t.yaml:5: gateway.approvals.destructive: unknown approval "Deny" (want elicit, deny or allow)`},
		{"negative operator wait", "  approvals:\n    operatorWait: -1s\n",
			`t.yaml:5: gateway.approvals.operatorWait: must be 0 or more, got "-1s"`},
		{"operator wait without a unit", "  approvals:\n    operatorWait: 30\n",
			`t.yaml:5: gateway.approvals.operatorWait: want a duration such as "30s" (0 to refuse at once), got integer 30`},
		{"webhook over plain http to another host", "  approvals:\n    webhook: {url: 'http://hooks.example.com/T1/secretpath', secretEnv: S}\n",
			`t.yaml:5: gateway.approvals.webhook.url: invalid webhook URL: plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost); use https`},
		{"webhook secret in the file", "  approvals:\n    webhook: {url: 'https://h/x', secretEnv: 'hunter2 s3cret!'}\n",
			`t.yaml:5: gateway.approvals.webhook.secretEnv: must name an environment variable (letters, digits and _); never put the secret in the file`},
		{"webhook without a secret", "  approvals:\n    webhook: {url: 'https://h/x'}\n",
			`t.yaml:5: gateway.approvals.webhook: needs "secretEnv"`},
		{"webhook misspelt field", "  approvals:\n    webhook: {url: 'https://h/x', secretEnv: S, secret: x}\n",
			`t.yaml:5: gateway.approvals.webhook.secret: unknown field`},
		{"bad tool approval", "  approvals:\n    tools:\n      demo__rm: never\n",
			`t.yaml:6: gateway.approvals.tools.demo__rm: unknown approval "never" (want elicit, deny or allow)`},
		{"approval not a string", "  approvals:\n    write: true\n",
			`t.yaml:5: gateway.approvals.write: want elicit, deny or allow, got true`},
		{"unknown approvals field", "  approvals:\n    read: allow\n",
			`t.yaml:5: gateway.approvals.read: unknown field`},
		{"empty tool name", "  approvals:\n    tools: {\"\": deny}\n",
			`t.yaml:5: gateway.approvals.tools[""]: empty tool name`},
		{"short sha256", tok("sha256: abc123\n      subject: a\n      role: r"),
			`t.yaml:5: gateway.tokens[0].sha256: want the token's SHA-256 as 64 hex digits ("toolwire token hash" prints it; never the token itself), got 6 characters`},
		{"non-hex sha256", tok("sha256: " + strings.Repeat("z", 64) + "\n      subject: a\n      role: r"),
			`t.yaml:5: gateway.tokens[0].sha256: want the token's SHA-256 as 64 hex digits ("toolwire token hash" prints it; never the token itself), got a character that is not a hex digit`},
		{"sha256 not a string", tok("sha256: 12\n      subject: a\n      role: r"),
			`t.yaml:5: gateway.tokens[0].sha256: want a string, got integer 12 (put it in quotes)`},
		{"token without subject", tok("sha256: " + hashA + "\n      role: r"),
			`t.yaml:5: gateway.tokens[0]: needs "subject"`},
		{"token without subject and role", tok("sha256: " + hashA),
			`t.yaml:5: gateway.tokens[0]: needs "subject" and "role"`},
		{"empty subject", tok("sha256: " + hashA + "\n      subject: \"\"\n      role: r"),
			`t.yaml:6: gateway.tokens[0].subject: must not be empty`},
		{"subject with a line break", tok("sha256: " + hashA + "\n      subject: \"a\\nb\"\n      role: r"),
			`t.yaml:6: gateway.tokens[0].subject: must not contain control characters`},
		{"unknown token field", tok("sha256: " + hashA + "\n      subject: a\n      role: r\n      token: hunter2"),
			`t.yaml:8: gateway.tokens[0].token: unknown field`},
		{"tokens not a list", "  tokens: {sha256: x}\n",
			`t.yaml:4: gateway.tokens: want a list of tokens, each with "sha256", "subject" and "role", got a map`},
		{"token not a map", "  tokens: [abc]\n",
			`t.yaml:4: gateway.tokens[0]: want a map with "sha256", "subject" and "role", got string "abc"`},
		{"same token twice", "  tokens:\n    - {sha256: " + hashB + ", subject: a, role: r}\n    - {sha256: " + strings.ToLower(hashB) + ", subject: b, role: r}\n  roles: {r: ['*']}\n",
			`t.yaml:6: gateway.tokens[1].sha256: same token as gateway.tokens[0]`},
		{"undefined role", "  tokens:\n    - sha256: " + hashA + "\n      subject: alice\n      role: writer\n  roles:\n    reader: ['*']\n    admin: ['*']\n",
			`t.yaml:7: gateway.tokens[0].role: role "writer" is not defined in gateway.roles (defined: admin, reader)`},
		{"role without roles", "  tokens:\n    - {sha256: " + hashA + ", subject: alice, role: reader}\n",
			`t.yaml:5: gateway.tokens[0].role: role "reader" is not defined in gateway.roles`},
		{"bad glob", "  roles:\n    reader:\n      - demo__echo\n      - \"demo__[list\"\n",
			`t.yaml:7: gateway.roles.reader[1]: invalid pattern "demo__[list": syntax error in pattern (want path.Match syntax: *, ?, [a-z])`},
		{"empty glob", "  roles:\n    reader: [\"\"]\n",
			`t.yaml:5: gateway.roles.reader[0]: must not be empty`},
		{"role not a list", "  roles:\n    admin: \"*\"\n",
			`t.yaml:5: gateway.roles.admin: want a list of strings, got string "*"`},
		{"role name with spaces", "  roles:\n    \" admin\": ['*']\n",
			`t.yaml:5: gateway.roles[" admin"]: role name must not start or end with spaces`},
		{"bad resource URL", "  resourceURL: mcp.example.com/mcp\n",
			`t.yaml:4: gateway.resourceURL: want an http:// or https:// URL, got "mcp.example.com/mcp"`},
		{"resource URL with fragment", "  resourceURL: https://h/mcp#x\n",
			`t.yaml:4: gateway.resourceURL: must not have a fragment`},
		{"bad authorization server", "  authorizationServers:\n    - https://auth.example.com\n    - ftp://auth\n",
			`t.yaml:6: gateway.authorizationServers[1]: want an http:// or https:// URL, got "ftp://auth"`},
		{"duplicate key", "  roles: {r: ['*']}\n  roles: {s: ['*']}\n",
			`t.yaml:5: gateway.roles: duplicate key (first defined on line 4)`},
		{"jwt not a map", "  jwt: https://auth\n  roles: {r: ['*']}\n",
			`t.yaml:4: gateway.jwt: want a map with "jwksURL", "issuer" and "audience", got string "https://auth"`},
		{"jwt without jwksURL", jwt("    issuer: https://i\n    audience: a\n"),
			`t.yaml:5: gateway.jwt: needs "jwksURL"`},
		{"jwt without issuer and audience", jwt("    jwksURL: https://i/jwks\n"),
			`t.yaml:5: gateway.jwt: needs "issuer" and "audience"`},
		{"jwt jwksURL over http", jwt("    jwksURL: http://auth.example.com/jwks\n    issuer: https://i\n    audience: a\n"),
			`t.yaml:5: gateway.jwt.jwksURL: http is only allowed to a loopback host, got "http://auth.example.com/jwks"; use https`},
		{"jwt jwksURL bad scheme", jwt("    jwksURL: ftp://auth.example.com/jwks\n    issuer: https://i\n    audience: a\n"),
			`t.yaml:5: gateway.jwt.jwksURL: want an http:// or https:// URL, got "ftp://auth.example.com/jwks"`},
		{"jwt jwksURL not a URL", jwt("    jwksURL: auth.example.com/jwks\n    issuer: https://i\n    audience: a\n"),
			`t.yaml:5: gateway.jwt.jwksURL: want an http:// or https:// URL, got "auth.example.com/jwks"`},
		{"jwt empty jwksURL", jwt("    jwksURL: \"\"\n    issuer: https://i\n    audience: a\n"),
			`t.yaml:5: gateway.jwt.jwksURL: must not be empty`},
		{"jwt issuer not a URL", jwt("    jwksURL: https://i/jwks\n    issuer: auth\n    audience: a\n"),
			`t.yaml:6: gateway.jwt.issuer: want an http:// or https:// URL, got "auth"`},
		{"jwt audience not a string", jwt("    jwksURL: https://i/jwks\n    issuer: https://i\n    audience: [a]\n"),
			`t.yaml:7: gateway.jwt.audience: want a string, got a list`},
		{"jwt empty roleClaim", jwt("    jwksURL: https://i/jwks\n    issuer: https://i\n    audience: a\n    roleClaim: \"\"\n"),
			`t.yaml:8: gateway.jwt.roleClaim: must not be empty`},
		{"jwt unknown field", jwt("    jwksURL: https://i/jwks\n    issuer: https://i\n    audience: a\n    roleclaim: r\n"),
			`t.yaml:8: gateway.jwt.roleclaim: unknown field (did you mean "roleClaim"?)`},
		{"jwt without roles", "  jwt:\n    jwksURL: https://i/jwks\n    issuer: https://i\n    audience: a\n",
			`t.yaml:4: gateway.jwt: needs gateway.roles: gateway.jwt is set, and a JWT's role claim must name a role defined here, or its caller sees no tool`},
		{"jwt with empty roles", "  jwt: {jwksURL: https://i/jwks, issuer: https://i, audience: a}\n  roles: {}\n",
			`t.yaml:5: gateway.roles: must define a role: gateway.jwt is set, and a JWT's role claim must name a role defined here, or its caller sees no tool`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, err := Parse("t.yaml", []byte(head+tt.data), "")
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want error %q", f.Gateway, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestParseGatewayReportsEveryProblem(t *testing.T) {
	const data = `servers:
  a: {command: x}
gateway:
  approvals: {write: maybe}
  tokens:
    - sha256: nothex
      subject: alice
      role: ghost
  roles:
    r: ["[x"]
  colour: red
`
	_, err := Parse("t.yaml", []byte(data), "")
	want := []string{
		`t.yaml:4: gateway.approvals.write: unknown approval "maybe" (want elicit, deny or allow)`,
		`t.yaml:6: gateway.tokens[0].sha256: want the token's SHA-256 as 64 hex digits ("toolwire token hash" prints it; never the token itself), got 6 characters`,
		`t.yaml:8: gateway.tokens[0].role: role "ghost" is not defined in gateway.roles (defined: r)`,
		`t.yaml:10: gateway.roles.r[0]: invalid pattern "[x": syntax error in pattern (want path.Match syntax: *, ?, [a-z])`,
		`t.yaml:11: gateway.colour: unknown field`,
	}
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got %q\nwant %q", got, want)
	}
}

// A "gateway" key makes a "servers" file toolwire's, so a VS Code file
// cannot carry one unnoticed.
func TestGatewayMarksTheToolwireDialect(t *testing.T) {
	_, err := Parse("mcp.json", []byte(`{"servers": {"a": {"type": "stdio", "command": "x"}}, "gateway": {}}`), "")
	if err == nil || !strings.Contains(err.Error(), `toolwire fields ("gateway" on line 1)`) {
		t.Errorf("VS Code server with a gateway section: %v", err)
	}
}

func TestMarshalRoundTripsGateway(t *testing.T) {
	f, err := Parse("toolwire.yaml", []byte(gatewayYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	// Values YAML would misread unquoted.
	f.Gateway.Roles["odd: role"] = []string{"*", "[a-z]*", "true", "# x"}
	f.Gateway.Tokens = append(f.Gateway.Tokens, GatewayToken{SHA256: strings.Repeat("0", 64), Subject: "null", Role: "odd: role"})
	out, err := Marshal(f)
	if err != nil {
		t.Fatalf("Marshal: %v\n%s", err, out)
	}
	back, err := Parse("back.yaml", out, "")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, out)
	}
	if !sameGateway(back.Gateway, f.Gateway) {
		t.Errorf("round trip\n got %+v\nwant %+v\n%s", back.Gateway, f.Gateway, out)
	}
	if !strings.Contains(string(out), "\ngateway:\n  approvals:\n    write: elicit\n") {
		t.Errorf("output:\n%s", out)
	}

	// Empty but present sections stay present; absent ones stay absent.
	for _, g := range []*Gateway{
		{},
		{Tokens: []GatewayToken{}, Roles: map[string][]string{}, Approvals: GatewayApprovals{Tools: map[string]string{}}},
		{AuthorizationServers: []string{}},
		{ResourceURL: "http://127.0.0.1:8080/mcp"},
		{Roles: map[string][]string{"r": {"*"}}, JWT: &GatewayJWT{JWKSURL: "http://127.0.0.1:1/jwks", Issuer: "https://i", Audience: "null"}},
	} {
		f := &File{Servers: []Server{{Name: "a", Transport: "stdio", Command: "x", DefaultTier: "read"}}, Gateway: g}
		out, err := Marshal(f)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v\n%s", g, err, out)
		}
		back, err := Parse("back.yaml", out, "")
		if err != nil || !sameGateway(back.Gateway, g) {
			t.Errorf("round trip of %+v: got %+v (err %v)\n%s", g, back.Gateway, err, out)
		}
	}

	if !strings.Contains(string(out), "\n  jwt:\n    jwksURL: https://auth.example.com/.well-known/jwks.json\n") {
		t.Errorf("output lacks jwt:\n%s", out)
	}

	// Marshal refuses a gateway that would not load back.
	f.Gateway.Approvals.Write = "sometimes"
	if _, err := Marshal(f); err == nil || !strings.Contains(err.Error(), "does not load") {
		t.Errorf("Marshal of a bad approval: %v", err)
	}
}
