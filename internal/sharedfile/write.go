package sharedfile

import (
	"os"
	"path/filepath"
	"runtime"
)

// WriteAtomic replaces the file at path with data, mode 0600: written to a
// temporary file in the same directory, flushed, renamed over path, and
// the directory flushed, so that a reader or a crash sees the old file or
// the new one, never a mix. The directory must exist.
func WriteAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
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
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
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
