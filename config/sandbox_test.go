package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestSandboxSettings(t *testing.T) {
	src := `servers:
  fs:
    command: npx
    sandbox:
      read: [/srv/docs, "${HOME}/notes"]
      write: [/srv/out]
      network: [npm-registry.example.com, "*.example.com"]
      maxProcesses: 64
      maxOpenFiles: 256
      maxMemoryMB: 512
  loose:
    command: x
    sandbox: off
  wide:
    command: x
    sandbox: {network: open}
  quiet:
    command: x
    sandbox: {network: none}
  plain: {command: x}
security:
  sandbox: required
`
	f, err := Parse("/etc/tw/toolwire.yaml", []byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*Sandbox{
		"fs": {Read: []string{"/srv/docs", "${HOME}/notes"}, Write: []string{"/srv/out"}, Network: []string{"npm-registry.example.com", "*.example.com"},
			MaxProcesses: 64, MaxOpenFiles: 256, MaxMemoryMB: 512},
		"loose": {Off: true},
		"wide":  {NetworkOpen: true},
		"quiet": {},
		"plain": nil,
	}
	for _, s := range f.Servers {
		if !reflect.DeepEqual(s.Sandbox, want[s.Name]) {
			t.Errorf("server %s: sandbox %+v, want %+v", s.Name, s.Sandbox, want[s.Name])
		}
	}
	if f.Security.Sandbox != SandboxRequired {
		t.Errorf("security.sandbox = %q, want required", f.Security.Sandbox)
	}
	warned := strings.Join(f.Warnings, "\n")
	for _, w := range []string{"servers.loose.sandbox: the server runs unconfined", "servers.wide.sandbox: network: open leaves the server's network unconfined"} {
		if !strings.Contains(warned, w) {
			t.Errorf("warnings %q lack %q", warned, w)
		}
	}
	// Marshal keeps every setting (the round trip is checked inside).
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"sandbox: \"off\"", "network: open", "maxMemoryMB: 512", "sandbox: required"} {
		if !strings.Contains(string(out), s) && !strings.Contains(string(out), strings.ReplaceAll(s, `"`, "")) {
			t.Errorf("marshalled output lacks %s:\n%s", s, out)
		}
	}

	// Placeholders in paths resolve when the server starts, and must then
	// be absolute.
	fs := f.Servers[0]
	got, _, err := ExpandServer(fs, Resolver{LookupEnv: func(k string) (string, bool) { return map[string]string{"HOME": "/home/u"}[k], k == "HOME" }})
	if err != nil {
		t.Fatal(err)
	}
	if got.Sandbox.Read[1] != "/home/u/notes" || fs.Sandbox.Read[1] != "${HOME}/notes" {
		t.Errorf("expanded read = %q (the configuration's: %q)", got.Sandbox.Read, fs.Sandbox.Read)
	}
	_, _, err = ExpandServer(fs, Resolver{LookupEnv: func(k string) (string, bool) { return "relative", true }})
	if err == nil || !strings.Contains(err.Error(), "sandbox.read[1]") || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative path after expansion: %v", err)
	}
}

func TestSandboxSettingsErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"    sandbox: on\n", `servers.a.sandbox: want "off" or a map of sandbox settings (read, write, network, maxProcesses, maxOpenFiles, maxMemoryMB), got "on"`},
		{"    sandbox:\n", `servers.a.sandbox: want "off" or a map of sandbox settings (read, write, network, maxProcesses, maxOpenFiles, maxMemoryMB), got nothing (remove the field for the default sandbox)`},
		{"    sandbox: true\n", `servers.a.sandbox: want "off" or a map`},
		{"    sandbox: {read: [docs]}\n", `servers.a.sandbox.read[0]: want an absolute path to a file or directory, got "docs"`},
		{"    sandbox: {write: [\"~/out\"]}\n", `servers.a.sandbox.write[0]: "~" is not expanded here; write ${HOME} instead`},
		{"    sandbox: {network: everywhere}\n", `servers.a.sandbox.network: want "none", "open" or a list of hosts, got "everywhere"`},
		{"    sandbox: {maxProcesses: 0}\n", "servers.a.sandbox.maxProcesses: must be a whole number greater than zero, got 0"},
		{"    sandbox: {maxMemoryMB: lots}\n", "servers.a.sandbox.maxMemoryMB"},
		{"    sandbox: {egress: [x]}\n", "servers.a.sandbox.egress"},
	} {
		_, err := Parse("t.yaml", []byte("servers:\n  a:\n    command: x\n"+tc.src), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{"servers:\n  r:\n    url: https://example.com/mcp\n    sandbox: off\n", `servers.r.sandbox: only valid for stdio servers`},
		{"servers:\n  a: {command: x}\nsecurity:\n  sandbox: always\n", `security.sandbox: unknown sandbox mode "always" (want on, required or off)`},
	} {
		_, err := Parse("t.yaml", []byte(tc.src), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
}
