package main

// The official MCP conformance suite (npm @modelcontextprotocol/conformance,
// pinned in scripts/conformance.sh) run against "toolwire serve --http" in
// front of the project's fixture server (./conformance/server) over stdio.
// scripts/test.sh installs the suite; without it, or without node, the test
// is skipped, except under CI=true, where it fails.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	conformanceSuiteVersion = "0.1.16"         // as pinned in scripts/conformance.sh
	conformanceRunTimeout   = 10 * time.Minute // the whole suite: ~32 scenarios in one node process, seconds
	conformanceServeBound   = 12 * time.Minute // serve's own context
	conformanceChecksPassed = 44               // go-sdk v1.8.0's own conformance server, stateful
	conformanceStartTimeout = 90 * time.Second // serve: fixture up and listening
	conformanceStopTimeout  = 20 * time.Second // serve: from cancel to return
	conformanceScenarioSecs = "60"             // conformance.sh --timeout, per scenario
	conformanceFixturePkg   = "github.com/toolwire/toolwire/conformance/server"
	conformanceScript       = "../../scripts/conformance.sh"
)

// statelessFailures are the scenarios a stateless server cannot pass, with
// the reason; anything else failing is a regression.
var statelessFailures = map[string]string{
	"tools-call-sampling":          "a stateless server cannot send requests to the client (sampling/createMessage)",
	"tools-call-elicitation":       "a stateless server cannot send requests to the client (elicitation/create)",
	"elicitation-sep1034-defaults": "a stateless server cannot send requests to the client (elicitation/create)",
	"elicitation-sep1330-enums":    "a stateless server cannot send requests to the client (elicitation/create)",
}

// conformanceSuite returns the npm directory holding the pinned suite,
// skipping (or failing, under CI=true) when node or the suite is missing.
func conformanceSuite(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping the conformance suite under -short: it runs node")
	}
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format+" (CI=true: CI installs node and the suite through scripts/test.sh, so this is a failure)", args...)
		}
		t.Skipf(format+"; run scripts/conformance.sh --install-only (needs Node >= 20) to enable this test", args...)
	}
	for _, cmd := range []string{"node", "bash", "timeout"} {
		if _, err := exec.LookPath(cmd); err != nil {
			unavailable("%s not found: %v", cmd, err)
		}
	}
	npmDir := os.Getenv("TOOLWIRE_NPM_DIR")
	if npmDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			unavailable("no TOOLWIRE_NPM_DIR and no home directory: %v", err)
		}
		npmDir = filepath.Join(home, ".cache", "toolwire-npm")
	}
	raw, err := os.ReadFile(filepath.Join(npmDir, "node_modules", "@modelcontextprotocol", "conformance", "package.json"))
	if err != nil {
		unavailable("the conformance suite is not installed in %s: %v", npmDir, err)
	}
	var installed struct{ Version string }
	_ = json.Unmarshal(raw, &installed)
	if installed.Version != conformanceSuiteVersion {
		unavailable("%s has @modelcontextprotocol/conformance %q, want %q", npmDir, installed.Version, conformanceSuiteVersion)
	}
	return npmDir
}

// conformanceRun is what scripts/conformance.sh reported.
type conformanceRun struct {
	verdicts       map[string]string // scenario -> PASS, FAIL or SKIP
	passed, failed int               // checks, as the suite counts them
	output         string
}

var (
	verdictLine = regexp.MustCompile(`(?m)^(\S+)\s+(PASS|FAIL|SKIP)\s+\d+\s+\d+\s+\d+`)
	totalsLine  = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)
)

func parseConformance(t *testing.T, out string) conformanceRun {
	t.Helper()
	run := conformanceRun{verdicts: map[string]string{}, output: out}
	for _, m := range verdictLine.FindAllStringSubmatch(out, -1) {
		run.verdicts[m[1]] = m[2]
	}
	m := totalsLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 || len(run.verdicts) == 0 {
		t.Fatalf("no scenario table or totals in the conformance output:\n%s", out)
	}
	last := m[len(m)-1]
	run.passed, _ = strconv.Atoi(last[1])
	run.failed, _ = strconv.Atoi(last[2])
	return run
}

func (r conformanceRun) withVerdict(v string) []string {
	var out []string
	for s, got := range r.verdicts {
		if got == v {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// TestConformanceSuiteThroughServeHTTP is the conformance target:
// with the gateway in front of the fixture server, stateful mode scores
// what go-sdk's own server scores (44 checks passed, none failed), and
// stateless mode fails only what a stateless server cannot do.
func TestConformanceSuiteThroughServeHTTP(t *testing.T) {
	t.Parallel() // mostly waiting on other processes: runs beside the rest
	npmDir := conformanceSuite(t)
	dir := t.TempDir()
	fixtureBin := conformanceFixture(t)
	config := filepath.Join(dir, "toolwire.yaml")
	if err := os.WriteFile(config, []byte("servers:\n  everything:\n    command: "+quoteYAML(fixtureBin)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, mode := range []string{"stateful", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			args := []string{"--config", config, "serve", "--http", "127.0.0.1:0", "--unprefixed"}
			if mode == "stateless" {
				args = append(args, "--stateless")
			}
			url := serveForConformance(t, args)

			run := runConformanceScript(t, npmDir, conformanceRunTimeout, conformanceScript, url,
				"--timeout", conformanceScenarioSecs, "-o", filepath.Join(t.TempDir(), "results"))

			failed := run.withVerdict("FAIL")
			switch mode {
			case "stateful":
				if len(failed) > 0 || run.failed != 0 || run.passed < conformanceChecksPassed {
					t.Errorf("stateful: failed scenarios %v, checks %d passed / %d failed; want none failed and at least %d passed\n%s",
						failed, run.passed, run.failed, conformanceChecksPassed, run.output)
				}
			case "stateless":
				var unexpected, missing []string
				for _, s := range failed {
					if _, ok := statelessFailures[s]; !ok {
						unexpected = append(unexpected, s)
					}
				}
				for s := range statelessFailures {
					if run.verdicts[s] != "FAIL" {
						missing = append(missing, s) // passing now: update the list and the docs
					}
				}
				if len(unexpected) > 0 || len(missing) > 0 || run.failed != len(statelessFailures) {
					t.Errorf("stateless: unexpected failures %v; expected failures that did not fail %v; %d checks failed, want %d\n%s",
						unexpected, missing, run.failed, len(statelessFailures), run.output)
				}
			}
			if run.verdicts["tools-call-with-logging"] != "PASS" || run.verdicts["resources-read-text"] != "PASS" {
				t.Errorf("log relay or resource serving failed:\n%s", run.output)
			}
		})
	}
}

// TestConformanceReportsThroughServeHTTPToAnHTTPUpstream runs the suite's
// progress and logging scenarios through the gateway in front of the
// fixture served over Streamable HTTP: the last report of a call, sent
// just before its result, must reach the caller before the result does,
// as it does over stdio. Losing it is a race that loses about one run in
// two, so the scenarios run three times, each time with the rest of the
// suite (one process runs it all as fast as two scenarios alone), all of
// which passes: test_reconnection's stream, closed mid-call by the fixture,
// is resumed by toolwire's client from the fixture's event store.
func TestConformanceReportsThroughServeHTTPToAnHTTPUpstream(t *testing.T) {
	t.Parallel() // mostly waiting on other processes: runs beside the rest
	npmDir := conformanceSuite(t)
	dir := t.TempDir()
	fixtureBin := conformanceFixture(t)
	upstream := serveFixtureHTTP(t, fixtureBin)
	config := filepath.Join(dir, "toolwire.yaml")
	if err := os.WriteFile(config, []byte("servers:\n  everything:\n    url: "+quoteYAML(upstream)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := serveForConformance(t, []string{"--config", config, "serve", "--http", "127.0.0.1:0", "--unprefixed"})
	scenarios := []string{"tools-call-with-progress", "tools-call-with-logging"}
	for round := 1; round <= 3; round++ {
		run := runConformanceScript(t, npmDir, conformanceRunTimeout, conformanceScript,
			url, "--timeout", conformanceScenarioSecs, "-o", filepath.Join(t.TempDir(), "results"))
		for _, s := range scenarios {
			if run.verdicts[s] != "PASS" {
				t.Fatalf("round %d: %s = %q, want PASS\n%s", round, s, run.verdicts[s], run.output)
			}
		}
		if failed := run.withVerdict("FAIL"); len(failed) > 0 || run.failed != 0 || run.passed != conformanceChecksPassed {
			t.Fatalf("round %d: failed %v, checks %d passed / %d failed; want none failed, %d / 0\n%s",
				round, failed, run.passed, run.failed, conformanceChecksPassed, run.output)
		}
	}
}

// fixtureListening finds the URL the fixture prints once it listens.
var fixtureListening = regexp.MustCompile(`listening on (http://\S+/mcp)`)

// serveFixtureHTTP starts the fixture binary serving Streamable HTTP on a
// free loopback port and returns its URL, ending it when the test ends.
func serveFixtureHTTP(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "-http", "127.0.0.1:0")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the fixture: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(conformanceStartTimeout)
	for time.Now().Before(deadline) {
		if m := fixtureListening.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the fixture printed no URL within %s\nstderr:\n%s", conformanceStartTimeout, stderr.String())
	return ""
}

// runConformanceScript runs one of the conformance scripts with args,
// bounded by limit, and returns what it reported. The script exits 1 when a
// scenario failed; its table says which, so that is not an error here.
func runConformanceScript(t *testing.T, npmDir string, limit time.Duration, script string, args ...string) conformanceRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "TOOLWIRE_NPM_DIR="+npmDir)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the suite did not finish within %s:\n%s", limit, out.String())
	}
	var xe *exec.ExitError
	if err != nil && !(errors.As(err, &xe) && xe.ExitCode() == 1) {
		t.Fatalf("%s: %v\n%s", script, err, out.String())
	}
	run := parseConformance(t, out.String())
	t.Logf("%s: %d checks passed, %d failed, %d scenarios, in %s", script, run.passed, run.failed, len(run.verdicts), time.Since(started).Round(time.Second))
	return run
}

// serveForConformance starts "toolwire serve" in-process with args and
// returns the URL it serves, stopping it when the test ends.
func serveForConformance(t *testing.T, args []string) string {
	t.Helper()
	stderr := &urlStderr{url: make(chan string, 1)}
	e := &env{stdin: strings.NewReader(""), stdout: &syncBuffer{}, stderr: stderr,
		isTerminal: func() bool { return false }, lookupEnv: func(string) (string, bool) { return "", false }}
	ctx, cancel := context.WithTimeout(context.Background(), conformanceServeBound)
	done := make(chan int, 1)
	go func() {
		root := newRootCommand(e)
		root.SetArgs(args)
		done <- exitCode(root.ExecuteContext(ctx), stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("serve exited %d after cancel, want %d\nstderr:\n%s", code, exitOK, stderr.String())
			}
		case <-time.After(conformanceStopTimeout):
			t.Errorf("serve did not return within %s of cancel\nstderr:\n%s", conformanceStopTimeout, stderr.String())
		}
	})
	select {
	case url := <-stderr.url:
		return url
	case code := <-done:
		done <- code
		t.Fatalf("serve exited %d before serving\nstderr:\n%s", code, stderr.String())
	case <-time.After(conformanceStartTimeout):
		t.Fatalf("serve printed no URL within %s\nstderr:\n%s", conformanceStartTimeout, stderr.String())
	}
	return ""
}

var (
	fixtureOnce sync.Once
	fixturePath string
	fixtureErr  error
)

// conformanceFixture returns the suite's fixture server, built once for
// every test that needs it.
func conformanceFixture(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := e2eBuildDir()
		if err != nil {
			fixtureErr = err
			return
		}
		fixturePath = filepath.Join(dir, "conformance-fixture")
		fixtureErr = goBuild(fixturePath, conformanceFixturePkg, false)
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixturePath
}
