package store

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pinsChannel is the NOTIFY channel of pin changes; the payload is the
// server's name.
const pinsChannel = "toolwire_pins"

// listener holds one connection that LISTENs to the store's channels and
// calls the watchers of each notification. It is the only goroutine the
// store starts: listen starts it, close stops it and waits for it.
//
// When the connection fails, the listener reconnects (backing off from
// 100 ms to 5 s) and then calls every watcher with "": notifications sent
// while it was away are lost, so watchers check everything again.
type listener struct {
	cfg    *pgx.ConnConfig
	logger *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	next     int
	watchers map[int]watcher
}

type watcher struct {
	channel string
	fn      func(payload string)
}

// listen connects, LISTENs, and starts the listener: once it returns,
// every notification committed later reaches the watchers registered by
// then.
func listen(ctx context.Context, cfg *pgx.ConnConfig, logger *slog.Logger) (*listener, error) {
	l := &listener{cfg: cfg.Copy(), logger: logger, done: make(chan struct{}), watchers: map[int]watcher{}}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
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
	if _, err := conn.Exec(ctx, "LISTEN "+pinsChannel); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				_ = conn.Close(context.Background())
				conn = nil
				if ctx.Err() != nil {
					return
				}
				l.logger.Warn("store: lost the connection that listens for changes; reconnecting", "err", err)
				break
			}
			backoff = 100 * time.Millisecond
			l.dispatch(n.Channel, n.Payload)
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
		l.dispatch(pinsChannel, "") // whatever was sent meanwhile is lost
	}
}

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

// close stops the listener and waits for its goroutine to end.
func (l *listener) close() {
	l.cancel()
	<-l.done
}
