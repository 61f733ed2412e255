package workspace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

// A workspace on a PostgreSQL store named by a ${VAR} in the
// configuration: the start-up log says which store (without its password)
// and which migrations the start applied; the pins are the store's, and
// the audit log is its table (audit.required is met by it), one chain
// that verifies; the next start applies no migration.
func TestOpenOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.DB(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	if password == "" {
		t.Fatalf("the test database's URL %s has no password to look for", u.Redacted())
	}
	lookup := func(k string) (string, bool) {
		if k == "FLEET_DB" {
			return dbURL, true
		}
		return "", false
	}
	f := newFixture(t)
	file := f.load(t, demoServer+"store: ${FLEET_DB}\naudit:\n  required: true\nsecurity:\n  pins: enforce\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func() (*workspace.Workspace, string) {
		t.Helper()
		var logs bytes.Buffer
		w, err := workspace.Open(ctx, file, &workspace.Options{
			Confirmer: tool.ConfirmFunc(approveAll), LookupEnv: lookup,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		return w, logs.String()
	}

	w, logs := open()
	if w.Store().Kind() != store.Postgres {
		t.Fatalf("store %s, want PostgreSQL", w.Store().Kind())
	}
	if !strings.Contains(logs, `msg="state kept in PostgreSQL"`) || !strings.Contains(logs, `migrationsApplied="1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12"`) || !strings.Contains(logs, u.Host) {
		t.Errorf("start-up log does not name the store and the migration applied:\n%s", logs)
	}
	if strings.Contains(logs, password) {
		t.Errorf("start-up log shows the store's password:\n%s", logs)
	}
	if res := w.Executor().Call(ctx, "demo__echo", json.RawMessage(`{"text":"in the fleet's audit"}`)); res.IsError {
		t.Fatalf("echo: %+v", res)
	}
	entries, err := w.Store().Pins().ListContext(ctx)
	if err != nil || len(entries) == 0 || entries[0].Server != "demo" {
		t.Errorf("pins in the store: %v, %v; want the demo's, pinned on first use", entries, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	w, logs = open()
	if !strings.Contains(logs, `migrationsApplied="none (the schema was up to date)"`) {
		t.Errorf("second start-up log:\n%s", logs)
	}
	rep, err := w.Store().VerifyAudit(ctx, nil)
	if err != nil {
		t.Fatalf("the audit table does not verify: %v", err)
	}
	w.Close()
	kinds := map[audit.Kind]int{}
	countKinds(t, dbURL, kinds)
	if kinds[audit.CallRequested] != 1 || kinds[audit.CallExecuted] != 1 || kinds[audit.ServerStarted] != 2 || kinds[audit.ToolPinned] == 0 {
		t.Errorf("audit table events %v: want one call, two starts, the pins of the first", kinds)
	}
	if rep.Lines < 5 {
		t.Errorf("verified %d rows", rep.Lines)
	}
}

// countKinds adds up the audit table's events by kind.
func countKinds(t *testing.T, dbURL string, kinds map[audit.Kind]int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT kind, count(*) FROM toolwire.audit_events GROUP BY kind")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		kinds[audit.Kind(k)] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// What a workspace refuses before it connects anywhere: an audit file or a
// pins file beside a PostgreSQL store, and a store variable that is not
// set. Options.StoreURL (the CLI's --store) wins over the configuration's.
func TestOpenStoreRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	const pg = "postgres://toolwire@127.0.0.1:1/toolwire?connect_timeout=5"
	for _, tc := range []struct {
		name, cfg string
		opts      *workspace.Options
		is        error
		want      []string
	}{
		{"audit.file", "store: " + pg + "\naudit:\n  file: audit.jsonl\n", nil, workspace.ErrAuditFileOnPostgres,
			[]string{"audit.jsonl", "toolwire.audit_events"}},
		{"AuditFile", "store: " + pg + "\n", &workspace.Options{AuditFile: "flag.jsonl"}, workspace.ErrAuditFileOnPostgres,
			[]string{"flag.jsonl"}},
		{"StoreURL over no store", "audit:\n  file: audit.jsonl\n", &workspace.Options{StoreURL: pg}, workspace.ErrAuditFileOnPostgres, nil},
		{"pinsFile", "store: " + pg + "\nsecurity:\n  pinsFile: pins.json\n", nil, workspace.ErrPinsFileOnPostgres,
			[]string{"pins.json"}},
		{"unset variable", "store: ${NO_SUCH_STORE}\n", nil, nil, []string{"store", "NO_SUCH_STORE"}},
	} {
		opts := &workspace.Options{LookupEnv: func(string) (string, bool) { return "", false }}
		if tc.opts != nil {
			opts.AuditFile, opts.StoreURL = tc.opts.AuditFile, tc.opts.StoreURL
		}
		st, err := workspace.OpenStore(ctx, f.load(t, demoServer+tc.cfg), opts)
		if err == nil {
			st.Close()
			t.Errorf("%s: opened", tc.name)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.is)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want it to name %q", tc.name, err, want)
			}
		}
	}
}
