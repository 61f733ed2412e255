package main

// The official MCP conformance suite's client scenarios (pinned in
// scripts/conformance-client.sh, the same npm packages as the server
// scenarios) run against toolwire's conformance client, ./conformance/client:
// the workspace package, which assembles the CLI's stack.
// Skipped without node or the suite, except under CI=true, where it fails.

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	conformanceClientPkg      = "github.com/toolwire/toolwire/conformance/client"
	conformanceClientScript   = "../../scripts/conformance-client.sh"
	conformanceClientExpected = "../../conformance/client-expected-failures.yml"
	// 26 scenarios, all at once in one process of the suite: seconds.
	conformanceClientRunTimeout = 6 * time.Minute
	conformanceClientScenarios  = 26 // conformance list --client, 0.1.16
	// conformanceClientFloor is what go-sdk v1.8.0's own example client
	// scores (282 checks passed, 7 failed): the bar.
	conformanceClientFloor = 282
	conformanceClientSecs  = "30" // the suite's limit per client run
)

// TestConformanceClientScenarios runs every client scenario of the suite
// against ./conformance/client, built race-enabled when the tests are, and
// asserts that exactly the scenarios in
// conformance/client-expected-failures.yml fail, each with a reason given,
// and that the checks passed are at least go-sdk's example client's.
func TestConformanceClientScenarios(t *testing.T) {
	t.Parallel() // mostly waiting on other processes: runs beside the rest
	npmDir := conformanceSuite(t)
	expected := expectedClientFailures(t, conformanceClientExpected)

	dir := t.TempDir()
	bin := filepath.Join(dir, "toolwire-conformance-client")
	if err := goBuild(bin, conformanceClientPkg, e2eRaceEnabled()); err != nil {
		t.Fatal(err)
	}
	run := runConformanceScript(t, npmDir, conformanceClientRunTimeout, conformanceClientScript,
		"--client", bin, "--timeout", conformanceClientSecs, "-o", filepath.Join(dir, "results"))

	if len(run.verdicts) != conformanceClientScenarios {
		t.Errorf("the suite ran %d client scenarios, want %d (a new suite version? update the expected failures)", len(run.verdicts), conformanceClientScenarios)
	}
	var unexpected, stale []string
	for s, v := range run.verdicts {
		_, listed := expected[s]
		switch {
		case v != "PASS" && !listed:
			unexpected = append(unexpected, s+" ("+v+")")
		case v == "PASS" && listed:
			stale = append(stale, s) // passing now: update the file and the docs
		}
	}
	for s := range expected {
		if _, ran := run.verdicts[s]; !ran {
			stale = append(stale, s+" (not run)")
		}
	}
	slices.Sort(unexpected)
	slices.Sort(stale)
	if len(unexpected) > 0 || len(stale) > 0 {
		t.Errorf("unexpected failures %v; listed as expected failures but did not fail %v\n%s", unexpected, stale, run.output)
	}
	if run.passed < conformanceClientFloor {
		t.Errorf("%d checks passed, want at least %d (go-sdk's example client)\n%s", run.passed, conformanceClientFloor, run.output)
	}
	// The scenarios that exercise the parts of toolwire the suite can see
	// best: the loopback login with registration, step-up, a pre-registered
	// client, machine-to-machine, and elicitation through the relay.
	for _, s := range []string{"auth/metadata-default", "auth/scope-step-up", "auth/pre-registration", "auth/client-credentials-basic", "elicitation-sep1034-client-defaults", "sse-retry"} {
		if run.verdicts[s] != "PASS" {
			t.Errorf("%s: %s, want PASS", s, run.verdicts[s])
		}
	}
}

// expectedClientFailures reads the expected failures file: the scenarios
// listed under "client", each with the comment that gives its reason.
func expectedClientFailures(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("%s: want a mapping with a client list", path)
	}
	m := doc.Content[0]
	reasons := map[string]string{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "client" {
			continue
		}
		list := m.Content[i+1]
		if list.Kind != yaml.SequenceNode {
			t.Fatalf("%s: client is not a list", path)
		}
		for _, item := range list.Content {
			reason := strings.TrimSpace(item.HeadComment + " " + item.LineComment)
			if item.Kind != yaml.ScalarNode || item.Value == "" {
				t.Fatalf("%s:%d: want a scenario name", path, item.Line)
			}
			if reason == "" {
				t.Errorf("%s:%d: %s has no reason (a comment before it)", path, item.Line, item.Value)
			}
			if _, dup := reasons[item.Value]; dup {
				t.Errorf("%s:%d: %s listed twice", path, item.Line, item.Value)
			}
			reasons[item.Value] = reason
		}
	}
	if len(reasons) == 0 {
		t.Fatalf("%s: no client scenarios listed", path)
	}
	t.Logf("expected failures: %v", slices.Sorted(maps.Keys(reasons)))
	return reasons
}
