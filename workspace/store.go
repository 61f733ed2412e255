package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/store"
)

// ErrAuditFileOnPostgres is wrapped by the error of [Open] and [OpenStore]
// when an audit file is configured (audit.file, or Options.AuditFile)
// with a PostgreSQL store. On PostgreSQL the audit log is the store's
// table, one hash chain for every replica; a file beside it would hold
// one replica's share of the events under a chain of its own, a record
// that verifies and yet is not the fleet's, so the combination is refused
// rather than quietly writing one of them.
var ErrAuditFileOnPostgres = errors.New("an audit file with a PostgreSQL store")

// ErrPinsFileOnPostgres is wrapped by the error of [Open] and [OpenStore]
// when security.pinsFile is set with a PostgreSQL store, whose tables
// hold the pins: the file would be ignored.
var ErrPinsFileOnPostgres = errors.New("security.pinsFile with a PostgreSQL store")

// StoreURL returns the store URL a workspace opens: opts.StoreURL as it
// is when set (a flag's or a variable's value, not expanded again: a
// password may hold a "$"), else the configuration's store with its
// ${VAR} placeholders expanded by opts.LookupEnv (os.LookupEnv when nil).
// "" means the files of one machine. The URL may hold a password (from a
// variable): show it only through [store.Store.String].
func StoreURL(file *config.File, opts *Options) (string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.StoreURL != "" {
		return o.StoreURL, nil
	}
	raw := file.Store
	if raw == "" {
		return "", nil
	}
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	u, err := config.Expand(raw, lookup)
	if err != nil {
		// The error names a variable, never a value.
		return "", fmt.Errorf("store: %w", err)
	}
	if strings.TrimSpace(u) == "" {
		return "", fmt.Errorf("store: %q expands to nothing; want postgres://USER@HOST:PORT/DATABASE, or leave it out for the files of one machine", raw)
	}
	return u, nil
}

// OpenStore opens the store a workspace keeps its state in, as [Open]
// does: the files of one machine (security.pinsFile, the OAuth store file,
// the audit file of opts.AuditFile or audit.file), or the PostgreSQL
// database that [StoreURL] names, migrated to this toolwire's schema. The
// OAuth tokens are encrypted with TOOLWIRE_PASSPHRASE as opts.LookupEnv
// finds it, else the key file (which a PostgreSQL store never creates);
// the audit log is signed with the key audit.signingKey names. The caller
// closes the store.
//
// On PostgreSQL the audit log is the store's table: an audit file besides
// is refused ([ErrAuditFileOnPostgres]), and so is security.pinsFile
// ([ErrPinsFileOnPostgres]).
func OpenStore(ctx context.Context, file *config.File, opts *Options) (*store.Store, error) {
	if file == nil {
		return nil, errors.New("workspace: no configuration")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	rawURL, err := StoreURL(file, &o)
	if err != nil {
		return nil, err
	}
	return openStoreAt(ctx, file, rawURL, &o)
}

// openStoreAt is OpenStore with the store URL already expanded (expanding
// it twice would expand what a variable's value holds).
func openStoreAt(ctx context.Context, file *config.File, rawURL string, o *Options) (*store.Store, error) {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	auditFile := file.Audit.File
	if o.AuditFile != "" {
		auditFile = o.AuditFile
	}
	if rawURL != "" {
		// Named without the URL: it may hold a password.
		if auditFile != "" {
			return nil, fmt.Errorf("%w: the audit log is the store's table (toolwire.audit_events), one chain for every replica; leave out the audit file %s (audit.file or Options.AuditFile)", ErrAuditFileOnPostgres, auditFile)
		}
		if file.Security.PinsFile != "" {
			return nil, fmt.Errorf("%w: the pins are the store's tables; leave out security.pinsFile (%s)", ErrPinsFileOnPostgres, file.Security.PinsFile)
		}
	}
	so := &store.Options{PinsFile: file.Security.PinsFile, AuditFile: auditFile, Logger: o.Logger}
	pass, _ := lookup(oauth.PassphraseEnv)
	so.OAuth = &oauth.StoreOptions{Passphrase: pass}
	if file.Audit.SigningKey != "" {
		key, err := audit.ReadPrivateKey(file.Audit.SigningKey)
		if err != nil {
			return nil, fmt.Errorf("audit.signingKey: %w", err)
		}
		so.AuditSigningKey = key
	}
	return store.Open(ctx, rawURL, so)
}

// urlPassword returns the password a store URL carries (in its user
// information or a password query parameter), for the workspace's
// secrets: the store's errors never show it, and nothing else should.
func urlPassword(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok && p != "" {
		out = append(out, p)
	}
	for k, vs := range u.Query() {
		if strings.Contains(strings.ToLower(k), "password") {
			out = append(out, vs...)
		}
	}
	return out
}

// logStore says at start-up where the state is kept and, on PostgreSQL,
// which schema migrations this start applied.
func logStore(logger *slog.Logger, st *store.Store) {
	if st.Kind() != store.Postgres {
		logger.Info("state kept in files")
		return
	}
	logger.Info("state kept in PostgreSQL", "store", st.String(), "migrationsApplied", DescribeMigrations(st.Applied()))
}

// DescribeMigrations says which schema migrations a start applied, for a
// person: "1, 2", or "none (the schema was up to date)".
func DescribeMigrations(applied []int) string {
	if len(applied) == 0 {
		return "none (the schema was up to date)"
	}
	parts := make([]string, len(applied))
	for i, v := range applied {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}
