package config

import (
	"strings"
	"testing"
)

func TestSecuritySection(t *testing.T) {
	src := "servers:\n  a: {command: x}\nsecurity:\n  strict: true\n  pinsFile: pins.json\n  allowHosts: [api.example.com, '*.corp.example']\n  maxDescription: 300\n  maxResultBytes: 1000\n  maxTools: 10\n"
	f, err := Parse("/etc/tw/toolwire.yaml", []byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	s := f.Security
	if !s.Strict || s.PinMode() != "enforce" || s.PinsFile != "pins.json" ||
		strings.Join(s.AllowHosts, ",") != "api.example.com,*.corp.example" ||
		s.DescriptionLimit() != 300 || s.ResultLimit() != 1000 || s.ToolLimit() != 10 {
		t.Errorf("decoded %+v", s)
	}
	// Marshal keeps every setting (the round trip is checked inside).
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "maxResultBytes: 1000") {
		t.Errorf("marshalled:\n%s", out)
	}
}

func TestSecurityDefaults(t *testing.T) {
	var s Security
	if s.PinMode() != "warn" || s.DescriptionLimit() != DefaultMaxDescription || s.ResultLimit() != DefaultMaxResultBytes || s.ToolLimit() != DefaultMaxTools {
		t.Errorf("defaults: %+v", s)
	}
	s.Pins = "off"
	s.Strict = true
	if s.PinMode() != "off" {
		t.Errorf("an explicit pins mode must win over strict, got %q", s.PinMode())
	}
}

func TestSecuritySectionErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"security:\n  pins: always\n", `security.pins: unknown pin mode "always" (want off, warn or enforce)`},
		{"security:\n  maxTools: 0\n", "security.maxTools: must be a whole number greater than zero, got 0"},
		{"security:\n  maxTools: lots\n", "security.maxTools"},
		{"security:\n  strict: yes please\n", "security.strict"},
		{"security:\n  egress: []\n", "security.egress"},
	} {
		_, err := Parse("t.yaml", []byte("servers:\n  a: {command: x}\n"+tc.src), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
}

func TestAgentSection(t *testing.T) {
	src := "servers:\n  a: {command: x}\nagent:\n  provider: anthropic\n  model: claude-x\n  baseURL: http://127.0.0.1:8080/v1\n  apiKeyEnv: MY_KEY\n"
	f, err := Parse("t.yaml", []byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Agent{Provider: "anthropic", Model: "claude-x", BaseURL: "http://127.0.0.1:8080/v1", APIKeyEnv: "MY_KEY"}
	if f.Agent != want {
		t.Errorf("agent = %+v, want %+v", f.Agent, want)
	}
	if _, err := Marshal(f); err != nil {
		t.Errorf("marshal: %v", err)
	}
	for _, tc := range []struct{ src, want string }{
		{"agent:\n  provider: gemini\n", `agent.provider: unknown provider "gemini" (want openai or anthropic)`},
		{"agent:\n  apiKeyEnv: sk-12345\n", "agent.apiKeyEnv: must name an environment variable"},
		{"agent:\n  key: x\n", "agent.key"},
		{"agent:\n  baseURL: ftp://h\n", "agent.baseURL"},
	} {
		_, err := Parse("t.yaml", []byte("servers:\n  a: {command: x}\n"+tc.src), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
}

func TestServerOAuthSection(t *testing.T) {
	src := "servers:\n  r:\n    url: https://mcp.example.com/mcp\n    oauth:\n      clientId: app\n      clientSecretEnv: APP_SECRET\n      scopes: [read, write]\n      grant: client_credentials\n      authMethod: client_secret_post\n"
	f, err := Parse("t.yaml", []byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	o := f.Servers[0].OAuth
	if o == nil || o.ClientID != "app" || o.ClientSecretEnv != "APP_SECRET" || strings.Join(o.Scopes, ",") != "read,write" || o.Grant != "client_credentials" || o.AuthMethod != "client_secret_post" {
		t.Fatalf("oauth = %+v", o)
	}
	if _, err := Marshal(f); err != nil {
		t.Errorf("marshal: %v", err)
	}
	for _, tc := range []struct{ src, want string }{
		{"servers:\n  r:\n    command: x\n    oauth: {clientId: a}\n", "oauth"},
		{"servers:\n  r:\n    url: https://h/\n    oauth: {grant: implicit}\n", `unknown grant "implicit"`},
		{"servers:\n  r:\n    url: https://h/\n    oauth: {grant: client_credentials, clientId: a}\n", "grant client_credentials needs clientId and clientSecretEnv"},
		{"servers:\n  r:\n    url: https://h/\n    oauth: {clientSecretEnv: \"s3cr3t-value!\"}\n", "must name an environment variable"},
		{"servers:\n  r:\n    url: https://h/\n    oauth: {clientSecret: x}\n", "servers.r.oauth.clientSecret"},
	} {
		_, err := Parse("t.yaml", []byte(tc.src), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: error %v, want it to contain %q (and no secret)", tc.src, err, tc.want)
		}
	}
}
