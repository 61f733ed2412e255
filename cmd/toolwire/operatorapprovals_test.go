package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/audit"
)

// The done-when of issue 24's approvals, on a fleet: a headless agent
// (no elicitation) calls a destructive tool through replica A, and the
// call waits; toolwire approvals pending, run as its own process against
// the fleet's PostgreSQL (its own connection, not A's), lists it;
// toolwire approvals approve --scope args decides it there, and A's call
// completes; the same call again runs without waiting, a call with other
// arguments waits again, and the audit names each decision's approval
// and who took it.
func TestOperatorApprovesAHeadlessCallOnAnotherConnection(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := startCluster(t, fleetOptions{replicas: 2, callers: 1, security: "  pins: off\n", direct: true,
		gateway: "  approvals:\n    write: allow\n    operatorWait: 2m\n"})
	t.Logf("cluster up after %s", time.Since(start))
	operatorFlow(t, c, func() []audit.Event { return tableEvents(t, c.dbURL) })
}

// The same on one machine: serve and the CLI share the files of the
// store (the approvals and the pending calls beside the pins file).
func TestOperatorApprovesAHeadlessCallOnOneMachine(t *testing.T) {
	t.Parallel()
	c := startCluster(t, fleetOptions{replicas: 1, callers: 1, files: true, direct: true,
		security: "  pins: off\naudit:\n  file: audit.jsonl\n",
		gateway:  "  approvals:\n    write: allow\n    operatorWait: 2m\n"})
	operatorFlow(t, c, func() []audit.Event { return fileEvents(t, filepath.Join(c.dir, "audit.jsonl")) })
}

func fileEvents(t *testing.T, path string) []audit.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []audit.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// operatorFlow runs the done-when against c's replica r0 and its store.
func operatorFlow(t *testing.T, c *cluster, events func() []audit.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs, err := dialFleet(ctx, c, newServed(c.tokens[0]), "2025-11-25", nil) // no elicitation: headless
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cli := func(args ...string) outcome {
		return runBinary(t, c.bin, c.env, append([]string{"--config", c.config, "approvals"}, args...)...)
	}
	callAsync := func(name string, args map[string]any) <-chan string {
		out := make(chan string, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			switch {
			case err != nil:
				out <- "protocol error: " + err.Error()
			case res.IsError:
				out <- "error: " + resultText(res)
			default:
				out <- resultText(res)
			}
		}()
		return out
	}
	call := func(name string, args map[string]any) string { return <-callAsync(name, args) }
	// waiting returns the one call pending other than those in seen, as
	// the CLI lists it.
	waiting := func(seen ...string) approval.Request {
		t.Helper()
		for ctx.Err() == nil {
			o := cli("pending", "--json")
			o.expect(t, exitOK)
			var list []approval.Request
			if err := json.Unmarshal([]byte(o.stdout), &list); err != nil {
				t.Fatalf("pending --json: %v\n%s", err, o.stdout)
			}
			for _, r := range list {
				if !strings.Contains(strings.Join(seen, " "), r.ID) {
					return r
				}
			}
			time.Sleep(100 * time.Millisecond) // the call is on its way to the queue
		}
		t.Fatal("no call came to wait for an operator")
		return approval.Request{}
	}

	for _, title := range []string{"a", "b"} {
		if got := call("demo__write_note", map[string]any{"title": title, "body": "x"}); strings.HasPrefix(got, "error") {
			t.Fatalf("write_note %s: %s", title, got)
		}
	}
	first := callAsync("demo__delete_note", map[string]any{"title": "a"})
	req := waiting()
	var compact bytes.Buffer
	_ = json.Compact(&compact, req.Args)
	if req.Tool != "demo__delete_note" || req.Tier != "destructive" || compact.String() != `{"title":"a"}` || !strings.HasPrefix(req.Caller, "caller-00") {
		t.Fatalf("pending: %+v", req)
	}
	table := cli("pending")
	table.expect(t, exitOK)
	if !strings.Contains(table.stdout, req.ID) || !strings.Contains(table.stdout, `{"title":"a"}`) {
		t.Fatalf("pending table:\n%s", table.stdout)
	}
	select {
	case got := <-first:
		t.Fatalf("the call ended before a decision: %s", got)
	default:
	}
	o := cli("approve", req.ID, "--scope", "args")
	o.expect(t, exitOK)
	m := regexp.MustCompile(`lasting approval ([0-9a-f]{16}) of scope args`).FindStringSubmatch(o.stdout)
	if !strings.HasPrefix(o.stdout, "approved "+req.ID) || m == nil {
		t.Fatalf("approve said %q", o.stdout)
	}
	grant := m[1]
	if got := <-first; got != `deleted note "a"` {
		t.Fatalf("the approved call: %s", got)
	}

	// Within the scope: the same call runs without waiting for anyone.
	call("demo__write_note", map[string]any{"title": "a", "body": "again"})
	if got := call("demo__delete_note", map[string]any{"title": "a"}); got != `deleted note "a"` {
		t.Fatalf("the same call again: %s", got)
	}

	// Other arguments wait again; a denial is said with who denied.
	second := callAsync("demo__delete_note", map[string]any{"title": "b"})
	other := waiting(req.ID)
	cli("deny", other.ID, "--reason", "b stays").expect(t, exitOK)
	if got := <-second; !strings.Contains(got, "denied by \"cli:") || !strings.Contains(got, "b stays") {
		t.Fatalf("the denied call: %s", got)
	}

	// Hostile: an unknown id, a second decision, a decision with a scope
	// that does not exist.
	cli("approve", "0123456789abcdef").expect(t, exitUsage)
	o = cli("approve", other.ID)
	o.expect(t, exitToolErr)
	if !strings.Contains(o.stderr, "already decided") || !strings.Contains(o.stderr, "denied") {
		t.Fatalf("a second decision: %s", o.stderr)
	}
	cli("approve", other.ID, "--scope", "forever").expect(t, exitUsage)
	cli("approve", other.ID, "--frobnicate").expect(t, exitUsage)

	// Hostile arguments: terminal escapes, direction overrides and HTML
	// are shown escaped, in the table and in the JSON.
	evil := "x\x1b]0;pwned\x07\u202e<script>alert(1)</script>"
	third := callAsync("demo__delete_note", map[string]any{"title": evil})
	hostile := waiting(req.ID, other.ID)
	table = cli("pending")
	js := cli("pending", "--json")
	for _, out := range []string{table.stdout, js.stdout} {
		if strings.ContainsAny(out, "\x1b\x07\u202e") {
			t.Fatalf("pending shows raw controls:\n%q", out)
		}
	}
	if !strings.Contains(table.stdout, `\u202e<script>`) || !strings.Contains(js.stdout, `\u202e`) {
		t.Fatalf("pending does not show the arguments escaped:\n%s\n%s", table.stdout, js.stdout)
	}
	cli("deny", hostile.ID).expect(t, exitOK)
	<-third

	evs := events()
	var accepted, rejected []audit.Event
	for _, ev := range evs {
		if ev.Tool != "demo__delete_note" {
			continue
		}
		switch ev.Kind {
		case audit.ConfirmationAccepted:
			accepted = append(accepted, ev)
		case audit.ConfirmationRejected:
			rejected = append(rejected, ev)
		}
	}
	if len(accepted) != 2 || !strings.HasPrefix(accepted[0].Reason, "approval "+req.ID+` by "cli:`) ||
		!strings.HasSuffix(accepted[0].Reason, "granted "+grant+" (args scope)") || accepted[1].Reason != "approval "+grant {
		t.Errorf("accepted in the audit: %+v", accepted)
	}
	if len(rejected) != 2 || !strings.Contains(rejected[0].Error, "(approval "+other.ID+")") || !strings.Contains(rejected[0].Error, `denied by "cli:`) {
		t.Errorf("rejected in the audit: %+v", rejected)
	}
}
