package sharedfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteAtomicReplacesWholeAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteAtomic(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("file = %q, %v; want %q", got, err, data)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
	if err := WriteAtomic(filepath.Join(dir, "missing", "x"), []byte("x")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func TestCreateAtomicNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "new.yaml")
	if err := CreateAtomic(p, []byte("first")); err != nil {
		t.Fatal(err)
	}
	err := CreateAtomic(p, []byte("second"))
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("creating over an existing file: %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "first" {
		t.Errorf("file = %q after a refused create, want the first", got)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
}

func TestLockExcludesAndHonoursTheContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second Lock while held: %v, want the context's deadline", err)
	}
	unlock()
	again, err := Lock(context.Background(), p)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	again()
}
