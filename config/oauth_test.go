package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestServerOAuthPrivateKey(t *testing.T) {
	src := "servers:\n  r:\n    url: https://mcp.example.com/mcp\n    oauth:\n      clientId: app\n      privateKeyFile: keys/app.pem\n      grant: client_credentials\n"
	f, err := Parse("/etc/toolwire/t.yaml", []byte(src), "/etc/toolwire")
	if err != nil {
		t.Fatal(err)
	}
	o := f.Servers[0].OAuth
	if want := filepath.FromSlash("/etc/toolwire/keys/app.pem"); o == nil || o.PrivateKeyFile != want || o.AuthMethod != "" {
		t.Fatalf("oauth = %+v, want the key file %s (relative to the file)", o, want)
	}
	out, err := Marshal(f)
	if err != nil || !strings.Contains(string(out), "privateKeyFile:") {
		t.Errorf("marshal: %v\n%s", err, out)
	}
	f, err = Parse("t.yaml", []byte("servers:\n  r:\n    url: https://h/\n    oauth: {clientId: a, privateKeyEnv: APP_KEY, authMethod: private_key_jwt, grant: client_credentials}\n"), "")
	if err != nil || f.Servers[0].OAuth.PrivateKeyEnv != "APP_KEY" || f.Servers[0].OAuth.AuthMethod != "private_key_jwt" {
		t.Fatalf("privateKeyEnv: %v", err)
	}
	for _, tc := range []struct{ src, want string }{
		{"oauth: {clientId: a, privateKeyEnv: \"-----BEGIN s3cr3t\"}", "servers.r.oauth.privateKeyEnv: must name an environment variable"},
		{"oauth: {clientId: a, privateKeyEnv: K, privateKeyFile: k.pem}", "privateKeyFile and privateKeyEnv exclude each other"},
		{"oauth: {clientId: a, privateKeyEnv: K, clientSecretEnv: S}", "and clientSecretEnv exclude each other"},
		{"oauth: {privateKeyEnv: K}", "needs clientId"},
		{"oauth: {clientId: a, privateKeyEnv: K, authMethod: client_secret_basic}", "authMethod client_secret_basic with a private key"},
		{"oauth: {clientId: a, clientSecretEnv: S, authMethod: private_key_jwt}", "authMethod private_key_jwt needs privateKeyFile or privateKeyEnv"},
		{"oauth: {clientId: a, authMethod: tls_client_auth}", `unknown authMethod "tls_client_auth"`},
	} {
		full := "servers:\n  r:\n    url: https://h/\n    " + tc.src + "\n"
		_, err := Parse("t.yaml", []byte(full), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: error %v, want it to contain %q (and no key)", tc.src, err, tc.want)
		}
	}
}

func TestServerOAuthClientMetadataURL(t *testing.T) {
	f, err := Parse("t.yaml", []byte("servers:\n  r:\n    url: https://h/\n    oauth: {clientMetadataUrl: \"https://tools.example.com/c.json\"}\n"), "")
	if err != nil || f.Servers[0].OAuth.ClientMetadataURL != "https://tools.example.com/c.json" {
		t.Fatalf("clientMetadataUrl: %v", err)
	}
	for _, tc := range []struct{ src, want string }{
		{`oauth: {clientMetadataUrl: "http://tools.example.com/c.json"}`, "servers.r.oauth.clientMetadataUrl: want an https URL with a path"},
		{`oauth: {clientMetadataUrl: "https://tools.example.com"}`, "want an https URL with a path"},
		{`oauth: {clientMetadataUrl: "https://tools.example.com/c.json", clientId: a}`, "not with clientId"},
	} {
		full := "servers:\n  r:\n    url: https://h/\n    " + tc.src + "\n"
		if _, err := Parse("t.yaml", []byte(full), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
}

func TestServerOAuthEnterprise(t *testing.T) {
	src := "servers:\n  r:\n    url: https://h/mcp\n    oauth:\n      grant: enterprise\n      clientId: app\n      clientSecretEnv: APP_SECRET\n      idp:\n        issuer: https://idp.example.com\n        clientId: toolwire\n        idTokenFile: sso/id_token\n"
	f, err := Parse("/etc/t.yaml", []byte(src), "/etc")
	if err != nil {
		t.Fatal(err)
	}
	c := f.Servers[0].OAuth.IdP
	if c == nil || c.Issuer != "https://idp.example.com" || c.ClientID != "toolwire" || c.IDTokenFile != filepath.FromSlash("/etc/sso/id_token") {
		t.Fatalf("idp = %+v", c)
	}
	if out, err := Marshal(f); err != nil || !strings.Contains(string(out), "idTokenFile:") {
		t.Errorf("marshal: %v\n%s", err, out)
	}
	idp := "idp: {issuer: \"https://idp.example.com\", clientId: t, idTokenEnv: ID_TOKEN}"
	for _, tc := range []struct{ src, want string }{
		{"oauth: {grant: enterprise, clientId: a, clientSecretEnv: S}", "idp and grant enterprise go together"},
		{"oauth: {clientId: a, clientSecretEnv: S, " + idp + "}", "idp and grant enterprise go together"},
		{"oauth: {grant: enterprise, clientId: a, " + idp + "}", "grant enterprise needs clientId and clientSecretEnv"},
		{"oauth: {grant: enterprise, clientId: a, clientSecretEnv: S, idp: {issuer: \"https://i/\", clientId: t}}", "needs one of idTokenEnv and idTokenFile"},
		{"oauth: {grant: enterprise, clientId: a, clientSecretEnv: S, idp: {issuer: \"ftp://i/\", clientId: t, idTokenEnv: X}}", "servers.r.oauth.idp.issuer: want an http(s) URL"},
		{"oauth: {grant: enterprise, clientId: a, clientSecretEnv: S, idp: {issuer: \"https://i/\", clientId: t, idTokenEnv: \"eyJs3cr3t.x.y\"}}", "servers.r.oauth.idp.idTokenEnv: must name an environment variable"},
		{"oauth: {grant: enterprise, clientId: a, clientSecretEnv: S, idp: {issuer: \"https://i/\", clientId: t, idTokenEnv: X, idToken: y}}", "servers.r.oauth.idp.idToken"},
	} {
		full := "servers:\n  r:\n    url: https://h/\n    " + tc.src + "\n"
		if _, err := Parse("t.yaml", []byte(full), ""); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: error %v, want it to contain %q (and no token)", tc.src, err, tc.want)
		}
	}
}

func TestOAuthDefaultsClientMetadataURL(t *testing.T) {
	src := `oauth:
  clientMetadataUrl: https://tools.example.com/c.json
servers:
  plain:
    url: https://a.example.com/mcp
  own:
    url: https://b.example.com/mcp
    oauth: {clientMetadataUrl: "https://other.example.com/c.json"}
  preregistered:
    url: https://c.example.com/mcp
    oauth: {clientId: app}
  local:
    command: x
`
	f, err := Parse("t.yaml", []byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range f.Servers {
		if s.OAuth != nil {
			got[s.Name] = s.OAuth.ClientMetadataURL
		}
	}
	want := map[string]string{"plain": "https://tools.example.com/c.json", "own": "https://other.example.com/c.json", "preregistered": ""}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: clientMetadataUrl %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["local"]; ok {
		t.Error("a stdio server got OAuth settings")
	}
	for _, tc := range []struct{ src, want string }{
		{"oauth: {clientMetadataUrl: \"http://t.example.com/c.json\"}\nservers:\n  r:\n    url: https://h/\n", "oauth.clientMetadataUrl: want an https URL"},
		{"oauth: {clientId: x}\nservers:\n  r:\n    url: https://h/\n", "oauth.clientId"},
	} {
		if _, err := Parse("t.yaml", []byte(tc.src), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
}

// callerGateway is a gateway section whose callers present JWTs.
const callerGateway = `gateway:
  jwt: {jwksURL: "https://idp.example.com/jwks.json", issuer: "https://idp.example.com", audience: "https://gw.example.com/mcp"}
  roles: {all: ["*"]}
`

func TestServerOAuthIdentityCaller(t *testing.T) {
	src := `oauth:
  redirectUrl: https://gw.example.com/oauth/callback
servers:
  login:
    url: https://mcp.example.com/mcp
    oauth: {identity: caller}
  exchange:
    url: https://wiki.example.com/mcp
    oauth:
      identity: caller
      grant: token_exchange
      issuer: https://as.example.com
      clientId: gw
      clientSecretEnv: GW_SECRET
      subjectTokenType: jwt
      audience: wiki
  own:
    url: https://own.example.com/mcp
    oauth: {identity: caller, redirectUrl: "http://127.0.0.1:8080/oauth/callback", issuer: "https://as.example.com"}
` + callerGateway
	f, err := Parse("t.yaml", []byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]OAuth{
		"login":    {Identity: IdentityCaller, RedirectURL: "https://gw.example.com/oauth/callback"},
		"exchange": {Identity: IdentityCaller, Grant: "token_exchange", Issuer: "https://as.example.com", ClientID: "gw", ClientSecretEnv: "GW_SECRET", SubjectTokenType: "jwt", Audience: "wiki"},
		"own":      {Identity: IdentityCaller, RedirectURL: "http://127.0.0.1:8080/oauth/callback", Issuer: "https://as.example.com"},
	}
	check := func(f *File, when string) {
		for _, s := range f.Servers {
			if !s.OAuth.PerCaller() || !reflect.DeepEqual(*s.OAuth, want[s.Name]) {
				t.Errorf("%s: server %s: oauth = %+v, want %+v", when, s.Name, s.OAuth, want[s.Name])
			}
		}
	}
	check(f, "parsed")
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("back.yaml", out, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	check(back, "marshalled and parsed again")

	for _, tc := range []struct{ oauth, gateway, want string }{
		{`{identity: someone}`, callerGateway, `servers.r.oauth.identity: unknown identity "someone"`},
		{`{grant: token_exchange, issuer: "https://as.example.com", clientId: gw, clientSecretEnv: S}`, callerGateway, "it needs identity: caller"},
		{`{identity: caller, grant: client_credentials, clientId: a, clientSecretEnv: S}`, callerGateway, "not client_credentials"},
		{`{issuer: "https://as.example.com"}`, callerGateway, "settings of identity: caller"},
		{`{identity: caller, redirectUrl: "https://gw.example.com/cb", audience: x}`, callerGateway, "settings of grant token_exchange"},
		{`{identity: caller, grant: token_exchange, clientId: gw, clientSecretEnv: S}`, callerGateway, "needs issuer"},
		{`{identity: caller, redirectUrl: "https://gw.example.com/cb", clientId: gw, clientSecretEnv: S}`, callerGateway, "a login per caller with clientSecretEnv or a private key needs issuer"},
		{`{identity: caller, redirectUrl: "https://gw.example.com/cb", clientId: gw, privateKeyEnv: K}`, callerGateway, "a login per caller with clientSecretEnv or a private key needs issuer"},
		{`{identity: caller, grant: token_exchange, issuer: "https://as.example.com", clientId: gw}`, callerGateway, "clientSecretEnv or a private key"},
		{`{identity: caller, grant: token_exchange, issuer: "https://as.example.com", clientId: gw, clientSecretEnv: S, redirectUrl: "https://gw.example.com/cb"}`, callerGateway, "not grant token_exchange"},
		{`{identity: caller, grant: token_exchange, issuer: "https://as.example.com", clientId: gw, clientSecretEnv: S, subjectTokenType: id_token}`, callerGateway, `unknown subjectTokenType "id_token"`},
		{`{identity: caller, redirectUrl: "http://gw.example.com/cb"}`, callerGateway, "servers.r.oauth.redirectUrl: plain http is for a loopback host only"},
		{`{identity: caller, redirectUrl: "https://gw.example.com/cb#x"}`, callerGateway, "no fragment"},
		{`{identity: caller}`, callerGateway, "servers.r.oauth: identity caller with a login per caller needs redirectUrl"},
		{`{identity: caller, redirectUrl: "https://gw.example.com/cb"}`, "", "needs gateway.tokens or gateway.jwt"},
		{`{identity: caller, grant: token_exchange, issuer: "https://as.example.com", clientId: gw, clientSecretEnv: S}`,
			"gateway:\n  tokens: [{sha256: " + strings.Repeat("a", 64) + ", subject: s, role: all}]\n  roles: {all: [\"*\"]}\n", "needs gateway.jwt"},
		{`{identity: caller, redirectUrl: "https://gw.example.com/cb"}` + "\n    bearerToken: x", callerGateway, "one credential for every caller"},
		{`{identity: caller, redirectUrl: "https://gw.example.com/cb"}` + "\n    headers: {authorization: x}", callerGateway, "one credential for every caller"},
	} {
		full := "servers:\n  r:\n    url: https://h/\n    oauth: " + tc.oauth + "\n" + tc.gateway
		_, err := Parse("t.yaml", []byte(full), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.oauth, err, tc.want)
		}
	}
}
