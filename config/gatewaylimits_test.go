package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const limitsYAML = `servers:
  demo:
    command: x
gateway:
  limits:
    sessionIdleTimeout: 10m
    maxSessions: 50
    maxSessionsPerCaller: 0
    maxCallsPerSession: 8
    maxCallsPerCaller: 16
    callRate: 2.5
    callBurst: 5
    maxListensPerCaller: 4
    maxListenResources: 12
    readHeaderTimeout: 5s
    readBodyTimeout: 20s
    idleTimeout: 1m
    maxHeaderBytes: 32768
    maxBodyBytes: 1048576
    drainGrace: 3s
  allowedOrigins: [https://app.example.com, "http://localhost:3000"]
  tls: {certFile: /etc/tw/cert.pem, keyFile: /etc/tw/key.pem}
`

func TestGatewayLimitsParseAndRoundTrip(t *testing.T) {
	f, err := Parse("toolwire.yaml", []byte(limitsYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	l := f.Gateway.Limits
	if l == nil || *l.SessionIdleTimeout != 10*time.Minute || *l.MaxSessions != 50 || *l.MaxSessionsPerCaller != 0 ||
		*l.CallRate != 2.5 || *l.CallBurst != 5 || *l.DrainGrace != 3*time.Second || *l.MaxBodyBytes != 1<<20 || l.MaxCallsPerSession == nil ||
		*l.MaxListensPerCaller != 4 || *l.MaxListenResources != 12 {
		t.Fatalf("limits: %+v", l)
	}
	if len(f.Gateway.AllowedOrigins) != 2 || f.Gateway.TLS == nil || f.Gateway.TLS.KeyFile != "/etc/tw/key.pem" {
		t.Fatalf("origins %v, tls %+v", f.Gateway.AllowedOrigins, f.Gateway.TLS)
	}
	out, err := Marshal(f)
	if err != nil {
		t.Fatalf("Marshal: %v\n%s", err, out)
	}
	back, err := Parse("back.yaml", out, "")
	if err != nil || !sameGateway(back.Gateway, f.Gateway) {
		t.Errorf("round trip: %+v (err %v)\n%s", back.Gateway, err, out)
	}
}

func TestGatewayLimitsBadValuesAreNamed(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"limits: {maxSessions: -1}", "gateway.limits.maxSessions"},
		{"limits: {maxSessions: many}", "gateway.limits.maxSessions"},
		{"limits: {drainGrace: 5}", "gateway.limits.drainGrace"},
		{`limits: {drainGrace: "-1s"}`, "gateway.limits.drainGrace"},
		{"limits: {callRate: -2}", "gateway.limits.callRate"},
		{"limits: {maxListensPerCaller: -1}", "gateway.limits.maxListensPerCaller"},
		{"limits: {maxSesions: 3}", "maxSesions"},
		{"allowedOrigins: [https://app.example.com/path]", "gateway.allowedOrigins[0]"},
		{"allowedOrigins: [app.example.com]", "gateway.allowedOrigins[0]"},
		{"tls: {certFile: /c.pem}", "keyFile"},
	} {
		_, err := Parse("toolwire.yaml", []byte("servers:\n  demo:\n    command: x\ngateway:\n  "+c.body+"\n"), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.body, err, c.want)
		}
	}
}

// The TLS files are found beside the configuration, like its other files.
func TestGatewayTLSFilesAreRelativeToTheConfiguration(t *testing.T) {
	f, err := Parse("/srv/tw/toolwire.yaml", []byte("servers:\n  demo: {command: x}\ngateway:\n  tls: {certFile: cert.pem, keyFile: /etc/tw/key.pem}\n"), "/srv/tw")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Gateway.TLS; got == nil || got.CertFile != filepath.Join("/srv/tw", "cert.pem") || got.KeyFile != "/etc/tw/key.pem" {
		t.Errorf("gateway.tls = %+v, want cert.pem beside the file and the absolute key path kept", got)
	}
}
