package workspace_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/gateway"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/store"
)

// roleURL makes a role of its own on dbURL's cluster (a superuser, as the
// tests' own) and returns dbURL as that role, and a func that stops or
// lets again the role's new connections: one replica whose connections
// to the database fail while the others' do not.
func roleURL(t *testing.T, dbURL string) (string, func(allow bool)) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	admin := *u
	admin.Path = "/postgres"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	role := pgx.Identifier{"replica_" + strings.TrimPrefix(u.Path, "/")}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN SUPERUSER PASSWORD 'replica-pw'"); err != nil {
		t.Fatal(err)
	}
	as := *u
	as.User = url.UserPassword(strings.Trim(role, `"`), "replica-pw")
	return as.String(), func(allow bool) {
		t.Helper()
		login := " NOLOGIN"
		if allow {
			login = " LOGIN"
		}
		if _, err := conn.Exec(ctx, "ALTER ROLE "+role+login); err != nil {
			t.Fatal(err)
		}
	}
}

// Issue 22.11: a replica whose claim goes (its connection holding the
// lock is ended, and it cannot connect again) says it is not ready and
// refuses calls at once; once another replica takes it for lost (giving
// its open call the outcome instance_lost), and it can connect again, it
// cancels the call it was still running, takes a new claim as a new
// instance and is ready again, without a restart, and the audit has
// exactly one outcome for every call.
func TestFleetReplicaTakenForLostClaimsAgain(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	aURL, allow := roleURL(t, dbURL)
	reps := openFleetAt(t, []string{aURL, dbURL}, gateway.Limits{})
	a, b := reps[0], reps[1]
	old := a.w.Store().Relay().Instance()
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, query, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ready := func() (int, string) {
		t.Helper()
		resp, err := http.Get(a.url + gateway.ReadinessPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(gateway.InstanceHeader)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatal(what)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}

	s := &steer{replicas: reps, token: "alice-token", pick: func(string) int { return 0 }}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-2025", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: approve}).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: a.url + "/mcp", HTTPClient: &http.Client{Transport: s}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	long := make(chan outcome, 1)
	go func() {
		// A minute long unless cancelled.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__slow_count", Arguments: map[string]any{"steps": 100, "interval_ms": 600}})
		long <- outcome{res, err}
	}()
	waitFor("the long call was not requested", func() bool {
		return count("SELECT count(*) FROM toolwire.audit WHERE event->>'kind' = 'call.requested' AND event->>'tool' = 'demo__slow_count'") == 1
	})

	allow(false)
	terminateInstance(t, dbURL, old)
	waitFor("a, without its claim, still says it is ready", func() bool { code, _ := ready(); return code == http.StatusServiceUnavailable })
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "refused"}}); err == nil || !strings.Contains(err.Error(), "cannot take calls now") {
		t.Errorf("a call to a replica without its claim: %v; want it refused, saying so", err)
	}

	// Unseen for longer than the grace (by the database's clock), and b's
	// own claim older than it: b's sweep takes a for lost.
	if _, err := db.Exec(ctx, "UPDATE toolwire.instances SET seen_at = now() - interval '1 minute' WHERE id = $1", old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "UPDATE toolwire.instances SET claimed_at = now() - interval '1 minute' WHERE id = $1", b.w.Store().Relay().Instance()); err != nil {
		t.Fatal(err)
	}
	waitFor("b did not take a for lost", func() bool {
		return count("SELECT count(*) FROM toolwire.instances WHERE id = $1 AND recovered_at IS NOT NULL", old) == 1
	})
	allow(true)

	// a learns it was taken for lost: the call it still ran stops.
	select {
	case o := <-long:
		if o.err == nil && !o.res.IsError {
			t.Errorf("the call a ran when it was taken for lost completed: %+v; want it stopped", o.res.Content)
		}
	case <-ctx.Done():
		t.Fatal("the call a ran when it was taken for lost did not stop")
	}
	var cur string
	waitFor("a was not ready again", func() bool {
		code, inst := ready()
		cur = inst
		return code == http.StatusOK
	})
	if cur == old || cur != a.w.Store().Relay().Instance() {
		t.Errorf("a's instance when ready again: %q (relay %q), was %q; want a new one", cur, a.w.Store().Relay().Instance(), old)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "again"}}); err != nil || res.IsError {
		t.Errorf("a call to a once it holds a new claim: %v %+v", err, res)
	}
	// The session opened before goes on: a question the replica asks it
	// now (an approval) is named as the new instance's, and its answer
	// comes back to it.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": "after", "body": "the new claim"}}); err != nil || res.IsError {
		t.Errorf("an approved call on the session opened before the new claim: %v %+v", err, res)
	}

	// Every call requested has exactly one outcome; the long one's is the
	// one b gave it.
	rows, err := db.Query(ctx, `SELECT r.event->>'tool', r.instance, array_agg(coalesce(o.event->>'kind', '') || ' ' || coalesce(o.event->>'reason', '') ORDER BY o.seq)
FROM toolwire.audit r LEFT JOIN toolwire.audit o ON o.instance = r.instance AND o.event->>'batch' = r.event->>'batch'
	AND o.event->>'index' = r.event->>'index' AND o.event->>'kind' = ANY($1)
WHERE r.event->>'kind' = 'call.requested' GROUP BY r.seq, r.event, r.instance ORDER BY r.seq`,
		[]string{"validation.failed", "confirmation.rejected", "call.executed", "call.errored", "call.refused"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var tool string
		var instance int
		var outs []string
		if err := rows.Scan(&tool, &instance, &outs); err != nil {
			t.Fatal(err)
		}
		got = append(got, tool+"@"+strconv.Itoa(instance)+": "+strings.Join(outs, ", "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"demo__slow_count@" + old + ": call.errored " + store.ReasonInstanceLost,
		"demo__echo@" + cur + ": call.executed ",
		"demo__write_note@" + cur + ": call.executed ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls and their outcomes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
