// Package pgtest runs a real PostgreSQL server for tests: one cluster per
// test binary, started on first use, with a fresh database for each test so
// that tests run in parallel without seeing one another's rows.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		url := pgtest.DB(t) // postgres://…/t_3, dropped with the cluster
//		...
//	}
//
// The cluster is initdb'd into a temporary directory and listens on
// 127.0.0.1 on a free port (and on a Unix socket in that directory), with
// fsync off: the data is thrown away anyway. PostgreSQL refuses to run as
// root, so under root initdb and postgres run as the "postgres" system
// user. The postmaster runs in a process group of its own and is sent
// SIGKILL by the kernel if the test binary dies (PR_SET_PDEATHSIG), so a
// killed test leaves no server behind; [Main] stops it by its PID when the
// tests end. A temporary directory left by a killed test binary is removed
// by the next cluster started on the machine.
//
// Without PostgreSQL's binaries (initdb and postgres on PATH or under
// /usr/lib/postgresql/*/bin) a test that asks for a database is skipped,
// except under CI=true, where it fails: CI installs them (.ci/run).
//go:build unix

package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// dirPrefix names the cluster directories in os.TempDir, so that one left
// by a killed test binary can be found and removed.
const dirPrefix = "toolwire-pgtest-"

// ownerFile, in a cluster directory, holds the PID of the test binary that
// made it.
const ownerFile = "owner.pid"

// startTimeout bounds initdb plus the server's start-up.
const startTimeout = 60 * time.Second

var (
	mu      sync.Mutex
	running *cluster // nil until first use, and after Main stopped it
	failed  error    // why the cluster could not start; every later DB fails the same way
	stopped bool
	dbs     atomic.Int64
)

// Main runs the tests and then stops the cluster, if one was started. Call
// it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the cluster and removes its directory. It is safe to call
// more than once and when no cluster was started; a DB after Stop fails.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	stopped = true
	if running != nil {
		running.stop()
		running = nil
	}
}

// DB creates a new, empty database on the test binary's cluster (starting
// the cluster on first use) and returns its URL. It skips t when
// PostgreSQL is not installed, unless CI=true.
func DB(t testing.TB) string {
	t.Helper()
	c, err := get()
	if err != nil {
		var missing *missingError
		if errors.As(err, &missing) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	name := fmt.Sprintf("t_%d", dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect to the cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return c.url(name)
}

// missingError says that PostgreSQL's binaries are not installed.
type missingError struct{ what string }

func (e *missingError) Error() string {
	return "pgtest: PostgreSQL is not installed (" + e.what + "); install Debian's postgresql package (apt-get install postgresql), as .ci/run does"
}

func get() (*cluster, error) {
	mu.Lock()
	defer mu.Unlock()
	switch {
	case running != nil:
		return running, nil
	case failed != nil:
		return nil, failed
	case stopped:
		return nil, errors.New("pgtest: the cluster was stopped")
	}
	c, err := start()
	if err != nil {
		failed = err
		return nil, err
	}
	running = c
	return c, nil
}

// cluster is one running PostgreSQL server.
type cluster struct {
	dir      string
	port     int
	password string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the postmaster has exited
}

func (c *cluster) url(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	// Debian keeps them off PATH, one directory per major version.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", &missingError{what: "no initdb on PATH nor in /usr/lib/postgresql/*/bin"}
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// account is who runs the server: the current user, or under root the
// postgres system user.
type account struct {
	cred *syscall.Credential // nil: the current user
	uid  int
	gid  int
}

func serverAccount() (account, error) {
	if os.Geteuid() != 0 {
		return account{uid: -1, gid: -1}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return account{}, &missingError{what: "running as root, and there is no postgres system user to run the server as"}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return account{}, fmt.Errorf("pgtest: postgres user has a non-numeric uid %q or gid %q", u.Uid, u.Gid)
	}
	return account{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid: uid, gid: gid}, nil
}

// command makes a command that runs as a.
func (a account) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.cred}
	// A minimal environment: the server needs no HOME, and the user's
	// PG* variables must not redirect it.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	return cmd
}

func start() (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	acct, err := serverAccount()
	if err != nil {
		return nil, err
	}
	removeAbandoned()
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c, err := startIn(dir, bin, acct)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func startIn(dir, bin string, acct account) (*cluster, error) {
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if acct.cred != nil {
		if err := os.Chown(dir, acct.uid, acct.gid); err != nil {
			return nil, fmt.Errorf("pgtest: chown %s to the postgres user: %w", dir, err)
		}
	}
	var pw [16]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, password: hex.EncodeToString(pw[:]), exited: make(chan struct{})}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(c.password+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if acct.cred != nil {
		if err := os.Chown(pwfile, acct.uid, acct.gid); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := acct.command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--pwfile="+pwfile, "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	out, err := initdb.CombinedOutput()
	os.Remove(pwfile)
	if err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %v: %s", err, strings.TrimSpace(string(out)))
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c.port = port
	c.cmd = acct.command(filepath.Join(bin, "postgres"), "-D", data,
		"-k", dir, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=200",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning")
	guard(c.cmd.SysProcAttr)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	ready := make(chan struct{})
	var log strings.Builder
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			if log.Len() < 64<<10 {
				log.WriteString(line + "\n")
			}
			logMu.Unlock()
			if strings.Contains(line, "ready to accept connections") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	select {
	case <-ready:
	case <-c.exited:
		logMu.Lock()
		defer logMu.Unlock()
		return nil, fmt.Errorf("pgtest: postgres exited during start-up: %s", strings.TrimSpace(log.String()))
	case <-time.After(startTimeout):
		c.stop()
		logMu.Lock()
		defer logMu.Unlock()
		return nil, fmt.Errorf("pgtest: postgres not ready after %v: %s", startTimeout, strings.TrimSpace(log.String()))
	}
	return c, nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another
// process may take it before postgres binds it; postgres then fails to
// start and says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop ends the server: an immediate shutdown (SIGQUIT: the data is thrown
// away, so nothing needs checkpointing), then SIGKILL for the process group
// if it is not gone within a few seconds, then the directory goes.
func (c *cluster) stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		pid := c.cmd.Process.Pid
		_ = syscall.Kill(pid, syscall.SIGQUIT)
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
		}
		// Whatever is left of the group (backends that outlived the
		// postmaster).
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-c.exited
	}
	os.RemoveAll(c.dir)
}

// removeAbandoned removes cluster directories whose test binary is gone:
// its postmaster died with it (PR_SET_PDEATHSIG), only the files are left.
func removeAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // being made right now, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		// Signal 0 checks for the process: ESRCH means it is gone.
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// Outage makes the database of dbURL (one that [DB] gave) refuse new
// connections and ends those it has: the database is down for whoever
// uses it, while the cluster runs. The function it returns lets
// connections in again.
func Outage(t testing.TB, dbURL string) (allow func()) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin := *u
	admin.Path = "/postgres"
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	ident := pgx.Identifier{name}.Sanitize()
	exec("ALTER DATABASE " + ident + " ALLOW_CONNECTIONS false")
	exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + name + "'")
	return func() { exec("ALTER DATABASE " + ident + " ALLOW_CONNECTIONS true") }
}
