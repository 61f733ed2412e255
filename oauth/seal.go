package oauth

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/crypto/argon2"
)

// The store file is one JSON object:
//
//	{"format":"toolwire-oauth-store","version":1,
//	 "key":{"source":"argon2id","salt":"…","time":3,"memoryKiB":65536,"threads":4},
//	 "nonce":"…","ciphertext":"…"}
//
// or with "key":{"source":"keyfile"}. The ciphertext is the AES-256-GCM
// sealing of the entries (JSON) under a fresh 12-byte nonce per write; the
// header (format, version, key) is the additional authenticated data, so
// changing the parameters or the key source is detected like changing the
// ciphertext. Byte strings are base64 (encoding/json's []byte).

const (
	fileFormat  = "toolwire-oauth-store"
	fileVersion = 1
	keySize     = 32 // AES-256
	saltSize    = 16
	// maxStoreSize bounds what is read of a store file.
	maxStoreSize = 16 << 20
)

// Key sources recorded in the file header.
const (
	sourceArgon2id = "argon2id"
	sourceKeyFile  = "keyfile"
)

// Argon2Params are the Argon2id cost parameters for deriving the store key
// from a passphrase. They are written in the file header, so a file is
// always read with the parameters it was written with.
type Argon2Params struct {
	// Time is the number of passes over the memory.
	Time uint32 `json:"time"`
	// MemoryKiB is the memory used, in KiB.
	MemoryKiB uint32 `json:"memoryKiB"`
	// Threads is the degree of parallelism.
	Threads uint8 `json:"threads"`
}

// DefaultArgon2 is the second recommended option of RFC 9106, section 4:
// 3 passes over 64 MiB with 4 lanes. It takes a fraction of a second once
// per process (the derived key is kept in memory by the Store).
var DefaultArgon2 = Argon2Params{Time: 3, MemoryKiB: 64 << 10, Threads: 4}

// Bounds applied to parameters read from a file, so that a doctored header
// cannot make toolwire allocate gigabytes before authentication fails.
const (
	maxArgonTime   = 16
	maxArgonMemory = 1 << 20 // KiB: 1 GiB
	maxArgonLanes  = 64
)

func (p Argon2Params) check() error {
	switch {
	case p.Time < 1 || p.Time > maxArgonTime:
		return fmt.Errorf("argon2id time %d out of range 1..%d", p.Time, maxArgonTime)
	case p.Threads < 1 || p.Threads > maxArgonLanes:
		return fmt.Errorf("argon2id threads %d out of range 1..%d", p.Threads, maxArgonLanes)
	case p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > maxArgonMemory:
		return fmt.Errorf("argon2id memory %d KiB out of range %d..%d", p.MemoryKiB, 8*uint32(p.Threads), maxArgonMemory)
	}
	return nil
}

// keyHeader says where the key comes from.
type keyHeader struct {
	Source string `json:"source"`
	Salt   []byte `json:"salt,omitempty"`
	*Argon2Params
}

// header is the authenticated, unencrypted part of the file.
type header struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Key     keyHeader `json:"key"`
}

type sealedFile struct {
	header
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// aad is the additional data the header contributes: its JSON encoding,
// which for a struct is deterministic.
func (h *header) aad() []byte {
	b, err := json.Marshal(h)
	if err != nil {
		panic(err) // a struct of strings, ints and bytes always encodes
	}
	return b
}

// parseSealed parses a store file strictly; anything unexpected is an
// error, so a file is never half-understood and then overwritten.
func parseSealed(data []byte) (*sealedFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f sealedFile
	if err := dec.Decode(&f); err != nil {
		return nil, errors.New("not a JSON store file")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the store object")
	}
	switch {
	case f.Format != fileFormat:
		return nil, fmt.Errorf("format %q, want %q", f.Format, fileFormat)
	case f.Version != fileVersion:
		return nil, fmt.Errorf("version %d, want %d", f.Version, fileVersion)
	case len(f.Nonce) != 12:
		return nil, errors.New("bad nonce length")
	case len(f.Ciphertext) < 16:
		return nil, errors.New("ciphertext too short")
	}
	switch f.Key.Source {
	case sourceArgon2id:
		if f.Key.Argon2Params == nil {
			return nil, errors.New("argon2id parameters missing")
		}
		if err := f.Key.Argon2Params.check(); err != nil {
			return nil, err
		}
		if len(f.Key.Salt) < saltSize || len(f.Key.Salt) > 64 {
			return nil, fmt.Errorf("salt of %d bytes, want %d to 64", len(f.Key.Salt), saltSize)
		}
	case sourceKeyFile:
		if f.Key.Argon2Params != nil || f.Key.Salt != nil {
			return nil, errors.New("key file store with passphrase parameters")
		}
	default:
		return nil, fmt.Errorf("unknown key source %q", f.Key.Source)
	}
	return &f, nil
}

// seal encrypts plaintext under key with a fresh nonce.
func seal(h header, key, plaintext []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	f := sealedFile{header: h, Nonce: nonce, Ciphertext: gcm.Seal(nil, nonce, plaintext, h.aad())}
	out, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// open decrypts f under key; a failure means a wrong key or a modified file.
func open(f *sealedFile, key []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	return gcm.Open(nil, f.Nonce, f.Ciphertext, f.header.aad())
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// deriveKey runs Argon2id. The caller caches the result per salt.
func deriveKey(passphrase string, salt []byte, p Argon2Params) []byte {
	return argon2.IDKey([]byte(passphrase), salt, p.Time, p.MemoryKiB, p.Threads, keySize)
}

// readKeyFile reads a key file, refusing one that others may read: a key
// next to the data it protects is only as good as its permissions.
func readKeyFile(path string) ([]byte, error) {
	key, err := readPrivateFile(path)
	if err != nil {
		return nil, err
	}
	if len(key) != keySize {
		return nil, fmt.Errorf("key file %s: want exactly %d bytes", path, keySize)
	}
	return key, nil
}

// createKeyFile writes a new random key, failing if the file exists.
func createKeyFile(path string) (_ []byte, err error) {
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if _, err := f.Write(key); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return key, nil
}

// loadOrCreateKeyFile returns the key in path, creating it if create is
// set and there is none.
func loadOrCreateKeyFile(path string, create bool) ([]byte, error) {
	key, err := readKeyFile(path)
	if err == nil || !create || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key, err = createKeyFile(path)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it between our read and create.
		return readKeyFile(path)
	}
	return key, err
}
