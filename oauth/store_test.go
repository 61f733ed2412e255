package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func sampleEntry() func(*Entry) error {
	return func(e *Entry) error {
		e.Client = &Client{ID: "client-123", Secret: "client-secret-value-0001", Issuer: "https://as.example", TokenURL: "https://as.example/token", Dynamic: true}
		e.Token = &Token{AccessToken: "access-token-value-0001", RefreshToken: "refresh-token-value-0001", Type: "Bearer", Expiry: time.Now().Add(time.Hour)}
		return nil
	}
}

func TestStoreRoundTripAndModes(t *testing.T) {
	for _, mode := range []string{"passphrase", "keyfile"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(PassphraseEnv, "")
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "cfg", "toolwire")
			path := filepath.Join(dir, "oauth.json")
			opts := &StoreOptions{Argon2: cheap}
			if mode == "passphrase" {
				opts.Passphrase = testPassphrase
			}
			s, err := NewStore(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			if e, err := s.Get("a"); err != nil || e != nil {
				t.Fatalf("empty store: %v, %v", e, err)
			}
			if err := s.Update(ctx, "a", sampleEntry()); err != nil {
				t.Fatal(err)
			}
			if err := s.Update(ctx, "b", func(e *Entry) error { e.Client = &Client{ID: "other"}; return nil }); err != nil {
				t.Fatal(err)
			}
			// A second value, as another process would open it.
			s2, _ := NewStore(path, opts)
			e, err := s2.Get("a")
			if err != nil {
				t.Fatal(err)
			}
			if e.Server != "a" || e.Token.RefreshToken != "refresh-token-value-0001" || e.Client.Secret != "client-secret-value-0001" {
				t.Errorf("read back %v", e)
			}
			list, err := s2.List()
			if err != nil || len(list) != 2 || list[0].Server != "a" || list[1].Server != "b" {
				t.Fatalf("list: %v, %v", list, err)
			}
			data, _ := os.ReadFile(path)
			for _, secret := range []string{"access-token-value", "refresh-token-value", "client-secret-value", "client-123"} {
				if bytes.Contains(data, []byte(secret)) {
					t.Errorf("file holds %q in plain text", secret)
				}
			}
			var hdr struct {
				Key map[string]any `json:"key"`
			}
			json.Unmarshal(data, &hdr)
			wantSource := map[string]string{"passphrase": "argon2id", "keyfile": "keyfile"}[mode]
			if hdr.Key["source"] != wantSource {
				t.Errorf("key source %v, want %s", hdr.Key["source"], wantSource)
			}
			if runtime.GOOS != "windows" {
				for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
					if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
						t.Errorf("%s: mode %v, want %v (%v)", p, st.Mode().Perm(), want, err)
					}
				}
				st, err := os.Stat(filepath.Join(dir, "oauth.key"))
				if mode == "keyfile" && (err != nil || st.Mode().Perm() != 0o600 || st.Size() != 32) {
					t.Errorf("key file: %v, %v", st, err)
				}
				if mode == "passphrase" && err == nil {
					t.Error("a key file was created in passphrase mode")
				}
			}
			if err := s2.Delete(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if e, err := s.Get("a"); err != nil || e != nil {
				t.Errorf("after delete: %v, %v", e, err)
			}
		})
	}
}

func TestStoreUnchangedIsNotRewritten(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "oauth.json")
	s := newTestStore(t, path)
	if err := s.Update(ctx, "a", sampleEntry()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if err := s.Update(ctx, "a", func(*Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, "a", func(*Entry) error { return errors.New("no") }); err == nil {
		t.Error("a failing change did not fail Update")
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("an unchanged or failed update rewrote the file (each write has a fresh nonce)")
	}
}

// TestStoreLockLosesNoUpdate increments a counter from two Store values
// and many goroutines: with read-modify-write under the lock, every
// increment lands.
func TestStoreLockLosesNoUpdate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "oauth.json")
	stores := []*Store{newTestStore(t, path), newTestStore(t, path)}
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := stores[i%2].Update(ctx, "counter", func(e *Entry) error {
				if e.Client == nil {
					e.Client = &Client{}
				}
				e.Client.ID = fmt.Sprint(len(e.Client.ID) + 1) // any change depending on the old value
				e.Client.Scopes = append(e.Client.Scopes, "x")
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	e, err := stores[0].Get("counter")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.Client.Scopes); got != n {
		t.Errorf("%d of %d updates landed", got, n)
	}
}

func TestStoreRefusesTamperingAndWrongKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "oauth.json")
	if err := newTestStore(t, path).Update(ctx, "a", sampleEntry()); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(path)

	edit := func(change func(map[string]any)) []byte {
		var g map[string]any
		json.Unmarshal(orig, &g)
		change(g)
		b, _ := json.Marshal(g)
		return b
	}
	flip := func(b64 string) string {
		// Change one base64 character in the middle.
		r := []byte(b64)
		i := len(r) / 2
		if r[i] == 'A' {
			r[i] = 'B'
		} else {
			r[i] = 'A'
		}
		return string(r)
	}
	tests := []struct {
		name string
		data []byte
		pass string
		want error
	}{
		{"ciphertext flipped", edit(func(g map[string]any) { g["ciphertext"] = flip(g["ciphertext"].(string)) }), testPassphrase, ErrStoreAuth},
		{"nonce flipped", edit(func(g map[string]any) { g["nonce"] = flip(g["nonce"].(string)) }), testPassphrase, ErrStoreAuth},
		{"salt changed", edit(func(g map[string]any) {
			g["key"].(map[string]any)["salt"] = flip(g["key"].(map[string]any)["salt"].(string))
		}), testPassphrase, ErrStoreAuth},
		{"cost lowered", edit(func(g map[string]any) { g["key"].(map[string]any)["time"] = 2 }), testPassphrase, ErrStoreAuth},
		{"cost absurd", edit(func(g map[string]any) { g["key"].(map[string]any)["memoryKiB"] = 1 << 30 }), testPassphrase, ErrStoreCorrupt},
		{"truncated", orig[:len(orig)/2], testPassphrase, ErrStoreCorrupt},
		{"unknown field", edit(func(g map[string]any) { g["extra"] = 1 }), testPassphrase, ErrStoreCorrupt},
		{"wrong passphrase", orig, "not the passphrase", ErrStoreAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, _ := NewStore(path, &StoreOptions{Passphrase: tt.pass, Argon2: cheap})
			_, err := s.Get("a")
			if !errors.Is(err, tt.want) {
				t.Fatalf("get: %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			noSecrets(t, err.Error(), tt.pass, "refresh-token-value-0001")
			// A change must not replace the file either.
			if err := s.Update(ctx, "b", func(e *Entry) error { e.Client = &Client{ID: "x"}; return nil }); !errors.Is(err, tt.want) {
				t.Errorf("update: %v, want %v", err, tt.want)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, tt.data) {
				t.Error("the refused file was changed")
			}
		})
	}
}

func TestKeyFileRules(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits")
	}
	t.Setenv(PassphraseEnv, "")
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "oauth.json")
	s, _ := NewStore(path, nil)
	if err := s.Update(ctx, "a", sampleEntry()); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "oauth.key")
	key, _ := os.ReadFile(keyPath)

	// Readable by others: refused, naming the file and the fix.
	os.Chmod(keyPath, 0o644)
	if _, err := s.Get("a"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("key file 0644: %v, want a refusal", err)
	}
	os.Chmod(keyPath, 0o600)

	// Another key: authentication fails, the file stays.
	other := bytes.Repeat([]byte{7}, 32)
	os.WriteFile(keyPath, other, 0o600)
	before, _ := os.ReadFile(path)
	if _, err := s.Get("a"); !errors.Is(err, ErrStoreAuth) || !strings.Contains(err.Error(), path) {
		t.Errorf("wrong key file: %v, want ErrStoreAuth naming %s", err, path)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("store changed")
	}
	os.WriteFile(keyPath, key, 0o600)

	// A passphrase now set: refused with the reason, not silently ignored.
	p, _ := NewStore(path, &StoreOptions{Passphrase: "x"})
	if _, err := p.Get("a"); err == nil || !strings.Contains(err.Error(), PassphraseEnv) {
		t.Errorf("passphrase over a key file store: %v", err)
	}
	// The environment variable is the passphrase when none is given.
	t.Setenv(PassphraseEnv, "from-env")
	envPath := filepath.Join(dir, "env.json")
	es, _ := NewStore(envPath, &StoreOptions{Argon2: cheap})
	if err := es.Update(ctx, "a", sampleEntry()); err != nil {
		t.Fatal(err)
	}
	t.Setenv(PassphraseEnv, "")
	ks, _ := NewStore(envPath, nil)
	if _, err := ks.Get("a"); err == nil || !strings.Contains(err.Error(), "set "+PassphraseEnv) {
		t.Errorf("passphrase store without a passphrase: %v", err)
	}
}

func TestEntryState(t *testing.T) {
	now := time.Now()
	const r = "https://mcp.example.com/mcp"
	tests := []struct {
		name string
		e    *Entry
		want State
	}{
		{"nil", nil, StateNone},
		{"valid", &Entry{Resource: r, Token: &Token{AccessToken: "a", Expiry: now.Add(time.Minute)}}, StateValid},
		{"no expiry", &Entry{Resource: r, Token: &Token{AccessToken: "a"}}, StateValid},
		{"refreshable", &Entry{Resource: r, Token: &Token{AccessToken: "a", RefreshToken: "r", Expiry: now.Add(-time.Minute)}}, StateRefreshable},
		{"expired", &Entry{Resource: r, Client: &Client{}, Token: &Token{AccessToken: "a", Expiry: now.Add(-time.Minute)}}, StateLoginRequired},
		{"registered only", &Entry{Resource: r, Client: &Client{}}, StateLoginRequired},
		{"pending", &Entry{Resource: r, Client: &Client{}, Pending: &Pending{Expires: now.Add(time.Minute)}}, StatePending},
		{"pending expired", &Entry{Resource: r, Client: &Client{}, Pending: &Pending{Expires: now.Add(-time.Minute)}}, StateLoginRequired},
		// Written before entries were bound to a server URL: not used.
		{"unbound valid", &Entry{Token: &Token{AccessToken: "a"}}, StateLoginRequired},
		{"unbound pending", &Entry{Client: &Client{}, Pending: &Pending{Expires: now.Add(time.Minute)}}, StateLoginRequired},
	}
	for _, tt := range tests {
		if got := tt.e.State(now); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// FuzzParseSealed feeds arbitrary files to the parser: it must not panic,
// and what it accepts must respect the bounds that protect the key
// derivation.
func FuzzParseSealed(f *testing.F) {
	path := filepath.Join(f.TempDir(), "oauth.json")
	s, _ := NewStore(path, &StoreOptions{Passphrase: "p", Argon2: cheap})
	s.Update(context.Background(), "a", sampleEntry())
	seed, _ := os.ReadFile(path)
	f.Add(seed)
	f.Add([]byte(`{"format":"toolwire-oauth-store","version":1,"key":{"source":"keyfile"},"nonce":"AAAAAAAAAAAAAAAA","ciphertext":"AAAAAAAAAAAAAAAAAAAAAA=="}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := parseSealed(data)
		if err != nil {
			return
		}
		if sf.Key.Source == sourceArgon2id {
			if err := sf.Key.Argon2Params.check(); err != nil {
				t.Fatalf("accepted out-of-bounds parameters: %v", err)
			}
		}
		if len(sf.Nonce) != 12 {
			t.Fatal("accepted a bad nonce")
		}
		// Opening with some key must fail cleanly, not panic.
		open(sf, make([]byte, keySize))
	})
}
