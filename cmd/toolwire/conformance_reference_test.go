package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// conformanceReferencePkg is go-sdk's own conformance server, the
// reference the suite's server scenarios are written against; it is built
// from the module cache, at the go-sdk version go.mod requires.
const conformanceReferencePkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// referenceMidCallFailures are the scenarios the reference server fails
// behind the gateway by default: toolwire speaks 2026-07-28 to it, and its
// tools ask their client during the call, which 2026-07-28 does not allow
// (go-sdk's server refuses its own tool's request).
var referenceMidCallFailures = []string{
	"elicitation-sep1034-defaults", "elicitation-sep1330-enums", "tools-call-elicitation", "tools-call-sampling",
}

var (
	referenceOnce sync.Once
	referencePath string
	referenceErr  error
)

func conformanceReference(t *testing.T) string {
	t.Helper()
	referenceOnce.Do(func() {
		dir, err := e2eBuildDir()
		if err != nil {
			referenceErr = err
			return
		}
		referencePath = filepath.Join(dir, "conformance-reference")
		referenceErr = goBuild(referencePath, conformanceReferencePkg, false)
	})
	if referenceErr != nil {
		t.Fatal(referenceErr)
	}
	return referencePath
}

// Issue 22.21: the gateway in front of go-sdk's reference conformance
// server over stdio. By default (toolwire speaks 2026-07-28 to it) the four
// scenarios whose tools ask their client mid-call fail, 32 checks passed
// and 4 failed, and each failed tool's error names the setting that makes
// it work; with that setting, protocol: 2025-11-25 on the server, the
// whole suite passes, 44 checks. A change in either score fails the test.
func TestConformanceSuiteThroughServeHTTPToTheReferenceServer(t *testing.T) {
	t.Parallel() // mostly waiting on other processes: runs beside the rest
	npmDir := conformanceSuite(t)
	bin := conformanceReference(t)
	for _, mode := range []string{"default", "protocol 2025-11-25"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			server := "servers:\n  everything:\n    command: " + quoteYAML(bin) + "\n"
			if mode != "default" {
				server += "    protocol: 2025-11-25\n"
			}
			config := filepath.Join(t.TempDir(), "toolwire.yaml")
			if err := os.WriteFile(config, []byte(server), 0o600); err != nil {
				t.Fatal(err)
			}
			url := serveForConformance(t, []string{"--config", config, "serve", "--http", "127.0.0.1:0", "--unprefixed"})
			results := filepath.Join(t.TempDir(), "results")
			run := runConformanceScript(t, npmDir, conformanceRunTimeout, conformanceScript,
				url, "--timeout", conformanceScenarioSecs, "-o", results)
			failed := run.withVerdict("FAIL")
			if mode != "default" {
				if len(failed) > 0 || run.passed != conformanceChecksPassed || run.failed != 0 {
					t.Errorf("with protocol 2025-11-25: failed %v, checks %d passed / %d failed; want none failed, %d / 0\n%s",
						failed, run.passed, run.failed, conformanceChecksPassed, run.output)
				}
				return
			}
			if !slices.Equal(failed, referenceMidCallFailures) || run.passed != 32 || run.failed != 4 {
				t.Errorf("by default: failed %v, checks %d passed / %d failed; want %v failed, 32 / 4\n%s",
					failed, run.passed, run.failed, referenceMidCallFailures, run.output)
			}
			// What the suite saw of the tool's error: the setting named.
			checks, err := filepath.Glob(filepath.Join(results, "scenarios", "tools-call-elicitation", "*", "checks.json"))
			if err != nil || len(checks) != 1 {
				t.Fatalf("the results of tools-call-elicitation: %v %v", checks, err)
			}
			raw, err := os.ReadFile(checks[0])
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), `set \"protocol: 2025-11-25\" on server \"everything\"`) {
				t.Errorf("the failed elicitation's tool error does not name the setting:\n%s", raw)
			}
		})
	}
}
