package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/internal/pgtest"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/oauth"
)

// childEnv makes the test binary, re-executed, a replica that opens the
// store at the URL it names and asks for the "demo" server's token once
// (see childMain); childResourceEnv names the MCP server's URL.
const (
	childEnv         = "TOOLWIRE_STORE_TEST_CHILD"
	childResourceEnv = "TOOLWIRE_STORE_TEST_RESOURCE"
)

// childMain prints the SHA-256 of the access token it gets.
func childMain() int {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(childEnv), testOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	src := oauth.NewTokenSource(s.Tokens(), "demo", os.Getenv(childResourceEnv), netpolicy.NewClient(nil), nil)
	tok, err := src.Token()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%x\n", sha256.Sum256([]byte(tok.AccessToken)))
	return 0
}

// oauthFixture is one authorization server and one protected MCP server.
type oauthFixture struct {
	op      *oauthtest.OP
	rs      *oauthtest.ResourceServer
	hc      *http.Client
	browser *oauthtest.Browser
}

func newOAuthFixture(t *testing.T) *oauthFixture {
	op := oauthtest.NewOP(t, nil)
	return &oauthFixture{op: op, rs: oauthtest.NewResourceServer(t, op, nil), hc: netpolicy.NewClient(nil), browser: oauthtest.NewBrowser()}
}

// login logs "demo" in through the browser, storing the token in st.
func (f *oauthFixture) login(t *testing.T, st *oauth.Store) {
	t.Helper()
	h, err := oauth.NewHandler(&oauth.HandlerConfig{Server: "demo", Resource: f.rs.URL, Store: st, HTTPClient: f.hc,
		Fetcher: &oauth.Loopback{Open: f.browser.Open, Out: io.Discard}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Login(context.Background(), f.rs.URL); err != nil {
		t.Fatal(err)
	}
}

// expire makes the stored access token expired, as time passing would.
func expire(t *testing.T, st *oauth.Store) {
	t.Helper()
	err := st.Update(context.Background(), "demo", func(e *oauth.Entry) error {
		e.Token.Obtained = time.Now().Add(-time.Hour)
		e.Token.Expiry = time.Now().Add(-time.Second)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func record(t *testing.T, url, server string) []byte {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var rec []byte
	if err := c.QueryRow(ctx, "SELECT record FROM toolwire.oauth_tokens WHERE server = $1", server).Scan(&rec); err != nil {
		t.Fatalf("record of %s: %v", server, err)
	}
	return rec
}

// TestRefreshOnceAcrossReplicas: two replicas (two stores, two connection
// pools), many callers each, all find the token expired at once. Exactly
// one refresh reaches the authorization server, everyone gets its token,
// and the stored refresh token is the rotated, live one.
func TestRefreshOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	f := newOAuthFixture(t)
	one, two := openPG(t, url, nil).Tokens(), openPG(t, url, nil).Tokens()
	f.login(t, one)
	before, err := two.Get("demo")
	if err != nil || before == nil || before.Token == nil {
		t.Fatalf("the other replica does not see the login: %v, %v", before, err)
	}
	expire(t, one)
	sources := []*oauth.TokenSource{
		oauth.NewTokenSource(one, "demo", f.rs.URL, f.hc, nil),
		oauth.NewTokenSource(two, "demo", f.rs.URL, f.hc, nil),
	}
	const n = 16
	tokens := make([]string, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			tok, err := sources[i%2].Token()
			errs[i] = err
			if err == nil {
				tokens[i] = tok.AccessToken
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if tokens[i] != tokens[0] {
			t.Errorf("caller %d got another token than caller 0", i)
		}
	}
	if tokens[0] == before.Token.AccessToken {
		t.Error("the token was not refreshed")
	}
	if got := f.op.Refreshes(); got != 1 {
		t.Errorf("refreshes at the authorization server = %d, want 1", got)
	}
	expire(t, two)
	if _, err := oauth.NewTokenSource(two, "demo", f.rs.URL, f.hc, nil).Token(); err != nil {
		t.Fatalf("refresh with the stored (rotated) refresh token: %v", err)
	}
	if got := f.op.Refreshes(); got != 2 {
		t.Errorf("refreshes = %d, want 2", got)
	}
}

// TestRefreshOnceAcrossProcesses: the same with two real processes, each
// with its own connections, as two replicas on two machines would be.
func TestRefreshOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	f := newOAuthFixture(t)
	st := openPG(t, url, nil).Tokens()
	f.login(t, st)
	e, err := st.Get("demo")
	if err != nil {
		t.Fatal(err)
	}
	expire(t, st)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+url, childResourceEnv+"="+f.rs.URL)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &outs[i], &stderr
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, stderr.String())
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	a, b := strings.TrimSpace(outs[0].String()), strings.TrimSpace(outs[1].String())
	if a == "" || a != b {
		t.Errorf("the processes got different tokens: %q, %q", a, b)
	}
	if a == fmt.Sprintf("%x", sha256.Sum256([]byte(e.Token.AccessToken))) {
		t.Error("the processes did not refresh")
	}
	if n := f.op.Refreshes(); n != 1 {
		t.Errorf("refreshes at the authorization server = %d, want 1", n)
	}
}

// TestTokensEncryptedAtRest: the table holds the store file's sealed
// format and no secret in the clear; a wrong key opens nothing, and a
// record moved to another server's row is found out.
func TestTokensEncryptedAtRest(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	f := newOAuthFixture(t)
	st := openPG(t, url, nil).Tokens()
	f.login(t, st)
	e, err := st.Get("demo")
	if err != nil || e == nil || e.Token == nil || e.Client == nil {
		t.Fatalf("entry %v, %v", e, err)
	}
	rec := record(t, url, "demo")
	for what, secret := range map[string]string{"access token": e.Token.AccessToken, "refresh token": e.Token.RefreshToken, "client id": e.Client.ID, "resource": e.Resource} {
		if secret != "" && bytes.Contains(rec, []byte(secret)) {
			t.Errorf("the record holds the %s in the clear", what)
		}
	}
	var sealed struct {
		Format string `json:"format"`
		Key    struct {
			Source string `json:"source"`
			Salt   []byte `json:"salt"`
		} `json:"key"`
		Nonce      []byte `json:"nonce"`
		Ciphertext []byte `json:"ciphertext"`
	}
	if err := json.Unmarshal(rec, &sealed); err != nil || sealed.Format != "toolwire-oauth-store" || sealed.Key.Source != "argon2id" || len(sealed.Nonce) != 12 || len(sealed.Ciphertext) == 0 {
		t.Fatalf("record is not the store file's sealed format: %s (%v)", rec, err)
	}

	// A second server's record reuses the first's salt: one key
	// derivation per replica, not one per record.
	if err := st.Update(context.Background(), "second", func(e *oauth.Entry) error {
		e.Token = &oauth.Token{AccessToken: "second-access-token-value", Type: "Bearer"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var second struct {
		Key struct {
			Salt []byte `json:"salt"`
		} `json:"key"`
	}
	if err := json.Unmarshal(record(t, url, "second"), &second); err != nil || !bytes.Equal(second.Key.Salt, sealed.Key.Salt) {
		t.Errorf("second record's salt %x, want the first's %x (%v)", second.Key.Salt, sealed.Key.Salt, err)
	}

	wrong := openPG(t, url, &Options{OAuth: &oauth.StoreOptions{Passphrase: "not it", Argon2: cheap}}).Tokens()
	if _, err := wrong.Get("demo"); !errors.Is(err, oauth.ErrStoreAuth) {
		t.Errorf("a wrong passphrase: %v, want ErrStoreAuth", err)
	}
	keyFile := filepath.Join(t.TempDir(), "oauth.key")
	writeKey(t, keyFile)
	byFile := openPG(t, url, &Options{OAuth: &oauth.StoreOptions{KeyFile: keyFile}}).Tokens()
	if _, err := byFile.Get("demo"); err == nil || !strings.Contains(err.Error(), oauth.PassphraseEnv) {
		t.Errorf("a key file for a passphrase's record: %v, want to be told to set %s", err, oauth.PassphraseEnv)
	}

	// Moved to another server's row, a record still decrypts, but it
	// names its own server under the seal.
	sql(t, url, "INSERT INTO toolwire.oauth_tokens (server, record) SELECT 'evil', record FROM toolwire.oauth_tokens WHERE server = 'demo'")
	if _, err := st.Get("evil"); !errors.Is(err, oauth.ErrStoreCorrupt) || !strings.Contains(err.Error(), `"demo"`) {
		t.Errorf("a record moved to another row: %v, want ErrStoreCorrupt naming demo", err)
	}
	if _, err := st.List(); !errors.Is(err, oauth.ErrStoreCorrupt) {
		t.Errorf("list with a moved record: %v, want ErrStoreCorrupt", err)
	}
	// A changed ciphertext does not open.
	flipped := record(t, url, "demo")
	i := bytes.Index(flipped, []byte(`"ciphertext": "`)) + len(`"ciphertext": "`) + 4
	if flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}
	sql(t, url, "UPDATE toolwire.oauth_tokens SET record = $1 WHERE server = 'demo'", flipped)
	if _, err := st.Get("demo"); !errors.Is(err, oauth.ErrStoreAuth) {
		t.Errorf("a changed ciphertext: %v, want ErrStoreAuth", err)
	}
}

func writeKey(t *testing.T, path string) {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTokenKeyFileIsNeverCreated: every replica needs the same key, so a
// fleet's store refuses to make one of its own.
func TestTokenKeyFileIsNeverCreated(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	keyFile := filepath.Join(t.TempDir(), "oauth.key")
	st := openPG(t, url, &Options{OAuth: &oauth.StoreOptions{KeyFile: keyFile}}).Tokens()
	put := func(st *oauth.Store) error {
		return st.Update(context.Background(), "demo", func(e *oauth.Entry) error {
			e.Token = &oauth.Token{AccessToken: "an-access-token-value", Type: "Bearer"}
			return nil
		})
	}
	if err := put(st); err == nil || !strings.Contains(err.Error(), keyFile) {
		t.Errorf("update without the key file: %v, want an error naming it", err)
	}
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the key file was created: %v", err)
	}
	// What toolwire login asks before a person logs in for nothing.
	if err := st.CheckKey(); err == nil || !strings.Contains(err.Error(), keyFile) || !strings.Contains(err.Error(), oauth.PassphraseEnv) {
		t.Errorf("CheckKey without the key file: %v, want an error naming it and %s", err, oauth.PassphraseEnv)
	}
	writeKey(t, keyFile)
	if err := st.CheckKey(); err != nil {
		t.Errorf("CheckKey with the key file: %v", err)
	}
	if err := put(st); err != nil {
		t.Fatal(err)
	}
	// Another replica given the same key file reads it.
	other := openPG(t, url, &Options{OAuth: &oauth.StoreOptions{KeyFile: keyFile}}).Tokens()
	e, err := other.Get("demo")
	if err != nil || e == nil || e.Token.AccessToken != "an-access-token-value" {
		t.Errorf("other replica: %v, %v", e, err)
	}
	if err := other.Delete(context.Background(), "demo"); err != nil {
		t.Fatal(err)
	}
	if e, err := st.Get("demo"); e != nil || err != nil {
		t.Errorf("after delete: %v, %v; want nothing", e, err)
	}
}

// Issue 22.12: a change of a server's OAuth record (a token refresh, with
// its request to the authorization server) holds the server's lease, not
// a connection: with a pool of one connection, other queries are served
// while it runs; a second change of the same server waits for it and sees
// what it stored; an expired lease is taken over; and a change that
// outlived its lease stores nothing.
func TestTokenChangeHoldsALeaseNotAConnection(t *testing.T) {
	t.Parallel()
	url := pgtest.DB(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	st := openPG(t, url+sep+"pool_max_conns=1", nil)
	tt := &tokenTable{pool: st.pool, where: "test"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	entered, release := make(chan struct{}), make(chan struct{})
	var firstDone atomic.Bool
	first := make(chan error, 1)
	go func() {
		first <- tt.Update(ctx, "srv", func(old []byte) ([]byte, error) {
			close(entered)
			<-release
			firstDone.Store(true)
			return []byte("rec-first"), nil
		})
	}()
	<-entered
	qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
	if _, err := st.pool.Exec(qctx, "SELECT 1"); err != nil {
		t.Errorf("a query while a change of a record runs, on a pool of one connection: %v", err)
	}
	qcancel()
	second := make(chan error, 1)
	var seen []byte
	var afterFirst bool
	go func() {
		second <- tt.Update(ctx, "srv", func(old []byte) ([]byte, error) {
			seen, afterFirst = old, firstDone.Load()
			return old, nil
		})
	}()
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first change: %v", err)
	}
	if err := <-second; err != nil || !afterFirst || string(seen) != "rec-first" {
		t.Errorf("the second change: %v; it ran after the first: %v, saw %q; want after, and the first's record", err, afterFirst, seen)
	}

	// A lease whose holder is gone (it expired) is taken over.
	sql(t, url, "INSERT INTO toolwire.token_leases (server, holder, expires_at) VALUES ('srv2', 'gone', now() - interval '1 second')")
	if err := tt.Update(ctx, "srv2", func([]byte) ([]byte, error) { return []byte("rec-2"), nil }); err != nil {
		t.Errorf("a change of a record whose lease expired: %v", err)
	}
	// A change that outlives its lease stores nothing.
	err := tt.Update(ctx, "srv2", func([]byte) ([]byte, error) {
		sql(t, url, "UPDATE toolwire.token_leases SET expires_at = now() - interval '1 second' WHERE server = 'srv2'")
		return []byte("rec-late"), nil
	})
	if !errors.Is(err, errLeaseLost) {
		t.Errorf("a change that outlived its lease: %v, want errLeaseLost", err)
	}
	if rec, err := tt.Get(ctx, "srv2"); err != nil || string(rec) != "rec-2" {
		t.Errorf("the record after a late change: %q, %v; want the one before", rec, err)
	}
}
