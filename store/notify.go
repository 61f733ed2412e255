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

// errLostInstance says that this instance was taken for lost by another:
// its lock was free (its listening connection was gone) and another
// instance gave its open calls an outcome.
var errLostInstance = errors.New("this toolwire was taken for lost by another replica while its connection to the database was down (its open calls were recorded as lost); restart it")

// listener holds one connection that LISTENs to the store's channels and
// calls the watchers of each notification, and that holds the instance's
// advisory lock, which says to the other instances that this one is
// running. It is one of the goroutines the store starts: listen starts it,
// close stops it and waits for it.
//
// When the connection fails, the listener reconnects (backing off from
// 100 ms to 5 s), takes the lock again, and then calls every watcher with
// "": notifications sent while it was away are lost, so watchers check
// everything again. If the lock cannot be taken again (another instance
// found this one lost meanwhile), the listener stops and [listener.lost]
// says so.
type listener struct {
	cfg      *pgx.ConnConfig
	logger   *slog.Logger
	instance int32 // 0: hold no lock
	cancel   context.CancelFunc
	done     chan struct{}
	lostErr  atomic.Pointer[error]
	claimed  atomic.Bool // the listening connection is up and holds the instance's lock

	mu       sync.Mutex
	next     int
	watchers map[int]watcher
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

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	if l.instance == 0 {
		if l.instance, err = register(ctx, conn); err != nil {
			_ = conn.Close(context.Background())
			return nil, fmt.Errorf("register this toolwire: %w", err)
		}
	} else {
		var got bool
		err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", instanceLockClass, l.instance).Scan(&got)
		if err == nil && got {
			// Taken, but found lost before it was: the others gave its
			// open calls an outcome already.
			var recovered bool
			err = conn.QueryRow(ctx, "SELECT recovered_at IS NOT NULL FROM toolwire.instances WHERE id = $1", l.instance).Scan(&recovered)
			got = err == nil && !recovered
		}
		if err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
		if !got {
			_ = conn.Close(context.Background())
			return nil, errLostInstance
		}
		// The claim holds again, from now on.
		if _, err := conn.Exec(ctx, "UPDATE toolwire.instances SET seen_at = now(), claimed_at = now() WHERE id = $1", l.instance); err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
	}
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
	}
	return conn, nil
}

// lost returns errLostInstance once this instance was found lost, else nil.
func (l *listener) lost() error {
	if p := l.lostErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
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
		if errors.Is(err, errLostInstance) {
			l.lostErr.Store(&err)
			l.logger.Error("store: " + err.Error())
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				l.logger.Warn("store: reconnect the listener", "err", err, "retry", backoff)
			}
			continue
		}
		conn = c
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
	_, err = conn.Exec(hctx, "UPDATE toolwire.instances SET seen_at = now() WHERE id = $1", l.instance)
	return nil, err
}

// claim returns nil while this instance holds its claim in the fleet (its
// listening connection is up, holding the lock), else why not.
func (l *listener) claim() error {
	if err := l.lost(); err != nil {
		return err
	}
	if !l.claimed.Load() {
		return errClaimLost
	}
	return nil
}

// errClaimLost says that the listening connection, which holds this
// instance's claim, is down: it is reconnecting.
var errClaimLost = errors.New("this toolwire lost its claim in the fleet (the connection that holds its lock in the database is down) and takes no calls until it holds it again")

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
