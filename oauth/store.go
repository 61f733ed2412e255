package oauth

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolwire/toolwire/internal/sharedfile"
	"golang.org/x/oauth2"
)

// PassphraseEnv is the environment variable a [Store] takes its passphrase
// from when [StoreOptions.Passphrase] is empty.
const PassphraseEnv = "TOOLWIRE_PASSPHRASE"

// Entry is what the store keeps for one server. Its String method and
// slog value leave out every token and secret.
type Entry struct {
	// Server is the configured server name (the store's key).
	Server string `json:"-"`
	// Resource is the URL of the MCP server the entry was obtained for, in
	// canonical form: the entry is used for that server only (see
	// [HandlerConfig.Resource]). Empty in an entry written before entries
	// were bound, which is therefore never used.
	Resource string `json:"resource,omitempty"`
	// Caller, set in the entry of one gateway caller at a server (see
	// [Callers]), is that caller: the entry is used for that caller only.
	// Nil in a server's own entry, which is never used for a caller.
	Caller *Caller `json:"caller,omitempty"`
	// Client is the client registration used with the server's
	// authorization server, if any.
	Client *Client `json:"client,omitempty"`
	// Token is the current token, if any.
	Token *Token `json:"token,omitempty"`
	// Pending is an authorization started by a [Handler] that defers to
	// the embedding application, awaiting [Handler.FinishAuth].
	Pending *Pending `json:"pending,omitempty"`
	// Linked, in a caller's entry (see [Callers]), is the upstream
	// account the caller's login linked, held until the caller confirms
	// it ([Callers.Confirm]); never used before.
	Linked *Linked `json:"linked,omitempty"`
	// Updated is when the entry last changed.
	Updated time.Time `json:"updated"`
}

// Client is a client registration with an authorization server.
type Client struct {
	// ID is the client_id.
	ID string `json:"clientId"`
	// Secret is the client_secret, empty for a public client.
	Secret string `json:"clientSecret,omitempty"`
	// Issuer is the authorization server's issuer identifier.
	Issuer string `json:"issuer"`
	// AuthURL and TokenURL are the authorization and token endpoints.
	AuthURL  string `json:"authorizationEndpoint"`
	TokenURL string `json:"tokenEndpoint"`
	// AuthMethod is the token endpoint authentication method:
	// "client_secret_basic", "client_secret_post", "none", or "" to let
	// golang.org/x/oauth2 detect it.
	AuthMethod string `json:"tokenEndpointAuthMethod,omitempty"`
	// RedirectURL is the redirect URI the client was registered with (for
	// a configured client: the one it uses).
	RedirectURL string `json:"redirectUri,omitempty"`
	// Scopes are the scopes last requested with this client.
	Scopes []string `json:"scopes,omitempty"`
	// Dynamic is set for a client toolwire registered itself (RFC 7591).
	Dynamic bool `json:"dynamic,omitempty"`
	// Registered is when the client was registered or first used.
	Registered time.Time `json:"registered"`
}

// Token is an OAuth token as stored.
type Token struct {
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken,omitempty"`
	// Type is the token type, normally "Bearer".
	Type string `json:"tokenType,omitempty"`
	// Expiry is when the access token expires; zero if the server did not
	// say.
	Expiry time.Time `json:"expiry,omitzero"`
	// Obtained is when the token was issued to us.
	Obtained time.Time `json:"obtained"`
	// Scopes are the granted scopes (from the token response, else the
	// requested ones).
	Scopes []string `json:"scopes,omitempty"`
}

// Pending is an authorization request waiting for its code (see
// [Handler.FinishAuth]). The PKCE verifier is kept here, encrypted with the
// rest, so that a code can be redeemed after a restart.
type Pending struct {
	State    string `json:"state"`
	Verifier string `json:"verifier"`
	// URL is the authorization URL handed out.
	URL         string `json:"url"`
	RedirectURL string `json:"redirectUri"`
	// Resource is the RFC 8707 resource indicator sent with the request.
	Resource string `json:"resource"`
	Issuer   string `json:"issuer"`
	// IssRequired is set when the server advertised RFC 9207, which makes
	// the iss parameter in the response mandatory.
	IssRequired bool      `json:"issRequired,omitempty"`
	Scopes      []string  `json:"scopes,omitempty"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
}

// Linked is the upstream account a caller's login linked (CallerLogin):
// the tokens the callback redeemed the code for, held until the caller
// confirms them with the code the callback showed in the browser that
// completed the login. Whoever completes a caller's authorization URL
// links their own account; the tokens become the caller's only when the
// code that browser was shown comes back through the caller's own client.
type Linked struct {
	Token *Token `json:"token"`
	// CodeHash is the SHA-256 of the confirmation code, hex.
	CodeHash string `json:"codeHash"`
	// ID is the authorization's ID (see [CallerAuthorization]).
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
	// Tries counts wrong codes; at maxLinkTries the link is dropped.
	Tries int `json:"tries,omitempty"`
}

func (c Client) String() string {
	return fmt.Sprintf("client{id=%s issuer=%s method=%s redirect=%s dynamic=%t secret=%s}",
		c.ID, c.Issuer, c.AuthMethod, c.RedirectURL, c.Dynamic, present(c.Secret))
}

// GoString keeps %#v from printing the secret.
func (c Client) GoString() string { return c.String() }

// LogValue keeps slog from printing the secret.
func (c Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

func (t Token) String() string {
	exp := "none"
	if !t.Expiry.IsZero() {
		exp = t.Expiry.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("token{type=%s expiry=%s scopes=%q access=%s refresh=%s}",
		t.Type, exp, t.Scopes, present(t.AccessToken), present(t.RefreshToken))
}

func (t Token) GoString() string     { return t.String() }
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }

func (p Pending) String() string {
	return fmt.Sprintf("pending{issuer=%s expires=%s}", p.Issuer, p.Expires.UTC().Format(time.RFC3339))
}

func (p Pending) GoString() string     { return p.String() }
func (p Pending) LogValue() slog.Value { return slog.StringValue(p.String()) }

func (e Entry) String() string {
	var parts []string
	if e.Client != nil {
		parts = append(parts, e.Client.String())
	}
	if e.Token != nil {
		parts = append(parts, e.Token.String())
	}
	if e.Pending != nil {
		parts = append(parts, e.Pending.String())
	}
	// The resource URL stays out: its query may carry a credential.
	return fmt.Sprintf("entry{server=%s bound=%t%s %s}", e.Server, e.Resource != "", callerPart(e.Caller), strings.Join(parts, " "))
}

func (e Entry) GoString() string     { return e.String() }
func (e Entry) LogValue() slog.Value { return slog.StringValue(e.String()) }

func callerPart(c *Caller) string {
	if c == nil {
		return ""
	}
	return " caller=" + c.String()
}

func present(s string) string {
	if s == "" {
		return "none"
	}
	return "[redacted]"
}

// State is a server's authorization state, as `toolwire auth status`
// shows it.
type State string

const (
	// StateNone: nothing stored.
	StateNone State = "none"
	// StateValid: an access token that has not expired.
	StateValid State = "valid"
	// StateRefreshable: the access token expired (or will within the
	// window) but a refresh token is kept.
	StateRefreshable State = "refreshable"
	// StateLoginRequired: a registration but no usable token, or an
	// entry bound to no server URL (written by an older toolwire).
	StateLoginRequired State = "login required"
	// StatePending: an authorization awaits [Handler.FinishAuth].
	StatePending State = "pending"
)

// State reports e's authorization state at now.
func (e *Entry) State(now time.Time) State {
	switch {
	case e == nil:
		return StateNone
	case e.Resource == "" && !e.empty():
		return StateLoginRequired
	case e.Token != nil && e.Token.AccessToken != "" && (e.Token.Expiry.IsZero() || now.Before(e.Token.Expiry)):
		return StateValid
	case e.Token != nil && e.Token.RefreshToken != "":
		return StateRefreshable
	case e.Pending != nil && now.Before(e.Pending.Expires):
		return StatePending
	case e.Client != nil || e.Token != nil:
		return StateLoginRequired
	}
	return StateNone
}

func (e *Entry) empty() bool {
	return e.Client == nil && e.Token == nil && e.Pending == nil && e.Linked == nil
}

// oauth2Token converts t for golang.org/x/oauth2 users. The refresh token
// stays behind: the transport needs only the access token.
func (t *Token) oauth2Token() *oauth2.Token {
	return &oauth2.Token{AccessToken: t.AccessToken, TokenType: t.Type, Expiry: t.Expiry}
}

// tokenFrom converts a token response; requested are the scopes asked for,
// used when the response does not say which were granted.
func tokenFrom(t *oauth2.Token, requested []string, now time.Time) *Token {
	scopes := requested
	if s, ok := t.Extra("scope").(string); ok && s != "" {
		scopes = strings.Fields(s)
	}
	typ := t.TokenType
	if typ == "" {
		typ = "Bearer"
	}
	return &Token{
		AccessToken:  t.AccessToken,
		RefreshToken: t.RefreshToken,
		Type:         typ,
		Expiry:       t.Expiry,
		Obtained:     now,
		Scopes:       slices.Clone(scopes),
	}
}

// StoreOptions configures [NewStore]. A nil *StoreOptions means defaults.
type StoreOptions struct {
	// Passphrase, if not empty, derives the key with Argon2id. Empty
	// means the PassphraseEnv environment variable as NewStore finds it,
	// and if that is empty too, the key file.
	Passphrase string
	// KeyFile is the key file used without a passphrase: 32 random bytes,
	// created with mode 0600 on the first write, refused if group or
	// others may access it. Empty means "oauth.key" beside the store.
	KeyFile string
	// Argon2 sets the cost of deriving a key for a new store file; nil
	// means DefaultArgon2. An existing file keeps its parameters.
	Argon2 *Argon2Params
}

// Store keeps OAuth state for every server in one encrypted file shared by
// all toolwire processes of a user. Reads need no lock: the file is only
// ever replaced whole (temporary file, fsync, rename). Every change takes
// an advisory lock on a sidecar file (path + ".lock"), re-reads the file,
// applies the change and replaces the file before releasing the lock, so
// two processes never lose each other's changes, rotated refresh tokens
// above all.
//
// A file that fails to decrypt (wrong passphrase or key file, or modified)
// is an error wrapping [ErrStoreAuth] that names the file; it is never
// rewritten or reset.
//
// A Store made by [NewStoreOn] keeps each server's entry as a sealed record
// in a [Records] backend instead (a database shared by a fleet of
// gateways), encrypted in the same format and with the same keys.
//
// A Store is safe for concurrent use.
type Store struct {
	path       string
	records    Records // nil for the store file
	keyFile    string
	passphrase string
	argon      Argon2Params
	now        func() time.Time

	mu   sync.Mutex
	keys map[string][]byte // derived keys by salt and parameters
	// recHdr is the header new records are sealed under: the first one
	// this store sealed or opened with its passphrase, so that a fleet
	// derives one key per salt rather than one per record.
	recHdr *header

	flights flights // single-flight refreshes, per server
}

// DefaultPath returns where the store is kept unless configured otherwise:
// oauth.json in the toolwire directory under [os.UserConfigDir].
func DefaultPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("oauth: default store path: %w", err)
	}
	return filepath.Join(dir, "toolwire", "oauth.json"), nil
}

// NewStore returns the store at path, or at [DefaultPath] when path is
// empty. It does no I/O: a missing file is an empty store, and the file,
// its directory (mode 0700) and any key file are created by the first
// change.
func NewStore(path string, opts *StoreOptions) (*Store, error) {
	if opts == nil {
		opts = &StoreOptions{}
	}
	if path == "" {
		p, err := DefaultPath()
		if err != nil {
			return nil, err
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("oauth: store path %q: %w", path, err)
	}
	s := &Store{path: abs}
	if err := s.configure(opts, filepath.Join(filepath.Dir(abs), "oauth.key")); err != nil {
		return nil, err
	}
	return s, nil
}

// configure applies opts; defaultKey is the key file used when
// opts.KeyFile is empty.
func (s *Store) configure(opts *StoreOptions, defaultKey string) (err error) {
	s.passphrase, s.argon, s.now, s.keys = opts.Passphrase, DefaultArgon2, time.Now, map[string][]byte{}
	if s.passphrase == "" {
		s.passphrase = os.Getenv(PassphraseEnv)
	}
	if opts.Argon2 != nil {
		if err := opts.Argon2.check(); err != nil {
			return fmt.Errorf("oauth: store options: %w", err)
		}
		s.argon = *opts.Argon2
	}
	s.keyFile = opts.KeyFile
	if s.keyFile == "" {
		s.keyFile = defaultKey
	}
	if s.keyFile, err = filepath.Abs(s.keyFile); err != nil {
		return fmt.Errorf("oauth: key file path: %w", err)
	}
	return nil
}

// Path returns the absolute path of the store file, or "" for a store on
// [Records].
func (s *Store) Path() string { return s.path }

// where names the store in errors: its file, or its records.
func (s *Store) where() string {
	if s.records != nil {
		return s.records.String()
	}
	return s.path
}

// Get returns a copy of server's entry, or nil if there is none.
func (s *Store) Get(server string) (*Entry, error) {
	return s.GetContext(context.Background(), server)
}

// GetContext is Get bounded by ctx, which a store on [Records] (a
// database) honours.
func (s *Store) GetContext(ctx context.Context, server string) (*Entry, error) {
	if s.records != nil {
		rec, err := s.records.Get(ctx, server)
		if err != nil {
			return nil, fmt.Errorf("oauth: store %s: %w", s.where(), err)
		}
		c, err := s.openRecord(server, rec)
		if err != nil {
			return nil, err
		}
		return c.entries[server], nil
	}
	c, err := s.read()
	if err != nil {
		return nil, err
	}
	e := c.entries[server]
	if e == nil {
		return nil, nil
	}
	e.Server = server
	return e, nil
}

// List returns every server's entry, ordered by server name. The entries
// of gateway callers ([Callers]) are not servers' and are not listed.
func (s *Store) List() ([]*Entry, error) {
	return s.ListContext(context.Background())
}

// ListContext is List bounded by ctx, which a store on [Records] (a
// database) honours.
func (s *Store) ListContext(ctx context.Context) ([]*Entry, error) {
	c, err := s.readAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Entry, 0, len(c.entries))
	for name, e := range c.entries {
		if !isServerKey(name) {
			continue
		}
		e.Server = name
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Entry) int { return cmp.Compare(a.Server, b.Server) })
	return out, nil
}

// Update changes server's entry under the store lock: change gets the
// current entry (an empty one if there is none) and edits it in place. If
// change returns an error, nothing is written and Update returns it. An
// entry left empty is removed; an unchanged one is not rewritten. ctx
// bounds the wait for the lock.
func (s *Store) Update(ctx context.Context, server string, change func(*Entry) error) error {
	if server == "" {
		return errors.New("oauth: store: empty server name")
	}
	apply := func(c *contents) error {
		e := c.entries[server]
		if e == nil {
			e = &Entry{}
		}
		before, _ := json.Marshal(e)
		e.Server = server
		if err := change(e); err != nil {
			return err
		}
		after, _ := json.Marshal(e)
		if bytes.Equal(before, after) {
			return errUnchanged
		}
		if e.empty() {
			delete(c.entries, server)
		} else {
			e.Updated = s.now().UTC()
			c.entries[server] = e
		}
		return nil
	}
	if s.records != nil {
		return s.updateRecord(ctx, server, apply)
	}
	return s.update(ctx, apply)
}

// Delete removes server's entry: its token, registration and any pending
// authorization. Deleting what is not there is not an error.
func (s *Store) Delete(ctx context.Context, server string) error {
	return s.Update(ctx, server, func(e *Entry) error {
		*e = Entry{}
		return nil
	})
}

// errUnchanged tells update that there is nothing to write.
var errUnchanged = errors.New("unchanged")

// contents is the decrypted file, with what is needed to write it back
// under the same key.
type contents struct {
	entries map[string]*Entry
	hdr     *header // nil for a missing file
	key     []byte  // nil until known
}

type plaintext struct {
	Servers map[string]*Entry `json:"servers"`
}

func (s *Store) update(ctx context.Context, change func(*contents) error) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("oauth: store: %w", err)
	}
	unlock, err := sharedfile.Lock(ctx, s.path+".lock")
	if err != nil {
		return fmt.Errorf("oauth: store: %w", err)
	}
	defer unlock()
	c, err := s.read()
	if err != nil {
		return err
	}
	if err := change(c); err != nil {
		if errors.Is(err, errUnchanged) {
			return nil
		}
		return err
	}
	return s.write(c)
}

// read loads and decrypts the file. A missing file is an empty store.
func (s *Store) read() (*contents, error) {
	f, err := os.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &contents{entries: map[string]*Entry{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oauth: store: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStoreSize+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("oauth: store: %w", err)
	}
	if len(data) > maxStoreSize {
		return nil, fmt.Errorf("oauth: store %s: %w: larger than %d bytes", s.path, ErrStoreCorrupt, maxStoreSize)
	}
	return s.decrypt(data, "")
}

// decrypt opens one sealed document: the store file (server empty) or
// the record of server, which must hold server's entry and nothing else.
func (s *Store) decrypt(data []byte, server string) (*contents, error) {
	what := s.where()
	if server != "" {
		what = fmt.Sprintf("%s, record %q", what, server)
	}
	sf, err := parseSealed(data)
	if err != nil {
		return nil, fmt.Errorf("oauth: store %s: %w: %w (fix or remove it; toolwire does not reset it)", what, ErrStoreCorrupt, err)
	}
	key, err := s.keyFor(&sf.header, false)
	if err != nil {
		return nil, err
	}
	plain, err := open(sf, key)
	if err != nil {
		thing := "file"
		if server != "" {
			thing = "record"
		}
		return nil, fmt.Errorf("oauth: store %s: %w: %s, or the %s was modified", what, ErrStoreAuth, s.keyHint(&sf.header), thing)
	}
	defer clear(plain)
	var p plaintext
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		// Authenticated but not understood: written by another version.
		return nil, fmt.Errorf("oauth: store %s: %w: contents not understood", what, ErrStoreCorrupt)
	}
	if p.Servers == nil {
		p.Servers = map[string]*Entry{}
	}
	for name, e := range p.Servers {
		if name == "" || e == nil {
			return nil, fmt.Errorf("oauth: store %s: %w: an empty entry", what, ErrStoreCorrupt)
		}
		if server != "" && name != server {
			// The name is under the seal: a record moved to another
			// server's row is found out, as a change to the file would be.
			return nil, fmt.Errorf("oauth: store %s: %w: it holds the entry of server %q", what, ErrStoreCorrupt, name)
		}
	}
	if server != "" && len(p.Servers) != 1 {
		return nil, fmt.Errorf("oauth: store %s: %w: %d entries, want 1", what, ErrStoreCorrupt, len(p.Servers))
	}
	return &contents{entries: p.Servers, hdr: &sf.header, key: key}, nil
}

// keyHint says which key was tried, without any of it.
func (s *Store) keyHint(h *header) string {
	if h.Key.Source == sourceArgon2id {
		return "wrong passphrase (" + PassphraseEnv + ")"
	}
	return "wrong key file " + s.keyFile
}

// keyFor returns the key for a file with header h. With create set (for a
// write), a missing key file is created.
func (s *Store) keyFor(h *header, create bool) ([]byte, error) {
	switch h.Key.Source {
	case sourceArgon2id:
		if s.passphrase == "" {
			return nil, fmt.Errorf("oauth: store %s is encrypted with a passphrase: set %s", s.where(), PassphraseEnv)
		}
		p := *h.Key.Argon2Params
		id := fmt.Sprintf("%x/%d/%d/%d", h.Key.Salt, p.Time, p.MemoryKiB, p.Threads)
		s.mu.Lock()
		defer s.mu.Unlock()
		if k := s.keys[id]; k != nil {
			return k, nil
		}
		k := deriveKey(s.passphrase, h.Key.Salt, p)
		s.keys[id] = k
		return k, nil
	case sourceKeyFile:
		if s.passphrase != "" {
			return nil, fmt.Errorf("oauth: store %s is encrypted with the key file %s, but %s is set: unset it, or remove the store to start over with the passphrase", s.where(), s.keyFile, PassphraseEnv)
		}
		k, err := loadOrCreateKeyFile(s.keyFile, create)
		if err != nil && s.records != nil && errors.Is(err, fs.ErrNotExist) {
			return nil, s.noFleetKey()
		}
		if err != nil {
			return nil, fmt.Errorf("oauth: store %s: %w", s.where(), err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("oauth: store %s: %w: unknown key source", s.where(), ErrStoreCorrupt)
}

// noFleetKey is the error of a store on [Records] with neither a
// passphrase nor a key file.
func (s *Store) noFleetKey() error {
	return fmt.Errorf("oauth: store %s: no key to encrypt the tokens with: set %s, the same on every replica (a store shared by a fleet never makes a key file: each replica would make its own and none could read the others' tokens; or give every replica the same key file %s)",
		s.where(), PassphraseEnv, s.keyFile)
}

// CheckKey returns nil when the store has a key to encrypt new entries
// with: a passphrase, a key file that can be read, or, for the store
// file, a key file it may create at its first write. A store on [Records]
// never creates one (see [NewStoreOn]): without a passphrase or the key
// file it returns an error naming both, before anything asks a person to
// log in only for the tokens to be refused.
func (s *Store) CheckKey() error {
	if s.passphrase != "" {
		return nil
	}
	_, err := readKeyFile(s.keyFile)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist) && s.records == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return s.noFleetKey()
	}
	return fmt.Errorf("oauth: store %s: %w", s.where(), err)
}

// write seals and replaces the file atomically: a temporary file in the
// same directory, created 0600, written, synced, renamed over the file,
// and the directory synced so that the rename survives a crash.
func (s *Store) write(c *contents) (err error) {
	defer wrapf(&err, "oauth: store %s: write", s.path)
	data, err := s.sealContents(c, true)
	if err != nil {
		return err
	}
	return sharedfile.WriteAtomic(s.path, data)
}

// sealContents seals c under its header and key, or a new header (a new
// salt for a passphrase) when c has none. createKey allows creating a
// missing key file.
func (s *Store) sealContents(c *contents, createKey bool) ([]byte, error) {
	if c.hdr == nil {
		h, err := s.newHeader()
		if err != nil {
			return nil, err
		}
		key, err := s.keyFor(h, createKey)
		if err != nil {
			return nil, err
		}
		c.hdr, c.key = h, key
	}
	plain, err := json.Marshal(plaintext{Servers: c.entries})
	if err != nil {
		return nil, err
	}
	data, err := seal(*c.hdr, c.key, plain)
	clear(plain)
	return data, err
}

// newHeader returns the header of a new store file, or of a new record:
// for a passphrase, a record reuses the store's record header (recHdr) so
// that its key is derived once.
func (s *Store) newHeader() (*header, error) {
	h := header{Format: fileFormat, Version: fileVersion}
	if s.passphrase == "" {
		h.Key = keyHeader{Source: sourceKeyFile}
		return &h, nil
	}
	if s.records != nil {
		s.mu.Lock()
		rh := s.recHdr
		s.mu.Unlock()
		if rh != nil && rh.Key.Source == sourceArgon2id {
			return rh, nil
		}
	}
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	p := s.argon
	h.Key = keyHeader{Source: sourceArgon2id, Salt: salt, Argon2Params: &p}
	return &h, nil
}
