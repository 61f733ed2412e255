package sharedfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// WriteAtomic replaces the file at path with data, mode 0600: written to a
// temporary file in the same directory, flushed, renamed over path, and
// the directory flushed, so that a reader or a crash sees the old file or
// the new one, never a mix. The directory must exist.
func WriteAtomic(path string, data []byte) error {
	return writeAtomic(path, data, false)
}

// CreateAtomic writes a new file at path as [WriteAtomic] does, but never
// replaces one: when path exists, even when it was created while data was
// being written, it fails with an error wrapping [fs.ErrExist]. Where the
// file system has no hard links, only a file that existed before the
// write is noticed.
func CreateAtomic(path string, data []byte) error {
	return writeAtomic(path, data, true)
}

func writeAtomic(path string, data []byte, exclusive bool) (err error) {
	if exclusive {
		if _, err := os.Lstat(path); err == nil {
			return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
		}
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	// After a rename this removes nothing; after a link, the extra name.
	defer os.Remove(tmp.Name())
	defer func() {
		if err != nil {
			tmp.Close()
		}
	}()
	// CreateTemp already uses 0600; Chmod states it for platforms and
	// umasks where that might not hold.
	if err = tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if exclusive {
		// A hard link fails if the name exists, which a rename would not.
		err = os.Link(tmp.Name(), path)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", path, fs.ErrExist)
		}
		if err == nil {
			return syncDir(dir)
		}
		// Some file systems have no hard links; the check above must do.
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir flushes the entry of a file just renamed into dir, so that the
// rename survives a crash. Windows cannot open a directory to sync it.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
