//go:build linux

package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// childEnv makes the test binary, re-executed, start a cluster, print its
// URL, postmaster PID and directory, and wait to be killed.
const childEnv = "TOOLWIRE_PGTEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		c, err := get()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("%s %d %s\n", c.url("postgres"), c.cmd.Process.Pid, c.dir)
		select {} // until killed
	}
	os.Exit(Main(m))
}

func TestDatabasesAreSeparate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := DB(t), DB(t)
	if a == b {
		t.Fatalf("two tests got one database: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE mine (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'mine'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("a table made in one test's database is seen in another's")
	}
	var fsync string
	if err := cb.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %s, want off", fsync)
	}
}

func TestWrongPasswordRefused(t *testing.T) {
	t.Parallel()
	u := DB(t)
	bad := strings.Replace(u, "postgres:", "postgres:x", 1)
	ctx := context.Background()
	if c, err := pgx.Connect(ctx, bad); err == nil {
		c.Close(ctx)
		t.Fatal("the cluster accepted a wrong password")
	}
}

// TestKilledTestLeavesNoServer starts a cluster in a child test binary,
// kills the child with SIGKILL (as a timed-out "go test" would be), and
// checks that its postmaster died with it and that its directory is
// removed by the next cluster's start.
func TestKilledTestLeavesNoServer(t *testing.T) {
	DB(t) // skips, or fails under CI, without PostgreSQL
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1")
	var stderr strings.Builder
	child.Stderr = &stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("child: %v: %s", err, stderr.String())
	}
	fields := strings.Fields(line)
	if len(fields) != 3 {
		t.Fatalf("child said %q", line)
	}
	url, dir := fields[0], fields[2]
	pid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	// A backend notices its postmaster's death while it waits: the query
	// fails once the postmaster is gone, instead of running its minute.
	qctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = conn.Exec(qctx, "SELECT pg_sleep(55)")
	if err == nil || errors.Is(qctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the server outlived its test binary (query: %v)", err)
	}
	// The postmaster's exit is awaited, not polled for: a pidfd becomes
	// readable when its process has exited.
	if err := awaitExit(pid, 30*time.Second); err != nil {
		t.Errorf("postmaster %d: %v", pid, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
		t.Fatalf("the killed child's directory: %v", err)
	}
	removeAbandoned()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed child's directory %s was not removed: %v", dir, err)
	}
}

// awaitExit waits until the process pid has exited, at most limit.
func awaitExit(pid int, limit time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(limit.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("still running %v after its test binary was killed", limit)
		}
		return nil
	}
}
