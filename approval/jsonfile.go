package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toolwire/toolwire/internal/sharedfile"
)

// versioned is the content of one of this package's JSON files: a
// pointer to a struct whose format version is at *format().
type versioned[T any] interface {
	*T
	format() *int
}

func (f *file) format() *int      { return &f.Version }
func (f *queueFile) format() *int { return &f.Version }

// readVersioned returns the content of the JSON file at path, of format
// version 1; a missing file is an empty one. what names the file in
// errors.
func readVersioned[T any, P versioned[T]](path, what string) (P, error) {
	all := P(new(T))
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		*all.format() = 1
		return all, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if err := json.Unmarshal(raw, all); err != nil {
		return nil, fmt.Errorf("%s %s: corrupt: %w", what, path, err)
	}
	if v := *all.format(); v != 1 {
		return nil, fmt.Errorf("%s %s: version %d: want 1", what, path, v)
	}
	return all, nil
}

// updateVersioned changes the JSON file at path under its lock: it reads
// it, lets change alter it and writes what encode makes of it atomically.
// A change returning an error writes nothing, unless the error is a
// [keepChange], which is returned after the write.
func updateVersioned[T any, P versioned[T]](ctx context.Context, path, what string, change func(P) error, encode func(any) ([]byte, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	unlock, err := sharedfile.Lock(ctx, path+".lock")
	if err != nil {
		return fmt.Errorf("%s %s: lock: %w", what, path, err)
	}
	defer unlock()
	all, err := readVersioned[T, P](path, what)
	if err != nil {
		return err
	}
	cerr := change(all)
	var kept *keepChange
	if cerr != nil && !errors.As(cerr, &kept) {
		return cerr
	}
	raw, err := encode(all)
	if err != nil {
		return err
	}
	if err := sharedfile.WriteAtomic(path, raw); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return cerr
}
