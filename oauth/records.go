package oauth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Records keeps a [Store]'s entries elsewhere than the store file, one
// sealed record per server: the store package's PostgreSQL table, shared
// by a fleet of gateways. A record is exactly what a store file holds (the
// same JSON document, AES-256-GCM under the same key sources, see seal.go)
// with the one server's entry inside; the backend sees ciphertext only.
//
// Its methods must be safe for concurrent use, also by other processes on
// the same storage.
type Records interface {
	// Get returns server's record, or nil when it has none.
	Get(ctx context.Context, server string) ([]byte, error)
	// List returns every record by server name.
	List(ctx context.Context) (map[string][]byte, error)
	// Update calls change once with server's record (nil when it has
	// none) while holding a lock on it that every Records on the same
	// storage respects, then stores what change returns in its place:
	// nil removes the record, the same bytes store nothing. When change
	// returns an error, nothing is stored and Update returns that error
	// (wrapped or not). The lock is held while change runs, which for a
	// token refresh includes the request to the authorization server:
	// that is what makes a refresh single-flight across processes.
	Update(ctx context.Context, server string, change func(record []byte) ([]byte, error)) error
	// String names the storage in messages. It must not carry a secret.
	String() string
}

// maxRecordSize bounds a record as maxStoreSize bounds the file.
const maxRecordSize = maxStoreSize

// NewStoreOn returns a store that keeps its entries in r, encrypted as a
// store file is: with opts.Passphrase (or TOOLWIRE_PASSPHRASE) through
// Argon2id, else with the key file (opts.KeyFile, or oauth.key beside
// [DefaultPath]). Unlike the file store's, that key file is never created:
// every process sharing r needs the same key, so it is made once (32
// random bytes, mode 0600) and given to each. It does no I/O.
func NewStoreOn(r Records, opts *StoreOptions) (*Store, error) {
	if opts == nil {
		opts = &StoreOptions{}
	}
	defaultKey := ""
	if opts.KeyFile == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return nil, fmt.Errorf("oauth: default key file: %w", err)
		}
		defaultKey = filepath.Join(dir, "toolwire", "oauth.key")
	}
	s := &Store{records: r}
	if err := s.configure(opts, defaultKey); err != nil {
		return nil, err
	}
	return s, nil
}

// openRecord decrypts server's record; nil is an empty entry set.
func (s *Store) openRecord(server string, rec []byte) (*contents, error) {
	if rec == nil {
		return &contents{entries: map[string]*Entry{}}, nil
	}
	if len(rec) > maxRecordSize {
		return nil, fmt.Errorf("oauth: store %s, record %q: %w: larger than %d bytes", s.where(), server, ErrStoreCorrupt, maxRecordSize)
	}
	c, err := s.decrypt(rec, server)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.recHdr == nil && c.hdr.Key.Source == sourceArgon2id {
		s.recHdr = c.hdr
	}
	s.mu.Unlock()
	if e := c.entries[server]; e != nil {
		e.Server = server
	}
	return c, nil
}

// readAll returns every entry: the file's, or every record's.
func (s *Store) readAll(ctx context.Context) (*contents, error) {
	if s.records == nil {
		return s.read()
	}
	recs, err := s.records.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("oauth: store %s: %w", s.where(), err)
	}
	all := &contents{entries: make(map[string]*Entry, len(recs))}
	for server, rec := range recs {
		c, err := s.openRecord(server, rec)
		if err != nil {
			return nil, err
		}
		if e := c.entries[server]; e != nil {
			all.entries[server] = e
		}
	}
	return all, nil
}

// updateRecord runs apply on server's record under the records' lock and
// seals the result. Records are sealed with a key file that exists, never
// a new one (see [NewStoreOn]).
func (s *Store) updateRecord(ctx context.Context, server string, apply func(*contents) error) error {
	return s.records.Update(ctx, server, func(rec []byte) ([]byte, error) {
		c, err := s.openRecord(server, rec)
		if err != nil {
			return nil, err
		}
		if err := apply(c); err != nil {
			if errors.Is(err, errUnchanged) {
				return rec, nil
			}
			return nil, err
		}
		if len(c.entries) == 0 {
			return nil, nil
		}
		out, err := s.sealContents(c, false)
		if err != nil {
			return nil, fmt.Errorf("oauth: store %s, record %q: seal: %w", s.where(), server, err)
		}
		if c.hdr.Key.Source == sourceArgon2id {
			s.mu.Lock()
			if s.recHdr == nil {
				s.recHdr = c.hdr
			}
			s.mu.Unlock()
		}
		return out, nil
	})
}
