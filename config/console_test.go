package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseGatewayConsole(t *testing.T) {
	t.Parallel()
	const yml = "servers:\n  a: {command: x}\ngateway:\n  console:\n    listen: 127.0.0.1:8790\n    tokenEnv: OPS_TOKEN\n"
	f, err := Parse("t.yaml", []byte(yml), "")
	if err != nil {
		t.Fatal(err)
	}
	want := &GatewayConsole{Listen: "127.0.0.1:8790", TokenEnv: "OPS_TOKEN"}
	if f.Gateway == nil || !reflect.DeepEqual(f.Gateway.Console, want) {
		t.Fatalf("Console = %+v, want %+v", f.Gateway, want)
	}
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("t.yaml", out, "")
	if err != nil || !reflect.DeepEqual(again.Gateway.Console, want) {
		t.Errorf("written and read again: %+v %v\n%s", again.Gateway, err, out)
	}
}

func TestParseGatewayConsoleRefusesBadValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, want string }{
		{"listen: localhost", "t.yaml:5: gateway.console.listen: must be host:port"},
		{"tokenEnv: s3cr3t-t0ken-pasted-here", "t.yaml:5: gateway.console.tokenEnv: must name an environment variable"},
		{"tokenenv: X", `t.yaml:5: gateway.console.tokenenv: unknown field (did you mean "tokenEnv"?)`},
		{"listen: ''", "t.yaml:5: gateway.console.listen"},
	} {
		_, err := Parse("t.yaml", []byte("servers:\n  a: {command: x}\ngateway:\n  console:\n    "+c.body+"\n"), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error repeats the value: %v", c.body, err)
		}
	}
}
