//go:build !unix

// Package pgtest runs a real PostgreSQL server for tests, on Unix systems;
// elsewhere a test that asks for a database is skipped (failed under
// CI=true).
package pgtest

import (
	"os"
	"testing"
)

// Main runs the tests.
func Main(m *testing.M) int { return m.Run() }

// Stop does nothing here.
func Stop() {}

// DB skips t, or fails it under CI=true.
func DB(t testing.TB) string {
	t.Helper()
	const msg = "pgtest: the test PostgreSQL runs on Unix systems only"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Outage is never reached here ([DB] skipped the test); it skips t.
func Outage(t testing.TB, _ string) (allow func()) {
	t.Helper()
	t.Skip("pgtest: the test PostgreSQL runs on Unix systems only")
	return func() {}
}
