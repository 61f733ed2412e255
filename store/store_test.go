package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/pins"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	// Nothing here may read or write the user's own configuration.
	home, err := os.MkdirTemp("", "toolwire-store-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	os.Unsetenv(oauth.PassphraseEnv)
	// zitadel's example OP logs every request through the default logger.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	code := pgtest.Main(m)
	os.RemoveAll(home)
	os.Exit(code)
}

// cheap keeps key derivation fast in tests; the parameters are still
// authenticated.
var cheap = &oauth.Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}

const testPassphrase = "correct horse battery staple"

func testOptions() *Options {
	return &Options{OAuth: &oauth.StoreOptions{Passphrase: testPassphrase, Argon2: cheap}}
}

// openPG opens a store on url (a database of pgtest), closed when the
// test ends.
func openPG(t testing.TB, url string, opts *Options) *Store {
	t.Helper()
	if opts == nil {
		opts = testOptions()
	}
	s, err := Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openFileStore opens a files store in a temporary directory.
func openFileStore(t testing.TB, opts *Options) *Store {
	t.Helper()
	if opts == nil {
		opts = testOptions()
	}
	dir := t.TempDir()
	o := *opts
	o.PinsFile = filepath.Join(dir, "pins.json")
	o.OAuthFile = filepath.Join(dir, "oauth.json")
	if o.AuditFile == "" {
		o.AuditFile = filepath.Join(dir, "audit.jsonl")
	}
	s, err := Open(context.Background(), "", &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sql runs statements on url directly, as an operator (or an attacker)
// with access to the database would.
func sql(t testing.TB, url, stmt string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tag, err := c.Exec(ctx, stmt, args...)
	if err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	return tag.RowsAffected()
}

func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const secret = "s3cretpassw0rd"
	for _, tc := range []struct {
		url  string
		want string
	}{
		{"mysql://u:" + secret + "@127.0.0.1/db", `URL scheme "mysql"`},
		{"/var/lib/toolwire", `URL scheme ""`},
		{"postgres://u:" + secret + "@127.0.0.1:notaport/db", "postgres"},
		{"postgres://u:" + secret + "@[::1/db", "does not parse"},
		{"postgres:u:" + secret + "@127.0.0.1/db", `without "//"`},
		{"postgres://u@127.0.0.1:1/db?password=" + secret + "&connect_timeout=5", "127.0.0.1:1"},
	} {
		_, err := Open(ctx, tc.url, nil)
		if err == nil {
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want it to say %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open's error reveals the password: %v", err)
		}
	}
	if _, err := Open(ctx, "mysql://x", nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("err = %v, want ErrUnsupported", err)
	}
	if _, err := Open(ctx, "", &Options{AuditSigningKey: make([]byte, 12)}); err == nil || !strings.Contains(err.Error(), "signing key has 12 bytes") {
		t.Errorf("a short signing key: err = %v", err)
	}
}

// TestOpenWrongPassword: a database that refuses the credentials is an
// error naming the database, without the password.
func TestOpenWrongPassword(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	bad := strings.Replace(url, "//postgres:", "//postgres:wrong", 1)
	_, err := Open(context.Background(), bad, testOptions())
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	if !strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("err = %v: want the host named and the password masked", err)
	}
}

// TestFilesAreTodaysFiles: without a URL the store is the files toolwire
// has always used, at their default paths.
func TestFilesAreTodaysFiles(t *testing.T) {
	// HOME and XDG_CONFIG_HOME point into TestMain's directory.
	s, err := Open(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantPins, _ := pins.DefaultPath()
	wantOAuth, _ := oauth.DefaultPath()
	if s.Kind() != Files || s.Pins().Path() != wantPins || s.Tokens().Path() != wantOAuth || s.Audit() != nil {
		t.Errorf("files store: kind %s, pins %s, oauth %s, audit %v; want files, %s, %s, none", s.Kind(), s.Pins().Path(), s.Tokens().Path(), s.Audit(), wantPins, wantOAuth)
	}
}

// TestMigrationsOnceUnderConcurrentOpens starts several replicas on one
// fresh database at once: all open, each migration is applied once.
func TestMigrationsOnceUnderConcurrentOpens(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	const replicas = 6
	stores := make([]*Store, replicas)
	errs := make([]error, replicas)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(context.Background(), url, testOptions())
		})
	}
	close(start)
	wg.Wait()
	applied := map[int]int{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer stores[i].Close()
		for _, v := range stores[i].Applied() {
			applied[v]++
		}
	}
	for _, m := range ms {
		if applied[m.version] != 1 {
			t.Errorf("migration %d applied by %d replicas, want 1", m.version, applied[m.version])
		}
	}
	var rows, distinct int
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := c.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT version) FROM toolwire.schema_migrations").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || distinct != len(ms) {
		t.Errorf("schema_migrations: %d rows, %d versions; want %d", rows, distinct, len(ms))
	}
	// And a later start applies nothing.
	if s := openPG(t, url, nil); len(s.Applied()) != 0 {
		t.Errorf("a restart applied %v again", s.Applied())
	}
}

func TestSchemaTooNewIsRefused(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	openPG(t, url, nil).Close()
	sql(t, url, "INSERT INTO toolwire.schema_migrations (version, name) VALUES (999, 'from the future')")
	_, err := Open(context.Background(), url, testOptions())
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "999") {
		t.Errorf("err = %v, want ErrSchemaTooNew naming version 999", err)
	}
}

func TestMigrationFilesAreNumbered(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].version != 1 || ms[0].name != "init" {
		t.Errorf("migrations = %+v, want 0001_init.sql first", ms)
	}
}

// Issue 22.13: the fleet's keys are sealed in the table under the
// passphrase: two instances with the same passphrase share the key, the
// table's row does not hold it, another passphrase opens nothing, and
// none at all is refused.
func TestFleetKeyIsSealedUnderThePassphrase(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	a, b := openPG(t, url, nil), openPG(t, url, nil)
	ctx := context.Background()
	const pass = "the fleet's passphrase"
	ka, err := a.FleetKey(ctx, "request_state", pass)
	if err != nil || len(ka) != 32 {
		t.Fatalf("the key made: %d bytes, %v", len(ka), err)
	}
	kb, err := b.FleetKey(ctx, "request_state", pass)
	if err != nil || !bytes.Equal(ka, kb) {
		t.Fatalf("the key read by another instance: %v; the same as the one made: %v", err, bytes.Equal(ka, kb))
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var row []byte
	if err := conn.QueryRow(ctx, "SELECT key FROM toolwire.fleet_keys WHERE name = 'request_state'").Scan(&row); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(row, ka) || bytes.Contains(row, ka[:16]) || bytes.Contains(row, ka[16:]) {
		t.Errorf("the table's row holds the key in clear")
	}
	if _, err := b.FleetKey(ctx, "request_state", "another passphrase"); !errors.Is(err, ErrFleetKeySealed) {
		t.Errorf("the key with another passphrase: %v, want ErrFleetKeySealed", err)
	}
	if _, err := b.FleetKey(ctx, "request_state", ""); !errors.Is(err, ErrNoFleetPassphrase) {
		t.Errorf("the key without a passphrase: %v, want ErrNoFleetPassphrase", err)
	}
	// A row moved to another name does not open there.
	if _, err := conn.Exec(ctx, "INSERT INTO toolwire.fleet_keys (name, key) SELECT 'other', key FROM toolwire.fleet_keys WHERE name = 'request_state'"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.FleetKey(ctx, "other", pass); !errors.Is(err, ErrFleetKeySealed) {
		t.Errorf("a sealed key moved to another name: %v, want ErrFleetKeySealed", err)
	}
}

// Replicas starting together all make the fleet's key at once: one row
// wins, and every one of them gets that key, none an error.
func TestFleetKeyMadeByReplicasAtOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	const n = 3
	stores := make([]*Store, n)
	for i := range stores {
		stores[i] = openPG(t, url, nil)
	}
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { keys[i], errs[i] = s.FleetKey(context.Background(), "request_state", "the fleet's passphrase") })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || len(keys[i]) != 32 || !bytes.Equal(keys[i], keys[0]) {
			t.Errorf("replica %d: key %x, %v; want the same 32 bytes as replica 0's (%x)", i, keys[i], errs[i], keys[0])
		}
	}
}
