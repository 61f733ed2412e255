package audit

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"runtime"
)

// Key files are PEM: a private key is a "PRIVATE KEY" block holding its
// PKCS#8 encoding, a public key a "PUBLIC KEY" block holding its PKIX
// encoding, as openssl writes them (openssl genpkey -algorithm ed25519).

const (
	privatePEMType = "PRIVATE KEY"
	publicPEMType  = "PUBLIC KEY"
)

// MarshalPrivateKey encodes key as a PEM "PRIVATE KEY" block (PKCS#8).
func MarshalPrivateKey(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: privatePEMType, Bytes: der}), nil
}

// MarshalPublicKey encodes key as a PEM "PUBLIC KEY" block (PKIX).
func MarshalPublicKey(key ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: publicPEMType, Bytes: der}), nil
}

// ReadPrivateKey reads an Ed25519 private key written by
// [MarshalPrivateKey]. Except on Windows, it refuses a file that its group
// or others may read or write: such a key signs nothing anyone can trust.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := readKeyFile(path, true)
	if err != nil {
		return nil, err
	}
	der, err := pemBlock(path, data, privatePEMType)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key file %s: a %T, want an Ed25519 key", path, k)
	}
	return key, nil
}

// ReadPublicKey reads an Ed25519 public key written by [MarshalPublicKey].
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := readKeyFile(path, false)
	if err != nil {
		return nil, err
	}
	der, err := pemBlock(path, data, publicPEMType)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	key, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("key file %s: a %T, want an Ed25519 key", path, k)
	}
	return key, nil
}

func readKeyFile(path string, private bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if private && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key file %s: mode %v lets others read or change the private key; chmod 600 it", path, fi.Mode().Perm())
	}
	if fi.Size() > 64<<10 {
		return nil, fmt.Errorf("key file %s: %d bytes, too large for a key", path, fi.Size())
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return data, nil
}

// pemBlock returns the DER bytes of the first PEM block in data, which must
// have type want.
func pemBlock(path string, data []byte, want string) ([]byte, error) {
	b, _ := pem.Decode(data)
	switch {
	case b == nil:
		return nil, fmt.Errorf("key file %s: no PEM block", path)
	case b.Type != want:
		return nil, fmt.Errorf("key file %s: holds a %q PEM block, want %q", path, b.Type, want)
	}
	return b.Bytes, nil
}
