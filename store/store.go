package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwire/toolwire/approval"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/task"
)

// Kind is where a [Store] keeps its state.
type Kind string

const (
	// Files: the pins file, the OAuth store file and the audit file of
	// one machine; limits and sessions in memory. The default.
	Files Kind = "files"
	// Postgres: one PostgreSQL database shared by a fleet.
	Postgres Kind = "postgres"
)

// Options configures [Open]. A nil *Options means defaults.
type Options struct {
	// PinsFile is the pins file (files only); "" means pins.DefaultPath.
	PinsFile string
	// OAuthFile is the OAuth store file (files only); "" means
	// oauth.DefaultPath.
	OAuthFile string
	// OAuth says where the OAuth store's key comes from, for files and
	// PostgreSQL alike (passphrase or key file; see oauth.StoreOptions).
	// On PostgreSQL the key file is never created: every replica is given
	// the same one (or the same passphrase).
	OAuth *oauth.StoreOptions
	// AuditFile is the audit log file (files only); "" means none, and
	// [Store.Audit] returns nil. On PostgreSQL the audit log is the
	// toolwire.audit_events table.
	AuditFile string
	// AuditSigningKey, if set, signs every audit line (both kinds).
	AuditSigningKey ed25519.PrivateKey
	// TasksDir is where tasks are kept (files only); "" means
	// task.DefaultDir.
	TasksDir string
	// Logger reports what the store does in the background (the
	// notification listener reconnecting); nil means slog.Default().
	Logger *slog.Logger
}

// Store is the state toolwire keeps, on files or on PostgreSQL. Its
// accessors return the same value on every call; Close releases them all.
type Store struct {
	kind    Kind
	where   string // for messages: "files" or the URL without its password
	pins    *pins.Store
	tokens  *oauth.Store
	sink    audit.Sink
	limits  Limiter
	session Sessions

	tasksMu   sync.Mutex
	tasks     *task.Store // made on first use (Tasks)
	taskFiles *task.Files // files only, once opened
	tasksDir  string

	// files only
	auditFile *audit.FileSink
	auditPath string
	// postgres only
	grants    *approvalTable
	requests  *requestTable
	pool      *pgxpool.Pool
	listener  *listener
	applied   []int
	instance  atomic.Int32 // this process in toolwire.instances; a new id after it was taken for lost
	logger    *slog.Logger
	relay     *Relay
	recovers  atomic.Bool   // a replica: recovers the instances that are lost (Replica)
	grace     time.Duration // claimGrace; shorter in tests
	sweepCtx  context.Context
	stopSweep context.CancelFunc
	sweeping  sync.WaitGroup
}

// ErrUnsupported is returned by [Open] for a store URL that is neither
// empty nor PostgreSQL's.
var ErrUnsupported = errors.New("unsupported store")

// Open opens the store that rawURL names: "" for files (today's paths, or
// those in opts), or a PostgreSQL URL (postgres:// or postgresql://, with
// pgx's parameters, e.g. ?sslmode=verify-full&pool_max_conns=16). For
// PostgreSQL it connects, applies the schema migrations under a lock (see
// the package doc) and starts listening for changes of the pins; ctx
// bounds all of that. An error never carries the URL's password.
func Open(ctx context.Context, rawURL string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.AuditSigningKey != nil && len(opts.AuditSigningKey) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("store: audit signing key has %d bytes, want an Ed25519 private key of %d", len(opts.AuditSigningKey), ed25519.PrivateKeySize)
	}
	if rawURL == "" {
		return openFiles(opts)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("store: the store URL does not parse: %v (want empty for files, or postgres://USER@HOST:PORT/DATABASE)", err)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		if u.Opaque != "" {
			return nil, fmt.Errorf("store: a %s URL without \"//\" (want postgres://USER@HOST:PORT/DATABASE)", u.Scheme)
		}
		return openPostgres(ctx, rawURL, redact(u), opts)
	}
	return nil, fmt.Errorf("store: %w: URL scheme %q (want empty for files, or postgres://USER@HOST:PORT/DATABASE)", ErrUnsupported, u.Scheme)
}

// redact returns u for messages: its password, and the values of query
// parameters that carry one (pgx takes password and sslpassword there
// too), masked.
func redact(u *url.URL) string {
	c := *u
	if _, has := c.User.Password(); has {
		c.User = url.UserPassword(c.User.Username(), "xxxxx")
	}
	q := c.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
		}
	}
	c.RawQuery = q.Encode()
	return c.String()
}

func openFiles(opts *Options) (*Store, error) {
	s := &Store{kind: Files, where: "files", limits: newMemoryLimiter(), session: newMemorySessions(), tasksDir: opts.TasksDir}
	var err error
	if s.pins, err = pins.NewStore(opts.PinsFile); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if s.tokens, err = oauth.NewStore(opts.OAuthFile, opts.OAuth); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if opts.AuditFile != "" {
		f, err := audit.OpenFileWith(opts.AuditFile, &audit.FileSinkOptions{SigningKey: opts.AuditSigningKey})
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		s.auditFile, s.sink, s.auditPath = f, f, opts.AuditFile
	}
	return s, nil
}

// Kind says where the store keeps its state.
func (s *Store) Kind() Kind { return s.kind }

// String names the store for messages: "files", or the PostgreSQL URL
// with its password masked.
func (s *Store) String() string { return s.where }

// Pins returns the pin store.
func (s *Store) Pins() *pins.Store { return s.pins }

// Tokens returns the OAuth token store.
func (s *Store) Tokens() *oauth.Store { return s.tokens }

// Audit returns the audit sink, or nil for files without an audit file.
// The Store owns it: Close closes it.
func (s *Store) Audit() audit.Sink { return s.sink }

// Limits returns the per-caller rate limiter: in memory for files (one
// process's callers), in the database for PostgreSQL (the fleet's).
func (s *Store) Limits() Limiter { return s.limits }

// Sessions returns the session records: in memory for files, in the
// database for PostgreSQL.
func (s *Store) Sessions() Sessions { return s.session }

// Approvals returns the lasting approvals kept in the database, and
// Pending the calls waiting there for an operator, shared by the fleet;
// both nil on files, where package workspace keeps them in files beside
// the pins file.
func (s *Store) Approvals() approval.Grants {
	if s.grants == nil {
		return nil
	}
	return s.grants
}

// Pending: see [Store.Approvals].
func (s *Store) Pending() approval.Queue {
	if s.requests == nil {
		return nil
	}
	return s.requests
}

// Applied returns the versions of the schema migrations this Open applied
// (none for files, and none when another replica had applied them).
func (s *Store) Applied() []int { return s.applied }

// VerifyAudit checks the audit log's hash chain, as [audit.Verify] checks
// a file: for files it reads opts' file (the store's AuditFile), for
// PostgreSQL the audit table, naming the first bad row with a *[RowError].
func (s *Store) VerifyAudit(ctx context.Context, opts *audit.VerifyOptions) (audit.Report, error) {
	if s.kind == Postgres {
		return verifyTable(ctx, s.pool, opts)
	}
	if s.auditPath == "" {
		return audit.Report{}, errors.New("store: no audit file to verify")
	}
	// The sink appends whole lines; a reader sees complete ones or a
	// torn last line, which Verify reports.
	f, err := os.Open(s.auditPath)
	if err != nil {
		return audit.Report{}, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	return audit.Verify(f, opts)
}

// Relay returns what connects the instances of a fleet (see [Relay]), or
// nil for files: one machine has nothing to relay.
func (s *Store) Relay() *Relay { return s.relay }

// FleetKey returns the key of name that every instance of the fleet
// shares, made by the first that asks (32 random bytes), or nil for
// files. toolwire.fleet_keys keeps it sealed under a key derived from
// passphrase (Argon2id, as the OAuth tokens' passphrase; deriving takes a
// moment and 64 MiB): without the passphrase the table gives nothing
// away. An empty passphrase is an error wrapping [ErrNoFleetPassphrase],
// one that does not open the key an error wrapping [ErrFleetKeySealed].
// "request_state" seals the gateway's requestState, so that a retry
// answering a parked call is accepted by every replica.
func (s *Store) FleetKey(ctx context.Context, name, passphrase string) ([]byte, error) {
	if s.kind != Postgres {
		return nil, nil
	}
	return fleetKey(ctx, s.pool, name, passphrase)
}

// Ping reports whether the store can be used now: for PostgreSQL, that
// the database answers a query within ctx and this process was not taken
// for lost by the others (see recoverInstance); files always can.
func (s *Store) Ping(ctx context.Context) error {
	if s.kind != Postgres {
		return nil
	}
	if err := s.listener.claim(); err != nil {
		return fmt.Errorf("store: %s: %w", s.where, err)
	}
	if _, err := s.pool.Exec(ctx, "SELECT 1"); err != nil {
		return fmt.Errorf("store: %s: %w", s.where, err)
	}
	return nil
}

// Claim returns nil while this process holds its claim in the fleet: its
// listening connection is up and holds its instance's lock; else an error
// saying why. A replica without its claim takes no calls (another may
// take it for lost once the grace has passed, and give its open calls
// their outcome). When its listener is back it holds its claim again, or,
// if it was taken for lost meanwhile, a new one as a new instance (see
// [Store.Claimed]). Files always hold it.
func (s *Store) Claim() error {
	if s.kind != Postgres {
		return nil
	}
	return s.listener.claim()
}

// Claimed returns a context that is ctx, cancelled also when this
// process learns that another replica took it for lost while its claim
// was down (its cause is then [ErrTakenForLost]): the calls it ran were
// given their outcome (call.errored, [ReasonInstanceLost]) by the replica
// that recovered it, so what they do from then on would be recorded
// nowhere. The process goes on under a new claim, as a new instance; a
// context from before is not renewed. stop releases the context's
// resources. For files it is ctx with a cancel.
func (s *Store) Claimed(ctx context.Context) (claimed context.Context, stop context.CancelFunc) {
	if s.kind != Postgres || s.listener == nil {
		return context.WithCancel(ctx)
	}
	return s.listener.claimedCtx(ctx)
}

// newClaim moves this store to the new instance id cur that its listener
// registered after the old one was taken for lost: the audit rows it
// writes from now on, the relay's messages and holds, and its end.
func (s *Store) newClaim(old, cur int32) {
	s.instance.Store(cur)
	if s.relay != nil {
		s.relay.renew(old)
	}
}

// Close stops the listener and closes the audit sink and the connections.
// On PostgreSQL it first records that this instance ended (so that no
// other takes it for lost). It is safe to call more than once.
func (s *Store) Close() error {
	var err error
	if s.stopSweep != nil {
		s.stopSweep()
		s.sweeping.Wait()
		s.stopSweep = nil
	}
	if s.relay != nil {
		s.relay.close()
		s.relay = nil
	}
	if s.pool != nil && s.instance.Load() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if e := ended(ctx, s.pool, s.instance.Load()); e != nil {
			s.logger.Warn("store: record that this toolwire ended", "err", e)
		}
		cancel()
	}
	if s.listener != nil {
		s.listener.close()
		s.listener = nil
	}
	if s.taskFiles != nil {
		err = s.taskFiles.Close()
		s.taskFiles = nil
	}
	if s.auditFile != nil {
		err = errors.Join(err, s.auditFile.Close())
		s.auditFile = nil
	}
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return err
}
