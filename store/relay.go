package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Relay connects the instances of a fleet on one PostgreSQL store: what
// one instance holds (a parked call, an approval page) is recorded in
// toolwire.held, and a request about it that reaches another instance is
// passed to the holder ([Relay.Call]) and answered by the handler the
// holder registered ([Relay.Handle]), which may send events back before
// its reply.
//
// Messages go through toolwire.mailbox: a row for the recipient, and a
// NOTIFY on toolwire_fleet naming it, in one statement. The recipient
// takes its rows in order when told, and again whenever its listener
// reconnects, so a notification lost meanwhile loses no message. No
// instance polls.
//
// While an instance waits on another's reply it watches that instance:
// one connection of its own per instance waited on, blocked on a shared
// lock of the other's instance lock, which it gets only when the other is
// gone. Then every call waiting on it fails with an error whose
// ReplicaLost method reports true, and the lost instance is recovered
// (see recoverInstance).
//
// A Relay is safe for concurrent use; the [Store] that made it stops it.
type Relay struct {
	st     *Store
	pool   *pgxpool.Pool
	cfg    *pgx.ConnConfig
	logger *slog.Logger

	ctx    context.Context // ends with the store
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	mu      sync.Mutex
	pending map[string]*pendingCall       // calls made by this instance, by id
	serving map[string]context.CancelFunc // requests served for others, by sender/id
	// abandoned holds when an abandon came for a request not received
	// (sender/id): see rememberAbandonedLocked.
	abandoned map[string]time.Time
	handlers  map[string][]*handlerEntry // by method, in the order registered
	closed    bool
	pruned    time.Time        // the mailbox, last (pruneSoon)
	watches   map[int32]*watch // instances waited on
	lost      map[int32]bool   // instances known lost
}

// RelayHandler serves one method for the other instances: it is given the
// request's body, and emit to send events back before it returns the
// reply. ctx ends when the caller gives up or the store closes.
type RelayHandler func(ctx context.Context, body []byte, emit func([]byte)) ([]byte, error)

// envelope is one message between instances.
// handlerEntry is one registration of a handler ([Relay.Handle]).
type handlerEntry struct{ fn RelayHandler }

// notHandled reports whether err says that the handler that returned it
// does not hold what the request is about (its NotHandled method reports
// true): the next handler of the method is asked.
func notHandled(err error) bool {
	var n interface{ NotHandled() bool }
	return errors.As(err, &n) && n.NotHandled()
}

type envelope struct {
	Kind   string `json:"k"` // "req", "evt", "rep" or "abandon"
	ID     string `json:"id"`
	From   int32  `json:"f"`
	Method string `json:"m,omitempty"`
	Body   []byte `json:"b,omitempty"`
	Err    string `json:"e,omitempty"` // of a reply: the handler's error
}

type pendingCall struct {
	to      int32
	queue   []envelope
	signal  chan struct{} // signalled when queue grows or failed is set
	failed  error
	settled bool
}

type watch struct {
	refs   int
	cancel context.CancelFunc
}

// lostError is the error of a call whose instance was lost.
type lostError struct {
	instance int32
	self     bool // the instance lost is this one (see Relay.renew)
}

func (e *lostError) Error() string {
	if e.self {
		return fmt.Sprintf("this toolwire (instance %d) was taken for lost by another replica while the request was in flight", e.instance)
	}
	return fmt.Sprintf("the toolwire holding it (instance %d) is gone: it was lost while the request was in flight", e.instance)
}

// ReplicaLost reports true: the instance the call went to is gone.
func (e *lostError) ReplicaLost() bool { return true }

func newRelay(st *Store, cfg *pgx.ConnConfig) *Relay {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Relay{
		st: st, pool: st.pool, cfg: cfg.Copy(), logger: st.logger,
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		pending: map[string]*pendingCall{}, serving: map[string]context.CancelFunc{}, abandoned: map[string]time.Time{},
		handlers: map[string][]*handlerEntry{}, watches: map[int32]*watch{}, lost: map[int32]bool{},
	}
	st.listener.watch(fleetChannel, r.notified)
	r.wg.Go(r.drain)
	return r
}

// Instance returns this instance's id, as [Relay.Holder] names holders.
func (r *Relay) Instance() string { return strconv.Itoa(int(r.me())) }

// me is this instance's id: the store's, a new one after it was taken for
// lost.
func (r *Relay) me() int32 { return r.st.instance.Load() }

// renew moves the relay off instance old, once the store holds the
// process's new claim after the old one was taken for lost: the replies to the calls it made as old
// were addressed to old, whose messages the replica that recovered it
// deleted, and those who asked old for something were told it is lost.
// Those calls fail, and what it served for others stops.
func (r *Relay) renew(old int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pending {
		r.settleLocked(p, &lostError{instance: old, self: true})
	}
	for _, cancel := range r.serving {
		cancel()
	}
}

// notified runs on the listener's goroutine: it only signals.
func (r *Relay) notified(payload string) {
	switch {
	case payload == "": // the listener reconnected: messages may wait
		r.poke()
	case strings.HasPrefix(payload, lostPrefix):
		if id, err := strconv.Atoi(strings.TrimPrefix(payload, lostPrefix)); err == nil {
			r.failTo(int32(id), &lostError{instance: int32(id)})
		}
	case payload == strconv.Itoa(int(r.me())):
		r.poke()
	}
}

func (r *Relay) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// close stops the relay's goroutines and fails the calls still waiting.
func (r *Relay) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	for _, p := range r.pending {
		r.settleLocked(p, errors.New("store: closed"))
	}
	r.mu.Unlock()
}

// Hold records that this instance holds key of kind for ttl, or until
// release (which is safe to call more than once).
func (r *Relay) Hold(ctx context.Context, kind, key string, ttl time.Duration) (release func(), err error) {
	_, err = r.pool.Exec(ctx, `INSERT INTO toolwire.held (kind, key, instance, expires_at) VALUES ($1, $2, $3, now() + $4::interval)
ON CONFLICT (kind, key) DO UPDATE SET instance = $3, expires_at = now() + $4::interval`, kind, key, r.me(), ttl)
	if err != nil {
		return nil, fmt.Errorf("store: hold %s: %w", kind, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := r.pool.Exec(ctx, "DELETE FROM toolwire.held WHERE kind = $1 AND key = $2 AND instance = $3", kind, key, r.me()); err != nil {
				r.logger.Warn("store: release a held "+kind, "err", err)
			}
		})
	}, nil
}

// Holder returns the instance that holds key of kind, or "" when none
// does (it was never held, or released, or it expired). An instance that
// held it and is gone is an error whose ReplicaLost method reports true.
func (r *Relay) Holder(ctx context.Context, kind, key string) (string, error) {
	var id int32
	var alive bool
	err := r.pool.QueryRow(ctx, `SELECT h.instance, EXISTS (SELECT 1 FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid::bigint = $3 AND l.objid::bigint = h.instance AND l.objsubid = 2 AND l.granted AND l.mode = 'ExclusiveLock')
FROM toolwire.held h WHERE h.kind = $1 AND h.key = $2 AND h.expires_at > now()`, kind, key, int64(instanceLockClass)).Scan(&id, &alive)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: look up a held %s: %w", kind, err)
	}
	if !alive && id != r.me() {
		r.recoverSoon(id)
		return "", &lostError{instance: id}
	}
	return strconv.Itoa(int(id)), nil
}

// Handle serves method for the other instances until stop is called. fn
// is a [RelayHandler]. Several handlers may serve one method (two
// gateways on one store in one process): a request is given to each in
// the order they were registered until one returns anything but an error
// whose NotHandled method reports true (it does not hold what the request
// is about). stop removes only this registration, and is safe to call
// more than once.
func (r *Relay) Handle(method string, fn func(ctx context.Context, body []byte, emit func([]byte)) ([]byte, error)) (stop func()) {
	e := &handlerEntry{fn: fn}
	r.mu.Lock()
	r.handlers[method] = append(r.handlers[method], e)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		hs := slices.DeleteFunc(slices.Clone(r.handlers[method]), func(x *handlerEntry) bool { return x == e })
		if len(hs) == 0 {
			delete(r.handlers, method)
		} else {
			r.handlers[method] = hs
		}
	}
}

// Call sends body to method of instance (as [Relay.Holder] named it) and
// returns its reply, passing each event the handler emits to event, in
// order, on the calling goroutine. The handler's error comes back as an
// error with its text; an instance that is lost before it replies is an
// error whose ReplicaLost method reports true. When ctx ends, the
// handler's context is cancelled and Call returns ctx's error.
func (r *Relay) Call(ctx context.Context, instance, method string, body []byte, event func([]byte)) ([]byte, error) {
	n, err := strconv.Atoi(instance)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("store: relay to %q: not an instance", instance)
	}
	to := int32(n)
	id := rand.Text()
	from := r.me() // the request's, and so its abandon's: renew may change r.me()
	p := &pendingCall{to: to, signal: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("store: closed")
	}
	if r.lost[to] {
		r.mu.Unlock()
		return nil, &lostError{instance: to}
	}
	r.pending[id] = p
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
	}()
	if err := r.send(ctx, to, envelope{Kind: "req", ID: id, From: from, Method: method, Body: body}); err != nil {
		if errors.Is(err, errNoRecipient) {
			// Never running, or gone and recovered already: nothing to
			// watch or recover, and nothing to remember.
			return nil, &lostError{instance: to}
		}
		if mayHaveSent(err) {
			// The statement may have committed with its answer lost (ctx
			// ended, or the connection broke, while it was read): the
			// handler may be running, and it goes on until told.
			r.abandon(ctx, to, from, id)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// Watched from when the message is written: if to is gone by then, the
	// watch finds it at once.
	r.mu.Lock()
	r.watchLocked(to)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.unwatchLocked(to)
		r.mu.Unlock()
	}()
	for {
		r.mu.Lock()
		queue := p.queue
		p.queue = nil
		failed := p.failed
		r.mu.Unlock()
		for _, env := range queue {
			switch env.Kind {
			case "evt":
				if event != nil {
					event(env.Body)
				}
			case "rep":
				if env.Err != "" {
					return nil, errors.New(env.Err)
				}
				return env.Body, nil
			}
		}
		if failed != nil {
			return nil, failed
		}
		select {
		case <-p.signal:
		case <-ctx.Done():
			r.abandon(ctx, to, from, id) // the handler goes on until told
			return nil, ctx.Err()
		}
	}
}

// abandon tells instance to that from gave up on its request id, so
// that its handler's context ends; a request it never received is
// nothing to it. It does not wait for ctx, which may have ended.
func (r *Relay) abandon(ctx context.Context, to, from int32, id string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.send(actx, to, envelope{Kind: "abandon", ID: id, From: from}); err != nil && !errors.Is(err, errNoRecipient) {
		r.logger.Warn("store: tell another instance a request was given up", "instance", to, "err", err)
	}
}

// sendMessage writes a message for an instance that is running (it has
// neither ended nor been recovered) and tells it, in one statement; for
// any other recipient it writes nothing and returns no row.
const sendMessage = `WITH m AS (
	INSERT INTO toolwire.mailbox (recipient, body)
	SELECT i.id, $2 FROM toolwire.instances i WHERE i.id = $1 AND i.ended_at IS NULL AND i.recovered_at IS NULL
	RETURNING recipient
)
SELECT pg_notify('` + fleetChannel + `', recipient::text) FROM m`

// errNoRecipient says that a message's recipient is not a running
// instance: it never was one, or it ended, or it was recovered.
var errNoRecipient = errors.New("no such running instance")

// errNotSent says that a message was not written because no connection
// to the database could be had for it: its statement never left.
var errNotSent = errors.New("no connection to the database")

// mayHaveSent reports whether a failed send's statement may have reached
// the database, and so committed: not when it never had a connection, or
// when pgx says nothing was sent.
func mayHaveSent(err error) bool {
	return !errors.Is(err, errNotSent) && !pgconn.SafeToRetry(err)
}

// send writes env for instance to. A recipient that is not a running
// instance is an error wrapping errNoRecipient, and nothing is written.
func (r *Relay) send(ctx context.Context, to int32, env envelope) error {
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: relay a message to instance %d: %w: %w", to, errNotSent, err)
	}
	tag, err := conn.Exec(ctx, sendMessage, to, b)
	conn.Release()
	if err != nil {
		return fmt.Errorf("store: relay a message to instance %d: %w", to, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: relay a message to instance %d: %w", to, errNoRecipient)
	}
	r.pruneSoon()
	return nil
}

// mailboxMaxAge bounds how long a message waits for its recipient: a
// running recipient takes its messages when told, and again whenever its
// listener reconnects, within seconds; one older than this was for an
// instance that could not read it, and nobody waits for it any more
// (every Call that sent one gave up long before).
const mailboxMaxAge = 10 * time.Minute

// pruneEvery is how often, at most, sending a message also removes what
// is left in the mailbox for instances that are gone and what waited
// longer than mailboxMaxAge.
const pruneEvery = time.Minute

// pruneSoon prunes the mailbox in the background when the last prune was
// pruneEvery ago or more.
func (r *Relay) pruneSoon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || time.Since(r.pruned) < pruneEvery {
		return
	}
	r.pruned = time.Now()
	r.wg.Go(func() {
		if _, err := r.prune(r.ctx); err != nil && r.ctx.Err() == nil {
			r.logger.Warn("store: prune the relay's mailbox", "err", err)
		}
	})
}

// prune removes the messages of recipients that are not running
// instances, and those older than mailboxMaxAge, and the holds that
// expired. It returns how many messages it removed.
func (r *Relay) prune(ctx context.Context) (int64, error) {
	tag, err := r.pool.Exec(ctx, `DELETE FROM toolwire.mailbox m WHERE m.sent_at < now() - $1::interval
	OR NOT EXISTS (SELECT 1 FROM toolwire.instances i WHERE i.id = m.recipient AND i.ended_at IS NULL AND i.recovered_at IS NULL)`, mailboxMaxAge)
	if err != nil {
		return 0, err
	}
	if _, err := r.pool.Exec(ctx, "DELETE FROM toolwire.held WHERE expires_at < now()"); err != nil {
		return tag.RowsAffected(), err
	}
	return tag.RowsAffected(), nil
}

// drain takes this instance's messages each time it is told there are
// some, until the relay closes.
func (r *Relay) drain() {
	r.poke() // whatever came before the listener was watched
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		}
		for r.ctx.Err() == nil {
			n, err := r.take()
			if err != nil {
				if r.ctx.Err() == nil {
					r.logger.Warn("store: read the relay's messages", "err", err)
				}
				break // the next notification, or reconnection, tries again
			}
			if n < mailBatch {
				break
			}
		}
	}
}

const mailBatch = 256

// take takes up to mailBatch messages in order and delivers them.
func (r *Relay) take() (int, error) {
	rows, err := r.pool.Query(r.ctx, `DELETE FROM toolwire.mailbox WHERE seq IN (
	SELECT seq FROM toolwire.mailbox WHERE recipient = $1 ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED
) RETURNING seq, body`, r.me(), mailBatch)
	if err != nil {
		return 0, err
	}
	type msg struct {
		seq  int64
		body []byte
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (msg, error) {
		var m msg
		err := row.Scan(&m.seq, &m.body)
		return m, err
	})
	if err != nil {
		return 0, err
	}
	slices.SortFunc(msgs, func(a, b msg) int { return int(a.seq - b.seq) })
	for _, m := range msgs {
		var env envelope
		if err := json.Unmarshal(m.body, &env); err != nil {
			r.logger.Warn("store: a relayed message does not parse", "err", err)
			continue
		}
		r.deliver(env)
	}
	return len(msgs), nil
}

func (r *Relay) deliver(env envelope) {
	key := strconv.Itoa(int(env.From)) + "/" + env.ID
	r.mu.Lock()
	defer r.mu.Unlock()
	switch env.Kind {
	case "evt", "rep":
		if p := r.pending[env.ID]; p != nil && p.to == env.From && !p.settled {
			p.queue = append(p.queue, env)
			if env.Kind == "rep" {
				p.settled = true
			}
			signal(p.signal)
		}
	case "abandon":
		if cancel := r.serving[key]; cancel != nil {
			cancel()
		} else {
			r.rememberAbandonedLocked(key)
		}
	case "req":
		if _, ok := r.abandoned[key]; ok {
			// Its caller gave up while the request was being written,
			// and the request committed after the abandon did: nobody
			// waits for what its handler would do.
			delete(r.abandoned, key)
			return
		}
		fns := slices.Clone(r.handlers[env.Method])
		ctx, cancel := context.WithCancel(r.ctx)
		r.serving[key] = cancel
		r.wg.Go(func() {
			defer func() {
				cancel()
				r.mu.Lock()
				delete(r.serving, key)
				r.mu.Unlock()
			}()
			var (
				reply []byte
				err   error
			)
			emit := func(ev []byte) {
				if err := r.send(ctx, env.From, envelope{Kind: "evt", ID: env.ID, From: r.me(), Body: ev}); err != nil && ctx.Err() == nil {
					r.logger.Warn("store: relay an event", "err", err)
				}
			}
			if len(fns) == 0 {
				err = fmt.Errorf("instance %d serves no %q", r.me(), env.Method)
			}
			for _, h := range fns {
				if reply, err = h.fn(ctx, env.Body, emit); !notHandled(err) {
					break
				}
			}
			rep := envelope{Kind: "rep", ID: env.ID, From: r.me(), Body: reply}
			if err != nil {
				rep.Err = err.Error()
			}
			// The reply goes even when the caller gave up: it drops it.
			sctx, scancel := context.WithTimeout(r.ctx, 10*time.Second)
			defer scancel()
			if err := r.send(sctx, env.From, rep); err != nil && r.ctx.Err() == nil {
				r.logger.Warn("store: relay a reply", "err", err)
			}
		})
	}
}

// abandonedMax bounds the abandons remembered for requests not received:
// most are for requests already served, and are never looked up again.
const abandonedMax = 1024

// rememberAbandonedLocked records an abandon that came with no request
// served under its key: the request may still come (see Call), and then it
// is dropped. What is older than mailboxMaxAge goes, since no request
// waits longer, and the oldest goes when there are abandonedMax; r.mu is
// held.
func (r *Relay) rememberAbandonedLocked(key string) {
	now := time.Now()
	if len(r.abandoned) >= abandonedMax {
		oldest := ""
		for k, at := range r.abandoned {
			if now.Sub(at) > mailboxMaxAge {
				delete(r.abandoned, k)
			} else if oldest == "" || at.Before(r.abandoned[oldest]) {
				oldest = k
			}
		}
		if len(r.abandoned) >= abandonedMax {
			delete(r.abandoned, oldest)
		}
	}
	r.abandoned[key] = now
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (r *Relay) settleLocked(p *pendingCall, err error) {
	if p.settled {
		return
	}
	p.settled, p.failed = true, err
	signal(p.signal)
}

// failTo fails every call waiting on instance to, which is gone.
func (r *Relay) failTo(to int32, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost[to] = true
	for _, p := range r.pending {
		if p.to == to {
			r.settleLocked(p, err)
		}
	}
}

// watchLocked starts watching instance to, unless this instance does
// already; r.mu is held.
func (r *Relay) watchLocked(to int32) {
	if r.closed {
		return
	}
	if w := r.watches[to]; w != nil {
		w.refs++
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.watches[to] = &watch{refs: 1, cancel: cancel}
	r.wg.Go(func() { r.watchInstance(ctx, to) })
}

func (r *Relay) unwatchLocked(to int32) {
	w := r.watches[to]
	if w == nil {
		return
	}
	if w.refs--; w.refs == 0 {
		w.cancel()
		delete(r.watches, to)
	}
}

// watchInstance waits, on a connection of its own, for a shared lock on
// instance to's lock, which it gets when to is gone, or until ctx ends.
func (r *Relay) watchInstance(ctx context.Context, to int32) {
	conn, err := pgx.ConnectConfig(ctx, r.cfg)
	if err != nil {
		if ctx.Err() == nil {
			r.failTo(to, fmt.Errorf("store: cannot watch instance %d, whose reply this request waits for: %w", to, err))
		}
		return
	}
	defer conn.Close(context.Background()) // with it, the shared lock if it was granted
	_, err = conn.Exec(ctx, "SELECT pg_advisory_lock_shared($1, $2)", instanceLockClass, to)
	if ctx.Err() != nil {
		return // nobody waits on to any more
	}
	if err != nil {
		// Not knowing whether to is there, the calls cannot wait on it.
		r.mu.Lock()
		for _, p := range r.pending {
			if p.to == to {
				r.settleLocked(p, fmt.Errorf("store: lost the connection watching instance %d, whose reply this request waited for: %w", to, err))
			}
		}
		r.mu.Unlock()
		return
	}
	r.failTo(to, &lostError{instance: to})
	_ = conn.Close(context.Background())
	r.recoverSoon(to)
}

// recoverSoon recovers instance id in the background: several instances
// may find it lost at once, each holding a shared lock a moment, so a
// recovery that could not take the lock is tried again a few times.
func (r *Relay) recoverSoon(id int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.wg.Go(func() {
		for try := 0; try < 5 && r.ctx.Err() == nil; try++ {
			ok, err := r.st.recoverInstance(r.ctx, id)
			if err != nil && r.ctx.Err() == nil {
				r.logger.Warn("store: recover a lost instance", "instance", id, "err", err)
			}
			if ok || r.recovered(id) {
				return
			}
			select {
			case <-r.ctx.Done():
			case <-time.After(time.Duration(100*(try+1)) * time.Millisecond):
			}
		}
	})
}

func (r *Relay) recovered(id int32) bool {
	var done bool
	err := r.pool.QueryRow(r.ctx, "SELECT recovered_at IS NOT NULL OR ended_at IS NOT NULL FROM toolwire.instances WHERE id = $1", id).Scan(&done)
	return err == nil && done
}
