package main

// The OAuth commands end to end (issue 6's "done when"): a real
// authorization server (zitadel/oidc's, internal/oauthtest) with
// short-lived access tokens, an MCP server behind bearer auth, and the CLI
// run in-process (and, for two processes, as the built binary) over one
// token store, with a browser that logs in by following the authorization
// URL.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/oauth"
)

// tokenLifetime is the OP's access token lifetime: short, so that tests
// see tokens expire, and long enough that a command started just after a
// refresh finds its token still fresh (toolwire refreshes within half the
// lifetime of the end).
const tokenLifetime = 4 * time.Second

// oauthFixture is the CLI fixture (the demo server) plus a protected
// remote server "remote", its OP, a browser, and a token store of its own.
type oauthFixture struct {
	*fixture
	op      *oauthtest.OP
	rs      *oauthtest.ResourceServer
	browser *oauthtest.Browser
	store   string // the token store's file
	// open, if set, is the CLI's browser opener instead of browser.Open.
	open func(ctx context.Context, url string) error
}

// newOAuthFixture makes the fixture; remote, if given, is more of the
// remote server's configuration (indented YAML lines).
func newOAuthFixture(t *testing.T, opts *oauthtest.OPOptions, remote ...string) *oauthFixture {
	t.Helper()
	// The store lives under the user's config directory: give the test one
	// of its own (not t.Parallel, then), and make sure the key file is
	// used, in this process and in children.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(oauth.PassphraseEnv, "")
	path, err := oauth.DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	op := oauthtest.NewOP(t, opts)
	rs := oauthtest.NewResourceServer(t, op, nil)
	return &oauthFixture{
		fixture: newFixture(t, "  remote:\n    url: "+quoteYAML(rs.URL)+"\n"+strings.Join(remote, "")),
		op:      op, rs: rs, browser: oauthtest.NewBrowser(), store: path,
	}
}

// run executes the CLI in-process, as a new toolwire process would: the
// browser opener is the fixture's browser.
func (f *oauthFixture) run(t *testing.T, stdin io.Reader, stderr io.Writer, args ...string) outcome {
	t.Helper()
	var stdout bytes.Buffer
	var errBuf syncBuffer
	w := io.Writer(&errBuf)
	if stderr != nil {
		w = io.MultiWriter(&errBuf, stderr)
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	e := &env{
		stdin: stdin, stdout: &stdout, stderr: w,
		isTerminal:  func() bool { return false },
		lookupEnv:   func(string) (string, bool) { return "", false },
		openBrowser: f.browser.Open,
	}
	if f.open != nil {
		e.openBrowser = f.open
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCommand(e)
	root.SetArgs(append([]string{"--config", f.config}, args...))
	code := exitCode(root.ExecuteContext(ctx), w)
	return outcome{code, stdout.String(), errBuf.String()}
}

// entry returns the server's entry in the token store, read as another
// process would.
func (f *oauthFixture) entry(t *testing.T, server string) *oauth.Entry {
	t.Helper()
	s, err := oauth.NewStore(f.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Get(server)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// waitExpiry sleeps until the stored access token has expired.
func (f *oauthFixture) waitExpiry(t *testing.T) {
	t.Helper()
	e := f.entry(t, "remote")
	if e == nil || e.Token == nil {
		t.Fatal("no token stored")
	}
	time.Sleep(time.Until(e.Token.Expiry) + 200*time.Millisecond)
}

// noTokens fails if out shows any 12-character piece of a token.
func noTokens(t *testing.T, out string, e *oauth.Entry) {
	t.Helper()
	for _, s := range []string{e.Token.AccessToken, e.Token.RefreshToken} {
		for i := 0; i+12 <= len(s); i++ {
			if strings.Contains(out, s[i:i+12]) {
				t.Fatalf("output shows (part of) a token:\n%s", out)
			}
		}
	}
}

// TestOAuthLoginToolsRefreshLogout is the "done when": before a
// login the protected server fails naming the command while the demo
// works; one login; then tools and calls work across restarts and after
// the access token expires, without another prompt; auth status shows
// state and expiry but no token; logout makes it ask again.
func TestOAuthLoginToolsRefreshLogout(t *testing.T) {
	f := newOAuthFixture(t, &oauthtest.OPOptions{AccessTokenLifetime: tokenLifetime})

	o := f.run(t, nil, nil, "tools")
	o.expect(t, exitOK)
	if !strings.Contains(o.stderr, "toolwire login remote") {
		t.Errorf("before login: stderr does not name the login command:\n%s", o.stderr)
	}
	if !strings.Contains(o.stdout, "demo__echo") || strings.Contains(o.stdout, "remote__whoami") {
		t.Errorf("before login: want the demo's tools and not remote's:\n%s", o.stdout)
	}
	if f.browser.Opened() != 0 || f.op.Registrations() != 0 {
		t.Fatalf("a command that cannot prompt opened the browser %d times, registered %d clients", f.browser.Opened(), f.op.Registrations())
	}

	o = f.run(t, nil, nil, "login", "remote")
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, "remote: logged in; 1 tools") {
		t.Errorf("login printed %q", o.stdout)
	}
	if f.browser.Opened() != 1 || f.op.Registrations() != 1 || f.op.Exchanges() != 1 {
		t.Fatalf("login: browser opened %d times, %d registrations, %d code exchanges; want 1 each", f.browser.Opened(), f.op.Registrations(), f.op.Exchanges())
	}

	// Restarts: each run is a new process's worth of state over the store.
	for i := range 2 {
		o = f.run(t, nil, nil, "tools")
		o.expect(t, exitOK)
		if !strings.Contains(o.stdout, "remote__whoami") || !strings.Contains(o.stdout, "demo__echo") || o.stderr != "" {
			t.Fatalf("run %d after login: want both servers' tools and no warning\nstdout:\n%s\nstderr:\n%s", i+1, o.stdout, o.stderr)
		}
	}
	o = f.run(t, nil, nil, "call", "remote__whoami")
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, oauthtest.Subject) {
		t.Errorf("whoami printed %q, want the user %s", o.stdout, oauthtest.Subject)
	}

	// The access token expires: the next command refreshes, no prompt.
	f.waitExpiry(t)
	refreshes := f.op.Refreshes()
	o = f.run(t, nil, nil, "call", "remote__whoami")
	o.expect(t, exitOK)
	if !strings.Contains(o.stdout, oauthtest.Subject) {
		t.Errorf("whoami after expiry printed %q", o.stdout)
	}
	if f.op.Refreshes() <= refreshes {
		t.Errorf("no refresh reached the OP after the access token expired")
	}
	if f.browser.Opened() != 1 || f.op.Exchanges() != 1 {
		t.Errorf("after expiry: browser opened %d times, %d code exchanges; want still 1", f.browser.Opened(), f.op.Exchanges())
	}

	// auth status: the server, its state and expiry, never a token.
	e := f.entry(t, "remote")
	o = f.run(t, nil, nil, "auth", "status")
	o.expect(t, exitOK)
	row := regexp.MustCompile(`(?m)^remote\s+(valid|refreshable)\s+(\S+)\s+` + regexp.QuoteMeta(f.op.Issuer) + `\s+` + regexp.QuoteMeta(e.Client.ID) + `\s*$`)
	m := row.FindStringSubmatch(o.stdout)
	if m == nil {
		t.Fatalf("auth status has no row for remote with a state, expiry, issuer and client:\n%s", o.stdout)
	}
	if exp, err := time.Parse(time.RFC3339, m[2]); err != nil || !exp.Equal(e.Token.Expiry.Truncate(time.Second)) {
		t.Errorf("auth status shows expiry %q, want %s", m[2], e.Token.Expiry.Local().Format(time.RFC3339))
	}
	noTokens(t, o.stdout+o.stderr, e)
	// The same as JSON (issue 23.7).
	o = f.run(t, nil, nil, "auth", "status", "--json")
	o.expect(t, exitOK)
	var rows []map[string]string
	if err := json.Unmarshal([]byte(o.stdout), &rows); err != nil {
		t.Fatalf("auth status --json is not a JSON array of objects: %v\n%s", err, o.stdout)
	}
	want := map[string]string{"server": "remote", "state": m[1], "expires": e.Token.Expiry.UTC().Truncate(time.Second).Format(time.RFC3339), "issuer": f.op.Issuer, "client": e.Client.ID}
	if len(rows) != 1 || !maps.Equal(rows[0], want) {
		t.Errorf("auth status --json = %v, want [%v]", rows, want)
	}
	noTokens(t, o.stdout+o.stderr, e)

	// logout: the token and the registration go; commands fail for the
	// server naming the login again; the demo is unaffected.
	before := f.entry(t, "remote")
	o = f.run(t, nil, nil, "logout", "remote")
	o.expect(t, exitOK)
	if e := f.entry(t, "remote"); e != nil {
		t.Errorf("after logout the store still has %v", e)
	}
	// Revoked (RFC 7009), not only forgotten.
	if !strings.Contains(o.stdout, "revoked the tokens") {
		t.Errorf("logout output %q does not say the tokens were revoked", o.stdout)
	}
	if _, err := f.op.Userinfo(context.Background(), before.Token.AccessToken, nil); err == nil {
		t.Error("the access token still works after logout")
	}
	o = f.run(t, nil, nil, "tools")
	o.expect(t, exitOK)
	if !strings.Contains(o.stderr, "toolwire login remote") || strings.Contains(o.stdout, "remote__whoami") || !strings.Contains(o.stdout, "demo__echo") {
		t.Errorf("after logout: want remote to ask for login and the demo to work\nstdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	}
	o = f.run(t, nil, nil, "auth", "status")
	o.expect(t, exitOK)
	if strings.Contains(o.stdout, "remote") {
		t.Errorf("auth status after logout still lists remote:\n%s", o.stdout)
	}
	if f.browser.Opened() != 1 {
		t.Errorf("browser opened %d times, want only the login's", f.browser.Opened())
	}
	o = f.run(t, nil, nil, "logout", "remote")
	o.expect(t, exitUsage)
}

// TestOAuthTwoProcessesShareTheStore runs two toolwire processes (the
// built binary) that find the access token expired at once. Both must get
// through without a login, with one refresh at the OP between them (the
// store's lock; the second reuses the rotation the first stored), and the
// stored refresh token must still be the live one afterwards.
func TestOAuthTwoProcessesShareTheStore(t *testing.T) {
	bin := e2eToolwire(t)
	// Tokens live 30 s here: long enough that the token one process got
	// is still fresh for the other, so that any second refresh would be a
	// failure of the lock, not time passing.
	f := newOAuthFixture(t, &oauthtest.OPOptions{AccessTokenLifetime: 30 * time.Second})
	cfg := filepath.Join(f.dir, "remote-only.yaml")
	if err := os.WriteFile(cfg, []byte("servers:\n  remote:\n    url: "+quoteYAML(f.rs.URL)+"\nsecurity:\n  pins: off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.run(t, nil, nil, "login", "remote").expect(t, exitOK)
	expire := func() {
		s, err := oauth.NewStore(f.store, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Update(context.Background(), "remote", func(e *oauth.Entry) error {
			e.Token.Obtained = time.Now().Add(-time.Hour)
			e.Token.Expiry = time.Now().Add(-time.Second)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Time passing, without waiting: the OP would still take the token,
	// but toolwire must not send it.
	expire()
	refreshes := f.op.Refreshes()
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	for i := range 2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), e2eStartTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--config", cfg, "call", "remote__whoami")
			cmd.Env = os.Environ() // with this test's XDG_CONFIG_HOME and no passphrase
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			<-start
			errs[i] = cmd.Run()
			outs[i] = out.String()
		})
	}
	close(start)
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || !strings.Contains(outs[i], oauthtest.Subject) {
			t.Errorf("process %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	if n := f.op.Refreshes() - refreshes; n != 1 {
		t.Errorf("%d refreshes at the OP for two processes, want 1", n)
	}
	// The refresh token the store kept is the rotated, live one.
	expire()
	o := f.run(t, nil, nil, "call", "remote__whoami")
	o.expect(t, exitOK)
	if n := f.op.Refreshes() - refreshes; n != 2 {
		t.Errorf("%d refreshes in all, want 2", n)
	}
	if f.browser.Opened() != 1 || f.op.Exchanges() != 1 {
		t.Errorf("browser opened %d times, %d code exchanges; want only the login's", f.browser.Opened(), f.op.Exchanges())
	}
}

// TestOAuthLoginWaitsForTheUser: the person at the browser may take
// longer than the server's timeout, which bounds each request: the login
// waits for them as long as the loopback receiver does, not as long as a
// request may take.
func TestOAuthLoginWaitsForTheUser(t *testing.T) {
	const timeout = time.Second
	f := newOAuthFixture(t, nil, fmt.Sprintf("    timeout: %s\n", timeout))
	f.open = func(ctx context.Context, u string) error {
		time.Sleep(timeout + 500*time.Millisecond) // reading, typing, a second factor
		return f.browser.Open(ctx, u)
	}
	o := f.run(t, nil, nil, "login", "remote")
	o.expect(t, exitOK)
	if f.browser.Opened() != 1 || f.op.Exchanges() != 1 {
		t.Errorf("browser opened %d times, %d code exchanges; want 1 each", f.browser.Opened(), f.op.Exchanges())
	}
	// The login's token serves the next command.
	f.run(t, nil, nil, "call", "remote__whoami").expect(t, exitOK)
}

// urlWatcher is a stderr that hands over the authorization URL the login
// prints.
type urlWatcher struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
	url  chan string
}

var authURLRE = regexp.MustCompile(`(?m)^  (http://127\.0\.0\.1:\d+/\S+\?\S*state=\S+)$`)

func (w *urlWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := authURLRE.FindStringSubmatch(w.buf.String()); m != nil {
		w.once.Do(func() { w.url <- m[1] })
	}
	return len(p), nil
}

// TestOAuthLoginNoBrowser is `toolwire login --no-browser` on a machine
// without a browser: it prints the URL, the user authorizes elsewhere and
// pastes the address the browser was sent to (or just the code); the
// loopback receiver never sees a request, and no browser is opened here.
func TestOAuthLoginNoBrowser(t *testing.T) {
	for _, paste := range []string{"redirect URL", "code"} {
		t.Run(paste, func(t *testing.T) {
			f := newOAuthFixture(t, nil)
			opened := f.browser.Opened
			pr, pw := io.Pipe()
			defer pw.Close()
			stderr := &urlWatcher{url: make(chan string, 1)}
			userErr := make(chan error, 1)
			go func() {
				var authURL string
				select {
				case authURL = <-stderr.url:
				case <-time.After(30 * time.Second):
					userErr <- fmt.Errorf("no authorization URL printed")
					return
				}
				u, err := url.Parse(authURL)
				if err != nil {
					userErr <- err
					return
				}
				// Another machine's browser: it stops at the redirect,
				// whose address the user copies.
				other := oauthtest.NewBrowser()
				other.StopAt(u.Query().Get("redirect_uri"))
				if err := other.Authorize(context.Background(), authURL); err != nil {
					userErr <- err
					return
				}
				line := other.Stopped()
				if paste == "code" {
					r, _ := url.Parse(line)
					line = r.Query().Get("code")
				}
				if line == "" {
					userErr <- fmt.Errorf("the browser did not stop at the redirect")
					return
				}
				_, err = io.WriteString(pw, "\n"+line+"\n")
				userErr <- err
			}()
			o := f.run(t, pr, stderr, "login", "remote", "--no-browser")
			if err := <-userErr; err != nil {
				t.Fatalf("the user: %v\nstderr:\n%s", err, o.stderr)
			}
			o.expect(t, exitOK)
			if !strings.Contains(o.stdout, "remote: logged in") || !strings.Contains(o.stderr, "paste the address") {
				t.Errorf("login --no-browser:\nstdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
			}
			if opened() != 0 {
				t.Errorf("--no-browser opened a browser %d times", opened())
			}
			o = f.run(t, nil, nil, "call", "remote__whoami")
			o.expect(t, exitOK)
			if !strings.Contains(o.stdout, oauthtest.Subject) {
				t.Errorf("whoami after a pasted login printed %q", o.stdout)
			}
		})
	}
}
