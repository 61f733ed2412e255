package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	auditpkg "github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/demo"
)

// TestSecretsReachNoLogOrAuditLine runs real sessions with known secret
// values, expanded from ${VAR} placeholders into a stdio server's
// environment, an HTTP server's bearer token and one of its headers, with
// debug logging and argument logging on, a call whose argument and result
// carry a secret, and a server that echoes its credentials into an error.
// Every log line and audit line is then searched for the secrets.
func TestSecretsReachNoLogOrAuditLine(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"STDIO_SECRET": "stdio-s3cret-6d1f",
		"WEB_TOKEN":    "bearer-s3cret-9a2c",
		"WEB_KEY":      "header-s3cret-44b0",
	}
	// An HTTP server, which must receive the credentials (else the test
	// would prove nothing), and a stdio server that prints its secret on
	// stderr and fails, so that the secret is in its error and its logs.
	var mu sync.Mutex
	var seen []string
	web := demo.HTTPHandler(nil)
	honest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		web.ServeHTTP(w, r)
	}))
	defer honest.Close()

	f := newFixture(t, `  web:
    url: `+honest.URL+`/mcp
    bearerToken: ${WEB_TOKEN}
    headers: {X-Api-Key: "${WEB_KEY}"}
  leaker:
    command: sh
    args: ["-c", "echo denied: my key is $LEAK >&2; exit 3"]
    env: {LEAK: "${STDIO_SECRET}"}
`)
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "      TOOLWIRE_TEST_SERVER: demo\n", "      TOOLWIRE_TEST_SERVER: demo\n      DEMO_API_KEY: ${STDIO_SECRET}\n", 1)
	cfg = strings.Replace(cfg, "audit:\n  file: audit.jsonl\n", "audit:\n  file: audit.jsonl\n  logArguments: true\n", 1)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	run := func(args ...string) {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, isTerminal: func() bool { return false },
			lookupEnv: func(k string) (string, bool) { v, ok := secrets[k]; return v, ok }}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		root := newRootCommand(e)
		root.SetArgs(append([]string{"--config", f.config, "--verbose"}, args...))
		code := exitCode(root.ExecuteContext(ctx), &stderr)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr.String())
		}
		logs.Write(stderr.Bytes())
	}
	run("tools")
	run("call", "demo__echo", "text=the key is "+secrets["STDIO_SECRET"]) // a secret in the arguments and the result
	run("call", "web__echo", "text=and "+secrets["WEB_TOKEN"])

	mu.Lock()
	got := strings.Join(seen, "\n")
	mu.Unlock()
	if !strings.Contains(got, "Bearer "+secrets["WEB_TOKEN"]+" "+secrets["WEB_KEY"]) {
		t.Fatalf("the web server never received the credentials; the test proves nothing:\n%s", got)
	}
	if !strings.Contains(logs.String(), "denied: my key is "+auditpkg.Mask) {
		t.Fatalf("the leaking server's stderr was not logged; the test proves nothing:\n%s", logs.String())
	}
	audit, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), `"text":"the key is `+auditpkg.Mask+`"`) {
		t.Fatalf("the audit log has no call of demo__echo:\n%s", audit)
	}
	for name, value := range secrets {
		for what, text := range map[string]string{"log": logs.String(), "audit": string(audit)} {
			for i, line := range strings.Split(text, "\n") {
				if strings.Contains(line, value) {
					t.Errorf("%s line %d holds the value of %s: %s", what, i+1, name, line)
				}
			}
		}
	}
}
