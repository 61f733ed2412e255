package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/gateway"
)

// consoleToken is the operator token of the console tests.
const consoleToken = "operator-token-of-serve-console-tests-0123"

var consoleRE = regexp.MustCompile(`toolwire: operator console at (http://\S+)/\n`)

// TestServeConsoleRefusesUnsafeSettings: no token, a short one, a
// caller's token as the operator's, a non-loopback address in the clear:
// each is a usage error naming what to change, before any server starts.
func TestServeConsoleRefusesUnsafeSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	callerToken := "a-caller-token-that-is-long-enough-0123456789"
	f.appendConfig(t, "gateway:\n  tokens:\n    - {sha256: "+gateway.HashToken(callerToken)+", subject: ci, role: all}\n  roles: {all: ['*']}\n")
	for _, c := range []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"no token", nil, []string{"--console", "127.0.0.1:0"}, "needs the operator token in $TOOLWIRE_CONSOLE_TOKEN"},
		{"a short token", map[string]string{"TOOLWIRE_CONSOLE_TOKEN": "hunter2"}, []string{"--console", "127.0.0.1:0"}, "too short"},
		{"a caller's token", map[string]string{"TOOLWIRE_CONSOLE_TOKEN": callerToken}, []string{"--console", "127.0.0.1:0"}, "is one of gateway.tokens"},
		{"in the clear", map[string]string{"TOOLWIRE_CONSOLE_TOKEN": consoleToken}, []string{"--console", "0.0.0.0:0"}, "only loopback addresses"},
		{"a flag alone", nil, []string{"--console-insecure-plain-http"}, "goes with --console"},
		{"not host:port", map[string]string{"TOOLWIRE_CONSOLE_TOKEN": consoleToken}, []string{"--console", "8790"}, `--console "8790"`},
	} {
		o := runIn(t, c.vars, nil, append([]string{"--config", f.config, "serve", "--http", "127.0.0.1:0"}, c.args...)...)
		if o.code != exitUsage || !strings.Contains(o.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and %q", c.name, o.code, o.stderr, exitUsage, c.want)
		}
		if strings.Contains(o.stderr, "hunter2") || strings.Contains(o.stderr, callerToken) {
			t.Errorf("%s: the token is in the message:\n%s", c.name, o.stderr)
		}
	}
}

// TestServeOffersTheConsoleOnItsOwnListener: serve --console offers the
// console at an address of its own, with the operator token of the
// environment; the MCP listener serves no page of it, and the console no
// MCP.
func TestServeOffersTheConsoleOnItsOwnListener(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	stderr := &urlStderr{url: make(chan string, 1)}
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, isTerminal: func() bool { return false },
		lookupEnv: lookupIn(map[string]string{"OPS_TOKEN": consoleToken})}
	f.appendConfig(t, "gateway:\n  console:\n    listen: 127.0.0.1:0\n    tokenEnv: OPS_TOKEN\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan int, 1)
	go func() {
		root := newRootCommand(e)
		root.SetArgs([]string{"--config", f.config, "serve", "--http", "127.0.0.1:0"})
		done <- exitCode(root.ExecuteContext(ctx), stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("serve exited %d\n%s", code, stderr.String())
		}
	}()
	var mcpURL string
	select {
	case mcpURL = <-stderr.url:
	case code := <-done:
		done <- code
		t.Fatalf("serve exited %d:\n%s", code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", stderr.String())
	}
	m := consoleRE.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("serve did not announce the console:\n%s", stderr.String())
	}
	con, mcpBase := m[1], strings.TrimSuffix(mcpURL, "/mcp")
	if con == mcpBase {
		t.Fatalf("the console shares the MCP listener %s", con)
	}
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(u string) *http.Request { r, _ := http.NewRequest(http.MethodGet, u, nil); return r }
	if code, _ := status(get(con + "/tools")); code != http.StatusSeeOther {
		t.Errorf("the console without a session: %d, want 303", code)
	}
	if code, body := status(get(mcpBase + "/login")); code == http.StatusOK || strings.Contains(body, "Operator token") {
		t.Errorf("the MCP listener serves the console's sign-in: %d %q", code, body)
	}
	if code, _ := status(get(con + "/mcp")); code != http.StatusNotFound {
		t.Errorf("the console's listener at /mcp: %d, want 404", code)
	}
	login, _ := http.NewRequest(http.MethodPost, con+"/login", strings.NewReader(url.Values{"token": {consoleToken}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	login.Header.Set("Origin", con)
	resp, err := noRedirect.Do(login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("sign-in: %s, cookies %v", resp.Status, resp.Cookies())
	}
	tools := get(con + "/tools")
	tools.AddCookie(resp.Cookies()[0])
	if code, body := status(tools); code != http.StatusOK || !strings.Contains(body, "demo__echo") {
		t.Errorf("the tools page signed in: %d\n%s", code, body)
	}
}

// TestReloadWarnsOfAChangedConsole: a reload cannot move the console or
// change its token, and says so rather than seeming to apply it.
func TestReloadWarnsOfAChangedConsole(t *testing.T) {
	t.Parallel()
	on := &config.Gateway{Console: &config.GatewayConsole{Listen: "127.0.0.1:8790"}}
	for _, c := range []struct {
		name          string
		before, after *config.Gateway
		warn          bool
	}{
		{"unchanged", on, &config.Gateway{Console: &config.GatewayConsole{Listen: "127.0.0.1:8790"}}, false},
		{"none before or after", nil, &config.Gateway{}, false},
		{"moved", on, &config.Gateway{Console: &config.GatewayConsole{Listen: "127.0.0.1:8791"}}, true},
		{"another token variable", on, &config.Gateway{Console: &config.GatewayConsole{Listen: "127.0.0.1:8790", TokenEnv: "X"}}, true},
		{"added", nil, on, true},
		{"removed", on, nil, true},
	} {
		var buf bytes.Buffer
		warnConsoleChanged(slog.New(slog.NewTextHandler(&buf, nil)), c.before, c.after)
		if got := strings.Contains(buf.String(), "gateway.console changed"); got != c.warn {
			t.Errorf("%s: warned %v, want %v: %q", c.name, got, c.warn, buf.String())
		}
	}
}
