package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// The NOTIFY channels the store listens on.
const (
	// pinsChannel: a pin changed; the payload is the server's name.
	pinsChannel = "toolwire_pins"
	// sessionsChannel: a session ended (deleted); the payload is its id.
	sessionsChannel = "toolwire_sessions"
	// fleetChannel: the payload is an instance's id, the recipient of a
	// message in toolwire.mailbox, or "lost:" and the id of an instance
	// found lost.
	fleetChannel = "toolwire_fleet"
	// approvalsChannel: a request waiting for an operator changed
	// (submitted, decided, expired, withdrawn); the payload is its id.
	approvalsChannel = "toolwire_approvals"
)

var channels = []string{pinsChannel, sessionsChannel, fleetChannel, approvalsChannel}

// ErrTakenForLost is the cause (see [context.Cause]) of the contexts
// [Store.Claimed] returns, once this instance learns that another took it
// for lost while its claim was down: its lock was free, and another
// replica gave its open calls their outcome (call.errored,
// [ReasonInstanceLost]). What they still do would be recorded nowhere.
var ErrTakenForLost = errors.New("this toolwire was taken for lost by another replica while its connection to the database was down: its open calls were recorded as lost")

// errLockBusy says that this instance's lock, which its listener wants to
// take again, is held by another connection: a replica looking at whether
// it is lost, or recovering it. The listener tries again.
var errLockBusy = errors.New("this toolwire's lock is held by another replica for now (looking at whether it is lost)")

// listener holds one connection that LISTENs to the store's channels and
// calls the watchers of each notification, and that holds the instance's
// advisory lock, which says to the other instances that this one is
// running. It is one of the goroutines the store starts: listen starts it,
// close stops it and waits for it.
//
// When the connection fails, the listener reconnects (backing off from
// 100 ms to 5 s), takes the lock again, and then calls every watcher with
// "": notifications sent while it was away are lost, so watchers check
// everything again. If another instance found this one lost meanwhile
// (and gave its open calls their outcome), the listener registers the
// process again as a new instance, under a new id: it cancels what runs
// under the old claim (see [listener.claimedCtx]), tells the store (see
// [listener.onNewClaim]), and holds the new claim from then on.
type listener struct {
	cfg      *pgx.ConnConfig
	logger   *slog.Logger
	instance atomic.Int32 // 0: none yet; changes when the process takes a new claim
	cancel   context.CancelFunc
	done     chan struct{}
	claimed  atomic.Bool // the listening connection is up and holds the instance's lock
	// term is the current claim's: cancelled, with ErrTakenForLost,
	// when the listener learns another took it for lost.
	term atomic.Pointer[claimTerm]

	mu       sync.Mutex
	next     int
	watchers map[int]watcher
	newClaim func(old, cur int32) // see onNewClaim
}

// claimTerm is one claim of the process, from its registration as an
// instance until another instance takes it for lost. Its end cancels the
// contexts made under it before it returns, so that nothing still runs
// under the old claim once the new one holds.
type claimTerm struct {
	mu    sync.Mutex
	cause error // why it ended; nil while it holds
	next  int
	subs  map[int]context.CancelCauseFunc
}

func newClaimTerm() *claimTerm { return &claimTerm{subs: map[int]context.CancelCauseFunc{}} }

// cancel ends the term with cause, cancelling its contexts.
func (t *claimTerm) cancel(cause error) {
	t.mu.Lock()
	if t.cause != nil {
		t.mu.Unlock()
		return
	}
	t.cause = cause
	subs := t.subs
	t.subs = nil
	t.mu.Unlock()
	for _, cancel := range subs {
		cancel(cause)
	}
}

// add makes cancel end with the term; remove forgets it.
func (t *claimTerm) add(cancel context.CancelCauseFunc) (remove func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cause != nil {
		cancel(t.cause)
		return func() {}
	}
	id := t.next
	t.next++
	t.subs[id] = cancel
	return func() {
		t.mu.Lock()
		delete(t.subs, id)
		t.mu.Unlock()
	}
}

type watcher struct {
	channel string
	fn      func(payload string)
}

// listen connects, registers this process as an instance (see
// instance.go) holding its lock, LISTENs, and starts the listener: once it
// returns, every notification committed later reaches the watchers
// registered by then.
func listen(ctx context.Context, cfg *pgx.ConnConfig, logger *slog.Logger) (*listener, error) {
	l := &listener{cfg: cfg.Copy(), logger: logger, done: make(chan struct{}), watchers: map[int]watcher{}}
	l.term.Store(newClaimTerm())
	// The wait for notifications ends every heartbeat: by a deadline on
	// the socket, not pgx's default cancel request (a connection to the
	// server each time).
	l.cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	l.claimed.Store(true)
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(runCtx, conn)
	return l, nil
}

// connect connects, takes the instance's lock (registering the process
// as an instance the first time, and again under a new id when another
// instance took it for lost), and LISTENs.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*pgx.Conn, error) {
		_ = conn.Close(context.Background())
		return nil, err
	}
	if id := l.instance.Load(); id == 0 {
		if id, err = register(ctx, conn); err != nil {
			return fail(fmt.Errorf("register this toolwire: %w", err))
		}
		l.instance.Store(id)
	} else {
		var got, recovered bool
		err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", instanceLockClass, id).Scan(&got)
		if err == nil {
			// Recovered, or its row long deleted: taken for lost. The
			// lock, held or not, says nothing more: a replica that found
			// the instance lost marked it so while it held the lock.
			err = conn.QueryRow(ctx, "SELECT coalesce((SELECT recovered_at IS NOT NULL FROM toolwire.instances WHERE id = $1), true)", id).Scan(&recovered)
		}
		switch {
		case err != nil:
			return fail(err)
		case recovered:
			if got {
				if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1, $2)", instanceLockClass, id); err != nil {
					return fail(err)
				}
			}
			cur, err := register(ctx, conn)
			if err != nil {
				return fail(fmt.Errorf("register this toolwire again: %w", err))
			}
			l.instance.Store(cur)
		case !got:
			return fail(errLockBusy)
		default:
			// The claim holds again, from now on.
			if _, err := conn.Exec(ctx, "UPDATE toolwire.instances SET seen_at = now(), claimed_at = now() WHERE id = $1", id); err != nil {
				return fail(err)
			}
		}
	}
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return fail(err)
		}
	}
	return conn, nil
}

// onNewClaim registers fn, called on the listener's goroutine when the
// process takes a new claim under a new instance id (the old one was
// taken for lost), before the listener says the claim holds again.
func (l *listener) onNewClaim(fn func(old, cur int32)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.newClaim = fn
}

// claimedCtx returns a context that is ctx, cancelled also, with cause
// ErrTakenForLost, when the listener learns that the claim held now was
// taken for lost; stop releases it.
func (l *listener) claimedCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	remove := l.term.Load().add(cancel)
	return cctx, func() { remove(); cancel(context.Canceled) }
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	announced := l.instance.Load() // the id the store knows
	for {
		for conn != nil {
			n, err := l.wait(ctx, conn)
			if err != nil {
				l.claimed.Store(false)
				_ = conn.Close(context.Background())
				conn = nil
				if ctx.Err() != nil {
					return
				}
				l.logger.Warn("store: lost the connection that listens for changes (and holds this toolwire's claim in the fleet); reconnecting", "err", err)
				break
			}
			backoff = 100 * time.Millisecond
			if n != nil {
				l.dispatch(n.Channel, n.Payload)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		c, err := l.connect(ctx)
		if err != nil {
			if ctx.Err() == nil {
				l.logger.Warn("store: reconnect the listener", "err", err, "retry", backoff)
			}
			continue
		}
		conn = c
		// A new instance id, registered now or by an attempt that failed
		// after registering: the store and what ran under the old claim
		// learn it once, before the claim holds.
		if cur := l.instance.Load(); cur != announced {
			old := announced
			announced = cur
			// What still runs under the old claim is recorded as lost
			// already: it stops, and what it would record is dropped
			// (the first outcome of a call is its outcome).
			term := l.term.Swap(newClaimTerm())
			term.cancel(ErrTakenForLost)
			l.mu.Lock()
			fn := l.newClaim
			l.mu.Unlock()
			if fn != nil {
				fn(old, cur)
			}
			l.logger.Warn("store: "+ErrTakenForLost.Error()+"; it holds a new claim as another instance", "was", old, "instance", cur)
		}
		for _, ch := range channels { // whatever was sent meanwhile is lost
			l.dispatch(ch, "")
		}
		// Ready again only now: what this instance must hear (pins,
		// session deletions, messages) reaches it from here on, and what
		// it missed is being read again.
		l.claimed.Store(true)
	}
}

// heartbeat is how often the listening connection confirms the
// instance's claim (instances.seen_at) while no notification comes.
const heartbeat = 2 * time.Second

// wait waits for the next notification on conn, confirming the claim
// every heartbeat meanwhile; a nil notification and no error is a
// heartbeat. An error means conn is broken (or ctx ended).
func (l *listener) wait(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	wctx, cancel := context.WithTimeout(ctx, heartbeat)
	n, err := conn.WaitForNotification(wctx)
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
		return n, err
	}
	hctx, cancel := context.WithTimeout(ctx, heartbeat)
	defer cancel()
	_, err = conn.Exec(hctx, "UPDATE toolwire.instances SET seen_at = now() WHERE id = $1", l.instance.Load())
	return nil, err
}

// claim returns nil while this instance holds its claim in the fleet (its
// listening connection is up, holding the lock), else why not.
func (l *listener) claim() error {
	if !l.claimed.Load() {
		return errClaimLost
	}
	return nil
}

// errClaimLost says that the listening connection, which holds this
// instance's claim, is down: it is reconnecting.
var errClaimLost = errors.New("this toolwire lost its claim in the fleet (the connection that holds its lock in the database is down) and takes no calls until it holds one again")

func (l *listener) dispatch(channel, payload string) {
	l.mu.Lock()
	ws := slices.Collect(maps.Values(l.watchers))
	l.mu.Unlock()
	for _, w := range ws {
		if w.channel == channel {
			w.fn(payload)
		}
	}
}

// watch registers fn for channel's notifications until stop is called.
// fn runs on the listener's goroutine: it must not block.
func (l *listener) watch(channel string, fn func(payload string)) (stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.next
	l.next++
	l.watchers[id] = watcher{channel: channel, fn: fn}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.watchers, id)
	}
}

// close stops the listener and waits for its goroutine to end; the
// instance's lock goes with its connection.
func (l *listener) close() {
	l.cancel()
	<-l.done
}
