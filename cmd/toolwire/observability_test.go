package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/gateway"
)

func TestServeMetricsListenServesTheCallsJustMade(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	s := f.serveHTTPInProcess(t, "--http", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	m := regexp.MustCompile(`serving metrics at (http://\S+/metrics)`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("serve did not say where its metrics are:\n%s", s.stderr.String())
	}
	cs := connectHTTP(t, s.url, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, text := range []string{"one", "two", "three"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
	}
	_ = cs.Close()

	// The metrics listener is not the MCP one: it needs no token and
	// serves nothing but /metrics.
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", m[1], err)
	}
	want := map[string]string{"tool": "demo__echo", "server": "demo", "tier": "read", "outcome": "ok"}
	if got := counter(fams, "toolwire_calls_total", want); got != 3 {
		t.Errorf("toolwire_calls_total%v = %v, want 3", want, got)
	}
	if got := counter(fams, "toolwire_audit_writes_total", map[string]string{"kind": "call.executed"}); got != 3 {
		t.Errorf("toolwire_audit_writes_total{kind=call.executed} = %v, want 3", got)
	}
	if got := gauge(fams, "toolwire_upstream_state", map[string]string{"server": "demo", "state": "ready"}); got != 1 {
		t.Errorf("toolwire_upstream_state{server=demo,state=ready} = %v, want 1", got)
	}
	if resp, err := http.Get(strings.TrimSuffix(m[1], "/metrics") + "/mcp"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("the metrics listener answers /mcp with %d, want 404", resp.StatusCode)
		}
	}
}

func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func counter(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	if m := find(fams, name, want); m != nil {
		return m.GetCounter().GetValue()
	}
	return -1
}

func gauge(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	if m := find(fams, name, want); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/toolwire/toolwire", Version: "v0.3.0"},
		Deps: []*debug.Module{
			{Path: "github.com/spf13/cobra", Version: "v1.10.2"},
			{Path: goSDKPath, Version: "v1.8.0", Replace: &debug.Module{Path: "../go-sdk", Version: "v1.8.1-fork"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "79221b8abc"}, {Key: "vcs.modified", Value: "true"}},
	}
	got := versionFrom(bi)
	want := versionInfo{Version: "v0.3.0", Commit: "79221b8abc", Modified: true, GoSDK: "v1.8.1-fork", Go: "go1.26.8"}
	if got != want {
		t.Errorf("versionFrom = %+v, want %+v", got, want)
	}
	if s := got.String(); s != "toolwire v0.3.0 (commit 79221b8abc, modified), go-sdk v1.8.1-fork, go1.26.8" {
		t.Errorf("String() = %q", s)
	}
}

func TestVersionCommandAndFlag(t *testing.T) {
	t.Parallel()
	f := &fixture{dir: t.TempDir()}
	o := f.run(t, "", false, "version", "--json")
	o.expect(t, exitOK)
	var v versionInfo
	if err := json.Unmarshal([]byte(o.stdout), &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, o.stdout)
	}
	// The test binary is built from this module, with go-sdk among its
	// dependencies.
	if v.Version == "" || !strings.HasPrefix(v.GoSDK, "v1.") || !strings.HasPrefix(v.Go, "go1.") {
		t.Errorf("version --json = %+v", v)
	}
	o = f.run(t, "", false, "--version")
	o.expect(t, exitOK)
	if want := buildVersion().String() + "\n"; o.stdout != want {
		t.Errorf("--version printed %q, want %q", o.stdout, want)
	}
}

func TestLogFormat(t *testing.T) {
	t.Parallel()
	secrets := audit.NewSecrets()
	secrets.Add("hunter2-secret")
	var text, js bytes.Buffer
	newLogger(&text, &globalFlags{logFormat: logText}, secrets).Warn("pin changed for hunter2-secret", "server", "demo", "detail", "two words")
	newLogger(&js, &globalFlags{logFormat: logJSON}, secrets).Warn("pin changed for hunter2-secret", "server", "demo")
	if got, want := text.String(), "toolwire: warning: pin changed for "+secrets.String("hunter2-secret")+" server=demo detail=\"two words\"\n"; got != want {
		t.Errorf("text line %q, want %q", got, want)
	}
	if strings.Contains(text.String()+js.String(), "hunter2-secret") {
		t.Errorf("a secret was logged:\n%s%s", text.String(), js.String())
	}
	var rec map[string]any
	if err := json.Unmarshal(js.Bytes(), &rec); err != nil || rec["level"] != "WARN" || rec["server"] != "demo" {
		t.Errorf("json line %q: %v", js.String(), err)
	}

	// serve's warnings take the same format.
	var out bytes.Buffer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	announceAuth(newLogger(&out, &globalFlags{logFormat: logJSON}, nil), nil, "0.0.0.0:0", ln, &gateway.HTTPOptions{}, true, false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] != "WARN" {
			t.Errorf("serve warning %q is not a JSON warning: %v", l, err)
		}
	}
	if !strings.Contains(out.String(), "WITHOUT CALLER AUTHENTICATION") {
		t.Errorf("no --insecure-no-auth warning: %s", out.String())
	}

	f := &fixture{dir: t.TempDir()}
	o := f.run(t, "", false, "--log-format", "yaml", "version")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, `--log-format "yaml": want text or json`) {
		t.Errorf("stderr: %s", o.stderr)
	}
}
