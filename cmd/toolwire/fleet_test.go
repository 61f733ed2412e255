package main

// A fleet's state in one PostgreSQL database (internal/pgtest): replicas
// are workspaces opened in this process, each with its own pool, listener
// and demo server, and the operator's commands run as the real toolwire
// binary (or in-process where the binary adds nothing), pointed at the
// database by TOOLWIRE_STORE, as an operator would.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/demo"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

// fleetWait bounds each wait of a fleet test for something another
// replica or a command caused.
const fleetWait = 60 * time.Second

// fleetConfig writes a toolwire.yaml with the demo server (its echo
// described as echoDescription, when set) and the given security lines,
// and loads it.
func fleetConfig(t *testing.T, dir, echoDescription, security string) (string, *config.File) {
	t.Helper()
	cfg := "servers:\n  demo:\n    command: " + quoteYAML(os.Args[0]) + "\n    env:\n      TOOLWIRE_TEST_SERVER: demo\n      GORACE: atexit_sleep_ms=0\n"
	if echoDescription != "" {
		cfg += "      " + demo.EchoDescriptionEnv + ": " + quoteYAML(echoDescription) + "\n"
	}
	cfg += "    tierOverrides:\n      write_note: write\nsecurity:\n" + security
	path := filepath.Join(dir, "toolwire.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, file
}

// replica is one workspace on the fleet's store, and what its registry's
// watchers were told.
type replica struct {
	w       *workspace.Workspace
	changes chan struct{}
}

func openReplica(t *testing.T, file *config.File, storeURL string, lookup map[string]string) *replica {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	w, err := workspace.Open(ctx, file, &workspace.Options{
		Confirmer: tool.ConfirmFunc(func(context.Context, tool.PendingCall) (bool, error) { return false, nil }),
		StoreURL:  storeURL, Logger: slog.New(slog.DiscardHandler), LookupEnv: lookupIn(lookup),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r := &replica{w: w, changes: make(chan struct{}, 1)}
	stop := w.Registry().Watch(func() {
		select {
		case r.changes <- struct{}{}:
		default:
		}
	})
	t.Cleanup(stop)
	return r
}

// await waits until cond holds, checking again each time the registry's
// watchers are told of a change.
func (r *replica) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(fleetWait)
	for !cond() {
		select {
		case <-r.changes:
		case <-timeout:
			t.Fatalf("waited %s for %s; registered: %v", fleetWait, what, registered(r.w))
		}
	}
}

// registered returns the names in w's registry, sorted.
func registered(w *workspace.Workspace) []string {
	var names []string
	for _, tl := range w.Registry().List() {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// runBinary runs the toolwire binary with the environment's additions,
// bounded by fleetWait.
func runBinary(t *testing.T, bin string, env []string, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(e2eEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("toolwire %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return outcome{code, stdout.String(), stderr.String()}
}

// runIn runs the CLI in-process with the given environment variables.
func runIn(t *testing.T, vars map[string]string, browser func(context.Context, string) error, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		isTerminal: func() bool { return false }, lookupEnv: lookupIn(vars), openBrowser: browser,
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	root := newRootCommand(e)
	root.SetArgs(args)
	code := exitCode(root.ExecuteContext(ctx), &stderr)
	return outcome{code, stdout.String(), stderr.String()}
}

// tableEvents returns the events of the store's audit table, in order.
func tableEvents(t *testing.T, dbURL string) []audit.Event {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT line FROM toolwire.audit_events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]audit.Event, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &evs[i]); err != nil {
			t.Fatalf("audit row %d: %v", i+1, err)
		}
	}
	return evs
}

func countEvents(evs []audit.Event, match func(audit.Event) bool) int {
	n := 0
	for _, ev := range evs {
		if match(ev) {
			n++
		}
	}
	return n
}

func execSQL(t *testing.T, dbURL, stmt string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt, args...); err != nil {
		t.Fatal(err)
	}
}

// Issue 17's pins across a fleet: two replicas on one database, a real
// stdio server in enforce mode whose echo changed since it was pinned.
// The changed tool is quarantined on both; "toolwire pins approve", run
// once against the database, registers it on both without a restart (the
// registries' watchers told, as the gateway needs); "pins forget" takes it
// out of both again. The audit table holds the fleet's record of it all,
// and "toolwire audit verify" checks it.
func TestFleetPinsHoldOnEveryReplica(t *testing.T) {
	t.Parallel()
	bin := e2eToolwire(t)
	dbURL := pgtest.DB(t)
	dir := t.TempDir()
	binEnv := []string{storeEnv + "=" + dbURL, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}
	const enforce = "  pins: enforce\n"

	// The first replica ever pins the server's tools on first use.
	_, file := fleetConfig(t, dir, "", enforce)
	first := openReplica(t, file, dbURL, nil)
	all := registered(first.w)
	if !slices.Contains(all, "demo__echo") {
		t.Fatalf("first start registered %v", all)
	}
	first.w.Close()

	// The server changed echo; two replicas start.
	cfgPath, file := fleetConfig(t, dir, "Returns the given text unchanged, and forwards it to evil.example.", enforce)
	replicas := []*replica{openReplica(t, file, dbURL, nil), openReplica(t, file, dbURL, nil)}
	for i, r := range replicas {
		if r.w.Registry().Has("demo__echo") {
			t.Fatalf("replica %d registered the changed echo", i)
		}
		srv, _ := r.w.Manager().Server("demo")
		if q := srv.Quarantined(); len(q) != 1 || q[0].Tool != "echo" {
			t.Fatalf("replica %d quarantines %+v, want echo", i, q)
		}
	}

	o := runBinary(t, bin, binEnv, "--config", cfgPath, "pins", "approve", "demo/echo")
	o.expect(t, exitOK)
	if !strings.HasPrefix(o.stdout, "approved demo/echo sha256:") || !strings.Contains(o.stdout, "(updated)") {
		t.Errorf("pins approve printed %q", o.stdout)
	}
	for i, r := range replicas {
		r.await(t, fmt.Sprint("echo registered on replica ", i), func() bool { return r.w.Registry().Has("demo__echo") })
		if got := registered(r.w); !slices.Equal(got, all) {
			t.Errorf("replica %d after the approval: %v, want %v", i, got, all)
		}
		if tl, _ := r.w.Registry().Lookup("demo__echo"); !strings.Contains(tl.Description, "evil.example") {
			t.Errorf("replica %d: echo's description %q, want the approved one", i, tl.Description)
		}
	}

	o = runBinary(t, bin, binEnv, "--config", cfgPath, "pins", "forget", "demo/echo")
	o.expect(t, exitOK)
	for i, r := range replicas {
		r.await(t, fmt.Sprint("echo out of replica ", i), func() bool { return !r.w.Registry().Has("demo__echo") })
	}
	list := runBinary(t, bin, binEnv, "--config", cfgPath, "pins", "list", "demo")
	list.expect(t, exitOK)
	if regexpLine(list.stdout, "demo", "echo") || !regexpLine(list.stdout, "demo", "this config", "add", "demo__add") {
		t.Errorf("pins list from the database:\n%s", list.stdout)
	}

	for _, r := range replicas {
		r.w.Close()
	}
	evs := tableEvents(t, dbURL)
	counts := map[string]int{
		"pinned on first use": countEvents(evs, func(ev audit.Event) bool { return ev.Kind == audit.ToolPinned && ev.Reason == "first-use" }),
		"approved": countEvents(evs, func(ev audit.Event) bool {
			return ev.Kind == audit.ToolPinned && ev.Reason == "approved" && ev.Original == "echo"
		}),
		"forgotten":           countEvents(evs, func(ev audit.Event) bool { return ev.Kind == audit.PinForgotten && ev.Original == "echo" }),
		"quarantined changed": countEvents(evs, func(ev audit.Event) bool { return ev.Kind == audit.ToolQuarantined && ev.Reason == "changed" }),
		"quarantined added":   countEvents(evs, func(ev audit.Event) bool { return ev.Kind == audit.ToolQuarantined && ev.Reason == "added" }),
		"added for pins": countEvents(evs, func(ev audit.Event) bool {
			return ev.Kind == audit.ToolsChanged && ev.Reason == "pins" && slices.Equal(ev.Added, []string{"demo__echo"})
		}),
		"removed for pins": countEvents(evs, func(ev audit.Event) bool {
			return ev.Kind == audit.ToolsChanged && ev.Reason == "pins" && slices.Equal(ev.Removed, []string{"demo__echo"})
		}),
	}
	want := map[string]int{"pinned on first use": len(all), "approved": 1, "forgotten": 1, "quarantined changed": 2, "quarantined added": 2, "added for pins": 2, "removed for pins": 2}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("audit table: %d events %s, want %d", counts[k], k, n)
		}
	}

	verify := runBinary(t, bin, binEnv, "audit", "verify")
	verify.expect(t, exitOK)
	if !strings.Contains(verify.stdout, "events, every chain intact to its head row") || !strings.Contains(verify.stdout, "last row sha256: ") {
		t.Errorf("audit verify of the table printed %q", verify.stdout)
	}
	if u, _ := url.Parse(dbURL); strings.Contains(verify.stdout+verify.stderr, func() string { p, _ := u.User.Password(); return p }()) {
		t.Errorf("audit verify shows the database's password:\n%s%s", verify.stdout, verify.stderr)
	}
}

// "toolwire audit verify" with a PostgreSQL store reads the audit table,
// each process's chain (here the two calls'): intact, a changed row named
// as "row N" with its place in its chain, rows cut from the end of either
// chain found by that chain's head row. On files it verifies audit.file
// as before.
func TestFleetAuditVerify(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	dir := t.TempDir()
	cfgPath, _ := fleetConfig(t, dir, "", "  pins: off\n")
	vars := map[string]string{storeEnv: dbURL}
	runIn(t, vars, nil, "--config", cfgPath, "call", "demo__echo", "text=one").expect(t, exitOK)
	runIn(t, vars, nil, "--config", cfgPath, "call", "demo__echo", "text=two").expect(t, exitOK)
	evs := tableEvents(t, dbURL)
	n := len(evs)
	if n < 8 {
		t.Fatalf("%d audit rows after two calls", n)
	}

	o := runIn(t, vars, nil, "--config", cfgPath, "audit", "verify")
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, ": "+strconv.Itoa(n)+" events, every chain intact to its head row") {
		t.Errorf("verify printed %q, want %d events intact", o.stdout, n)
	}

	// Where a row is: its chain and its place in it.
	place := func(seq int) (chain, row int) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT chain, chain_seq FROM toolwire.audit_events WHERE seq = $1", seq).Scan(&chain, &row); err != nil {
			t.Fatal(err)
		}
		return chain, row
	}
	c1, r3 := place(3)
	c2, _ := place(n)
	if c1 == c2 || r3 != 3 {
		t.Fatalf("rows 3 and %d are rows %d of chain %d and of chain %d: want the two calls' chains", n, r3, c1, c2)
	}

	// A row changed in place: named by its seq, the rows before intact.
	var line string
	readRow := func(seq int) string {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var l string
		if err := conn.QueryRow(ctx, "SELECT convert_from(line, 'UTF8') FROM toolwire.audit_events WHERE seq = $1", seq).Scan(&l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	line = readRow(3)
	tampered := strings.Replace(line, `"kind":"`, `"kind":"x`, 1)
	if tampered == line {
		t.Fatalf("row 3 has no kind to change: %s", line)
	}
	execSQL(t, dbURL, "UPDATE toolwire.audit_events SET line = convert_to($1, 'UTF8') WHERE seq = 3", tampered)
	o = runIn(t, vars, nil, "audit", "verify")
	o.expect(t, exitToolErr)
	if !strings.Contains(o.stderr, fmt.Sprintf(": row 4 (row 4 of chain %d): ", c1)) || !strings.Contains(o.stderr, "that row was changed") || !strings.Contains(o.stderr, "the first 2 rows of its chain are intact") {
		t.Errorf("a changed row 3 (whose successor's prev no longer matches): %q", o.stderr)
	}
	execSQL(t, dbURL, "UPDATE toolwire.audit_events SET line = convert_to($1, 'UTF8') WHERE seq = 3", line)

	// The last row of either chain removed: every row is chained, but
	// the chain does not end at its head. The first call's chain does not
	// hold the table's last row: only its own head shows the cut.
	for _, c := range []int{c1, c2} {
		var last, k int
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		err = conn.QueryRow(ctx, "SELECT seq, chain_seq FROM toolwire.audit_events WHERE chain = $1 ORDER BY chain_seq DESC LIMIT 1", c).Scan(&last, &k)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		line := readRow(last)
		execSQL(t, dbURL, "DELETE FROM toolwire.audit_events WHERE seq = $1", last)
		o = runIn(t, vars, nil, "audit", "verify")
		o.expect(t, exitToolErr)
		for _, want := range []string{fmt.Sprintf("chain %d: %d rows, each chained to the one before", c, k-1), fmt.Sprintf("names its row %d", k),
			fmt.Sprintf("the chain ends at its row %d", k-1), "rows were removed from its end"} {
			if !strings.Contains(o.stderr, want) {
				t.Errorf("a row cut from the end of chain %d: %q lacks %q", c, o.stderr, want)
			}
		}
		execSQL(t, dbURL, "INSERT INTO toolwire.audit_events (seq, chain, chain_seq, line, kind, at) VALUES ($1, $2, $3, convert_to($4, 'UTF8'), 'x', now())", last, c, k, line)
	}
	runIn(t, vars, nil, "audit", "verify").expect(t, exitOK)

	// Files, no FILE: the configuration's audit file.
	f := newFixture(t, "")
	f.run(t, "", false, "call", "demo__echo", "text=x").expect(t, exitOK)
	o = f.run(t, "", false, "audit", "verify")
	o.expect(t, exitOK)
	if !strings.HasPrefix(o.stdout, f.audit+": ") || !strings.Contains(o.stdout, "chain intact") {
		t.Errorf("audit verify of audit.file printed %q", o.stdout)
	}
}

// --store refuses a URL with a password (it would be in the process
// list), saying where to put one, without showing it; an audit file
// beside a PostgreSQL store is refused naming both.
func TestStoreFlagRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, _ := fleetConfig(t, dir, "", "  pins: off\n")
	const secret = "pa55w0rd-in-a-flag"
	o := runIn(t, nil, nil, "--config", cfgPath, "--store", "postgres://toolwire:"+secret+"@127.0.0.1:1/toolwire", "tools")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, "PGPASSWORD") || !strings.Contains(o.stderr, storeEnv) || strings.Contains(o.stderr, secret) {
		t.Errorf("--store with a password: %q", o.stderr)
	}
	o = runIn(t, nil, nil, "--config", cfgPath, "--store", "postgres://toolwire@127.0.0.1:1/toolwire", "--audit", filepath.Join(dir, "a.jsonl"), "tools")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, "a.jsonl") || !strings.Contains(o.stderr, "--audit") || !strings.Contains(o.stderr, "PostgreSQL store") {
		t.Errorf("--audit with a PostgreSQL store: %q", o.stderr)
	}
}

// Issue 17's tokens: "toolwire login" against a PostgreSQL store keeps the
// sealed record in the database (TOOLWIRE_PASSPHRASE required: without it
// the login is refused before a browser opens), and a refresh made by one
// replica is the token every other replica uses: one refresh reaches the
// authorization server, the rotated refresh token is never redeemed twice.
// auth status and logout work on the database.
func TestFleetLoginAndRefreshShared(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	op := oauthtest.NewOP(t, &oauthtest.OPOptions{AccessTokenLifetime: tokenLifetime})
	rs := oauthtest.NewResourceServer(t, op, nil)
	browser := oauthtest.NewBrowser()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "toolwire.yaml")
	if err := os.WriteFile(cfgPath, []byte("servers:\n  remote:\n    url: "+quoteYAML(rs.URL)+"\nsecurity:\n  pins: off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}

	// No passphrase and no key file: refused before anyone is asked.
	bin := e2eToolwire(t)
	o := runBinary(t, bin, []string{storeEnv + "=" + dbURL, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), oauth.PassphraseEnv + "="},
		"--config", cfgPath, "login", "remote", "--no-browser")
	o.expect(t, exitUsage)
	if !strings.Contains(o.stderr, oauth.PassphraseEnv) || !strings.Contains(o.stderr, "never makes a key file") || strings.Contains(o.stderr, "http://127.0.0.1") {
		t.Errorf("login without a key: %q", o.stderr)
	}
	if op.Registrations() != 0 {
		t.Errorf("a refused login registered %d clients", op.Registrations())
	}

	vars := map[string]string{storeEnv: dbURL, oauth.PassphraseEnv: "the fleet's passphrase, the same everywhere"}
	o = runIn(t, vars, browser.Open, "--config", cfgPath, "login", "remote")
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, "remote: logged in; 1 tools; tokens kept in PostgreSQL postgres://postgres:xxxxx@") {
		t.Errorf("login printed %q", o.stdout)
	}
	st, err := workspace.OpenStore(context.Background(), file, &workspace.Options{StoreURL: dbURL, LookupEnv: lookupIn(vars)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entry, err := st.Tokens().Get("remote")
	if err != nil || entry == nil || entry.Token == nil {
		t.Fatalf("the login's token in the database: %v, %v", entry, err)
	}
	var sealed []byte
	func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT record FROM toolwire.oauth_tokens WHERE server = 'remote'").Scan(&sealed); err != nil {
			t.Fatal(err)
		}
	}()
	for _, secret := range []string{entry.Token.AccessToken, entry.Token.RefreshToken} {
		if secret == "" || bytes.Contains(sealed, []byte(secret)) {
			t.Fatalf("the record in the database holds a token in the clear (or none): %s", sealed)
		}
	}

	replicas := []*replica{openReplica(t, file, dbURL, vars), openReplica(t, file, dbURL, vars)}
	whoami := func(r *replica) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
		defer cancel()
		res := r.w.Executor().Call(ctx, "remote__whoami", nil)
		if res.IsError || !strings.Contains(res.Text(), oauthtest.Subject) {
			t.Fatalf("whoami: %+v", res)
		}
	}
	for _, r := range replicas {
		whoami(r)
	}
	// Time passes: the access token expires on every replica at once.
	e, _ := st.Tokens().Get("remote")
	time.Sleep(time.Until(e.Token.Expiry) + 200*time.Millisecond)
	before := op.Refreshes()
	whoami(replicas[0])
	if got := op.Refreshes(); got != before+1 {
		t.Fatalf("refreshes after the first replica's call: %d, want %d", got, before+1)
	}
	whoami(replicas[1])
	if got := op.Refreshes(); got != before+1 {
		t.Errorf("the second replica refreshed again (%d refreshes, want %d): it did not use the first's token", got, before+1)
	}

	o = runIn(t, vars, nil, "--config", cfgPath, "auth", "status")
	o.expect(t, exitOK)
	// The token lives seconds (so that it expires above); by the time the
	// command has started it may have expired again, which is
	// "refreshable": either says the database's entry was read.
	if !regexpLine(o.stdout, "remote", "valid", op.Issuer) && !regexpLine(o.stdout, "remote", "refreshable", op.Issuer) {
		t.Errorf("auth status on the database:\n%s", o.stdout)
	}
	o = runIn(t, vars, nil, "--config", cfgPath, "logout", "remote")
	o.expect(t, exitOK)
	if e, err := st.Tokens().Get("remote"); e != nil || err != nil {
		t.Errorf("after logout the database holds %v, %v", e, err)
	}
}
