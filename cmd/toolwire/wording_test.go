package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwire/toolwire/agent/agenttest"
)

// Issue 23.13: what a person reads says what they can do, in their terms.

func TestDeclinedCallSpeaksToAPerson(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "n\n", true, "call", "demo__write_note", "title=t", "body=b")
	o.expect(t, exitDeclined)
	mustContain(t, "stderr", o.stderr, `call to "demo__write_note" was declined`)
	if strings.Contains(o.stderr, "do not retry") {
		t.Errorf("a person is told what a model is told:\n%s", o.stderr)
	}
}

func TestLoginOfAnUnknownServerListsTheServers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "", false, "login", "nosuch")
	o.expect(t, exitUsage)
	mustContain(t, "stderr", o.stderr, `no server "nosuch" in the configuration (its servers: demo)`)
	if strings.Contains(o.stderr, "[demo]") {
		t.Errorf("the servers are listed as a Go slice:\n%s", o.stderr)
	}
}

func TestIdleTimeoutNamesItsFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	release := make(chan struct{})
	defer close(release)
	srv := agenttest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // says nothing until the run has given up
		case <-release:
		case <-r.Context().Done():
		}
	})
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "--idle-timeout", (300*time.Millisecond).String(), "x")...)
	o.expect(t, exitToolErr)
	mustContain(t, "stderr", o.stderr, "sent nothing for 300ms", "--idle-timeout sets how long to wait")
}

// Issue 23.12: a server error from the model is retried, and without a
// terminal each retry leaves a line on stderr.
func TestRunRetriesAServerErrorAndSaysSoWithoutATerminal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	srv := agenttest.NewServer(t,
		agenttest.Status(http.StatusBadGateway, "upstream died", "Retry-After", "0.2"),
		agenttest.OpenAIReply("fine"))
	o := f.runAgent(t, context.Background(), agentCLI{}, openaiArgs(srv, "x")...)
	o.expect(t, exitOK)
	if o.stdout != "fine\n" {
		t.Errorf("stdout = %q", o.stdout)
	}
	mustContain(t, "stderr", o.stderr, "502 Bad Gateway", "upstream died", "; retrying in 0.2 s (attempt 2)\n")
	if strings.ContainsAny(o.stderr, "\r\033") {
		t.Errorf("stderr, not a terminal, has live-line controls:\n%q", o.stderr)
	}
}
